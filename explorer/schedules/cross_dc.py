"""Pipelines whose stages span datacenters: what a WAN boundary costs 1F1B, and latency-aware 1F1B.

Setting (the SC21 Sec. 2.2 analysis of Narayanan et al. with one more ingredient): p stages,
m micro-batches, every stage's forward F and backward B, and one stage boundary that crosses a
datacenter — between stage b-1 and stage b, u = p - b stages downstream of it — whose transfers
take D from send to arrival (the WAN's one-way latency plus message size over bandwidth), so a
round trip costs R = 2D; transfers inside a datacenter are free.

**1F1B** (stage s runs w_s = p-s-1 warm-up forwards, then one forward / one backward; SC21 Fig. 4).
The iteration is the longest path of its order (a max-plus system):

    T = (m + p - 1)(F + B) + R * (1 + floor(max(0, m - u) / 2))

- Fill and drain: the first micro-batch's forward and the last one's backward cross the boundary
  once each, as SC21's (p-1)(F+B) path does: + R once, whatever the latency.
- Steady state: 1F1B keeps exactly one more micro-batch in flight on stage b-1 than on stage b
  (w_{b-1} - w_b = 1).  The cycle F_k(b-1) -> F_k(b) -> B_{k-w_b}(b) -> B_{k-w_b}(b-1) ->
  F_{k+2}(b-1) costs 2(F+B) + R and advances two micro-batches, so the period is F + B + R/2 per
  micro-batch instead of F + B: the pipeline loses the round trip once every two micro-batches,
  once the u downstream stages' warm-up is used up (hence m - u).  There is no slack to hide even
  a small latency: any R > 0 shows.  CrossPipe (Chen et al., "CrossPipe: Towards Optimal Pipeline
  Schedules for Cross-Datacenter Training", ATC 2025 / arXiv 2025) and GeoPipe make the same
  observation and remedy it by more micro-batches in flight across the slow link.

**Latency-aware 1F1B** (``1f1b-latency``): the stages before the boundary run k more warm-up
forwards, k = ceil(R / (F+B)).  The cycle then advances 2 + k micro-batches for the same
2(F+B) + R, which fits in (2 + k)(F + B): no steady-state stall, and

    T = (m + p - 1)(F + B) + R

— only the fill/drain round trip remains, which no flushing schedule avoids (the last
micro-batch's forward and backward both cross).  Stages before the boundary hold k more
micro-batches (p - s + k); several WAN boundaries add up (each stage gets the k of every boundary
downstream of it, so each boundary keeps its margin).

Exactness: both forms are exact for equal stages and free transfers inside a datacenter.  The
engine runs a stage's sends one after another on its pp stream, each for its whole D; while D is
at most min(F, B) that never delays a send and the forms hold (tests/test_cross_dc_pipeline.py,
1e-6); above it, sends queue and the engine is slower than the forms.  Unequal stages use the
largest F + B for k (the pace of the pipeline); several WAN boundaries on plain 1F1B have no
closed form here — the formula text then gives the order's critical path (:func:`timed_makespan`).
"""
from __future__ import annotations

import math

from .base import BubbleInputs, Timing, chunk_ops, critical_path
from .pipeline import Op, flush_bubble, one_f_one_b


