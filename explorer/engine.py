"""Deterministic list scheduler over a task DAG on per-class streams.

Each task runs on one stream of one GPU class (``compute``, ``pp``, ``dp``, ...).  A stream runs
one task at a time, non-preemptively; when it frees, it takes the ready task with the smallest
``priority``, then the earliest ready, then the first added (a counter), so the same task list
always gives the same timeline (the tie-break of SimPy's event heap).  A dependency may fire
part-way through its predecessor: ``(task, 0.25)`` is satisfied once a quarter of that task has
run — this is how a gradient bucket becomes ready while the backward pass that produces it is
still running.

Program order on a stream (the 1F1B order of a pipeline stage, say) is expressed by the schedule
builder as explicit dependencies; the engine adds no ordering of its own beyond readiness.
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:                             # type names only: the engine depends on nothing above it
    from .taskgraph.records import LinkCall, Payload


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
    # What the task is, for the stages after the engine (taskgraph.records: PassInfo, TransferInfo,
    # BucketInfo, OverlapInfo, StepInfo); the engine never reads it.
    info: Payload | None = None
    links: tuple[LinkCall, ...] = ()          # the network calls it makes, as the builder priced them
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
    """Schedule every task (fills ``ready``, ``start``, ``end``, ``binding``); return the makespan.

    Event-driven list scheduling: whenever a stream is free, it starts the ready task with the
    smallest (priority, ready time, insertion order) — so among equally urgent tasks a stream is
    first-come first-served, and a more urgent task (a P3/ByteScheduler-prioritised gradient
    bucket, say) overtakes queued ones without preempting the running one.
    """
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
    arrivals = [(0.0, i) for i in range(n) if waiting[i] == 0]   # (ready time, task): ids are unique
    heapq.heapify(arrivals)
    finishes: list[tuple[float, int, tuple[int, str]]] = []        # (end time, task, stream)
    queues: dict[tuple[int, str], list[tuple[int, float, int]]] = {}
    busy: dict[tuple[int, str], bool] = {}
    done = 0
    makespan = 0.0
    while arrivals or finishes:
        now = min(arrivals[0][0] if arrivals else float("inf"), finishes[0][0] if finishes else float("inf"))
        touched = set()
        while finishes and finishes[0][0] <= now:
            _, _, key = heapq.heappop(finishes)
            busy[key] = False
            touched.add(key)
        while arrivals and arrivals[0][0] <= now:
            ready, i = heapq.heappop(arrivals)
            key = (tasks[i].cls, tasks[i].stream)
            heapq.heappush(queues.setdefault(key, []), (tasks[i].priority, ready, i))
            touched.add(key)
        for key in sorted(touched):
            queue = queues.get(key)
            if busy.get(key) or not queue:
                continue
            _, ready, i = heapq.heappop(queue)
            t = tasks[i]
            t.ready, t.start, t.end = ready, now, now + t.duration
            busy[key] = True
            heapq.heappush(finishes, (t.end, i, key))
            makespan = max(makespan, t.end)
            done += 1
            for j, frac in dependents[i]:
                at = now + frac * t.duration
                if at >= ready_at[j]:
                    ready_at[j] = at
                    tasks[j].binding = i
                waiting[j] -= 1
                if waiting[j] == 0:
                    heapq.heappush(arrivals, (ready_at[j], j))
    if done != n:
        raise CycleError(f"{n - done} tasks never became ready (dependency cycle)")
    return makespan
