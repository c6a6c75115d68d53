"""Zero-bubble pipeline schedules (Qi, Wan, Huang & Lin, "Zero Bubble Pipeline Parallelism",
ICLR 2024, Sec. 3.1 and Fig. 3): the backward is split into B (input gradients, on the critical
path between stages) and W (weight gradients, needed only by the optimizer); W passes are
deferred to fill what would be bubbles.

Both handcrafted schedules are a sequence of steps x = 0, 1, ... in which stage i runs, in this
order and when they exist (0 <= index < m):
- ZB-H1: F_x, B_(x-(p-1-i)), W_(x-(p-1)) — the warm-up forwards of 1F1B, the same peak of p
  micro-batches in flight, bubble (p-1)(F+B-W);
- ZB-H2: F_x, B_(x-2(p-1-i)), W_(x-2(p-1)) — twice the warm-up forwards, up to 2p-1 micro-batches
  in flight, bubble (p-1)(F+B-2W), zero when F+B <= 2W.
(With B and W fused, the first form with no W is exactly 1F1B: F_x, B_(x-(p-1-i)).)
"""
from __future__ import annotations

from .base import BubbleInputs, chunk_ops, critical_path, idle_share
from .pipeline import Op


def _lags(schedule: str, p: int, i: int) -> tuple[int, int]:
    """Steady-state lag of B behind F on stage i, and of W behind F, in steps: ZB-H2 doubles
    ZB-H1's (Qi et al. 2024, Fig. 3)."""
    k = {"zb-h1": 1, "zb-h2": 2}[schedule]
    return k * (p - 1 - i), k * (p - 1)


def zero_bubble_order(schedule: str, stage: int, p: int, m: int) -> list[Op]:
    """Program order of ``stage`` for ``schedule`` ("zb-h1" or "zb-h2")."""
    b_lag, w_lag = _lags(schedule, p, stage)
    fwd, bwd, wgt = chunk_ops("F", 0, m), chunk_ops("B", 0, m), chunk_ops("W", 0, m)
    order: list[Op] = []
    for x in range(m + w_lag):
        if x < m:
            order.append(fwd[x])
        if 0 <= x - b_lag < m:
            order.append(bwd[x - b_lag])
        if 0 <= x - w_lag < m:
            order.append(wgt[x - w_lag])
    return order


def zb_h1(stage: int, p: int, m: int, v: int = 1) -> list[Op]:
    """ZB-H1's order of ``stage`` (one chunk per GPU; ``v`` is ignored)."""
    return zero_bubble_order("zb-h1", stage, p, m)


def zb_h2(stage: int, p: int, m: int, v: int = 1) -> list[Op]:
    """ZB-H2's order of ``stage`` (one chunk per GPU; ``v`` is ignored)."""
    return zero_bubble_order("zb-h2", stage, p, m)


def zb_h1_in_flight(stage: int, p: int, m: int, v: int = 1) -> int:
    """ZB-H1 frees activations at W, which lags F by p-1 steps on every stage: p in flight (at most m)."""
    return min(p, m)


def zb_h2_in_flight(stage: int, p: int, m: int, v: int = 1) -> int:
    """ZB-H2's W lags F by 2(p-1) steps: 2p-1 micro-batches in flight (at most m)."""
    return min(2 * p - 1, m)


def zb_h1_bubble(b: BubbleInputs) -> tuple[float, str]:
    """Qi et al. ICLR 2024 Sec. 3.1 / Table 1: bubble (p-1)(F+B-W) against m(F+B+W) of work, for
    W <= F.  A deferred W fills a cool-down gap of at most F (the gap a stage waits for the next
    stage's B after its own F), so a W longer than F leaves (p-1)B: in general (p-1)(F+B-min(F,W)),
    which the order's critical path (ideal_makespan) reproduces.  The closed form assumes the warm-up
    is filled (m >= p); otherwise the critical path gives the exact bubble."""
    p, m = b.p, b.m
    F, B, W = b.passes()
    bub = (p - 1) * (F + B - min(F, W))
    val = bub / (m * (F + B + W) + bub)
    if m < p:
        exact = idle_share(m * (F + B + W), ideal_makespan("zb-h1", p, m, F, B, W))
        return exact, (f"1 - m(F+B+W)/T = {exact:.1%}, T the critical path of the ZB-H1 order with p = {p}, "
                       f"m = {m} < p (the paper's (p-1)(F+B-W) assumes m >= p and gives {val:.1%})")
    return val, (f"(p-1)(F+B-min(F,W))/(m(F+B+W)+(p-1)(F+B-min(F,W))) = {val:.1%} with p = {p}, m = {m}, "
                 f"F = {F * 1e3:.3g} ms, B = {B * 1e3:.3g} ms, W = {W * 1e3:.3g} ms "
                 f"(Qi et al. 2024, Table 1)")


