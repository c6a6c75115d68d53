"""The scenario's ``model`` section: what is trained (a transformer's shape, or the convolutional,
recommendation or graph model whose transformer fields the loader derives).  Kept beside
:mod:`explorer.config.sections`, which re-exports it, so that each module stays one concept."""
from __future__ import annotations

from dataclasses import dataclass, field

from .bounds import _FROM_PRESET
from .dlrm import Dlrm
from .gnn import GNN_FIELD, Gnn
from .model_parts import HEAD_DIM, KIND, KV_HEADS, MLA, Conv, MoE, first_moe_layer
from .rnn import RNN_FIELD, Rnn


@dataclass(frozen=True)
class Model:
    """The network: a transformer (shape, vocabulary, sequence length, optional MoE, MLA), or with
    ``conv``, ``dlrm`` or ``gnn`` a convolutional, recommendation or graph model whose transformer
    fields the loader derives."""

    preset: str | None = field(default=None, metadata={
        "doc": "start from a named model (explorer/data/models.yaml)"})
    kind: str = KIND                 # the workload family (model_parts.KIND, issue 36)
    layers: int = field(default=0, metadata={**_FROM_PRESET, "min": 1, "max": 100_000,
                                             "doc": "transformer layers"})
    hidden: int = field(default=0, metadata={**_FROM_PRESET, "min": 1, "max": 1_048_576,
                                             "doc": "hidden size h"})
    heads: int = field(default=0, metadata={**_FROM_PRESET, "min": 1, "max": 65536,
                                            "doc": "attention heads a"})
    kv_heads: int | None = field(default=None, metadata=KV_HEADS)
    head_dim: int | None = field(default=None, metadata=HEAD_DIM)
    ffn_hidden: int | None = field(default=None, metadata={"min": 1, "max": 4_194_304,
                                                           "doc": "FFN width; default 4 * hidden"})
    ffn_kind: str = field(default="gelu", metadata={"choices": ("gelu", "swiglu"),
                                                    "doc": "gelu: 2 matrices; swiglu: 3 matrices"})
    vocab: int = field(default=51200, metadata={"min": 1, "max": 10_000_000, "doc": "vocabulary size V"})
    seq_len: int = field(default=2048, metadata={"min": 1, "max": 10_000_000,
                                                 "doc": "sequence length s in tokens"})
    tied_embeddings: bool = field(default=False, metadata={
        "doc": "output layer shares the input embedding matrix: where one GPU holds both (pp 1, "
               "DualPipe's edge ranks) its V*h/tp parameters are held, reduced and updated once; on "
               "different stages each keeps a copy (Megatron-LM), the embedding-group gradient "
               "all-reduce between them is not modelled"})
    moe: MoE | None = field(default=None, metadata={"doc": "mixture of experts; absent = dense"})
    mla: MLA | None = field(default=None, metadata={
        "doc": "multi-head latent attention (DeepSeek-V2/V3); absent = multi-head/grouped-query attention"})
    mtp_depth: int = field(default=0, metadata={
        "min": 0, "max": 16, "doc": "multi-token prediction modules after the last layer (DeepSeek-V3: 1)"})
    dropout: bool = field(default=True, metadata={
        "doc": "attention and hidden dropout (GPT-3, Megatron); Llama and DeepSeek train without"})
    conv: Conv | None = field(default=None, metadata={
        "doc": "a convolutional network (ResNet, SlowOnly video ResNet) instead of a transformer; "
               "absent = a transformer"})
    dlrm: Dlrm | None = field(default=None, metadata={"doc": "a recommendation model (DLRM, DCNv2)"})
    gnn: Gnn | None = GNN_FIELD      # a graph neural network (explorer/config/gnn.py, issue 36)
    rnn: Rnn | None = RNN_FIELD      # a GNMT-style LSTM translation model (explorer/config/rnn.py, issue 36)

    @property
    def is_moe(self) -> bool:
        """Whether tokens are routed to experts (some experts and a top_k)."""
        return self.moe is not None and self.moe.routed

    @property
    def samples(self) -> str:
        """What the batch counts, plural, for labels: tokens (a transformer), images or clips (a
        convolutional network), samples (a recommendation model), seed nodes (a GNN)."""
        if self.conv is None:
            return "samples" if self.dlrm is not None else "seed nodes" if self.gnn is not None else "tokens"
        return "clips" if self.conv.frames > 1 else "images"

    @property
    def moe_layers(self) -> int:
        """Layers with experts: all but the leading dense ones (0 for a dense model)."""
        return max(self.layers - first_moe_layer(self.moe, self.layers), 0)
