"""One iteration of a scenario, by the cheapest exact route: folded over array runs
(fold/arrays/fold.py), else the full count as one array run (fold/arrays/direct.py), else folded
over tasks (fold/steady.py), else every task scheduled — the one place that chooses, for the
simulation (explorer/simulate.py) and for the bubble's re-simulations with ideal-pipeline aspects
(explorer/teaching/bubble.py).  A fold is tried only when its attempts cost less than the run it
replaces, decided from the counts before simulating (fold/cost.py).  Every route gives the same
measures to float rounding (tests/test_fold.py, tests/test_arrayfold.py, tests/test_array_run.py)."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..analysis.measures import Measures, measure
from ..analysis.steady_state import schedule_iteration
from ..config import Scenario
from ..engine.gc_pause import paused_collector
from ..engine.scheduler import Task
from ..network.groups import Network
from ..taskgraph.builder import IterationBuilder
from . import replica_choice
from .admit import attempt_arrays_once, attempt_folded_once
from .arrays.direct import ArrayRun, attempt_array_run, run_tasks
from .arrays.fold import ArrayFold, arrays_tasks
from .arrays.lazy import LazyTasks
from .budget import MAX_WORK, check_unfolded_budget, estimate, folded_estimate
from .steady import FoldedRun, FoldInfo

# The routes, fastest first (what Route.taken names and bench/korthikanti.py prints).
ARRAYS = "array fold"
ARRAY_RUN = "array run"
TASKS = "task fold"
FULL = "full simulation"


@dataclass(frozen=True)
class Iteration:
    """What an iteration's route gives: the builder and network (what does not depend on the
    micro-batch count), the per-class measures, the tasks (folded or made on first read), how
    the steady state was folded (None: not folded) and the route taken."""

    builder: IterationBuilder
    net: Network
    measures: Measures
    tasks: Sequence[Task]
    info: FoldInfo | None = None
    route: str = FULL


@dataclass(frozen=True)
class Route:
    """The route an iteration took and why each faster one was not taken (None: taken or not
    tried)."""

    taken: str
    arrays: str | None = None          # why not folded over arrays
    array_run: str | None = None       # why not one array run
    tasks: str | None = None           # why not folded over tasks


def run_iteration(sc: Scenario, ideal: frozenset[str] | None = None, fold: bool = True,
                  arrays: bool = True, budget: bool = True) -> Iteration:
    """One iteration of ``sc`` (a scenario without variants that wrap it: variants/registry.py)
    with the given ideal-pipeline aspects (its own when None).  ``fold``: try the folds and the
    array run; ``arrays``: try the array routes first; ``budget``: refuse an unfolded run beyond
    the work budget (fold/budget.py)."""
    return routed(sc, ideal, fold, arrays, budget)[0]


def routed(sc: Scenario, ideal: frozenset[str] | None = None, fold: bool = True, arrays: bool = True,
           budget: bool = True) -> tuple[Iteration, Route]:
    """:func:`run_iteration`, and the :class:`Route` it took."""
    why: dict[str, str] = {}
    sc = replica_choice.resolved(sc)   # stage_replicas auto: the plan simulate runs (replica_choice.py)
    if sc.parallelism.stage_replicas and fold:
        # PipeDream's per-stage replicas (taskgraph/replicas.py) run on streams of their own that
        # neither the array routes nor the task fold's period proof know: every task is scheduled.
        fold, why = False, {k: "parallelism.stage_replicas: every task is scheduled"
                            for k in ("arrays", "array_run", "tasks")}
    if fold and arrays:
        got = attempt_arrays_once(sc, ideal)      # proved at load when it alone was admitted
        if isinstance(got, ArrayFold):
            return _from_array_fold(sc, ideal, got), Route(ARRAYS)
        why["arrays"] = got.reason
        direct = attempt_array_run(sc, ideal)
        if isinstance(direct, ArrayRun):
            return _from_array_run(sc, ideal, direct), Route(ARRAY_RUN, **why)
        why["array_run"] = direct.reason
    if fold and budget and _beyond_every_engine_route(sc):
        # The full run and the task fold's own reduced runs are both over the budget (admitted for
        # an array route that did not hold): refused now, not after minutes of reduced runs.
        check_unfolded_budget(sc)
    if fold:
        folded = attempt_folded_once(sc, ideal)
        if isinstance(folded, FoldedRun):
            r = folded.run
            it = Iteration(r.builder, r.net, folded.measures, folded.tasks, folded.info, TASKS)
            return it, Route(TASKS, **why)
        why["tasks"] = folded.reason
    if budget:
        check_unfolded_budget(sc)
    r = schedule_iteration(sc, ideal)
    return Iteration(r.builder, r.net, measure(r), r.tasks), Route(FULL, **why)


def _beyond_every_engine_route(sc: Scenario) -> bool:
    """Whether the full simulation of ``sc`` and the task fold's reduced simulations both exceed
    the work budget (fold/budget.py): the engine routes that remain could not run within it."""
    if estimate(sc).work <= MAX_WORK:
        return False
    reduced = folded_estimate(sc)
    return reduced is None or reduced.work > MAX_WORK


def _from_array_fold(sc: Scenario, ideal: frozenset[str] | None, a: ArrayFold) -> Iteration:
    tasks = LazyTasks(a.tasks, lambda: arrays_tasks(a) or _tasks(sc, ideal))
    return Iteration(a.builder, a.net, a.measures, tasks, a.info, ARRAYS)


def _from_array_run(sc: Scenario, ideal: frozenset[str] | None, a: ArrayRun) -> Iteration:
    def make() -> Sequence[Task]:
        check_unfolded_budget(sc)      # every task, unfolded: admitted for its array run only?
        return run_tasks(a) or _tasks(sc, ideal)
    tasks = LazyTasks(a.tasks, make)
    return Iteration(a.builder, a.net, a.measures, tasks, None, ARRAY_RUN)


def _tasks(sc: Scenario, ideal: frozenset[str] | None) -> Sequence[Task]:
    """The task list of ``sc``'s iteration, folded where the task fold proves its period (what a
    result made from array runs makes when its timeline is first read)."""
    with paused_collector():
        return run_iteration(sc, ideal, arrays=False).tasks

