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
    waiting = [0] * n
    ready_at = [0.0] * n
    dependents: list[list[tuple[int, float]]] = [[] for _ in range(n)]
    for i, t in enumerate(tasks):
        deps = t.deps
        waiting[i] = len(deps)
        for d, frac in deps:
            if not 0 <= d < n or d == i:
                raise CycleError(f"task {i} ({t.kind}) depends on missing task {d}")
            dependents[d].append((i, frac))
    # Streams as integers numbered in (class, stream) order, so that sorting them visits streams in
    # the same order as sorting the (class, stream) pairs (determinism), at a fraction of the cost.
    streams = sorted({(t.cls, t.stream) for t in tasks})
    number = {k: j for j, k in enumerate(streams)}
    stream_of = [number[(t.cls, t.stream)] for t in tasks]
    arrivals = [(0.0, i) for i in range(n) if waiting[i] == 0]   # (ready time, task): ids are unique
    heapq.heapify(arrivals)
    finishes: list[tuple[float, int, int]] = []                   # (end time, task, stream)
    queues: list[list[tuple[int, float, int]]] = [[] for _ in streams]
    busy = [False] * len(streams)
    push, pop = heapq.heappush, heapq.heappop
    inf = float("inf")
    done = 0
    makespan = 0.0
    while arrivals or finishes:
        a = arrivals[0][0] if arrivals else inf
        f = finishes[0][0] if finishes else inf
        now = a if a < f else f
        touched = set()
        while finishes and finishes[0][0] <= now:
            key = pop(finishes)[2]
            busy[key] = False
            touched.add(key)
        while arrivals and arrivals[0][0] <= now:
            ready, i = pop(arrivals)
            key = stream_of[i]
            push(queues[key], (tasks[i].priority, ready, i))
            touched.add(key)
        for key in sorted(touched):
            queue = queues[key]
            if busy[key] or not queue:
                continue
            _, ready, i = pop(queue)
            t = tasks[i]
            dur = t.duration
            end = now + dur
            t.ready, t.start, t.end = ready, now, end
            busy[key] = True
            push(finishes, (end, i, key))
            if end > makespan:
                makespan = end
            done += 1
            for j, frac in dependents[i]:
                at = now + frac * dur
                if at >= ready_at[j]:
                    ready_at[j] = at
                    tasks[j].binding = i
                waiting[j] -= 1
                if waiting[j] == 0:
                    push(arrivals, (ready_at[j], j))
    if done != n:
        raise CycleError(f"{n - done} tasks never became ready (dependency cycle)")
    return makespan
