"""One iteration of a scenario, by the cheapest exact route: folded over array runs
(fold/arrays), else folded over tasks (fold/steady.py), else every task scheduled — the one place
that chooses, for the simulation (explorer/simulate.py) and for the bubble's re-simulations with
ideal-pipeline aspects (explorer/teaching/bubble.py).  Every route gives the same measures to
float rounding (tests/test_fold.py, tests/test_arrayfold.py)."""
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
from .arrays.fold import arrays_tasks, simulate_arrays
from .arrays.lazy import LazyTasks
from .arrays.whole import simulate_whole, whole_tasks
from .budget import check_unfolded_budget
from .steady import FoldInfo, simulate_folded


@dataclass(frozen=True)
class Iteration:
    """What an iteration's route gives: the builder and network (what does not depend on the
    micro-batch count), the per-class measures, the tasks (folded or made on first read) and how
    the steady state was folded (None: every task scheduled)."""

    builder: IterationBuilder
    net: Network
    measures: Measures
    tasks: Sequence[Task]
    info: FoldInfo | None = None


def run_iteration(sc: Scenario, ideal: frozenset[str] | None = None, fold: bool = True,
                  arrays: bool = True, budget: bool = True) -> Iteration:
    """One iteration of ``sc`` (a scenario without variants that wrap it: variants/registry.py)
    with the given ideal-pipeline aspects (its own when None).  ``fold``: try the folds;
    ``arrays``: try the array fold first; ``budget``: refuse an unfolded run beyond the work
    budget (fold/budget.py)."""
    if fold and arrays:
        got = simulate_arrays(sc, ideal)
        if got is not None:
            a = got
            tasks = LazyTasks(a.tasks, lambda: arrays_tasks(a) or _tasks(sc, ideal))
            return Iteration(a.builder, a.net, a.measures, tasks, a.info)
        # Not folded: the whole iteration as one array run, when the arrays hold its graph.
        w = simulate_whole(sc, ideal)
        if w is not None:
            return Iteration(w.builder, w.net, w.measures,
                             LazyTasks(w.tasks, lambda: whole_tasks(w) or _tasks(sc, ideal, fold=False)))
    if fold:
        folded = simulate_folded(sc, ideal)
        if folded is not None:
            r = folded.run
            return Iteration(r.builder, r.net, folded.measures, folded.tasks, folded.info)
    if budget:
        check_unfolded_budget(sc)
    r = schedule_iteration(sc, ideal)
    return Iteration(r.builder, r.net, measure(r), r.tasks)


def _tasks(sc: Scenario, ideal: frozenset[str] | None, fold: bool = True) -> Sequence[Task]:
    """The task list of ``sc``'s iteration, folded where the task fold proves its period (what a
    result folded from array runs makes when its timeline is first read)."""
    with paused_collector():
        return run_iteration(sc, ideal, fold=fold, arrays=False).tasks
