"""A CrossPipe-style greedy schedule: each stage's forward/backward order chosen by list scheduling
given every stage boundary's delay and a cap on micro-batches in flight.

CrossPipe (Chen et al., "CrossPipe: Towards Optimal Pipeline Schedules for Cross-Datacenter
Training", ATC 2025 / arXiv 2025) schedules the passes of a pipeline whose stages are joined by
links of very different latency, under a memory limit, with a solver and with a greedy heuristic;
this module is the greedy one, in the spirit of its list scheduler:

- time advances event by event; a free stage starts, among the passes whose input has arrived,
  the one that can start first;
- a forward is allowed only while the stage holds fewer than its cap of micro-batches (the
  ``max_in_flight`` cap, or by default latency-aware 1F1B's p - s + extra, schedules/cross_dc.py);
- on a tie the stage prefers its backward (it frees activations) once it holds its target —
  latency-aware 1F1B's in-flight count, the forwards that keep the WAN pipe downstream busy over a
  round trip — and its forward before;
- backwards run in micro-batch order (their gradients arrive in that order).

The greedy order is then checked against latency-aware 1F1B and 1F1B (both under the cap) on
the same timing, with the engine's sending rule (cross_dc.timed_makespan), and the fastest order
is kept (ties: the smaller peak memory): the schedule is never slower than those on that model.
Without timing (no WAN) the order is 1F1B's.
"""
from __future__ import annotations

import math

from .base import Timing
from .cross_dc import extra_warmup, latency_orders, timed_makespan, warmup_order
from .pipeline import Op, peak_in_flight


def caps(t: Timing) -> tuple[int, ...]:
    """Per stage, the most micro-batches in flight: ``max_in_flight`` when set, else latency-aware
    1F1B's p - s + extra (never below 1)."""
    extra = extra_warmup(t)
    return tuple(max(1, t.max_in_flight or (t.p - s + extra[s])) for s in range(t.p))


def greedy_orders(m: int, t: Timing) -> list[list[Op]]:
    """The list-scheduled order of every stage (module docstring)."""
    p = t.p
    cap = caps(t)
    extra = extra_warmup(t)
    target = [min(cap[s], t.p - s + extra[s]) for s in range(p)]
    orders: list[list[Op]] = [[] for _ in range(p)]
    clock = [0.0] * p
    stream = [0.0] * p
    nf = [0] * p                                         # next forward of each stage
    nb = [0] * p                                         # next backward
    arrive_f: dict[tuple[int, int], float] = {(0, i): 0.0 for i in range(m)}
    arrive_b: dict[tuple[int, int], float] = {}

    def send(s: int, key: tuple[int, int], into: dict, end: float, delay: float) -> None:
        start = max(end, stream[s])
        stream[s] = start + delay
        into[key] = start + delay

    def options(s: int) -> tuple[float, float]:
        """Earliest start of the stage's next forward and next backward (inf: not possible yet)."""
        sf = sb = math.inf
        if nf[s] < m and nf[s] - nb[s] < cap[s] and (s, nf[s]) in arrive_f:
            sf = max(clock[s], arrive_f[(s, nf[s])])
        if nb[s] < nf[s] and (s, nb[s]) in arrive_b:
            sb = max(clock[s], arrive_b[(s, nb[s])])
        return sf, sb

    for _ in range(2 * m * p):
        best = None
        for s in range(p):
            sf, sb = options(s)
            start = min(sf, sb)
            if start < math.inf and (best is None or start < best[0]):
                prefer_f = sf < sb or (sf == sb and nf[s] - nb[s] < target[s])
                best = (start, s, "F" if prefer_f else "B")
        if best is None:
            raise RuntimeError("crosspipe greedy order deadlocks")   # a schedule bug, never user input
        start, s, kind = best
        if kind == "F":
            i = nf[s]
            nf[s] += 1
            clock[s] = start + t.fwd[s]
            if s < p - 1:
                send(s, (s + 1, i), arrive_f, clock[s], t.delay[s])
            else:
                arrive_b[(s, i)] = clock[s]                # the last stage's backward follows its forward
        else:
            i = nb[s]
            nb[s] += 1
            clock[s] = start + t.bwd[s]
            if s > 0:
                send(s, (s - 1, i), arrive_b, clock[s], t.delay[s - 1])
        orders[s].append(Op(kind, i, 0))
    return orders


def orders(p: int, m: int, t: Timing) -> list[list[Op]]:
    """The kept order (module docstring): the fastest of the greedy order, latency-aware 1F1B and
    1F1B under the cap on ``t``; ties go to the smaller peak of micro-batches in flight."""
    cap = caps(t)
    plain = [warmup_order(min(p - s - 1, cap[s] - 1), m) for s in range(p)]
    aware = latency_orders(p, m, t)                    # its warm-up already within the cap
    candidates = [greedy_orders(m, t), aware, plain]

    def score(o: list[list[Op]]) -> tuple[float, int]:
        return timed_makespan(o, t), max(peak_in_flight(x) for x in o)

    return min(candidates, key=score)

