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
