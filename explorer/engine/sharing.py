"""Calls of different streams that load one link at the same time share its bandwidth.

A communication task may name the tier whose bandwidth sets its time (``Task.tier``: the
boundary of the collective model, e.g. ``scale-out`` for a GPU's NIC) and the seconds of its
duration spent moving bytes at that tier's full rate (``Task.wire``; the rest, ``duration -
wire``, is latency: per-step start-up and synchronisation, spread over the call, during which its
link idles).  Tasks of one GPU class on the same tier but on *different* streams (pipeline sends
on ``pp``, gradient buckets on ``dp``) can be in flight together; one stream runs one task at a
time, so two tasks of one stream never share.

Alone, a call uses ``w = wire / duration`` of its link on average.  Calls in flight together on one
link get max-min fair rates by progressive filling (Bertsekas & Gallager, "Data Networks", 2nd ed.
1992, Sec. 6.5.2): in order of demand, each gets the smaller of its demand ``w`` and an equal share
of the capacity left, so calls that together need no more than the link run unslowed, and ``k``
calls that each fill it (w = 1) get 1/k each — the fluid model of flows on a bottleneck link that
the analytical network backend of ASTRA-sim 2.0 (Won et al., ISPASS 2023, Sec. IV-B) and SimAI
(Wang et al., NSDI 2025) use for chunks sharing a link; NCCL's channels of two communicators on
one NIC are served by its queue pairs in turn, which the fair share idealises.  A call granted
``r`` of the link progresses at ``r / w`` of its own pace (its latency and its bytes stretch
alike: the pace of its steps is set by its bytes).  Rates change only when a call joins or leaves,
so each call's remaining seconds are advanced event by event; a pool holds at most one call per
stream.  A call that was never slowed ends at ``start + duration`` exactly, the engine's time
without sharing, so graphs whose calls never meet keep their timelines bit for bit.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol


class Task(Protocol):
    """What sharing reads and writes of the scheduler's task (engine/scheduler.Task), structurally,
    so this module does not import the scheduler that imports it."""

    cls: int
    tier: str
    wire: float
    start: float
    duration: float
    alone: float
    parts: tuple[tuple[str, float], ...]

INF = float("inf")


def pools_of(tasks: Sequence[Task], stream_of: list[int]) -> tuple[list[int], int] | None:
    """Per task the pool (class, tier) it joins, -1 for none, and the number of pools; None when no
    pool holds flows of two streams (nothing can share: the engine's plain path).  A flow is a task
    with a tier and wire seconds; a pool is kept only when two streams of one class load it."""
    streams: dict[tuple[int, str], set[int]] = {}
    for i, t in enumerate(tasks):
        if t.wire > 0 and t.tier:
            streams.setdefault((t.cls, t.tier), set()).add(stream_of[i])
    shared = sorted(k for k, v in streams.items() if len(v) > 1)
    if not shared:
        return None
    index = {k: j for j, k in enumerate(shared)}
    return [index.get((t.cls, t.tier), -1) if t.wire > 0 and t.tier else -1 for t in tasks], len(shared)


class Pool:
    """The calls in flight on one link of one GPU class (module docstring)."""

    __slots__ = ("t", "flows", "version")

    def __init__(self) -> None:
        self.t = 0.0                                     # when remaining seconds were last advanced
        # task -> [remaining own seconds (once slowed), pace, demand w, slowed]
        self.flows: dict[int, list] = {}
        self.version = 0                                 # bumps when the membership changes

    def join(self, now: float, i: int, demand: float, start: list[float], duration: list[float]) -> None:
        """Call ``i`` (using ``demand`` of the link alone) is on the link from ``now``."""
        self._advance(now)
        self.flows[i] = [0.0, 1.0, demand, False]
        self._rebalance(now, start, duration)

    def finish(self, now: float, start: list[float], duration: list[float]) -> list[int]:
        """The calls that end at ``now`` (the projection :meth:`next_end` gave), removed."""
        out = [i for i, f in self.flows.items() if self._end(i, f, start, duration) <= now]
        for i in out:
            del self.flows[i]
        self._advance(now)
        self._rebalance(now, start, duration)
        return out

    def next_end(self, start: list[float], duration: list[float]) -> float:
        """When the first call in flight ends at today's rates (INF when the link is idle)."""
        return min((self._end(i, f, start, duration) for i, f in self.flows.items()), default=INF)

    def _end(self, i: int, f: list, start: list[float], duration: list[float]) -> float:
        return self.t + f[0] / f[1] if f[3] else start[i] + duration[i]

    def _advance(self, now: float) -> None:
        for f in self.flows.values():
            if f[3]:
                f[0] -= (now - self.t) * f[1]
        self.t = now

    def _rebalance(self, now: float, start: list[float], duration: list[float]) -> None:
        """Progressive filling (module docstring), in order of demand then task (determinism)."""
        self.version += 1
        left, n = 1.0, len(self.flows)
        for k, (w, i) in enumerate(sorted((f[2], i) for i, f in self.flows.items())):
            f = self.flows[i]
            r = min(w, left / (n - k))
            left -= r
            pace = r / w if w > 0 else 1.0
            if pace < 1.0 and not f[3]:                  # first slowed: its own seconds left
                f[0], f[3] = start[i] + duration[i] - now, True
            f[1] = pace


def stretched(t: Task, end: float) -> None:
    """Record a shared call's longer run: its duration becomes end - start (the Gantt bar, the
    stream's busy time) and its parts grow in proportion (a pipeline send stays ``pp``, a bucket
    ``dp``), so the breakdown still sums; ``alone`` keeps the time its call was priced at."""
    new = end - t.start
    if t.duration > 0 and new != t.duration:
        f = new / t.duration
        t.parts = tuple((k, v * f) for k, v in t.parts)
    t.alone, t.duration = t.duration, new
