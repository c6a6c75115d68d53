"""The tensors one transformer layer saves for its backward, term by term, per token.

Each term is one tensor an autograd function keeps from forward to backward, sized per token of
the micro-batch (the s*b of Korthikanti et al., "Reducing Activation Recomputation in Large
Transformer Models", MLSys 2023, arXiv 2205.05198, Sec. 4.1), with its bytes per element, the
tensor-parallel divisor it is split by, and the recompute module that drops it.  The derivation
follows Korthikanti Sec. 4.1 term by term and extends it, citing each extension where it is made:

- GPT (LayerNorm, MHA, GeLU 4h, dropout): Korthikanti Sec. 4.1 / Table 2 exactly —
  34*s*b*h + 5*a*s^2*b bytes per layer with 2-byte activations and 1-byte dropout masks.
- Llama-style: no dropout (no masks; the softmax output is the tensor the PV matmul keeps),
  RMSNorm inputs in place of LayerNorm inputs, GQA (K and V of kv_heads * h/a), SwiGLU.
- MLA (DeepSeek-V2, arXiv 2405.04434, Sec. 2.1.2-2.1.3, Eq. 9-19; DeepSeek-V3 Sec. 2.1.1): the
  query latent c_Q and key/value latent c_KV (+ the shared rope key) before and after their
  RMSNorms, the up-projected per-head Q (nope + rope), K and V, and the attention output.
- MoE (Megatron-Core ``TopKRouter`` + ``TEGroupedMLP``): router input and fp32 scores, the
  permuted token copy each of the top_k experts receives, each copy's FFN intermediates, and the
  shared experts as a dense FFN.
- FlashAttention (Dao, FlashAttention-2, arXiv 2307.08691, Sec. 3.1 and Alg. 1): keeps Q, K, V,
  the output O and one fp32 log-sum-exp per query row and head, never the s x s scores.
- FP8 (NVIDIA Transformer Engine, ``transformer_engine/pytorch/module/linear.py`` and
  ``layernorm_linear.py`` forward: a Linear under FP8 saves its FP8-quantized input, keeping only
  the column-wise (transposed) copy the weight-gradient GEMM reads; TE docs "Performance
  considerations: handling transposes"): every linear layer's saved input is 1 byte per element.
  The attention core, norms and router stay in bf16, so FlashAttention's own O stays 2 bytes.

Everything here is per token, before the tensor-parallel divisor;
explorer/workloads/transformer/activations.py sums
the terms into bytes per layer and applies recompute policies.
"""
from __future__ import annotations

from dataclasses import dataclass

from ...config import Model
from .attention import head_dims

MASK_BYTES = 1          # dropout masks are bytes (Korthikanti Sec. 4.1: "as^2b" and "sbh" terms)
FP8_BYTES = 1           # Transformer Engine keeps an FP8 linear input as 1 byte per element
LSE_BYTES = 4           # FlashAttention's log-sum-exp statistics are fp32 (FlashAttention-2 Alg. 1)
ROUTER_SCORE_BYTES = 4  # Megatron-Core's moe_router_dtype fp32, as DeepSeek-V3 recipes set it
E5M6_BYTES = 1.5        # DeepSeek-V3 Sec. 3.3.3: the attention output cached in a 12-bit E5M6 format


@dataclass(frozen=True)
class Term:
    """One saved tensor: ``elements`` per token, ``bytes_per_element``, split over ``divisor``
    tensor-parallel ranks, dropped by recompute module ``module`` (None: never dropped by a
    selective module; full recompute drops everything but the layer input)."""

    name: str
    elements: float
    bytes_per_element: float
    divisor: float
    module: str | None = None

    @property
    def bytes(self) -> float:
        """Bytes per token on one GPU."""
        return self.elements * self.bytes_per_element / self.divisor


@dataclass(frozen=True)
class Ctx:
    """What the term builders read: the model, the TP degree, whether sequence parallelism splits
    the norm/dropout region, activation bytes ``e``, FP8 linear layers, flash attention, and the
    recompute modules in force (Megatron-Core ``recompute_modules`` names); ``deepseek_storage``:
    DeepSeek-V3's low-precision activation storage (Sec. 3.3.3) instead of Transformer Engine's;
    ``expert_load``: the routed token copies this GPU's expert rank receives over the balanced mean
    (moe_load.routed_copy_load; 1 = balanced routing)."""

    m: Model
    tp: int
    sp: bool
    e: float
    fp8: bool
    flash: bool
    modules: frozenset[str]
    deepseek_storage: bool = False
    expert_load: float = 1.0

    @property
    def seq_div(self) -> float:
        """Divisor of the tensors outside the TP regions: t with sequence parallelism (Korthikanti
        Sec. 4.2.2), 1 without (replicated on every TP rank, Sec. 4.2.1)."""
        return self.tp if self.sp else 1

    def linear_input_bytes(self, from_norm: bool) -> float:
        """Bytes per element a linear layer keeps of its input: 1 under FP8 (its own quantized
        copy); otherwise the bf16 tensor itself, which ``layernorm`` recompute (Megatron-Core's
        output-discarding checkpoint of the norms; DeepSeek-V3 Sec. 3.2.3 "recomputation of
        RMSNorm") frees when that input is a norm's output."""
        if self.fp8:
            return FP8_BYTES
        return 0.0 if from_norm and "layernorm" in self.modules else self.e


