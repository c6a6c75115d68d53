"""Program orders and their normalised steps, memoised for the builder (taskgraph/builder.py).

An untimed schedule's orders are a pure function of (order function, p, units, v)
(schedules/registry.py), asked by every builder: the scenario's, the bubble formula's ideal one
(analysis/bubble.py), each re-simulation of an app or a sweep.  DualPipe's 16 ranks over 120
micro-batches took ~2.5 ms a builder to order and ~1 ms to normalise (layout.normalise).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence

from ..schedules.base import Timing
from ..schedules.registry import Schedule
from .layout import Fused, Pass, normalise

# Program orders of untimed schedules by (order function, p, units, v); immutable (tuples),
# bounded (emptied when full).
_ORDERS: dict[tuple, tuple[tuple, ...]] = {}
_ORDERS_MAX = 64
# Each order's steps (layout.normalise) by the order's identity, as (order, steps): the entry holds
# the order, so its id is not reused while the entry lives.
_STEPS: dict[tuple[int, bool], tuple[Sequence, tuple]] = {}


def program_orders(schedule: Schedule, p: int, units: int, v: int,
                   timing: Callable[[], Timing]) -> Sequence[Sequence]:
    """``schedule.orders``, memoised for an untimed schedule (its orders read only p, units, v;
    a timed one reads the stages' seconds and is asked every time)."""
    if schedule.timed is not None:                     # the same type as the memoised orders
        return tuple(tuple(o) for o in schedule.orders(p, units, v, timing))
    key = (schedule.order, p, units, v)
    got = _ORDERS.get(key)
    if got is None:
        if len(_ORDERS) >= _ORDERS_MAX:
            _ORDERS.clear()
        got = _ORDERS[key] = tuple(tuple(o) for o in schedule.orders(p, units, v, timing))
    return got


def steps(order: Sequence, schedule: Schedule) -> tuple[Pass | Fused, ...]:
    """``order`` normalised (layout.normalise), memoised by the order's identity for an untimed
    schedule (its memoised order is the same object for every builder)."""
    if schedule.timed is not None:                     # a timed schedule's fresh orders: not kept
        return tuple(normalise(op, schedule) for op in order)
    key = (id(order), schedule.split_backward)
    got = _STEPS.get(key)
    if got is None or got[0] is not order:
        if len(_STEPS) >= 16 * _ORDERS_MAX:
            _STEPS.clear()
        got = _STEPS[key] = (order, tuple(normalise(op, schedule) for op in order))
    return got[1]
