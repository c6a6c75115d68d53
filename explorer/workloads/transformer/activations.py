"""Activation bytes one layer keeps from its forward to its backward, per micro-batch and GPU.

The tensors are listed term by term in :mod:`explorer.workloads.transformer.activations_terms` (GPT,
Llama-style, MLA,
MoE, FlashAttention, FP8, each cited there); this module sums them for a scenario and applies the
recompute policy:

- none: every term (Korthikanti et al., MLSys 2023, arXiv 2205.05198, Table 2 for GPT:
  s*b*h*(34 + 5*a*s/h) bytes per layer without TP, 10*s*b*h of it replicated across TP ranks
  unless sequence parallelism splits it);
- selective: the terms of the recomputed modules are dropped.  Megatron-Core's
  ``recompute_modules`` (``megatron/core/transformer/transformer_config.py``) defaults to
  ``core_attn`` — Korthikanti Sec. 4.2.2/5's selective recomputation of the attention core, which
  drops the 5*a*s^2*b term; ``layernorm``, ``mla_up_proj`` and ``moe_act`` drop the norm outputs,
  MLA's up-projected Q/K/V and the MoE activation output (what DeepSeek-V3, arXiv 2412.19437,
  Sec. 3.2.3 and 3.3.3, recomputes); ``mlp`` checkpoints the dense MLP (Megatron-Core
  ``recompute_modules`` "mlp": only its input, the norm output, is kept; the activation function's
  input and output are recomputed);
- full: only the layer input, 2*s*b*h (Korthikanti Sec. 5, "storing only the input of each layer").
  With TP it is split across the TP ranks both with sequence parallelism and without it, as
  Megatron-LM's ``CheckpointFunction`` does with ``distribute_saved_activations`` (it keeps a 1/t
  slice of the checkpointed input and all-gathers it before recomputing:
  ``megatron/core/tensor_parallel/random.py``; DeepSpeed's ``partition_activations`` does the same).

During the backward of one layer, what that layer's recompute dropped is live again (Chen et al.,
"Training Deep Nets with Sublinear Memory Cost", arXiv 1604.06174, Sec. 3: the peak is the
checkpoints plus one segment's activations): :func:`recompute_working_bytes`, added once per GPU
by explorer/analysis/memory.py.
"""
from __future__ import annotations

from dataclasses import dataclass

from ...config import Scenario
from ...config.generations import runs_fp8
from ...physics.hardware import BYTES_PER_ELEMENT
from .activations_recipes import offload_share, recompute_kind, recompute_share
from .activations_terms import Ctx, Term, attention_terms, dense_mlp_terms, moe_mlp_terms
from .attention import fused
from .moe_load import routed_copy_load

# Megatron-Core's recompute_modules this accounting knows (transformer_config.py).
RECOMPUTE_MODULES = ("core_attn", "layernorm", "mla_up_proj", "moe_act", "mlp")
SELECTIVE_DEFAULT = frozenset({"core_attn"})        # Megatron-Core's default for "selective"
# DeepSeek-V3 report Sec. 3.2.3: "we recompute all RMSNorm operations and MLA up-projections";
# Sec. 3.3.3: the MoE SwiGLU output is recomputed from its (FP8-cached) inputs.  With
# fp8_storage "deepseek" this is the report's memory recipe.
DEEPSEEK_V3_RECOMPUTE = frozenset({"layernorm", "mla_up_proj", "moe_act"})


@dataclass(frozen=True)
class ActivationPolicy:
    """How a layer's activations are kept: ``full`` recompute (layer input only), else the set of
    selectively recomputed ``modules``; ``fp8`` linear layers; ``fp8_storage``: whose FP8
    activation storage an FP8 run follows — "te" (Transformer Engine: each linear keeps its FP8
    input) or "deepseek" (DeepSeek-V3 Sec. 3.3.3: additionally the MoE SwiGLU inputs in FP8 and
    the attention output once, in E5M6, for both the output projection and the attention backward)."""

    full: bool = False
    modules: frozenset[str] = frozenset()
    fp8: bool = False
    fp8_storage: str = "te"


