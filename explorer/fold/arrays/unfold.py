"""The task list of a result folded over arrays, made when it is first read: the builder's graph
of the triple's largest reduced run, its times and bindings copied from the array run, and the
proven period as a fold_tasks.FoldedTasks — what the task fold would have kept, without running
the engine (the Gantt draws it folded; a download unfolds it)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...config import Scenario
from ...engine.gc_pause import paused_collector
from ...engine.records import OverlapInfo
from ...engine.scheduler import Task
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


def _drawn(t: Task) -> bool:
    """A ZeRO-3 call drawn under a pass (builder._fsdp_hidden_task), which no array row holds."""
    return t.stream == "dp" and isinstance(t.info, OverlapInfo) and len(t.deps) == 1 and t.deps[0][1] == 0.0


def copy_times(tasks: list[Task], where: np.ndarray, ready: np.ndarray, start: np.ndarray, end: np.ndarray,
               binding: np.ndarray) -> np.ndarray | None:
    """Copy an array run's times and bindings (task space, ``where``: its tasks in the builder's
    order, :func:`builder_order`) into the builder's ``tasks``; the builder positions of the row's
    tasks, or None when the graph is not the row's task for task.  The ZeRO-3 calls drawn under
    the passes start when their pass does and are bound to it, as the engine runs them: ready at
    the pass's start plus 0 x its duration, on a dp stream the call before left by then
    (arrays/tail._drawn_fsdp_held)."""
    drawn = [i for i, t in enumerate(tasks) if _drawn(t)]
    if drawn:
        mask = np.ones(len(tasks), bool)
        mask[drawn] = False
        at = np.flatnonzero(mask)
    else:
        at = np.arange(len(tasks))
    if len(at) != len(where):
        return None
    pos = np.full(len(ready), -1, np.int64)
    pos[where] = at
    bind = np.where(binding[where] >= 0, pos[np.maximum(binding[where], 0)], -1)
    for i, r, s, e, b in zip(at.tolist(), ready[where].tolist(), start[where].tolist(),
                             end[where].tolist(), bind.tolist(), strict=True):
        t = tasks[i]
        t.ready, t.start, t.end, t.binding = r, s, e, b
    for i in drawn:
        t = tasks[i]
        k = t.deps[0][0]
        t.ready = t.start = tasks[k].start
        t.end = t.start + t.duration
        t.binding = k
    return at


def folded_tasks(kept: KeptRun, base: IterationBuilder, delta: float, periods: int,
                 rebuild) -> FoldedTasks | None:
    """The FoldedTasks of ``kept`` (None when the builder's graph is not the array run's task for
    task, which the caller then leaves to the task fold): tasks in the builder's order are the
    run's existing task-space entries in order (passes, transfers, optimizer steps)."""
    with paused_collector():
        tasks = base.for_scenario(kept.scenario).build().tasks
        where = builder_order(kept.exists, base)
        at = copy_times(tasks, where, kept.ready, kept.start, kept.end, kept.binding)
        if at is None:
            return None
        keys = task_keys(tasks)
        # A drawn FSDP call is late with its pass (the task it is bound to).
        flags = np.zeros(len(tasks), bool)
        flags[at] = kept.late[where]
        for i, t in enumerate(tasks):
            if t.binding >= 0 and _drawn(t):
                flags[i] = flags[t.binding]
        late = flags.tolist()
        split: dict[tuple, int] = {}
        for (ident, mb), is_late in zip(keys, late, strict=True):
            if is_late and mb >= 0 and split.get(ident, mb) >= mb:
                split[ident] = mb
        return FoldedTasks(tasks, Shift(delta, kept.shift, late, split), periods, rebuild, keys)
