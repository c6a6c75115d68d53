"""``parallelism.stage_replicas: auto``: PipeDream's partitioner proposes, the simulation decides.

PipeDream's dynamic programme (taskgraph/replica_split.py; Narayanan et al., SOSP 2019, Sec. 3.1)
prices a plan by its slowest stage and its dearest cut.  The simulation runs uneven replica counts
slower than that (taskgraph/replica_layers.py says why: a replica's sends to both neighbours share
one stream, and 1F1B-RR's bounded micro-batches in flight make a replica wait for a slow round
trip through the stages after it), and the plan it picked was not even monotone in the network's
bandwidth (GNMT-16 on pp 4: 3,352 samples/s at 50 Gb/s against 4,195 at 25; VGG-16 on pp 4:
2,580 at 50 against 2,945 at 25).  So ``auto``:

1. proposes candidates: PipeDream's own plan, the equal replica counts (when the slots divide by
   pp) and every other composition of the replica slots into pp counts of 1 to m (at most
   :data:`MAX_PATTERNS` of them; beyond, the counts one replica away from PipeDream's and from the
   equal ones), each with the layers replica_layers.best_layers gives those counts;
2. prices each by the larger of that recurrence's value and the bound 1F1B-RR's order sets
   (replica_layers.in_flight) — within a few per cent of the simulated time, and rarely above it;
3. simulates PipeDream's plan and the equal one, then the others in order of price, until one is
   priced at least the best time simulated so far, :data:`MAX_SIMULATED` were simulated or their
   engine work passes :data:`CHOICE_WORK`; and keeps the fastest (the first of equals).  Its time
   is what ``run`` reports (``simulate``'s link bound included): the choice is right by the
   simulation's own physics among the candidates, and never slower than PipeDream's plan.

Deterministic (the same scenario gives the same candidates, order and times); memoised per
scenario, since the run, the estimator and ``validate`` each resolve it.  Here in the fold layer,
above the analysis that times an iteration: simulate and fold/run resolve ``auto`` through
:func:`resolved`, and the estimator's entries (estimate/many.py, estimate/fast.py,
estimate/overrides.py, design/scores.py) before pricing a row, whose profile
(pricing/profile.row_profile) then meets replica counts.
"""
from __future__ import annotations

from dataclasses import replace
from itertools import combinations
from math import comb

from ..analysis.link_bound import link_bound
from ..analysis.measures import measure
from ..analysis.steady_state import schedule_iteration
from ..config import Scenario
from ..config.schema import ScenarioError
from ..taskgraph.replica_layers import LayerPricer
from ..taskgraph.replica_split import ReplicaPlan, _Costs, given_layers, plan, with_plan
from .budget import check_unfolded_budget, estimate

MAX_PATTERNS = 1_000         # compositions priced one by one (C(15, 3) = 455 for 16 slots on pp 4)
MAX_SIMULATED = 16           # candidates simulated at most
# Engine work (fold/budget.py's units: 300,000 take about 3.5 s) the candidates' simulations may
# take together; with fewer than two of them affordable PipeDream's plan is taken unsimulated.
CHOICE_WORK = 40_000
_MEMO: dict[tuple, ReplicaPlan] = {}
_MEMO_SIZE = 256

Plan = tuple[tuple[int, ...], tuple[int, ...]]          # (replicas, layers) per stage


def resolved(sc: Scenario) -> Scenario:
    """``sc`` with ``parallelism.stage_replicas: auto`` (all entries 0) replaced by the replicas
    and, when ``stage_layers`` is not given, the layers :func:`choose` picks; unchanged otherwise."""
    r = sc.parallelism.stage_replicas
    if not r or min(r) > 0:
        return sc
    return with_plan(sc, choose(sc, given_layers(sc)))


def describe(sc: Scenario) -> str:
    """``sc``'s per-stage replicas as ``15-1``; under ``auto`` what it runs, e.g.
    ``auto (13-1-1-1, stage layers 13-1-1-1)`` (the layers when it chose them too)."""
    r = sc.parallelism.stage_replicas
    if not r:
        return "none"
    if min(r) > 0:
        return "-".join(map(str, r))
    got = resolved(sc).parallelism
    layers = "-".join(map(str, got.stage_layers or ()))
    chose = "" if given_layers(sc) is not None else f", stage layers {layers}"
    return f"auto ({'-'.join(map(str, got.stage_replicas or ()))}{chose})"