def one_f_one_b_wan(p: int, m: int, F: float, B: float, b: int, R: float) -> float:
    """1F1B's iteration with one WAN boundary before stage ``b`` of round trip ``R`` (module
    docstring): (m+p-1)(F+B) + R(1 + floor(max(0, m-(p-b))/2))."""
    return (m + p - 1) * (F + B) + R * (1 + max(0, m - (p - b)) // 2)


def latency_aware_wan(p: int, m: int, F: float, B: float, R: float) -> float:
    """Latency-aware 1F1B's iteration with one WAN boundary of round trip ``R``: (m+p-1)(F+B) + R."""
    return (m + p - 1) * (F + B) + R


def extra_for(R: float, period: float) -> int:
    """Extra warm-up forwards that cover a round trip ``R`` at ``period`` seconds per micro-batch:
    ceil(R / period) (module docstring; 0 without latency)."""
    return 0 if R <= 0 else math.ceil(R / period - 1e-12)


def extra_warmup(t: Timing) -> tuple[int, ...]:
    """Per stage, the extra warm-up forwards of latency-aware 1F1B: the sum over the WAN boundaries
    downstream of it of ceil(round trip / pace), the pace being the slowest stage's F + B."""
    pace = max(f + b for f, b in zip(t.fwd, t.bwd, strict=True))
    per = [extra_for(2 * d, pace) if w else 0 for d, w in zip(t.delay, t.wan, strict=True)]
    return tuple(sum(per[s:]) for s in range(t.p))


def warmup_order(warmup: int, m: int) -> list[Op]:
    """1F1B's shape with ``warmup`` forwards before the first backward (at most m)."""
    w = min(warmup, m)
    fwd, bwd = chunk_ops("F", 0, m), chunk_ops("B", 0, m)
    order: list[Op] = list(fwd[:w])
    for b in range(m - w):
        order += (fwd[w + b], bwd[b])
    return order + list(bwd[max(0, m - w):m])


def latency_orders(p: int, m: int, t: Timing) -> list[list[Op]]:
    """Latency-aware 1F1B: stage s runs p-s-1 + extra_warmup(t)[s] warm-up forwards, no more than
    ``max_in_flight`` - 1 (the cap counts the steady step's forward too) nor m."""
    cap = t.max_in_flight or math.inf
    extra = extra_warmup(t)
    return [warmup_order(int(min(p - s - 1 + extra[s], cap - 1)), m) for s in range(p)]


def timed_makespan(orders: list[list[Op]], t: Timing) -> float:
    """Critical path of per-stage orders under ``t``, as the engine runs them: a pass starts when
    its stage's previous pass ended and its input arrived; a transfer leaves at the end of the
    pass that produced it, after the stage's earlier transfers (one pp stream per stage, each
    transfer on it for its whole delay), and arrives a delay later."""
    p = t.p
    arrive: dict[tuple[str, int, int], float] = {}
    f_end: dict[tuple[int, int], float] = {}
    stream = [0.0] * p

    def send(s: int, key: tuple[str, int, int], end: float, delay: float) -> None:
        start = max(end, stream[s])
        stream[s] = start + delay
        arrive[key] = start + delay

    def finish(s: int, op: Op, clock: float) -> float | None:
        kind, i = op.kind, op.mb
        ready: float | None
        if kind == "F":
            ready = 0.0 if s == 0 else arrive.get(("F", i, s))
        else:
            ready = f_end.get((i, s)) if s == p - 1 else arrive.get(("B", i, s))
        if ready is None:
            return None
        end = max(clock, ready) + (t.fwd[s] if kind == "F" else t.bwd[s])
        if kind == "F":
            f_end[(i, s)] = end
            if s < p - 1:
                send(s, ("F", i, s + 1), end, t.delay[s])
        elif s > 0:
            send(s, ("B", i, s - 1), end, t.delay[s - 1])
        return end

    return critical_path(orders, finish, "cross-datacenter")


def _wan_boundaries(b: BubbleInputs) -> tuple[Timing, list[int]] | None:
    """The pipeline's timing and its stage boundaries that cross a WAN with a delay; None when
    there is none (or no timing: no builder)."""
    t = b.timing()
    if t is None:
        return None
    wan = [j for j, (d, w) in enumerate(zip(t.delay, t.wan, strict=True)) if w and d > 0]
    return (t, wan) if wan else None


def one_f_one_b_bubble(b: BubbleInputs) -> tuple[float, str]:
    """1F1B's bubble: SC21's (p-1)/(m+p-1) within a datacenter; with one WAN boundary of round
    trip R, 1 - m(F+B)/T with T = :func:`one_f_one_b_wan`; with several, T is the order's
    critical path at equal stages (:func:`timed_makespan`)."""
    found = _wan_boundaries(b)
    if found is None:
        return flush_bubble(b)
    t, wan = found
    p, m = b.p, b.m
    F, B, W = b.passes()
    if len(wan) == 1:
        j = wan[0]
        R = 2 * t.delay[j]
        T = one_f_one_b_wan(p, m, F, B + W, j + 1, R)
        val = 1 - m * (F + B + W) / T
        return val, (f"1 - m(F+B)/T, T = (m+p-1)(F+B) + R(1 + floor((m-u)/2)) = {val:.1%} with p = {p}, "
                     f"m = {m} {b.unit}, u = {p - j - 1} stages after the WAN, round trip R = "
                     f"{R * 1e3:.3g} ms, F+B = {(F + B + W) * 1e3:.3g} ms (SC21 Sec. 2.2 with a WAN hop; "
                     f"CrossPipe, ATC 2025)")
    even = Timing((F,) * p, (B + W,) * p, t.delay, t.wan, t.max_in_flight)
    T = timed_makespan([one_f_one_b(s, p, m) for s in range(p)], even)
    val = 1 - m * (F + B + W) / T
    return val, (f"1 - m(F+B)/T = {val:.1%}, T the critical path of the 1F1B order over {len(wan)} WAN "
                 f"boundaries with p = {p}, m = {m} {b.unit} (no closed form with several)")


def latency_bubble(b: BubbleInputs) -> tuple[float, str]:
    """Latency-aware 1F1B: 1 - m(F+B)/T with T = (m+p-1)(F+B) + R summed over the WAN boundaries
    (each covered by its extra warm-up); SC21's (p-1)/(m+p-1) within a datacenter."""
    found = _wan_boundaries(b)
    if found is None:
        return flush_bubble(b)
    t, wan = found
    p, m = b.p, b.m
    F, B, W = b.passes()
    R = sum(2 * t.delay[j] for j in wan)
    T = latency_aware_wan(p, m, F, B + W, R)
    val = 1 - m * (F + B + W) / T
    return val, (f"1 - m(F+B)/T, T = (m+p-1)(F+B) + R = {val:.1%} with p = {p}, m = {m} {b.unit}, "
                 f"round trip R = {R * 1e3:.3g} ms covered by ceil(R/(F+B)) extra warm-up forwards "
                 f"before the WAN (CrossPipe, ATC 2025; SC21 Sec. 2.2)")
