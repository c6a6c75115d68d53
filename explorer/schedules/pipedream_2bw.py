"""PipeDream-2BW (Narayanan et al., "Memory-Efficient Pipeline-Parallel DNN Training", ICML 2021,
Sec. 3.1 and Fig. 2): the 1F1B order of every stage without pipeline flushes, with double-buffered
weights — each stage keeps two weight versions (the one new micro-batches use, and the one the
micro-batches still in flight used), accumulates gradients over the m micro-batches of an iteration
and updates once per iteration with a delay of one (W(t+1) = W(t) - ν∇f(W(t-1))).

The timeline is PipeDream's asynchronous 1F1B (schedules/pipedream.py): two iterations back to
back, a steady-state period of m backwards measured in the second.  What differs is the memory:
2 weight versions on every stage instead of PipeDream's p - s (Table 2 of the Chimera paper and
Sec. 3.1 of 2BW: 2·Mθ), and 1F1B's activations (p - s micro-batches in flight on stage s).
"""
from __future__ import annotations

from .base import BubbleInputs
from .pipedream import ITERATIONS_SIMULATED, order, rule

__all__ = ["ITERATIONS_SIMULATED", "order", "rule", "weight_versions", "version_of", "bubble"]

WEIGHT_VERSIONS = 2       # double buffering (ICML 2021 Sec. 3.1): the newest and the one in flight


def weight_versions(stage: int, p: int) -> int:
    """Double-buffered weights (ICML 2021 Sec. 3.1): 2 versions on every stage, whatever p."""
    return WEIGHT_VERSIONS


def version_of(k: int, m: int) -> int:
    """The weight version (batches applied) input micro-batch ``k`` (1-indexed) uses for both its
    forward and its backward pass, m micro-batches per batch: max(floor((k-1)/m) - 1, 0)
    (ICML 2021 Sec. 3.1) — one batch stale once the pipeline runs."""
    return max((k - 1) // m - 1, 0)


def bubble(b: BubbleInputs) -> tuple[float, str]:
    """PipeDream-2BW (ICML 2021 Sec. 3.1; Chimera SC21 Table 2 '≈0'): 1F1B without flushes keeps
    every stage busy in steady state; the once-per-iteration update does not drain the pipeline."""
    return 0.0, ("0 in steady state: 1F1B without flushes, weights double-buffered "
                 "(PipeDream-2BW, Narayanan et al. ICML 2021)")
