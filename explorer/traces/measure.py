"""Measured per-category time of each iteration, in the explorer's categories.

Within one rank's ``ProfilerStep#N`` window every instant gets one category, so the categories
sum to the step's duration exactly (as analysis/breakdown.py's do to the simulated iteration):

- on each thread/stream, an instant inside a collective is communication (a CPU thread inside
  ``c10d::allreduce_`` is blocked on it, even when the call sits inside an autograd op that also
  computes), else inside compute is compute — or recompute/optimizer under those markers;
- on the rank, any thread or stream computing makes the instant compute (communication beside it
  is overlapped, hidden); otherwise a collective in flight makes it *exposed* communication of the
  collective's dimension; otherwise the rank is idle, which the explorer calls ``bubble``.

Exposed communication is thus "collective time not overlapped by compute on the same rank" (the
definition of Holistic Trace Analysis' comm/comp overlap, facebookresearch/HolisticTraceAnalysis,
hta/analyzers/breakdown_analysis.py).  A collective's dimension comes from its process group's
ranks placed by the scenario's layout (explorer/network/placement.py, Megatron's rank order), or
from its op when no group is known (point-to-point: pp, all-to-all: ep, a reduction: the one data
or model dimension the scenario has, dp by default).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..vocabulary import CATEGORIES, COMM_DIMS
from . import classify
from .load import RankTrace

_WORK = ("recompute", "optimizer", "compute")     # precedence when threads do different work


@dataclass(frozen=True)
class Layout:
    """How the scenario lays ranks out: strides and sizes of tp, cp, dp, pp (placement.py)."""

    strides: dict[str, int]
    sizes: dict[str, int]

    @property
    def world(self) -> int:
        n = 1
        for v in self.sizes.values():
            n *= v
        return n

    def dimension(self, ranks: Sequence[int]) -> str | None:
        """The outermost dimension along which ``ranks`` differ (None: one rank or off the layout)."""
        if len(ranks) < 2 or max(ranks) >= self.world:
            return None
        varying = [d for d, st in self.strides.items()
                   if len({(r // st) % self.sizes[d] for r in ranks}) > 1]
        return max(varying, key=lambda d: self.strides[d]) if varying else None

    def default_reduction_dim(self) -> str:
        """The dimension a reduction of an unknown group belongs to: the only one of dp/tp/cp with
        degree > 1, else dp."""
        wide = [d for d in ("dp", "tp", "cp") if self.sizes.get(d, 1) > 1]
        return wide[0] if len(wide) == 1 else "dp"


@dataclass(frozen=True)
class StepMeasure:
    """One rank's categories over one step (seconds; they sum to ``duration_s``)."""

    step: int
    rank: int
    duration_s: float
    categories: dict[str, float]
    comm_total_s: dict[str, float]      # time with a collective of the dimension in flight


def dimension_of_call(op: str, group: str | None, trace: RankTrace, layout: Layout) -> str:
    """The dimension a collective of ``op`` on process group ``group`` belongs to (module docstring)."""
    by_op = classify.dimension_of(op)
    if by_op is not None:
        return by_op
    ranks = trace.groups.get(group) if group is not None else None
    if ranks is None and len(trace.groups) == 1:
        ranks = next(iter(trace.groups.values()))     # the only group there is (gloo annotations name none)
    dim = layout.dimension(ranks) if ranks else None
    return dim if dim in COMM_DIMS else layout.default_reduction_dim()


# Shortest mean iteration a trace may measure: 1 µs (no GPU kernel launch is shorter).
MIN_STEP_S = 1e-6


