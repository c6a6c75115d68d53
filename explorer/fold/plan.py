"""Which micro-batch counts the steady-state fold simulates (explorer/fold/steady.py), known before
simulating so that the work budget (config/budget.py) can count the folded simulation.

With identical micro-batches every stage's schedule becomes periodic after its warm-up: adding
one period of micro-batches inserts one more block in the middle of the timeline and shifts what
follows.  The fold simulates reduced counts ``base``, ``base + g``, ``base + 2g``, ... (``g`` the
schedule's granularity: the interleaved schedule needs whole groups of ``pp`` micro-batches) and
stops at the first three counts ``c - 2k, c - k, c`` that prove a period of ``k`` micro-batches
(:data:`PERIODS`) —
unequal stages can make a 1F1B-like steady state repeat only every few micro-batches (the
cyclicity of max-plus systems) — with ``c`` a whole number of periods below the scenario's count;
when none does from ``base``, from twice ``base`` (the transient of unequal stages can last a few
fills), within a limit of micro-batches simulated in all.
``base`` covers one fill of the pipeline (``pp x vpp`` units): warm-up, a steady phase, cool-down.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..schedules import registry
from ..schedules.base import ScenarioLike

# Folding pays once the reduced simulations together are smaller than the full one by this factor
# (below it the full simulation is about as cheap and needs no proof).
MIN_GAIN = 1.5
# The search may simulate at most this many times the micro-batches of the first three counts, or
# SEARCH_FLOOR micro-batches when that is more (small pipelines: cheap runs, long transients).
SEARCH_FACTOR = 4
SEARCH_FLOOR = 256
# Periods tried, in granularity steps.  A pipeline whose stages differ can repeat only every few
# micro-batches (max-plus cyclicity).  The task fold tries 1-4 within its limit; the array fold
# (explorer/fold/arrays), whose reduced runs cost little, also 6 and 8: GPT-3 175B at 16,384
# sequences with 20 Gb/s NICs repeats every 8.
PERIODS = (1, 2, 3, 4)
ARRAY_PERIODS = (1, 2, 3, 4, 6, 8)


@dataclass(frozen=True)
class NotFolded:
    """Why a fold was not taken, in one sentence (what bench/korthikanti.py prints per row)."""

    reason: str


@dataclass(frozen=True)
class FoldPlan:
    """Where the fold's search starts and how far it may go (micro-batches per pipeline)."""

    micro_batches: int        # the scenario's count
    base: int                 # the first reduced count
    granularity: int          # between reduced counts
    limit: int                # micro-batches all reduced simulations together may hold

    @property
    def first(self) -> tuple[int, int, int]:
        """The first three counts (a period of one step), for the work budget."""
        g = self.granularity
        return self.base, self.base + g, self.base + 2 * g

    def triples(self, periods: tuple[int, ...] = PERIODS):
        """Candidate triples ``(c - 2k, c - k, c)`` in the order the search tries them: periods of
        ``periods`` steps from the base, then from twice the base, and so on (a period that sets in
        late), each ending a whole number of periods below the scenario's count."""
        g, m = self.granularity, self.micro_batches
        start = self.base
        while 3 * start <= self.limit:
            for k in periods:
                step = k * g
                c = start + 2 * step
                c += (m - c) % step
                if c < m:
                    yield c - 2 * step, c - step, c
            start *= 2


def granularity(sc: ScenarioLike) -> int:
    """The smallest change of the micro-batch count that keeps ``sc`` valid for its schedule."""
    sched = registry.get(sc.parallelism.schedule)
    if sched.virtual_stages:
        return sc.parallelism.pp            # whole groups of pp micro-batches (SC21 Sec. 2.2.2)
    return 1


def foldable(sc: ScenarioLike) -> bool:
    """Whether adding micro-batches inserts one period at one place of the timeline: not GPipe's
    all-forwards-then-all-backwards order (it grows in both phases) nor DualPipe's two directions
    (both ends grow); those are simulated in full."""
    sched = registry.get(sc.parallelism.schedule)
    return sched.grows_in_one_place and not sched.two_directions and not sched.fused_pairs


def plan(sc: ScenarioLike) -> FoldPlan | None:
    """The fold's search for ``sc``, or None when folding cannot pay (few micro-batches) or one
    inserted period cannot describe the schedule's growth (:func:`foldable`)."""
    got = planned(sc)
    return got if isinstance(got, FoldPlan) else None


def planned(sc: ScenarioLike) -> FoldPlan | NotFolded:
    """:func:`plan`, with the reason when there is none."""
    par = sc.parallelism
    if not foldable(sc):
        return NotFolded(f"adding micro-batches to the {par.schedule} schedule does not insert one period "
                         "at one place (GPipe grows in both phases, DualPipe at both ends, CrossPipe's "
                         "greedy order as a whole)")
    m = sc.training.global_batch // (sc.training.micro_batch * (par.dp or 1))
    g = granularity(sc)
    # Units (micro-batches x token slices) of one pipeline fill and two more, in micro-batches.
    need = -(-(par.pp * par.vpp + 2) // par.token_slices)
    base = -(-max(need, g) // g) * g
    first = 3 * base + 3 * g
    fold = FoldPlan(m, base, g, min(int(m / MIN_GAIN), max(SEARCH_FACTOR * first, SEARCH_FLOOR)))
    if first > fold.limit:
        counts = "/".join(str(c) for c in fold.first)
        many = f"{m:,} micro-batches per pipeline are" if m != 1 else "1 micro-batch per pipeline is"
        return NotFolded(f"{many} too few: the first three reduced runs ({counts} micro-batches, "
                         f"{first:,} in all, each past one fill of pp x vpp = {par.pp * par.vpp} units) "
                         f"exceed the {fold.limit:,} the fold may simulate (m / {MIN_GAIN:g})")
    return fold