def zb_h2_bubble(b: BubbleInputs) -> tuple[float, str]:
    """Qi et al. ICLR 2024 Sec. 3.1: bubble (p-1)(F+B-2W), zero once F+B <= 2W, for W <= F; as in
    ZB-H1 a W fills at most an F-long gap, so in general (p-1)·max(0, F+B-2·min(F,W)); consecutive
    iterations overlap, so the iteration is the steady-state period m(F+B+W) + bubble.  The closed
    form assumes ZB-H2's warm-up of 2p-1 forwards is filled (m >= 2p-1); with fewer micro-batches
    the period is the critical path's, one iteration after the next (:func:`overlap_period`)."""
    p, m = b.p, b.m
    F, B, W = b.passes()
    bub = (p - 1) * max(0.0, F + B - 2 * min(F, W))
    val = bub / (m * (F + B + W) + bub)
    if m < 2 * p - 1:
        exact = idle_share(m * (F + B + W), overlap_period("zb-h2", p, m, F, B, W))
        return exact, (f"1 - m(F+B+W)/T = {exact:.1%}, T the period of back-to-back ZB-H2 iterations with "
                       f"p = {p}, m = {m} < 2p-1 (the paper's (p-1)(F+B-2W) assumes its warm-up filled "
                       f"and gives {val:.1%})")
    return val, (f"(p-1)·max(0, F+B-2min(F,W))/(m(F+B+W)+(p-1)·max(0, F+B-2min(F,W))) = {val:.1%} "
                 f"with p = {p}, m = {m}, "
                 f"F = {F * 1e3:.3g} ms, B = {B * 1e3:.3g} ms, W = {W * 1e3:.3g} ms "
                 f"(Qi et al. 2024, Sec. 3.1)")


def overlap_period(schedule: str, p: int, m: int, F: float, B: float, W: float) -> float:
    """The steady-state period of iterations run back to back, each stage's order after its order
    of the iteration before (ZB-H2's overlapping iterations): the makespan of three iterations less
    that of two.  (The difference is the same from the second iteration on: checked from p 4 to 32,
    m 1 to 2p-2, in tests/test_bubble.py.)"""
    return ideal_makespan(schedule, p, m, F, B, W, 3) - ideal_makespan(schedule, p, m, F, B, W, 2)


def ideal_makespan(schedule: str, p: int, m: int, F: float, B: float, W: float, iterations: int = 1) -> float:
    """Makespan of a zero-bubble order with free communication and passes costing F, B (input
    gradients) and W (weight gradients): a critical-path evaluation of the order (each op starts
    when its stage's previous op and the same micro-batch's pass on the neighbouring stage are
    done), independent of the engine.  For m >= p it equals m(F+B+W) + (p-1)(F+B-min(F,W)) for ZB-H1
    (Qi et al. 2024, Table 1); for fewer micro-batches the warm-up is not filled and it is longer.
    ``iterations``: that many iterations' orders one after the other on every stage (micro-batch j
    of iteration k numbered k·m + j)."""
    orders = [[op._replace(mb=op.mb + k * m) for k in range(iterations) for op in
               zero_bubble_order(schedule, s, p, m)] for s in range(p)]
    f_end: dict[tuple[int, int], float] = {}
    b_end: dict[tuple[int, int], float] = {}
    cost = {"F": F, "B": B, "W": W}

    def finish(s: int, op: Op, clock: float) -> float | None:
        kind, i = op.kind, op.mb
        t: float | None
        if kind == "F":
            t = 0.0 if s == 0 else f_end.get((i, s - 1))
        elif kind == "B":
            t = f_end.get((i, s)) if s == p - 1 else b_end.get((i, s + 1))
        else:
            t = 0.0
        if t is None:
            return None
        end = max(clock, t) + cost[kind]
        if kind == "F":
            f_end[(i, s)] = end
        elif kind == "B":
            b_end[(i, s)] = end
        return end

    return critical_path(orders, finish, "zero-bubble")
