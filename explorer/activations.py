"""Activation bytes one layer keeps from its forward to its backward, per micro-batch and GPU.

Korthikanti et al., "Reducing Activation Recomputation in Large Transformer Models" (MLSys 2023,
arXiv 2205.05198), Sec. 4, Table 2: s*b*h*(34 + 5*a*s/h) bytes per layer for GPT with 2-byte
activations, with 10*s*b*h replicated across tensor-parallel ranks unless sequence parallelism
splits it.  (Moved here unchanged from workload.py; the per-architecture accounting of issue 10
replaces the body.)
"""
from __future__ import annotations

from .scenario import Scenario

BYTES_PER_ELEMENT = {"bf16": 2, "fp16": 2, "fp8": 1, "fp32": 4}


def _mlp_matrices(ffn_kind: str) -> int:
    return 3 if ffn_kind == "swiglu" else 2


def layer_activation_bytes(sc: Scenario, moe_layer: bool, tokens: float) -> float:
    """Bytes kept for the backward by one (dense or MoE) layer for ``tokens`` tokens on one GPU."""
    m, p, tr = sc.model, sc.parallelism, sc.training
    t = p.tp
    e = BYTES_PER_ELEMENT["bf16" if tr.dtype == "fp8" else tr.dtype]
    h, a, s = m.hidden, m.heads, m.seq_len
    r = (m.kv_heads or m.heads) / m.heads
    mats = _mlp_matrices(m.ffn_kind)
    sp = p.sequence_parallel and t > 1
    if moe_layer:
        moe = m.moe
        mlp_act_sbh = 3 + (moe.top_k + moe.shared_experts) * (2 * mats) * moe.expert_ffn_hidden / h
    else:
        mlp_act_sbh = 3 + 2 * mats * m.ffn_hidden / h        # Korthikanti: 19 for GeLU, f = 4h
    attn_act_sbh = 7 + 4 * r
    total_sbh = attn_act_sbh + mlp_act_sbh + 4
    score_act = 0.0 if tr.flash_attention else 5 * a * s / h   # coefficient of sbh, before /t
    if tr.recompute == "full":
        act = 2 * tokens * h / (t if sp else 1)
    else:
        keep_scores = tr.recompute == "none" and not tr.flash_attention
        if sp:
            act = tokens * h / t * (total_sbh + (score_act if keep_scores else 0))
        else:
            act = tokens * h * (10 + (total_sbh - 10) / t + (score_act / t if keep_scores else 0))
    return act * e / 2