def choose(sc: Scenario, layers: tuple[int, ...] | None = None) -> ReplicaPlan:
    """The replicas (and, unless ``layers`` are given, the layers) ``auto`` runs for ``sc`` (module
    docstring); ``seconds``: the chosen plan's simulated iteration (PipeDream's objective when no
    candidate was simulated)."""
    key = (sc, layers)
    got = _MEMO.get(key)
    if got is None:
        if len(_MEMO) >= _MEMO_SIZE:
            _MEMO.clear()
        got = _MEMO[key] = _choose(sc, layers)
    return got


def candidates(sc: Scenario, layers: tuple[int, ...] | None = None) -> tuple[ReplicaPlan, list[Plan],
                                                                                list[tuple[float, Plan]]]:
    """PipeDream's plan, the plans simulated first whatever their price (PipeDream's and the
    equal replica counts') and every other candidate with its price, lowest first (module
    docstring, steps 1-2)."""
    c = _Costs(sc)
    pipedream = plan(sc, layers=layers, costs=c)
    pricer = LayerPricer(c)
    first: list[Plan] = [(pipedream.replicas, pipedream.layers)]
    if c.slots % c.pp == 0:
        even = (c.slots // c.pp,) * c.pp
        first.append((even, pricer.best_layers(even, layers)[0]))
    ranked: list[tuple[float, Plan]] = []
    for reps in patterns(c.slots, c.pp, c.m, pipedream.replicas):
        split, value = pricer.best_layers(reps, layers)
        ranked.append((max(value, pricer.in_flight(reps, split)), (reps, split)))
    ranked.sort()
    return pipedream, first, ranked


def _choose(sc: Scenario, layers: tuple[int, ...] | None) -> ReplicaPlan:
    """Step 3 of the module docstring over :func:`candidates`."""
    pipedream, first, ranked = candidates(sc, layers)
    best: ReplicaPlan | None = None
    seen: set[Plan] = set()
    work = tried = 0
    for price, (r, lay) in [(0.0, p) for p in first] + ranked:
        if (r, lay) in seen:
            continue
        if tried >= MAX_SIMULATED or (best is not None and price >= best.seconds):
            break
        seen.add((r, lay))
        cand = replace(sc, parallelism=replace(sc.parallelism, stage_replicas=r, stage_layers=lay))
        work += estimate(cand).work
        if work > CHOICE_WORK:
            break
        tried += 1
        try:
            seconds = iteration_seconds(cand)
        except ScenarioError:            # beyond the simulation budget: not a candidate
            continue
        if best is None or seconds < best.seconds:
            best = ReplicaPlan(lay, r, seconds)
    return best if best is not None and tried > 1 else pipedream


def patterns(slots: int, pp: int, m: int, near: tuple[int, ...]) -> list[tuple[int, ...]]:
    """Replica counts per stage to price: every composition of ``slots`` into ``pp`` counts of 1 to
    ``m`` (each replica needs a micro-batch: config/replica_rules.py) when there are at most
    MAX_PATTERNS compositions; else ``near`` (PipeDream's), the equal counts when they divide, and
    the counts one replica away from either."""
    if comb(slots - 1, pp - 1) <= MAX_PATTERNS:
        out = []
        for cut in combinations(range(1, slots), pp - 1):
            reps = tuple(b - a for a, b in zip((0, *cut), (*cut, slots), strict=True))
            if max(reps) <= m:
                out.append(reps)
        return out
    seeds = [near] + ([(slots // pp,) * pp] if slots % pp == 0 else [])
    out = list(seeds)
    for reps in seeds:
        for a in range(pp):
            for b in range(pp):
                if a != b and reps[a] > 1 and reps[b] < m:
                    moved = list(reps)
                    moved[a] -= 1
                    moved[b] += 1
                    out.append(tuple(moved))
    return list(dict.fromkeys(out))


def iteration_seconds(sc: Scenario) -> float:
    """The iteration time ``simulate`` reports for ``sc`` (replicas and layers given): fold/run.routed
    takes every scenario with per-stage replicas by its full route (the budget checked, every task
    scheduled), and simulate.assemble raises the engine's period to its busiest link's busy time
    (analysis/link_bound.py)."""
    check_unfolded_budget(sc)
    ms = measure(schedule_iteration(sc))
    return link_bound(ms.T, ms.link_load, ms.breakdowns, ms.traffic).T