def selective_modules(sc: Scenario) -> frozenset[str]:
    """Modules recomputed under ``training.recompute: selective``: the scenario's
    ``training.recompute_modules`` (Megatron-Core's default is ``core_attn``)."""
    given = sc.training.recompute_modules
    return frozenset(given) if given else SELECTIVE_DEFAULT


def fp8_storage(sc: Scenario) -> str:
    """The FP8 activation storage recipe: ``training.fp8_storage`` ("te" | "deepseek")."""
    return sc.training.fp8_storage


def policy_for(sc: Scenario) -> ActivationPolicy:
    """The scenario's activation policy (training.recompute, training.dtype)."""
    tr = sc.training
    fp8 = runs_fp8(sc)                  # in bf16 on a GPU without FP8 tensor cores
    kind = recompute_kind(sc)
    selective = kind == "selective" and not tr.recompute_layers
    modules = selective_modules(sc) if selective else frozenset()
    unknown = modules - set(RECOMPUTE_MODULES)
    if unknown:
        known = ", ".join(RECOMPUTE_MODULES)
        raise ValueError(f"unknown recompute modules {sorted(unknown)}; known: {known}")
    storage = fp8_storage(sc)
    if storage not in ("te", "deepseek"):
        raise ValueError(f"unknown fp8 activation storage {storage!r}; known: te, deepseek")
    return ActivationPolicy(kind == "full" and not tr.recompute_layers, modules, fp8, storage)


def activation_element_bytes(sc: Scenario) -> int:
    """Bytes per activation element: the training dtype's; FP8 runs keep bf16 activations outside
    the linear layers' own FP8 copies (Transformer Engine)."""
    return BYTES_PER_ELEMENT["bf16" if sc.training.dtype == "fp8" else sc.training.dtype]


def _ctx(sc: Scenario, policy: ActivationPolicy) -> Ctx:
    p = sc.parallelism
    flash = fused(sc)
    return Ctx(sc.model, p.tp, p.sequence_parallel and p.tp > 1, activation_element_bytes(sc), policy.fp8,
               flash, policy.modules, policy.fp8 and policy.fp8_storage == "deepseek",
               routed_copy_load(sc.model.moe, p.ep))


def layer_terms(sc: Scenario, moe_layer: bool, policy: ActivationPolicy | None = None) -> list[Term]:
    """Every tensor one layer saves per token on one GPU with no recompute (``policy`` sets the
    dtype-dependent bytes and which terms selective modules would drop; its ``full`` is ignored)."""
    policy = policy if policy is not None else policy_for(sc)
    c = _ctx(sc, policy)
    mlp = moe_mlp_terms(c) if moe_layer else dense_mlp_terms(c)
    return attention_terms(c, sc.model.seq_len) + mlp


def layer_input_bytes(sc: Scenario, tokens: float) -> float:
    """Full recompute's checkpoint: the layer input, 2*s*b*h bytes for 2-byte activations
    (Korthikanti Sec. 5), split across TP ranks by sequence parallelism or, without it, by
    Megatron's distributed checkpointed activations (``distribute_saved_activations``)."""
    return tokens * sc.model.hidden * activation_element_bytes(sc) / sc.parallelism.tp


def kept_bytes(sc: Scenario, moe_layer: bool, tokens: float, policy: ActivationPolicy) -> float:
    """Bytes one layer keeps for ``tokens`` tokens on one GPU under ``policy``."""
    if policy.full:
        return layer_input_bytes(sc, tokens)
    return tokens * sum(t.bytes for t in layer_terms(sc, moe_layer, policy) if t.module not in policy.modules)


