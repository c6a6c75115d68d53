"""Admission: whether a scenario's simulation fits the work budget (fold/budget.py), counting
what is simulated — in full, over array runs (fold/arrays: a fold of reduced rows or the full
count as one row, fold/cost.array_work), or folded over reduced engine runs — so that a 1T model
at pp 128 with 4,096 micro-batches (2.6 M work units in full) opens by its array fold, while a
scenario that no route brings within the budget is refused in one line (explorer/runnable.py).

Where the array fold is the only route within the budget — the full count as one array row and
the task fold's reduced runs both exceed it — its period is proven here, at load, rather than
promised: a scenario admitted so would otherwise be refused only when simulated (fuzzing found
``parallelism.token_slices: 1024`` on a 32-micro-batch pipeline, 32,768 units, whose fold proves no
period).  The proven fold is kept for the simulation that usually follows (:func:`attempt_arrays_once`),
so proving it at load costs that simulation nothing.
"""
from __future__ import annotations

import contextlib
import contextvars
import threading
from collections.abc import Callable, Iterator
from typing import Any

from ..config.sections import Scenario
from .arrays.fold import ArrayFold, attempt_arrays, ineligible
from .budget import MAX_WORK, check_unfolded_budget, estimate, folded_estimate, refuse
from .cost import array_fold_refused, first_attempt
from .cost import array_work as work
from .plan import NotFolded, plan
from .steady import FoldedRun, attempt_folded

# The array fold proven at admission, taken by the first simulation of an equal scenario (one entry:
# a load is followed by its simulation; a proof nobody takes is replaced by the next).
_proven: list[tuple[Scenario, ArrayFold]] = []
_proven_tasks: list[tuple[Scenario, FoldedRun]] = []      # the same for the task fold
_lock = threading.Lock()
# Whether a load proves the fold it admits a scenario for.  The design tools (search, sweeps,
# scaling) build thousands of scenarios and simulate or estimate each one themselves, which refuses
# the few whose fold does not hold (counted invalid by the budget's field); proving every one at
# load as well would double that work (design/space.LayoutBuilder, design/base.Base.scenario).
_proving: contextvars.ContextVar[bool] = contextvars.ContextVar("proving", default=True)


@contextlib.contextmanager
def unproven() -> Iterator[None]:
    """Within it, scenarios admitted for a task fold are not proven at load (see :data:`_proving`)."""
    token = _proving.set(False)
    try:
        yield
    finally:
        _proving.reset(token)


def check_budget(sc: Scenario, joined: bool = False) -> None:
    """Raise a one-line ScenarioError when simulating ``sc`` would exceed :data:`MAX_WORK` — in full,
    over array runs (:func:`array_work`), or, when the steady state folds, its reduced simulations.
    ``joined``: its replicas differ and their kinds' simulations are joined into one task list
    that the timeline draws and downloads unfolded (explorer/variants/replicas.py), which the
    folds and the array runs do not admit."""
    e = estimate(sc)
    if e.work > MAX_WORK:
        arrays = None if joined else array_work(sc)
        if arrays is not None and arrays <= MAX_WORK:
            # The array runs hold it (fold/arrays): their work is what counts.  Admitted by the array
            # fold's first attempt alone (no route behind it within the budget), the fold must hold.
            if work(sc, [sc.micro_batches]) > MAX_WORK and not _task_fold_within(sc):
                _prove_array_fold(sc)
            return
        if joined or not _task_fold_within(sc):
            refuse(sc, e, "")
        if _proving.get():
            # Admitted for the task fold alone: its period is proven now (pipedream-gnmt16 at
            # 4,096 units validated "ok" and was refused when run: no period within 256 units).
            _prove_task_fold(sc)


def _task_fold_within(sc: Scenario) -> bool:
    """Whether the task fold's reduced simulations of ``sc`` fit the budget (budget.folded_estimate).
    Never for PipeDream's stage replicas: their runs schedule every task (fold/run.routed), so a
    validation that counted on the fold said ok to what the simulation then refused."""
    if sc.parallelism.stage_replicas:
        return False
    folded = folded_estimate(sc)
    return folded is not None and folded.work <= MAX_WORK


def _prove_array_fold(sc: Scenario) -> None:
    """Attempt the array fold of ``sc`` now: kept for its simulation when it holds, else the
    refusal its simulation would give (budget.check_unfolded_budget)."""
    _prove(sc, attempt_arrays, _proven)


def _prove_task_fold(sc: Scenario) -> None:
    """The same for the task fold (``sc`` is over the budget unfolded)."""
    _prove(sc, attempt_folded, _proven_tasks)


def _prove(sc: Scenario, attempt: Callable[[Scenario], Any], kept: list) -> None:
    """``attempt(sc)`` kept in ``kept`` (one entry) when it folds, else the unfolded refusal."""
    got = attempt(sc)
    if isinstance(got, NotFolded):
        check_unfolded_budget(sc)
        return                          # (not reached: only over-budget scenarios are proven)
    with _lock:
        kept[:] = [(sc, got)]


def _take(kept: list, sc: Scenario) -> Any:
    """The proof ``kept`` holds for a scenario equal to ``sc``, removed (taken once), or None."""
    with _lock:
        if kept and kept[0][0] == sc:
            return kept.pop()[1]
    return None


def attempt_folded_once(sc: Scenario, ideal: frozenset[str] | None = None) -> FoldedRun | NotFolded:
    """fold/steady.attempt_folded, or the task fold admission proved for an equal scenario (taken
    once: a second simulation attempts it again)."""
    got = _take(_proven_tasks, sc) if ideal is None else None
    return got if got is not None else attempt_folded(sc, ideal)


def attempt_arrays_once(sc: Scenario, ideal: frozenset[str] | None = None) -> ArrayFold | NotFolded:
    """fold/arrays/fold.attempt_arrays, or the fold admission proved for an equal scenario (taken
    once: a second simulation attempts it again)."""
    got = _take(_proven, sc) if ideal is None else None
    return got if got is not None else attempt_arrays(sc, ideal)


def array_work(sc: Scenario) -> float | None:
    """The most work the array routes of ``sc`` take on a first call (fold/cost.array_work): the
    array fold's first attempt where folding pays, else the full count as one array row; None
    when the array runs do not hold its graph (its schedule, framework or options:
    fold/arrays/fold.ineligible).  Admitted so, a scenario whose period is not proven, or whose
    data-parallel tasks the array runs turn out not to hold (ZeRO 1-2 gathers with dp > 1), is
    refused when simulated if the route that remains exceeds the budget (fold/arrays/direct.py,
    budget.check_unfolded_budget)."""
    if ineligible(sc) is not None:
        return None
    fp = plan(sc)
    if fp is not None and array_fold_refused(sc, fp) is None:
        return work(sc, first_attempt(fp))
    return work(sc, [sc.micro_batches])
