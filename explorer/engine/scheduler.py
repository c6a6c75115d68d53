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

Calls of one class on different streams that are limited by the same tier (``Task.tier``: a
pipeline send beside a gradient bucket on the GPU's NIC) share that link while both are in flight
(sharing.py: max-min fair rates, each call's end an event of its link's pool); a call that never
met another ends at start + duration, as every other task.
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .sharing import INF, Pool, pools_of, stretched

if TYPE_CHECKING:                             # type names only: the engine depends on nothing above it
    from .records import LinkCall, Payload


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
    # What the task is, for the stages after the engine (engine/records.py: PassInfo, TransferInfo,
    # BucketInfo, OverlapInfo, StepInfo); the engine never reads it.
    info: Payload | None = None
    links: tuple[LinkCall, ...] = ()          # the network calls it makes, as the builder priced them
    # The tier whose bandwidth sets a call's time and the seconds of ``duration`` spent on its wire
    # (the rest is latency): flows of different streams on one tier share it (engine/sharing.py).
    tier: str = ""
    wire: float = 0.0
    alone: float = 0.0                        # a call its link's sharing slowed: its seconds alone
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

    Events are arrivals (a task's dependencies satisfied) and wake-ups (a busy stream frees while
    tasks queue for it).  A stream is free at ``now`` once its running task ended by ``now``; a
    wake-up is only scheduled when a task waits for a busy stream, since a stream that frees with
    nothing queued starts its next task when that task arrives (most passes of a pipeline arrive
    just as their stream frees) — the same timeline as one finish event per task, at fewer heap
    operations.
    """
    tasks = graph.tasks
    n = len(tasks)
    waiting = [len(t.deps) for t in tasks]
    ready_at = [0.0] * n
    dependents: list[list[tuple[int, float]]] = [[] for _ in range(n)]
    i = -1
    try:
        for i, t in enumerate(tasks):
            for d, frac in t.deps:
                if d < 0 or d == i:      # (beyond the last task: the IndexError below)
                    raise IndexError
                dependents[d].append((i, frac))
    except IndexError:
        t = tasks[i]
        bad = next(d for d, _ in t.deps if not 0 <= d < n or d == i)
        raise CycleError(f"task {i} ({t.kind}) depends on missing task {bad}") from None
    # Streams as integers numbered in (class, stream) order, so that sorting them visits streams in
    # the same order as sorting the (class, stream) pairs (determinism), at a fraction of the cost.
    number: dict[tuple[int, str], int] = {}
    stream_of = [number.setdefault((t.cls, t.stream), len(number)) for t in tasks]
    rank = {k: j for j, k in enumerate(sorted(number))}
    if any(rank[k] != j for k, j in number.items()):
        order = [rank[k] for k in number]          # first-seen numbers -> sorted numbers
        stream_of = [order[j] for j in stream_of]
    priority = [t.priority for t in tasks]
    duration = [t.duration for t in tasks]
    arrivals = [(0.0, i) for i in range(n) if waiting[i] == 0]   # (ready time, task): ids are unique
    # Calls that share a link with another stream's (engine/sharing.py): their ends are events of
    # their pool, known only when the calls beside them are; ``flows`` holds (projected end, seq,
    # pool, pool version), superseded when the pool's membership changes.
    got = pools_of(tasks, stream_of)
    pool_of, pools = (got[0], [Pool() for _ in range(got[1])]) if got else (None, [])
    flows: list[tuple[float, int, int, int]] = []
    starts_at = [0.0] * n if got else []
    seq = 0
    heapq.heapify(arrivals)
    wakeups: list[tuple[float, int]] = []                         # (end of a running task, stream)
    queues: list[list[tuple[int, float, int]]] = [[] for _ in number]
    free_at = [0.0] * len(number)                                 # when each stream's running task ends
    push, pop = heapq.heappush, heapq.heappop
    done = 0
    makespan = 0.0
    while arrivals or wakeups or flows:
        if flows and ((not arrivals or flows[0][0] <= arrivals[0][0])
                      and (not wakeups or flows[0][0] <= wakeups[0][0])):
            now, _, px, version = pop(flows)
            pool = pools[px]
            if version != pool.version:
                continue                                        # superseded by a change of members
            for i in pool.finish(now, starts_at, duration):
                t = tasks[i]
                if t.start + t.duration != now:
                    stretched(t, now)
                t.end = now
                key = stream_of[i]
                free_at[key] = now
                if queues[key]:
                    push(wakeups, (now, key))
                makespan = max(makespan, now)
                done += 1
                # Dependents are released at the end: buckets and transfers are waited for whole
                # (no task depends on part of a call).
                for j, _ in dependents[i]:
                    if now >= ready_at[j]:
                        ready_at[j] = now
                        tasks[j].binding = i
                    waiting[j] -= 1
                    if waiting[j] == 0:
                        push(arrivals, (ready_at[j], j))
            end = pool.next_end(starts_at, duration)
            if end < INF:
                seq += 1
                push(flows, (end, seq, px, pool.version))
            continue
        if not wakeups or (arrivals and arrivals[0][0] <= wakeups[0][0]):
            now = arrivals[0][0]
            # Fast path: the only event at ``now`` is one arrival (no wake-up due, the heap's second
            # smallest — a child of its root — later), so its stream alone is touched.
            k = len(arrivals)
            if ((not wakeups or wakeups[0][0] > now)
                    and (k == 1 or (arrivals[1][0] > now and (k == 2 or arrivals[2][0] > now)))):
                ready, i = pop(arrivals)
                key = stream_of[i]
                queue = queues[key]
                if free_at[key] > now:
                    if not queue and free_at[key] < INF:
                        push(wakeups, (free_at[key], key))      # waits for the running task
                    push(queue, (priority[i], ready, i))
                    continue
                if not queue:
                    starts: list[tuple[int, float, int]] | tuple = ((key, ready, i),)
                else:                                           # not reached: a free stream's queue
                    push(arrivals, (ready, i))                  # is empty between events
                    starts = _starts(now, arrivals, wakeups, queues, free_at, stream_of, priority)
            else:
                starts = _starts(now, arrivals, wakeups, queues, free_at, stream_of, priority)
        else:
            now = wakeups[0][0]
            starts = _starts(now, arrivals, wakeups, queues, free_at, stream_of, priority)
        for key, ready, i in starts:
            t = tasks[i]
            dur = duration[i]
            if pool_of is not None and pool_of[i] >= 0:        # a flow: its end comes from its pool
                t.ready, t.start = ready, now
                starts_at[i] = now
                free_at[key] = INF                              # woken when the flow ends
                pool = pools[pool_of[i]]
                pool.join(now, i, min(1.0, t.wire / dur), starts_at, duration)
                seq += 1
                push(flows, (pool.next_end(starts_at, duration), seq, pool_of[i], pool.version))
                continue
            end = now + dur
            t.ready, t.start, t.end = ready, now, end
            free_at[key] = end
            if queues[key]:
                push(wakeups, (end, key))
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


def _starts(now: float, arrivals: list, wakeups: list, queues: list, free_at: list[float],
            stream_of: list[int], priority: list[int]) -> list[tuple[int, float, int]]:
    """The events due at ``now``: queue every arrival, then — in stream order — the task each
    touched free stream starts, as (stream, ready time, task).  Starting a task never changes
    another stream's queue, so choosing every start before running any is the same as choosing
    them one by one."""
    pop, push = heapq.heappop, heapq.heappush
    touched: list[int] = []
    while wakeups and wakeups[0][0] <= now:
        key = pop(wakeups)[1]
        if key not in touched:
            touched.append(key)
    while arrivals and arrivals[0][0] <= now:
        ready, i = pop(arrivals)
        key = stream_of[i]
        queue = queues[key]
        if free_at[key] > now and not queue and free_at[key] < INF:
            push(wakeups, (free_at[key], key))              # waits for the running task (a call: its end)
        push(queue, (priority[i], ready, i))
        if key not in touched:
            touched.append(key)
    touched.sort()
    out = []
    for key in touched:
        queue = queues[key]
        if free_at[key] <= now and queue:
            _, ready, i = pop(queue)
            out.append((key, ready, i))
    return out
