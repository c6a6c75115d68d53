"""The attention block of one layer on one GPU: its weight GEMMs, parameters and core FLOPs.

Two families:
- multi-head / grouped-query attention (Vaswani et al. 2017; Ainslie et al. 2023, GQA): a fused
  QKV projection h -> (a + 2*kv_heads) * d_head and an output projection a * d_head -> h, both
  split over the tensor-parallel ranks by heads (Shoeybi et al., Megatron-LM, Sec. 3).  d_head is
  ``model.head_dim``, h/a unless the model decouples it (Qwen3-8B config.json: hidden 4096, 32
  heads, head_dim 128; Qwen3-32B: hidden 5120, 64 heads of 128 = 8192 != hidden);
- multi-head latent attention (DeepSeek-V2, arXiv 2405.04434, Sec. 2.1, Eq. 9-19; DeepSeek-V3,
  arXiv 2412.19437, Sec. 2.1.1): queries go through a low-rank latent h -> q_lora_rank ->
  a * (d_nope + d_rope), keys and values through h -> kv_lora_rank (+ a shared d_rope key) ->
  a * (d_nope + d_v).  The two down-projections act on the whole hidden vector and are replicated
  on every TP rank (Megatron-Core's MLA builds them as non-parallel "duplicated" linears); the
  up-projections and the output projection are split by heads.

The core (QK^T and PV) costs 2 * tokens * s * a * (d_qk + d_v) FLOPs forward: for MHA with
d_qk = d_v = h/a that is the 4 * tokens * s * h of Narayanan et al. SC21 Eq. 3 (with a decoupled
head_dim, 4 * tokens * s * a * head_dim); for DeepSeek-V3's
MLA (a = 128, d_qk = 192, d_v = 128, h = 7168) it is 2.86x what an MHA of the same hidden size
would count.
"""
from __future__ import annotations

from dataclasses import dataclass

from ...config import Model, Scenario
from ...physics.attention import MAX_FUSED_HEAD_DIM
from ...physics.work import Gemm


@dataclass(frozen=True)
class AttentionBlock:
    """The attention of one layer for ``tokens`` tokens on one GPU."""

    gemms: tuple[Gemm, ...]
    core_flops: float          # forward QK^T + PV FLOPs over the full s x s square (SC21 convention)
    kv_elements: float         # K and V elements of these tokens on this GPU (what ring attention passes)
    latent_norm_params: float  # RMSNorm gains of MLA's latents (0 for MHA)


def head_dims(m: Model) -> tuple[float, float]:
    """Per-head query/key and value dimensions (d_qk, d_v)."""
    if m.mla is not None:
        return float(m.mla.qk_nope_head_dim + m.mla.qk_rope_head_dim), float(m.mla.v_head_dim)
    d = float(m.head_dim) if m.head_dim else m.hidden / m.heads
    return d, d


def fused(sc: Scenario) -> bool:
    """Whether the attention core runs as one fused kernel: ``training.flash_attention`` with a
    kernel (not ``none``), and heads no wider than the fused kernels take
    (physics/attention.MAX_FUSED_HEAD_DIM).  Else it runs unfused, in time, model FLOPs and memory
    (the s x s scores kept) as with ``flash_attention`` false: a 512-wide head was priced as
    FlashAttention at its 256-wide rate."""
    tr = sc.training
    narrow = max(head_dims(sc.model)) <= MAX_FUSED_HEAD_DIM
    return tr.flash_attention and tr.attention_kernel != "none" and narrow


def attention_block(m: Model, tokens: float, seq: float, tp: int) -> AttentionBlock:
    """Weight GEMMs, core FLOPs and K/V size of one layer's attention for ``tokens`` tokens of
    sequences of length ``seq`` on one of ``tp`` tensor-parallel ranks."""
    h, a = m.hidden, m.heads
    d_qk, d_v = head_dims(m)
    core = 2.0 * tokens * seq * a * (d_qk + d_v) / tp
    if m.mla is None:
        kv = m.kv_heads if m.kv_heads is not None else a
        d = d_qk                      # model.head_dim, or h/a
        qkv = Gemm(tokens, (a + 2 * kv) * d / tp, h)
        out = Gemm(tokens, h, a * d / tp)
        return AttentionBlock((qkv, out), core, 2.0 * tokens * kv * d / tp, 0.0)
    mla = m.mla
    gemms: list[Gemm] = []
    # The down-projections are whole on every tensor-parallel rank (Megatron-Core's MLA builds
    # linear_q_down_proj and linear_kv_down_proj "duplicated"): shared by the tp ranks.
    if mla.q_lora_rank:
        gemms += [Gemm(tokens, mla.q_lora_rank, h, shared=tp), Gemm(tokens, a * d_qk / tp, mla.q_lora_rank)]
    else:
        gemms.append(Gemm(tokens, a * d_qk / tp, h))
    gemms += [Gemm(tokens, mla.kv_lora_rank + mla.qk_rope_head_dim, h, shared=tp),  # kv down + rope key
              Gemm(tokens, a * (mla.qk_nope_head_dim + d_v) / tp, mla.kv_lora_rank),  # kv up
              Gemm(tokens, h, a * d_v / tp)]                                      # output projection
    kv_el = tokens * a * (d_qk + d_v) / tp
    return AttentionBlock(tuple(gemms), core, kv_el, float(mla.q_lora_rank + mla.kv_lora_rank))


def attention_params(m: Model) -> float:
    """Attention weights of one layer, all TP ranks together (for the model's parameter count)."""
    blk = attention_block(m, 1.0, 1.0, 1)
    return sum(g.params for g in blk.gemms) + blk.latent_norm_params
