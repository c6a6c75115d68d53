"""Deterministic list scheduler over a task DAG on per-class streams.

Each task runs on one stream of one GPU class (``compute``, ``pp``, ``dp``, ...).  A stream runs
one task at a time, non-preemptively, in the order tasks become ready; ties are broken by
``priority`` and then by the order tasks were added (a counter), so the same task list always gives
the same timeline (the tie-break of SimPy's event heap).  A dependency may fire part-way through
its predecessor: ``(task, 0.25)`` is satisfied once a quarter of that task has run — this is how a
gradient bucket becomes ready while the backward pass that produces it is still running.

Program order on a stream (the 1F1B order of a pipeline stage, say) is expressed by the schedule
builder as explicit dependencies; the engine adds no ordering of its own beyond readiness.
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass, field


@dataclass(slots=True)
class Task:
    """One operation of one GPU class.  ``parts`` splits ``duration`` into breakdown categories."""

    cls: int                                  # GPU class (pipeline stage, ...)
    stream: str                               # compute | pp | dp | ...
    kind: str                                 # forward | backward | weight-grad | pp | dp | optimizer ...
    duration: float
    deps: list[tuple[int, float]] = field(default_factory=list)
    priority: int = 0
    parts: tuple[tuple[str, float], ...] = ()
    info: dict | None = None                  # micro_batch, chunk, bytes, group, algorithm, tier ...
    ready: float = 0.0                        # when its dependencies were satisfied
    start: float = 0.0                        # >= ready: later if its stream was busy
    end: float = 0.0
    binding: int = -1                         # the dependency that made this task wait longest


class CycleError(RuntimeError):
    """The task graph has a cycle or a dependency on a missing task (a schedule-builder bug)."""


class TaskGraph:
    """Tasks in insertion order; ``add`` returns the id to depend on."""

    def __init__(self) -> None:
        self.tasks: list[Task] = []

    def add(self, task: Task) -> int:
        self.tasks.append(task)
        return len(self.tasks) - 1

    def __len__(self) -> int:
        return len(self.tasks)


def run(graph: TaskGraph) -> float:
    """Schedule every task (fills ``start``, ``end``, ``binding``); return the makespan in seconds."""
    tasks = graph.tasks
    n = len(tasks)
    waiting = [len(t.deps) for t in tasks]
    ready_at = [0.0] * n
    dependents: list[list[tuple[int, float]]] = [[] for _ in range(n)]
    for i, t in enumerate(tasks):
        for d, frac in t.deps:
            if not 0 <= d < n or d == i:
                raise CycleError(f"task {i} ({t.kind}) depends on missing task {d}")
            dependents[d].append((i, frac))
    heap = [(0.0, t.priority, i) for i, t in enumerate(tasks) if waiting[i] == 0]
    heapq.heapify(heap)
    free: dict[tuple[int, str], float] = {}
    done = 0
    makespan = 0.0
    while heap:
        ready, _, i = heapq.heappop(heap)
        t = tasks[i]
        key = (t.cls, t.stream)
        start = max(ready, free.get(key, 0.0))
        t.ready = ready
        t.start = start
        t.end = start + t.duration
        free[key] = t.end
        makespan = max(makespan, t.end)
        done += 1
        for j, frac in dependents[i]:
            at = start + frac * t.duration
            if at >= ready_at[j]:
                ready_at[j] = at
                tasks[j].binding = i
            waiting[j] -= 1
            if waiting[j] == 0:
                heapq.heappush(heap, (ready_at[j], tasks[j].priority, j))
    if done != n:
        raise CycleError(f"{n - done} tasks never became ready (dependency cycle)")
    return makespan
