"""Admission: whether a scenario's simulation fits the work budget (fold/budget.py), counting
what is simulated — in full, over array runs (fold/arrays: a fold of reduced rows or the full
count as one row, fold/cost.array_work), or folded over reduced engine runs — so that a 1T model
at pp 128 with 4,096 micro-batches (2.6 M work units in full) opens by its array fold, while a
scenario that no route brings within the budget is refused in one line (explorer/runnable.py).
"""
from __future__ import annotations

from ..config.sections import Scenario
from .arrays.fold import ineligible
from .budget import MAX_WORK, estimate, folded_estimate, refuse
from .cost import array_fold_refused, first_attempt
from .cost import array_work as work
from .plan import plan


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
            return                      # the array runs hold it (fold/arrays): their work is what counts
        folded = None if joined else folded_estimate(sc)
        if folded is None or folded.work > MAX_WORK:
            refuse(sc, e, "")


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
