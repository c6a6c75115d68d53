"""The model's optional parts: a mixture of experts (``model.moe``) and multi-head latent attention
(``model.mla``), kept beside :mod:`explorer.config.model_section`; and the field
metadata of the attention fields of sections.py (Model.kv_heads / head_dim, Training.flash_attention /
attention_kernel), kept here so that sections.py stays one line per field (the Triton kernel's
head-dim rule is explorer/config/kernel_rules.py)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .schema import ScenarioError

# model.kind (issue 36's contract): the workload families a scenario may name, and those the
# simulator models (explorer/workloads/registry.py); the others are refused at load, naming the field.
MODEL_KINDS = ("transformer", "cnn", "dlrm", "gnn", "rnn")
MODELLED_KINDS = ("transformer", "cnn", "dlrm", "gnn", "rnn")
KIND = field(default="transformer", metadata={"choices": MODEL_KINDS, "doc": (
    "workload family: transformer; cnn = a convolutional network (model.conv, ResNet-50 when absent; a "
    "conv section alone implies it); dlrm = a recommendation model (model.dlrm, MLPerf's DLRM-DCNv2 when "
    "absent; a dlrm section alone implies it); gnn = GraphSAGE (model.gnn, ogbn-products when absent; a "
    "gnn section alone implies it); rnn = a GNMT-style LSTM translation model (model.rnn, GNMT-8 when "
    "absent; an rnn section alone implies it)")})

# The ResNet family's table (He et al., "Deep Residual Learning for Image Recognition", CVPR 2016,
# Table 1): residual blocks per stage for each depth, and the 4x width the last 1x1 convolution of
# a bottleneck block (depth 50 and more) restores (Sec. 4.1).  The layer table itself is built in
# explorer/workloads/convnet/arch.py from these; the loader derives the transformer fields from them.
STAGE_BLOCKS = {18: (2, 2, 2, 2), 34: (3, 4, 6, 3), 50: (3, 4, 6, 3), 101: (3, 4, 23, 3), 152: (3, 8, 36, 3)}
BOTTLENECK_FROM_DEPTH = 50
BOTTLENECK_EXPANSION = 4
# The VGG family (Simonyan & Zisserman, "Very Deep Convolutional Networks for Large-Scale Image
# Recognition", ICLR 2015, Table 1, configurations A, B, D, E): 3x3 convolutions per block of 64,
# 128, 256, 512, 512 channels, each block ending in a 2x2/2 max pool, then three fully connected
# layers (4096, 4096, classes).  A depth in this table selects a VGG (the ResNet depths differ);
# its pipeline layers are its convolutions and its fully connected layers
# (explorer/workloads/convnet/vgg.py builds them).
VGG_BLOCK_CONVS = {11: (1, 1, 2, 2, 2), 13: (2, 2, 2, 2, 2), 16: (2, 2, 3, 3, 3), 19: (2, 2, 4, 4, 4)}
VGG_FC_WIDTH = 4096
VGG_FC_LAYERS = 3

# Attention width and kernel fields (explorer/workloads/transformer/attention.py reads the widths,
# explorer/physics/attention.py the kernel).
KV_HEADS = {"min": 1, "max": 65536, "doc": "key/value heads (GQA when < heads); default heads"}
HEAD_DIM = {"min": 1, "max": 65536,
            "doc": "per-head query/key/value width d; absent: hidden / heads (Qwen3, GPT-OSS set it: "
                   "heads x head_dim != hidden)"}
FLASH_ATTN = {"doc": "fused attention: no s x s score tensor in HBM (Dao et al. 2022)"}
ATTN_KERNEL = {
    "choices": ("auto", "sdpa", "flash2", "flash3", "cudnn", "flex", "triton", "none"),
    "doc": "attention kernel, priced at its measured rate by sequence length and head dim: auto = the "
           "framework's (megatron: cuDNN via Transformer Engine on Hopper/Blackwell, FlashAttention-2 "
           "on Ampere; deepspeed: FlashAttention-2; fsdp: PyTorch SDPA = FlashAttention-2, cuDNN on "
           "B200); triton = the 2022-23 Triton FlashAttention kernel (flash-attn's flash_attn_triton.py, "
           "llm-foundry's attn_impl: triton), slower than FlashAttention-2 by the FA2 paper's A100 "
           "ratios; none = unfused, as flash_attention false (explorer/physics/attention.py)"}
@dataclass(frozen=True)
class MoE:
    """Mixture-of-experts layers (absent or ``experts: 0`` = a dense model)."""

    experts: int = field(default=0, metadata={"min": 0, "max": 65536,
                                              "doc": "routed experts per MoE layer (0 = dense)"})
    top_k: int = field(default=0, metadata={"min": 0, "max": 1024, "doc": "experts each token is routed to"})
    expert_ffn_hidden: int = field(default=0, metadata={"min": 0, "max": 1_048_576,
                                                        "doc": "FFN width of one expert"})
    shared_experts: int = field(default=0, metadata={"min": 0, "max": 64,
                                                     "doc": "always-active experts per MoE layer"})
    dense_layers: int = field(default=0, metadata={"min": 0, "max": 100_000,
                                                   "doc": "leading layers that stay dense"})
    max_nodes: int = field(default=0, metadata={
        "min": 0, "max": 1_000_000,
        "doc": "0: no node limit; M > 0: node-limited routing, each token's experts on at most M nodes "
               "(DeepSeek-V3: 4), and communication.moe_dispatcher then defaults to deepep (one fabric "
               "copy per destination node, then NVLink)"})
    imbalance: float = field(default=1.0, metadata={"min": 1.0, "max": 64.0,
                                                    "doc": "extra factor on the busiest expert rank's load, "
                                                           "on top of what skew implies"})
    skew: float = field(default=0.0, metadata={
        "min": 0.0, "max": 4.0, "doc": "Zipf exponent of expert popularity (0 = uniform routing); the "
                                       "busiest EP rank's share of tokens follows from it"})

    @property
    def routed(self) -> bool:
        """Whether tokens are routed to experts (some experts and a top_k)."""
        return self.experts > 0 and self.top_k > 0


def first_moe_layer(moe: MoE | None, layers: int) -> int:
    """Index of the first layer with experts (the leading dense layers come before it); ``layers``
    for a model without routed experts."""
    return moe.dense_layers if moe is not None and moe.routed else layers


@dataclass(frozen=True)
class MLA:
    """Multi-head latent attention (DeepSeek-V2, arXiv 2405.04434, Sec. 2.1; V3 Sec. 2.1.1):
    queries and keys/values go through low-rank latent projections; heads carry a positional
    (rope) and a content (nope) part."""

    q_lora_rank: int = field(default=1536, metadata={"min": 0, "max": 1_048_576,
                                                     "doc": "query latent rank (0 = uncompressed queries)"})
    kv_lora_rank: int = field(default=512, metadata={"min": 1, "max": 1_048_576,
                                                     "doc": "key/value latent rank d_c"})
    qk_nope_head_dim: int = field(default=128, metadata={"min": 1, "max": 65536,
                                                         "doc": "per-head query/key content dimension"})
    qk_rope_head_dim: int = field(default=64, metadata={"min": 0, "max": 65536,
                                                        "doc": "per-head decoupled rope dimension"})
    v_head_dim: int = field(default=128, metadata={"min": 1, "max": 65536, "doc": "per-head value dimension"})


@dataclass(frozen=True)
class Conv:
    """A convolutional network instead of a transformer (explorer/workloads/convnet/): ResNet-18 to
    -152 on images (He et al. 2016, v1.5 strides), the SlowOnly 3D ResNet on video clips when
    ``frames`` > 1 (Feichtenhofer et al. 2019), or VGG-11 to -19 (depths 11, 13, 16, 19; Simonyan &
    Zisserman 2015).  A sample is one image or clip; the loader derives the transformer fields from
    it (layers = residual blocks or VGG weight layers, hidden = the classifier's input width, vocab
    = classes, seq_len 1)."""

    depth: int = field(default=50, metadata={"choices": tuple(STAGE_BLOCKS) + tuple(VGG_BLOCK_CONVS),
                                             "doc": "layers with weights: a ResNet (18, 34, 50, 101, 152) "
                                                    "or a VGG (11, 13, 16, 19; Simonyan & Zisserman 2015)"})
    image_size: int = field(default=224, metadata={"min": 32, "max": 4096,
                                                   "doc": "input height and width in pixels"})
    frames: int = field(default=1, metadata={"min": 1, "max": 1024,
                                             "doc": "frames per clip: 1 = images (ResNet), more = a video "
                                                    "model (SlowOnly: res4/res5 conv1 3x1x1)"})
    width: int = field(default=64, metadata={
        "min": 8, "max": 4096, "doc": "channels of the stem and the first stage (64 in ResNet)"})
    classes: int = field(default=1000, metadata={
        "min": 1, "max": 1_000_000, "doc": "classifier outputs (ImageNet 1000, Kinetics-400 400)"})

    @property
    def vgg(self) -> bool:
        """Whether the depth selects a VGG (plain 3x3 convolutions and three FC layers)."""
        return self.depth in VGG_BLOCK_CONVS

    @property
    def blocks(self) -> int:
        """The layers a pipeline splits: residual blocks of a ResNet, every convolution and fully
        connected layer of a VGG (VGG-16: 13 + 3)."""
        if self.vgg:
            return sum(VGG_BLOCK_CONVS[self.depth]) + VGG_FC_LAYERS
        return sum(STAGE_BLOCKS[self.depth])

    @property
    def features(self) -> int:
        """Channels of the last feature map, the classifier's input: the first stage's width
        doubled at each later stage, times the bottleneck's expansion."""
        if self.vgg:
            return VGG_FC_WIDTH                      # the last FC layer's input (fc7's output)
        expansion = BOTTLENECK_EXPANSION if self.depth >= BOTTLENECK_FROM_DEPTH else 1
        return self.width * 2 ** (len(STAGE_BLOCKS[self.depth]) - 1) * expansion

    @property
    def label(self) -> str:
        """The network's name: "ResNet-50", or "SlowOnly ResNet-50 (8 frames)" for a video model."""
        if self.vgg:
            return f"VGG-{self.depth}"
        if self.frames > 1:
            return f"SlowOnly ResNet-{self.depth} ({self.frames} frames)"
        return f"ResNet-{self.depth}"