def measure_step(trace: RankTrace, index: int, step: int, layout: Layout) -> StepMeasure:
    """Sweep the step window once: events sorted by time, per-lane counters, one category per
    elementary segment."""
    a, b = trace.steps[step]
    points: list[tuple[float, int, int, str]] = []     # (time, +1/-1, lane, what)
    for li, lane in enumerate(trace.lanes.values()):
        for s, e in lane.work:
            if e > a and s < b:
                points += [(max(s, a), 1, li, "work"), (min(e, b), -1, li, "work")]
        for s, e, label in lane.marks:
            if e > a and s < b:
                points += [(max(s, a), 1, li, label), (min(e, b), -1, li, label)]
        for s, e, op, group in lane.comm:
            if e > a and s < b:
                what = "comm:" + dimension_of_call(op, group, trace, layout)
                points += [(max(s, a), 1, li, what), (min(e, b), -1, li, what)]
    points.sort(key=lambda p: (p[0], -p[1]))
    count: dict[tuple[int, str], int] = {}
    out = dict.fromkeys(CATEGORIES, 0.0)
    total = dict.fromkeys(COMM_DIMS, 0.0)
    lanes = range(len(trace.lanes))
    at = a

    def charge(t0: float, t1: float) -> None:
        if t1 <= t0:
            return
        dims = {d for d in COMM_DIMS if any(count.get((li, "comm:" + d), 0) > 0 for li in lanes)}
        for d in dims:
            total[d] += t1 - t0
        work = None
        for li in lanes:
            if count.get((li, "work"), 0) <= 0 or any(count.get((li, "comm:" + d), 0) > 0 for d in dims):
                continue                # a lane inside a collective is blocked on it, not computing
            label = next((w for w in _WORK[:2] if count.get((li, w), 0) > 0), "compute")
            if work is None or _WORK.index(label) < _WORK.index(work):
                work = label
        if work is not None:
            out[work] += t1 - t0
        elif dims:
            out[min(dims, key=COMM_DIMS.index)] += t1 - t0
        else:
            out["bubble"] += t1 - t0

    for t, delta, li, what in points:
        charge(at, t)
        at = max(at, t)
        count[(li, what)] = count.get((li, what), 0) + delta
    charge(at, b)
    rank = trace.rank if trace.rank is not None else index
    us = 1e-6
    return StepMeasure(step=step, rank=rank, duration_s=(b - a) * us,
                       categories={k: v * us for k, v in out.items()},
                       comm_total_s={k: v * us for k, v in total.items()})


@dataclass(frozen=True)
class Measured:
    """The iterations every rank has, each charged to its slowest rank, and their mean."""

    steps: tuple[int, ...]
    per_step: tuple[StepMeasure, ...]      # the slowest rank of each step
    iteration_s: float
    categories: dict[str, float]
    comm_total_s: dict[str, float]
    ranks: int
    gpu: bool

    @property
    def exposed_comm_s(self) -> float:
        return sum(self.categories[d] for d in COMM_DIMS)


def measure(traces: Sequence[RankTrace], layout: Layout, skip: int = 0) -> Measured:
    """Measure the steps common to all ranks (after the first ``skip``, warm-up): per step the
    slowest rank (the iteration ends when the last rank does), then the mean over steps."""
    common = sorted(set.intersection(*(set(t.steps) for t in traces)))
    steps = common[skip:]
    if not steps:
        have = ", ".join(f"{t.path.name}: {len(t.steps)}" for t in traces)
        raise ValueError(f"no ProfilerStep common to every rank after skipping {skip} ({have})")
    slowest = []
    for n in steps:
        per_rank = [measure_step(t, i, n, layout) for i, t in enumerate(traces)]
        slowest.append(max(per_rank, key=lambda m: m.duration_s))
    k = len(slowest)
    cats = {c: sum(m.categories[c] for m in slowest) / k for c in CATEGORIES}
    tot = {d: sum(m.comm_total_s[d] for m in slowest) / k for d in COMM_DIMS}
    mean = sum(m.duration_s for m in slowest) / k
    # Chrome-trace times are microseconds (Kineto writes ts and dur so); a step shorter than
    # MIN_STEP_S is no training iteration: times written in seconds, or steps of no length.
    if not mean >= MIN_STEP_S:
        raise ValueError(f"its iterations last {mean * 1e6:.3g} µs on average: ts and dur must be "
                         "microseconds (Kineto's unit), and each iteration at least 1 µs")
    if sum(v for c, v in cats.items() if c != "bubble") <= 0.0:
        raise ValueError("no kernel, operator or collective falls inside its iterations: nothing to "
                         "measure (profile with activities=[CPU, CUDA])")
    return Measured(steps=tuple(steps), per_step=tuple(slowest),
                    iteration_s=mean, categories=cats,
                    comm_total_s=tot, ranks=len(traces), gpu=all(t.gpu for t in traces))
