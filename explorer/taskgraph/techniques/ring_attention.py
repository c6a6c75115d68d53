"""Context parallelism by ring attention (Liu, Zaharia & Abbeel, "Ring Attention with Blockwise
Transformers for Near-Infinite Context", 2023; Megatron-Core's context parallelism).

The sequence is split over ``cp`` GPUs; each attention layer passes the K/V blocks around the
ring in cp-1 hand-offs, each overlapped with the attention block of the previous step.  The
backward sends K/V and dK/dV (twice the bytes) against twice the attention work.

What one step costs is priced where the layer's work is (explorer/workloads/transformer/layer.py,
``attention_core``, read by the engine and the estimator alike): each step is its own attention
kernel on the rank's s/cp queries, at the kernel's measured rate for an s/cp sequence
(explorer/physics/attention.py, ``ring_step_seq``), on the zig-zag (2*cp chunks) causal split that
Megatron-Core/Transformer Engine and PyTorch's context_parallel use by default (every rank the mean
work, ``causal_cp_imbalance``), plus the softmax-correction merge after each step
(``ring_merge_bytes``).  Each hand-off's seconds (``step_s``) come from the network's send-recv
price, latency included, so a step pays its P2P latency whenever the attention block is shorter.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RingCost:
    """One layer's ring-attention communication: exposed and hidden seconds of the forward and
    the backward, and the bytes one GPU sends per micro-batch (forward K/V + backward K/V, dK/dV)."""

    exposed_f: float = 0.0
    exposed_b: float = 0.0
    hidden_f: float = 0.0
    hidden_b: float = 0.0
    bytes: float = 0.0


def ring_cost(cp: int, kv_bytes: float, step_s: float, step_b_s: float, attn_step_s: float) -> RingCost:
    """``step_s`` / ``step_b_s``: seconds of one forward (K/V) and backward (K/V and dK/dV)
    hand-off; ``attn_step_s``: the attention compute of one ring step (1/cp of the layer's core)."""
    f = (cp - 1) * max(0.0, step_s - attn_step_s)
    b = (cp - 1) * max(0.0, step_b_s - 2 * attn_step_s)
    return RingCost(f, b, (cp - 1) * step_s - f, (cp - 1) * step_b_s - b, (cp - 1) * kv_bytes * 3)
