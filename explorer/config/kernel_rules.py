"""Cross-field rules of ``training.attention_kernel``: which head dims a kernel runs, and that a fused
kernel is asked for only with ``training.flash_attention`` on."""
from __future__ import annotations

from .schema import ScenarioError
from .sections import Scenario

# The Triton FlashAttention kernel runs head dims up to 128: "Support all head dimensions up to 128
# (not just 16, 32, 64, 128)" (flash-attn's flash_attn_triton.py docstring; llm-foundry's copy).
TRITON_MAX_HEAD_DIM = 128


def rule_triton_head_dim(sc: Scenario) -> None:
    """``training.attention_kernel: triton`` needs a query/key head dim of at most 128 (MLA: its
    nope + rope dims); a convolutional network has no attention."""
    tr, m = sc.training, sc.model
    if tr.attention_kernel != "triton" or not tr.flash_attention or m.conv is not None:
        return
    d = (m.mla.qk_nope_head_dim + m.mla.qk_rope_head_dim if m.mla is not None
         else m.head_dim or m.hidden / m.heads)
    if d > TRITON_MAX_HEAD_DIM:
        raise ScenarioError("training.attention_kernel", f"triton runs head dims up to {TRITON_MAX_HEAD_DIM} "
                            f"and this model's is {d:g}; choose flash2, flash3, cudnn, flex or sdpa")


def rule_kernel_needs_fused_attention(sc: Scenario) -> None:
    """A fused kernel (sdpa, flash2, flash3, cudnn, flex, triton) with ``training.flash_attention``
    false was ignored — the attention ran unfused (megatron-gpt3-175b: all seven kernels gave the
    same 29.27 s) — so the two are refused together; ``auto`` and ``none`` mean unfused there."""
    tr = sc.training
    if not tr.flash_attention and tr.attention_kernel not in ("auto", "none"):
        raise ScenarioError("training.attention_kernel", f"{tr.attention_kernel} with "
                            "training.flash_attention false: the attention runs unfused; set "
                            "flash_attention true to use it, or attention_kernel none")

