"""Which micro-batch counts the steady-state fold simulates (explorer/fold.py), known before
simulating so that the work budget (config/budget.py) can count the folded simulation.

With identical micro-batches every stage's schedule becomes periodic after its warm-up: adding
``step`` micro-batches inserts one more period in the middle of the timeline and shifts what
follows.  The fold simulates three reduced counts ``base``, ``base + step``, ``base + 2*step``,
checks that the second and third differ from the first and second by exactly one period, and
extrapolates to the scenario's count.  ``step`` is the schedule's granularity (the interleaved
schedule needs whole groups of ``pp`` micro-batches, DualPipe an even count); ``base`` covers the
warm-up and the cool-down of the deepest pipeline position (``pp x vpp`` units) with margin.
"""
from __future__ import annotations

from dataclasses import dataclass

from .schedules import registry
from .schedules.base import ScenarioLike

# Folding pays once the three reduced simulations together are smaller than the full one by this
# factor (below it the full simulation is about as cheap and needs no proof).
MIN_GAIN = 1.5
# Units per pipeline position the base count holds: one fill of the pipeline gives every stage a
# warm-up, a steady phase and a cool-down (the 1F1B family reaches its period within one fill).
WARMUP_UNITS = 1


@dataclass(frozen=True)
class FoldPlan:
    """The reduced micro-batch counts of a folded simulation (micro-batches per pipeline)."""

    micro_batches: int        # the scenario's count
    base: int                 # the first reduced count
    step: int                 # between reduced counts: the schedule's granularity

    @property
    def counts(self) -> tuple[int, int, int]:
        return self.base, self.base + self.step, self.base + 2 * self.step

    @property
    def periods(self) -> int:
        """Periods of ``step`` micro-batches beyond the largest reduced count (the extrapolation)."""
        return (self.micro_batches - self.counts[-1]) // self.step


def granularity(sc: ScenarioLike) -> int:
    """The smallest change of the micro-batch count that keeps ``sc`` valid for its schedule."""
    sched = registry.get(sc.parallelism.schedule)
    if sched.virtual_stages:
        return sc.parallelism.pp            # whole groups of pp micro-batches (SC21 Sec. 2.2.2)
    if sched.two_directions:
        return 2                            # half from each end
    return 1


def plan(sc: ScenarioLike, base_scale: int = 1) -> FoldPlan | None:
    """The fold's reduced counts for ``sc``, or None when folding cannot pay (few micro-batches,
    no pipeline).  ``base_scale`` multiplies the base count (the fold's second try)."""
    par = sc.parallelism
    m = sc.training.global_batch // (sc.training.micro_batch * (par.dp or 1))
    step = granularity(sc)
    positions = par.pp * par.vpp
    # Units (micro-batches x token slices) to cover warm-up and cool-down, in micro-batches.
    need = -(-(WARMUP_UNITS * positions * base_scale + 2) // par.token_slices)
    if registry.get(par.schedule).two_directions:
        need = max(need, -(-(2 * par.pp) // par.token_slices) + 2)     # DualPipe: units >= 2 pp
    base = -(-max(need, step) // step) * step
    fold = FoldPlan(m, base, step)
    if fold.counts[-1] >= m or (m - fold.counts[-1]) % step or sum(fold.counts) * MIN_GAIN > m:
        return None
    return fold
