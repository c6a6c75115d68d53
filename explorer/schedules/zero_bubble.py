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

from .pipeline import Op

# Steady-state lag of B behind F on stage i, and of W behind F, in steps, per schedule.
LAGS = {"zb-h1": lambda p, i: (p - 1 - i, p - 1), "zb-h2": lambda p, i: (2 * (p - 1 - i), 2 * (p - 1))}
INFLIGHT = {"zb-h1": lambda p: p, "zb-h2": lambda p: 2 * p - 1}
# ZB-H2's zero bubble needs the next iteration's warm-up to overlap this one's tail, which the
# paper enables by replacing the optimizer's global synchronisation with post-validation (Sec. 4).
OVERLAPPING = frozenset({"zb-h2"})


def zero_bubble_order(schedule: str, stage: int, p: int, m: int) -> list[Op]:
    """Program order of ``stage`` for ``schedule`` ("zb-h1" or "zb-h2")."""
    b_lag, w_lag = LAGS[schedule](p, stage)
    order: list[Op] = []
    for x in range(m + w_lag):
        if x < m:
            order.append(("F", x, 0))
        if 0 <= x - b_lag < m:
            order.append(("B", x - b_lag, 0))
        if 0 <= x - w_lag < m:
            order.append(("W", x - w_lag, 0))
    return order


def ideal_makespan(schedule: str, p: int, m: int, F: float, B: float, W: float) -> float:
    """Makespan of a zero-bubble order with free communication and passes costing F, B (input
    gradients) and W (weight gradients): a critical-path evaluation of the order (each op starts
    when its stage's previous op and the same micro-batch's pass on the neighbouring stage are
    done), independent of the engine.  For m >= p it equals m(F+B+W) + (p-1)(F+B-W) for ZB-H1
    (Qi et al. 2024, Table 1); for fewer micro-batches the warm-up is not filled and it is longer."""
    orders = [zero_bubble_order(schedule, s, p, m) for s in range(p)]
    f_end: dict[tuple[int, int], float] = {}
    b_end: dict[tuple[int, int], float] = {}
    pos = [0] * p
    clock = [0.0] * p
    remaining = sum(len(o) for o in orders)
    while remaining:
        progressed = False
        for s in range(p):
            while pos[s] < len(orders[s]):
                kind, i, _ = orders[s][pos[s]]
                if kind == "F":
                    t = 0.0 if s == 0 else f_end.get((i, s - 1))
                elif kind == "B":
                    t = f_end.get((i, s)) if s == p - 1 else b_end.get((i, s + 1))
                else:
                    t = 0.0
                if t is None:
                    break
                end = max(clock[s], t) + {"F": F, "B": B, "W": W}[kind]
                if kind == "F":
                    f_end[(i, s)] = end
                elif kind == "B":
                    b_end[(i, s)] = end
                clock[s] = end
                pos[s] += 1
                remaining -= 1
                progressed = True
        if not progressed:
            raise RuntimeError("zero-bubble order deadlocks")    # a schedule bug, never user input
    return max(clock)
