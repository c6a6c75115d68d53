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
    the backward (the recomputed forward's ring included), and the bytes one GPU sends per micro-batch
    (forward K/V + backward K/V, dK/dV + the recomputed forward's K/V)."""

    exposed_f: float = 0.0
    exposed_b: float = 0.0
    hidden_f: float = 0.0
    hidden_b: float = 0.0
    bytes: float = 0.0


def ring_cost(cp: int, kv_bytes: float, step_s: float, step_b_s: float, attn_step_s: float,
              recompute: float = 0.0) -> RingCost:
    """``step_s`` / ``step_b_s``: seconds of one forward (K/V) and backward (K/V and dK/dV)
    hand-off; ``attn_step_s``: the attention compute of one ring step (1/cp of the layer's core).

    ``recompute``: the share of the forward ring that recomputation runs again in the backward
    (LayerCost.cp_recompute: 1 under full recompute or selective ``core_attn``, N/L under block
    recompute).  The recomputed core attention is the forward's (Transformer Engine's
    AttnFuncWithCPAndKVP2P.forward runs again inside the checkpoint), so its cp-1 hand-offs of K/V hide
    under the same attention steps: the backward gains ``recompute`` x the forward's exposed and hidden
    seconds, and a GPU sends (cp-1) x kv_bytes x (3 + recompute) per micro-batch: (cp-1) x kv x 4 with
    full recompute."""
    f = (cp - 1) * max(0.0, step_s - attn_step_s)
    b = (cp - 1) * max(0.0, step_b_s - 2 * attn_step_s)
    hidden_f = (cp - 1) * step_s - f
    return RingCost(f, b + recompute * f, hidden_f, (cp - 1) * step_b_s - b + recompute * hidden_f,
                    (cp - 1) * kv_bytes * (3 + recompute))
