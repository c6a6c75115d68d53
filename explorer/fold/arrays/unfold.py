"""The task list of a result folded over arrays, made when it is first read: the builder's graph
of the triple's largest reduced run, its times and bindings copied from the array run, and the
proven period as a fold_tasks.FoldedTasks — what the task fold would have kept, without running
the engine (the Gantt draws it folded; a download unfolds it)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...config import Scenario
from ...engine.gc_pause import paused_collector
from ...taskgraph.builder import IterationBuilder
from ..tasks import FoldedTasks, Shift, task_keys
from .tail import GATHER_FIRST, tail


@dataclass(frozen=True)
class KeptRun:
    """One array run (a column of arrayfold.rows.Rows, task space) and how it relates to the run one
    period shorter."""

    scenario: Scenario               # the reduced scenario it ran
    exists: np.ndarray               # (N,) bool
    ready: np.ndarray
    start: np.ndarray
    end: np.ndarray
    binding: np.ndarray              # task-space index, -1 none
    late: np.ndarray                 # (N,) bool: one period later than in the shorter run
    shift: int                       # units per period


def builder_order(exists: np.ndarray, base: IterationBuilder) -> np.ndarray:
    """Task-space indices of a run's existing tasks in the order the builder makes them: passes,
    transfers, then per stage its per-iteration tasks (arrayfold/rows.py), except that the ZeRO 1-2
    gathers issued at the start come first, every stage's before any pass
    (builder._gathers_at_start)."""
    where = np.flatnonzero(exists)
    tl = tail(base)
    if tl is None or not (tl.role == GATHER_FIRST).any():
        return where
    first = np.zeros(len(exists), bool)
    first[len(exists) - len(tl):] = tl.role == GATHER_FIRST
    return np.concatenate([where[first[where]], where[~first[where]]])


def folded_tasks(kept: KeptRun, base: IterationBuilder, delta: float, periods: int,
                 rebuild) -> FoldedTasks | None:
    """The FoldedTasks of ``kept`` (None when the builder's graph is not the array run's task for
    task, which the caller then leaves to the task fold): tasks in the builder's order are the
    run's existing task-space entries in order (passes, transfers, optimizer steps)."""
    with paused_collector():
        tasks = base.for_scenario(kept.scenario).build().tasks
        where = builder_order(kept.exists, base)
        if len(tasks) != len(where):
            return None
        pos = np.full(len(kept.exists), -1, np.int64)
        pos[where] = np.arange(len(where))
        bind = np.where(kept.binding[where] >= 0, pos[np.maximum(kept.binding[where], 0)], -1)
        for t, r, s, e, b in zip(tasks, kept.ready[where].tolist(), kept.start[where].tolist(),
                                 kept.end[where].tolist(), bind.tolist(), strict=True):
            t.ready, t.start, t.end, t.binding = r, s, e, b
        keys = task_keys(tasks)
        late = kept.late[where].tolist()
        split: dict[tuple, int] = {}
        for (ident, mb), is_late in zip(keys, late, strict=True):
            if is_late and mb >= 0 and split.get(ident, mb) >= mb:
                split[ident] = mb
        return FoldedTasks(tasks, Shift(delta, kept.shift, late, split), periods, rebuild, keys)