def _scores(c: Ctx, keys: float) -> list[Term]:
    """Unfused attention's s x s tensors per token and head (Korthikanti Sec. 4.1): the softmax
    output 2as^2b, and with dropout its mask as^2b and its output 2as^2b (else the PV matmul keeps
    the softmax output itself).  FlashAttention keeps only the fp32 log-sum-exp per row and head."""
    a, t = c.m.heads, c.tp
    if c.flash:
        return [Term("softmax_lse", a, LSE_BYTES, t, "core_attn")]
    out = [Term("softmax_out", a * keys, c.e, t, "core_attn")]
    if c.m.dropout:
        out += [Term("attn_dropout_mask", a * keys, MASK_BYTES, t, "core_attn"),
                Term("attn_dropout_out", a * keys, c.e, t, "core_attn")]
    return out


def _attn_output(c: Ctx, width: float) -> list[Term]:
    """The core's output O (``width`` per token): the output projection's saved input, and under
    FP8 with FlashAttention also FlashAttention's own bf16 copy (its backward reads O).  DeepSeek-V3
    (Sec. 3.3.3) keeps one E5M6 copy that serves both backwards."""
    if c.deepseek_storage:
        return [Term("proj_in", width, E5M6_BYTES, c.tp)]
    out = [Term("proj_in", width, c.linear_input_bytes(False), c.tp)]
    if c.fp8 and c.flash:
        out.append(Term("core_out", width, c.e, c.tp, "core_attn"))
    return out


def attention_terms(c: Ctx, keys: float) -> list[Term]:
    """The attention block's saved tensors, ``keys`` = the sequence length the scores span."""
    m, t, e = c.m, c.tp, c.e
    h, a = m.hidden, m.heads
    # Korthikanti Sec. 4.1: the norm input (2sbh) and the QKV input, its output (2sbh).
    out = [Term("attn_norm_in", h, e, c.seq_div), Term("qkv_in", h, c.linear_input_bytes(True), c.seq_div)]
    if m.mla is None:
        g = m.kv_heads or a
        d = head_dims(m)[0]           # model.head_dim, or h/a
        # Korthikanti: Q and K for QK^T (4sbh), V for the PV matmul (2sbh); GQA (Ainslie et al.
        # 2023) keeps K and V of g heads.  A TP rank holds at least one KV head (Megatron-Core
        # replicates query groups when tp > g), so K/V split by min(t, g).
        kv_div = min(t, g)
        out += [Term("q", a * d, e, t), Term("k", g * d, e, kv_div), Term("v", g * d, e, kv_div)]
        out += _scores(c, keys) + _attn_output(c, a * d)
    else:
        out += mla_terms(c) + _scores(c, keys) + _attn_output(c, a * m.mla.v_head_dim)
    if m.dropout:
        out.append(Term("attn_out_dropout_mask", h, MASK_BYTES, c.seq_div))   # Korthikanti: sbh
    return out


def mla_terms(c: Ctx) -> list[Term]:
    """MLA's saved tensors between the norm output and the core (DeepSeek-V2 Eq. 9-19): the latents
    c_Q (q_lora_rank) and [c_KV, k_rope] (kv_lora_rank + rope dim) as their RMSNorms' inputs, the
    normed latents as the up-projections' inputs, and the per-head Q = [q_nope, q_rope] (a*d_qk),
    K = [k_nope, k_rope] (a*d_qk) and V (a*d_v) that the core keeps.  Megatron-Core builds the
    down-projections as duplicated (non-TP) linears, so the latents are replicated on every TP rank;
    the per-head tensors split over TP.  ``mla_up_proj`` recompute (Megatron-Core; DeepSeek-V3
    Sec. 3.2.3 "recomputation of ... MLA up-projections") drops Q, K and V: they are recomputed
    from the latents in the backward."""
    mla, a, t, e = c.m.mla, c.m.heads, c.tp, c.e
    assert mla is not None                                # only MLA models have these terms
    d_qk = mla.qk_nope_head_dim + mla.qk_rope_head_dim
    out: list[Term] = []
    if mla.q_lora_rank:
        out += [Term("q_latent", mla.q_lora_rank, e, 1),
                Term("q_up_in", mla.q_lora_rank, c.linear_input_bytes(True), 1)]
    out += [Term("kv_latent", mla.kv_lora_rank + mla.qk_rope_head_dim, e, 1),
            Term("kv_up_in", mla.kv_lora_rank, c.linear_input_bytes(True), 1)]
    for name, width in (("q", a * d_qk), ("k", a * d_qk), ("v", a * mla.v_head_dim)):
        out.append(Term(name, width, e, t, "mla_up_proj"))
    return out


