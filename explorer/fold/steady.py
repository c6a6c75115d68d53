"""The steady-state fold: a full iteration's figures and timeline from four small simulations.

With identical micro-batches, every stage's schedule becomes periodic after its warm-up, so the
full simulation repeats one block of tasks hundreds of times.  Instead of scheduling them all, the
fold (plan in explorer/fold/plan.py):

1. simulates the scenario with reduced micro-batch counts ``c - 2k``, ``c - k`` and ``c`` (the
   plan's candidates: periods of ``k`` = 1-4 steps from one pipeline fill on), and ``c + k`` to
   confirm;
2. proves that each run is the one before with exactly one period inserted — every task early
   (unchanged) or late (``step`` micro-batches later and ``delta`` seconds later, its binding
   dependency alike), the same ``delta`` all three times (fold_tasks.match_shift) — and that every
   measure before a maximum (analysis/measures.py) is affine in the micro-batch count;
3. extrapolates the measures to the scenario's count and keeps the largest run as the folded task
   list, which unfolds only when read (fold_tasks.FoldedTasks).

Both proofs are checked to 1e-12 relative; when either fails (a schedule whose period has not set
in, priorities that reorder across periods), or when the reduced runs would hold as many tasks as
the full simulation (few micro-batches, many per-iteration tasks), the caller simulates in full.
Timelines are exact to float rounding: a folded figure equals the unfolded one to about 1e-13
relative.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ..analysis.measures import Measures, measure
from ..analysis.steady_state import ScheduledRun, schedule_iteration
from ..config import Scenario
from ..network.groups import Network
from ..taskgraph.builder import IDEAL_ASPECTS, IterationBuilder
from ..taskgraph.make import iteration_builder
from .cost import search_spent, task_fold_refused
from .plan import FoldPlan, NotFolded, planned
from .tasks import FoldedTasks, match_shift, task_keys

REL_TOL = 1e-12            # times and measures must repeat to this, relative to the iteration


@dataclass(frozen=True)
class FoldInfo:
    """How a result was folded (what the bench and the Gantt report)."""

    counts: tuple[int, int, int]      # micro-batches of the three reduced simulations that prove the period
    step: int                         # micro-batches per period
    periods: int                      # periods beyond the largest reduced simulation
    delta_s: float                    # seconds one period adds
    simulated_tasks: int              # tasks the reduced simulations scheduled (the search's too)
    block_tasks: int                  # tasks of the repeated block

    @property
    def repeats(self) -> int:
        """How often the block runs in the full timeline (the Gantt's "xK")."""
        return self.periods + 1

    def describe(self) -> str:
        return (f"folded: simulated {'/'.join(map(str, self.counts))} micro-batches, a block of "
                f"{self.block_tasks:,} tasks x{self.repeats} ({self.step} micro-batch"
                f"{'es' if self.step > 1 else ''}, {self.delta_s * 1e3:.3g} ms per period)")


@dataclass(frozen=True)
class FoldedRun:
    """A folded simulation: measures at the scenario's micro-batch count and the folded tasks."""

    run: ScheduledRun                 # the largest reduced run (its builder: m-independent facts)
    measures: Measures
    tasks: FoldedTasks
    info: FoldInfo


def reduced(sc: Scenario, micro_batches: int) -> Scenario:
    """``sc`` with ``micro_batches`` micro-batches per pipeline (the global batch changed only)."""
    gb = micro_batches * sc.training.micro_batch * sc.dp
    return replace(sc, training=replace(sc.training, global_batch=gb))


def simulate_folded(sc: Scenario, ideal: frozenset[str] | None = None) -> FoldedRun | None:
    """The folded simulation of ``sc``, or None when folding does not pay or is not proven."""
    got = attempt_folded(sc, ideal)
    return got if isinstance(got, FoldedRun) else None


def attempt_folded(sc: Scenario, ideal: frozenset[str] | None = None) -> FoldedRun | NotFolded:
    """The folded simulation of ``sc``, or why there is none.

    Simulates the plan's candidate triples in turn (fold_plan.FoldPlan.triples, sharing runs) and
    stops at the first that proves a period; tried only when its first attempt costs well below
    the full simulation, and gives up at the plan's limit of micro-batches or once its runs have
    cost as much as the full simulation it replaces (explorer/fold/cost.py)."""
    fp = planned(sc)
    if isinstance(fp, NotFolded):
        return fp
    refused = task_fold_refused(sc, fp)
    if refused is not None:
        return refused
    done: dict[int, tuple[ScheduledRun, Measures]] = {}
    if ideal is None:
        ideal = IDEAL_ASPECTS if sc.parallelism.ideal_pipeline else frozenset()
    # One builder (and network) for every reduced run: the layer split, chunks, priced calls and
    # passes never depend on the micro-batch count, so they are made once instead of once per run.
    base: IterationBuilder | None = None

    def run(c: int) -> tuple[ScheduledRun, Measures]:
        nonlocal base
        if c not in done:
            small = reduced(sc, c)
            if base is None:
                base = iteration_builder(small, Network(sc, free="comm" in ideal), ideal)
            r = schedule_iteration(small, ideal, base.for_scenario(small))
            done[c] = (r, measure(r))
        return done[c]

    unproven = NotFolded(f"no period proven within the {fp.limit:,} micro-batches the fold may simulate")
    heavy = NotFolded("its reduced runs cost as much as the full simulation before a period was proven "
                      "(explorer/fold/cost.py)")
    for triple in fp.triples():
        # The triple and the run one period beyond it, which confirms the period (_confirm).
        beyond = 2 * triple[2] - triple[1]
        if beyond >= fp.micro_batches or sum({*done, *triple, beyond}) > fp.limit:
            return unproven
        for c in triple:
            run(c)
        simulated = sum(len(x.tasks) for x, _ in done.values())
        if search_spent([len(x.tasks) for x, _ in done.values()], _full_tasks(done, fp.micro_batches)):
            return heavy         # the runs so far cost the full simulation: it replaces the search
        out = _try(sc, fp, triple, [done[n] for n in triple], ideal, simulated)
        if out is not None and _confirm(out, done[triple[1]], done[triple[2]], run(beyond)):
            simulated = sum(len(x.tasks) for x, _ in done.values())
            if search_spent([len(x.tasks) for x, _ in done.values()], _full_tasks(done, fp.micro_batches)):
                return heavy     # with the confirming run, as costly as the full simulation
            return replace(out, info=replace(out.info, simulated_tasks=simulated))
    return unproven


def _confirm(out: FoldedRun, mid: tuple[ScheduledRun, Measures], last: tuple[ScheduledRun, Measures],
             beyond: tuple[ScheduledRun, Measures]) -> bool:
    """Whether the run one period beyond the triple is the triple's last run with the same period
    inserted once more, its measures on the same line.  Two equal insertions can be a coincidence of
    a longer period: a zero-bubble pipeline of 2 stages whose iteration grows by a, a, b, a, a, b
    seconds per added micro-batch passes the triple (4, 5, 6) with a period of 1 (tests/test_fold.py,
    seed 841); the third insertion shows b."""
    (r2, m2), (r3, m3) = last, beyond
    tol = REL_TOL * max(max(t.end for t in r3.tasks), 1e-30)
    if len({mid[1].structure(), m2.structure(), m3.structure()}) != 1 or \
            _extrapolate([mid[1].flat(), m2.flat(), m3.flat()], 1, m3.T) is None:
        return False
    got = match_shift(r2.tasks, r3.tasks, _units_per_lane(r2, r3), tol)
    return got is not None and abs(got.delta - out.info.delta_s) <= tol


def _units_per_lane(small: ScheduledRun, big: ScheduledRun) -> int:
    """Units one period adds to each lane of the pipeline between two reduced runs (the shift
    match_shift compares at): DualPipe feeds two lanes, from both ends."""
    lanes = 2 if big.builder.schedule.two_directions else 1
    return (big.builder.m_sim - small.builder.m_sim) // lanes


def _full_tasks(done: dict[int, tuple[ScheduledRun, Measures]], micro_batches: int) -> float:
    """Tasks of the full simulation, on the line through the two smallest reduced runs (a run's
    tasks are its per-iteration ones plus a fixed number per micro-batch); inf from one run."""
    counts = sorted(done)
    if len(counts) < 2:
        return float("inf")
    c0, c1 = counts[:2]
    t0, t1 = (len(done[c][0].tasks) for c in (c0, c1))
    return t0 + (t1 - t0) * (micro_batches - c0) / (c1 - c0)


def _try(sc: Scenario, fp: FoldPlan, counts: tuple[int, int, int], done: list[tuple[ScheduledRun, Measures]],
         ideal: frozenset[str], simulated: int) -> FoldedRun | None:
    """The fold over the three reduced runs ``done`` (of ``counts`` micro-batches), if both proofs
    hold: cheap ones first (the iteration time on a line), the task-by-task match last."""
    runs = [r for r, _ in done]
    ms = [x for _, x in done]
    step = counts[1] - counts[0]
    periods = (fp.micro_batches - counts[2]) // step
    if len({x.structure() for x in ms}) != 1 or _extrapolate([[x.T] for x in ms], periods, ms[-1].T) is None:
        return None
    values = _extrapolate([x.flat() for x in ms], periods, ms[-1].T)
    if values is None:
        return None
    # A maximum inside the iteration time (a never-flushing pipeline's busiest stream against its
    # compute window) must stay on the same side up to the scenario's count, or T is not affine.
    # A margin within rounding noise of zero (REL_TOL of T) is on both sides: the two candidates of
    # the maximum are equal there, so T is affine whichever wins.
    noise = REL_TOL * max(ms[-1].T, 0.0)
    sides = {_side(x.pace_margin, noise) for x in ms} | {_side(values[-1], noise)}
    if len(sides - {0}) > 1:
        return None
    shift = _units_per_lane(runs[0], runs[1])
    tol = REL_TOL * max(max(t.end for t in runs[-1].tasks), 1e-30)
    keys = [task_keys(r.tasks) for r in runs]
    first = match_shift(runs[0].tasks, runs[1].tasks, shift, tol, (keys[0], keys[1]))
    if first is None:
        return None
    second = match_shift(runs[1].tasks, runs[2].tasks, shift, tol, (keys[1], keys[2]))
    if second is None or abs(first.delta - second.delta) > tol:
        return None
    folded = FoldedTasks(runs[-1].tasks, second, periods, _rebuild(sc, ideal), keys[2])
    block = len(folded.block)
    info = FoldInfo(counts, step, periods, second.delta, simulated, block)
    return FoldedRun(runs[-1], ms[-1].with_flat(values), folded, info)


def _side(margin: float, noise: float) -> int:
    """+1 / -1 for a margin beyond ``noise`` on either side of zero, 0 within it."""
    return 0 if abs(margin) <= noise else (1 if margin > 0 else -1)


def _rebuild(sc: Scenario, ideal: frozenset[str]):
    """The full task graph of ``sc``, unscheduled (the folded task list fills in its times)."""
    def build() -> list:
        return iteration_builder(sc, Network(sc, free="comm" in ideal), ideal).build().tasks
    return build


def _extrapolate(points: list[list[float]], periods: int, T: float) -> list[float] | None:
    """Each value ``periods`` steps beyond the third point, when the three points lie on a line
    (to REL_TOL of the value, or of the iteration for values near zero); None otherwise.  A value
    zero to that tolerance at all three points is zero: extrapolating its rounding noise (2e-19 s
    of bubble, 250 periods on) would give -5e-17 s, a "-0.0%" where the full simulation, whose
    categories only ever add positive seconds, says "0.0%"."""
    x, y, z = (np.asarray(v, dtype=float) for v in points)
    tol = REL_TOL * np.maximum(np.maximum(np.abs(x), np.abs(y)), np.maximum(np.abs(z), 1e-3 * T))
    # Zero: within REL_TOL of the iteration at all three points.  A category is T minus sums of
    # T-sized times, so its rounding noise is a few ulps of T (3e-15 s at T = 1.6 s), above the
    # 1e-3 T floor of ``tol``; extrapolated 109 periods on it gave a -2e-14 s PipeDream bubble.
    # Such noise is not a line either (0.4, 2.0, 7.1e-15 s of bubble at T = 2 s), so it is exempt
    # from the line test, which would otherwise refuse the fold over a category that is zero.
    noise = REL_TOL * max(T, 0.0)
    zero = (np.abs(x) <= np.maximum(tol, noise)) & (np.abs(y) <= np.maximum(tol, noise)) \
        & (np.abs(z) <= np.maximum(tol, noise))
    if (~zero & (np.abs((z - y) - (y - x)) > tol)).any():
        return None
    return np.where(zero, 0.0, z + periods * (z - y)).tolist()

