"""The transformer family as the registry sees it (explorer/workloads/registry.py): its
:class:`~explorer.workloads.spec.WorkloadSpec` from the layer, embedding and output-layer costs of
layer.py, the PowerSGD factor of its weight matrices, and the names and controls the pages show.

Layer kinds: the dense layer, and with a mixture of experts the MoE layer, which every layer from
``moe.dense_layers`` on is (DeepSeek-V3 keeps its first 3 dense).  Multi-token prediction modules
(DeepSeek-V3, arXiv 2412.19437, Sec. 2.2) run one block each of the last layer's kind after the
model, on the last chunk (their projections and output head are in the output layer's cost).
"""
from __future__ import annotations

from ...config import Model, Scenario
from ...physics.hardware import weight_bytes
from ..family import Nouns
from ..spec import EdgeCost, WorkloadSpec
from .layer import embedding_cost, layer_cost, logits_cost, model_params
from .lora import lora_first, lora_last
from .moe_load import busiest_rank_factor

DENSE, MOE = 0, 1                     # kind indices of the spec


def spec(sc: Scenario) -> WorkloadSpec:
    """Dense (and MoE) layer costs, their runs, the embedding and output layer, the MTP blocks
    and the busiest expert rank's load (moe_load.py, times ``moe.imbalance``)."""
    m, p = sc.model, sc.parallelism
    dense = layer_cost(sc, moe_layer=False)
    first, last = _edges(sc)
    if not m.is_moe:
        return WorkloadSpec((dense,), ((DENSE, m.layers),), first, last,
                            ((DENSE, m.mtp_depth),) if m.mtp_depth else ())
    moe = layer_cost(sc, moe_layer=True)
    assert m.moe is not None                      # is_moe: the section is there
    lead = min(m.moe.dense_layers, m.layers)
    runs = tuple((k, n) for k, n in ((DENSE, lead), (MOE, m.layers - lead)) if n > 0)
    load = busiest_rank_factor(m.moe.experts, p.ep, m.moe.top_k, m.moe.skew) * m.moe.imbalance
    tail = MOE if m.moe_layers else DENSE
    return WorkloadSpec((dense, moe), runs, first, last, ((tail, m.mtp_depth),) if m.mtp_depth else (), load)


def _edges(sc: Scenario) -> tuple[EdgeCost, EdgeCost]:
    """The embedding and the output layer; under LoRA both frozen (lora.py)."""
    first, last = embedding_cost(sc), logits_cost(sc)
    if not sc.training.lora_rank:
        return first, last
    weight = weight_bytes(sc.training.dtype)
    return lora_first(first, weight), lora_last(last, weight)


def powersgd_factor(m: Model, tp: int, rank: int) -> float:
    """(P + Q elements) / (gradient elements) of one layer's weight matrices, each m x n cut by tp:
    r (m + n) / (m n) summed over QKV, the output projection and the MLP (Vogels et al., PowerSGD,
    NeurIPS 2019, Sec. 3)."""
    h, f = m.hidden, m.ffn_hidden
    assert f is not None                          # filled by the defaults (config/loading.py)
    kv = (m.kv_heads or m.heads) * (h // m.heads)
    mats = 3 if m.ffn_kind == "swiglu" else 2
    shapes = [(h, (h + 2 * kv) / tp), (h / tp, h)] + [(h, f / tp)] * (mats - 1) + [(f / tp, h)]
    full = sum(a * b for a, b in shapes)
    return min(1.0, sum(rank * (a + b) for a, b in shapes) / full)


def nouns(m: Model) -> Nouns:
    """Tokens per second; the batch counts sequences."""
    return Nouns("tokens", "sequences")


CONTROLS = (
    ("model.layers", "Layers", "int"),
    ("model.hidden", "Hidden size", "int"),
    ("model.heads", "Attention heads", "int"),
    ("model.kv_heads", "KV heads", "int"),
    ("model.head_dim", "Head dimension", "int"),
    ("model.ffn_hidden", "FFN width", "int"),
    ("model.ffn_kind", "FFN kind", "choice"),
    ("model.seq_len", "Sequence length", "int"),
    ("model.vocab", "Vocabulary", "int"),
    ("model.moe.experts", "MoE experts (0 = dense)", "int"),
    ("model.moe.top_k", "MoE top-k", "int"),
    ("model.moe.expert_ffn_hidden", "MoE expert width", "int"),
    ("model.moe.max_nodes", "MoE node limit (0 = none)", "int"),
    ("model.moe.imbalance", "MoE load imbalance (max/mean)", "float"),
    ("model.moe.skew", "MoE routing skew (Zipf exponent)", "float"),
    ("model.mtp_depth", "Multi-token prediction modules", "int"),
    ("model.dropout", "Dropout", "bool"),
)

__all__ = ["CONTROLS", "model_params", "nouns", "powersgd_factor", "spec"]
