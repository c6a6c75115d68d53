"""The ``cluster.stragglers`` section: GPUs that compute slower than their peers.

A straggler is a GPU whose kernels run ``slowdown`` times longer than its peers' (thermal or power
throttling, a degraded HBM stack, a noisy neighbour); its network is unaffected.  Synchronous
training waits for it: its tensor- and context-parallel peers wait at every collective, so its
whole pipeline stage in its replica runs at its speed; that replica's schedule stretches; and every
data-parallel collective waits for that replica (Llama 3 report, arXiv 2407.21783, Sec. 3.3.4;
Wu et al., "Falcon: Pinpointing and Mitigating Stragglers for Large-Scale Hybrid-Parallel
Training", arXiv 2410.12588).  How it is simulated is :mod:`explorer.variants.replicas`.
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Stragglers:
    """Slow GPUs: how many and by what factor (placed as :mod:`explorer.variants.replicas` says)."""

    count: int = field(default=0, metadata={
        "min": 0, "max": 1_000_000,
        "why": "0 (none) up to a million GPUs",
        "doc": "slow GPUs; all in one pipeline replica, one per stage from the last stage back (the "
               "worst placement for the synchronous step); one slows its whole TP/CP group"})
    slowdown: float = field(default=1.0, metadata={
        "min": 1.0, "max": 100.0,
        "why": "1 (no slowdown) to 100; a throttled H100 runs at 0.6-0.9 of its clock (1.1-1.7)",
        "doc": "factor on a straggler's compute time (1/0.7 = 1.43 for a GPU at 70% speed)"})
    # Per pipeline stage, the compute factor of the replica being simulated (explorer.variants.replicas
    # sets it on the straggler replica's scenario; empty = every stage at speed).
    stage_slowdown: tuple[float, ...] = field(default=(), metadata={"derived": True})

    @property
    def active(self) -> bool:
        """Whether some GPU is slower than its peers."""
        return self.count > 0 and self.slowdown > 1.0