# A transformer's optional parts and their "absent" values: what another family's rule refuses.
_PART_ABSENT = {"moe": None, "mla": None, "mtp_depth": 0, "conv": None}


def refuse_parts(m: Any, parts: tuple[str, ...], message: str) -> None:
    """Raise ``message`` on ``model.<part>`` for the first of ``parts`` that ``m`` sets (an MoE
    section counts only when it routes tokens: Model.is_moe)."""
    for part in parts:
        if getattr(m, part) != _PART_ABSENT[part] and not (part == "moe" and not m.is_moe):
            raise ScenarioError(f"model.{part}", message)


# Each family's own section of the model (the transformer has none).
FAMILY_SECTIONS = {"conv": "cnn", "dlrm": "dlrm", "gnn": "gnn", "rnn": "rnn"}


def one_family(model: dict[str, Any]) -> dict[str, Any]:
    """``model``; a section of another family than the model's kind (or, the kind not given, than
    its first section's) is refused: it would be dropped silently, e.g. model.gnn under model.kind
    dlrm."""
    kind = model.get("kind")
    present = [s for s in FAMILY_SECTIONS if model.get(s) is not None]
    if kind is None:
        if len(present) < 2:
            return model
        kind = FAMILY_SECTIONS[present[0]]
    if kind == "transformer" and present:
        part = present[0]
        raise ScenarioError("model.kind", f"'transformer' but model.{part} is set; use "
                                          f"{FAMILY_SECTIONS[part]}, or remove model.{part}")
    for part in present:
        if FAMILY_SECTIONS[part] != kind:
            raise ScenarioError(f"model.{part}", f"is the section of a {FAMILY_SECTIONS[part]} model; "
                                                 f"a {kind} "
                                                 f"model has none (remove it, or set model.kind: "
                                                 f"{FAMILY_SECTIONS[part]} without the {kind} section)")
    return model