def _kept_in_hbm_before_offload(sc: Scenario, moe_layer: bool, tokens: float) -> float:
    """Bytes one average layer keeps: under ``training.recompute_layers`` N, the chunk's N fully
    recomputed layers keep their input and the others everything (activations_recipes.py)."""
    if sc.training.recompute_layers > 0:
        r = recompute_share(sc)
        plain = ActivationPolicy(fp8=runs_fp8(sc), fp8_storage=fp8_storage(sc))
        return r * layer_input_bytes(sc, tokens) + (1 - r) * kept_bytes(sc, moe_layer, tokens, plain)
    return kept_bytes(sc, moe_layer, tokens, policy_for(sc))


def layer_activation_bytes(sc: Scenario, moe_layer: bool, tokens: float) -> float:
    """Bytes kept in HBM for the backward by one (dense or MoE) layer for ``tokens`` tokens on one
    GPU: what the recompute policy keeps, less the offloaded layers' share (it is in host memory)."""
    return _kept_in_hbm_before_offload(sc, moe_layer, tokens) * (1 - offload_share(sc))


def offloaded_layer_bytes(sc: Scenario, moe_layer: bool, tokens: float) -> float:
    """Bytes one offloaded layer copies to host memory after its forward (and back before its
    backward): what it would keep in HBM."""
    return _kept_in_hbm_before_offload(sc, moe_layer, tokens) if offload_share(sc) > 0 else 0.0


def recompute_working_bytes(sc: Scenario, moe_layer: bool, tokens: float) -> float:
    """Bytes a recomputed layer holds again during its own backward beyond what it kept: its
    activations but the checkpointed input under full recompute (the recomputation reads that
    input, it does not copy it: counting it twice made full recompute hold 2.1 MB more than none on
    a one-layer stage), the dropped modules' tensors under selective (Chen et al. 2016, Sec. 3); 0
    without recompute.  Live for one layer at a time, so counted once per GPU."""
    policy = policy_for(sc)
    # Offloading double-buffers: one offloaded layer's activations are in HBM while they are
    # copied out (or back), on top of the rest (activations_recipes.py).
    copy = offloaded_layer_bytes(sc, moe_layer, tokens)
    no_recompute = ActivationPolicy(fp8=policy.fp8, fp8_storage=policy.fp8_storage)
    everything = kept_bytes(sc, moe_layer, tokens, no_recompute)
    if sc.training.recompute_layers > 0:
        # A layer recomputed by count keeps its input as full recompute does.
        return copy + (everything - _reused_checkpoint(sc, tokens) if recompute_share(sc) > 0 else 0.0)
    if not policy.full and not policy.modules:
        return copy
    if policy.full:
        return copy + everything - _reused_checkpoint(sc, tokens)
    return copy + everything - kept_bytes(sc, moe_layer, tokens, policy)


def _reused_checkpoint(sc: Scenario, tokens: float) -> float:
    """The part of a full-recompute checkpoint that is the re-materialised layer's own input: all of
    it where the checkpoint is the input as the layer holds it (no TP, or sequence parallelism's
    shard), none where Megatron distributed a replicated input over the TP ranks (the backward
    gathers it into a new tensor beside the shard)."""
    p = sc.parallelism
    return layer_input_bytes(sc, tokens) if p.tp == 1 or p.sequence_parallel else 0.0


def mtp_extra_bytes(sc: Scenario, tokens: float) -> float:
    """Per multi-token-prediction module, what it keeps besides its transformer block (DeepSeek-V3
    Sec. 2.2, Eq. 21): the two RMSNorm inputs (the previous depth's hidden state and the next
    token's embedding, h each) and the 2h -> h projection's input (the concatenated normed pair,
    2h; FP8 under an FP8 recipe).  Sequence parallelism splits them over TP."""
    p = sc.parallelism
    e = activation_element_bytes(sc)
    proj = 1 if runs_fp8(sc) else e
    div = p.tp if p.sequence_parallel and p.tp > 1 else 1
    return tokens * sc.model.hidden * (2 * e + 2 * proj) / div