def _ffn_terms(c: Ctx, prefix: str, width: float, copies: float, divisor: float,
               act_module: str | None, act_in_bytes: float, in_module: str | None = None) -> list[Term]:
    """One FFN of ``width`` run on ``copies`` token copies: the activation function's inputs (GeLU:
    the up-projection output, f; SwiGLU: gate and up, 2f — Shazeer 2020) and its output, the
    down-projection's saved input (f); ``in_module`` drops the input too (the dense ``mlp``
    recompute).  ``act_module`` recompute drops that output (Megatron-Core
    ``moe_act``; DeepSeek-V3 Sec. 3.3.3 "recompute its output in the backward pass")."""
    glu = c.m.ffn_kind == "swiglu"
    act_in = (2 if glu else 1) * width
    return [Term(f"{prefix}act_in", copies * act_in, act_in_bytes, divisor, in_module),
            Term(f"{prefix}fc2_in", copies * width, c.linear_input_bytes(False), divisor, act_module)]


def dense_mlp_terms(c: Ctx) -> list[Term]:
    """Dense FFN (Korthikanti Sec. 4.1: norm input 2sbh, FC1 input 2sbh, GeLU input 8sbh and
    output 8sbh for f = 4h, dropout mask sbh)."""
    m = c.m
    out = [Term("mlp_norm_in", m.hidden, c.e, c.seq_div),
           Term("fc1_in", m.hidden, c.linear_input_bytes(True), c.seq_div)]
    assert m.ffn_hidden is not None                       # filled by the defaults
    # Megatron-Core's "mlp" recompute checkpoints the MLP on its input (fc1_in, kept): the
    # activation function's input and output are recomputed in the backward.
    out += _ffn_terms(c, "", m.ffn_hidden, 1, c.tp, "mlp", c.e, "mlp")
    if m.dropout:
        out.append(Term("mlp_dropout_mask", m.hidden, MASK_BYTES, c.seq_div))
    return out


def moe_mlp_terms(c: Ctx) -> list[Term]:
    """MoE FFN, per token of this GPU.  With balanced routing each EP rank receives tokens*top_k
    copies over its local experts (as explorer/workloads/transformer/layer.py prices the expert
    GEMMs); the busiest rank receives ``c.expert_load`` times that (moe_load.py), the rank whose time
    and memory are reported.  Routing is dropless (Megatron-Core's default strategy "will not drop or
    pad any token"; only ``--moe-expert-capacity-factor`` drops the tokens beyond an expert's
    capacity, GShard Sec. 2.2 / Switch Transformer Sec. 2.2), so that rank keeps every copy it
    receives: the per-copy terms below scale with the load, the others do not:
    - the norm input, and its output as the router GEMM's bf16 input (freed by ``layernorm``
      recompute; Megatron-Core's router linear is not an FP8 layer);
    - the router's fp32 scores over all experts (the softmax/sigmoid backward reads them);
    - per routed copy: the permuted token as the expert FC1 input (h), and the expert FFN
      intermediates.  Megatron-Core's ``TEGroupedMLP`` multiplies the routing probabilities into the
      activation output (``moe_apply_probs_on_input`` off), so the combine keeps no expert output.
      Token copies are replicated over the TP ranks of the expert-TP group; intermediates split;
    - DeepSeek-V3's storage (Sec. 3.3.3) caches the SwiGLU inputs of the MoE in FP8 (1 byte);
    - shared experts as a dense FFN of width shared_experts * expert_ffn_hidden on every token."""
    m, moe = c.m, c.m.moe
    assert moe is not None                                # only MoE layers have these terms
    h, k = m.hidden, moe.top_k * c.expert_load       # routed copies per token on this rank
    out = [Term("mlp_norm_in", h, c.e, c.seq_div),
           Term("router_in", h, 0.0 if "layernorm" in c.modules else c.e, c.seq_div),
           Term("router_scores", moe.experts, ROUTER_SCORE_BYTES, c.seq_div),
           Term("expert_fc1_in", k * h, FP8_BYTES if c.fp8 else c.e, 1)]
    out += _ffn_terms(c, "expert_", moe.expert_ffn_hidden, k, c.tp, "moe_act",
                      FP8_BYTES if c.deepseek_storage else c.e)
    if moe.shared_experts:
        if c.fp8:   # bf16: the shared FC1 keeps the norm output, already counted as router_in
            out.append(Term("shared_fc1_in", h, FP8_BYTES, c.seq_div))
        out += _ffn_terms(c, "shared_", moe.shared_experts * moe.expert_ffn_hidden, 1, c.tp, None, c.e)
    if m.dropout:
        out.append(Term("mlp_dropout_mask", h, MASK_BYTES, c.seq_div))
    return out
