"""Types every schedule module shares: an op of a program order, the inputs of a bubble formula
and a validation problem.  No physics here: schedule modules stay pure functions of p, m, v."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

Op = tuple  # ("F" | "B" | "W" | "Bz", micro_batch or direction, ...) or DualPipe's fused ("FB", ...)


@dataclass(frozen=True)
class BubbleInputs:
    """What a closed-form bubble needs: stages ``p``, chunks per GPU ``v``, pipeline units ``m``,
    how to name those units, and — computed only when a formula asks, as it costs one extra
    ideal-pipeline build — the F, B (input gradients) and W (weight gradients) seconds of one
    micro-batch on one stage."""

    p: int
    v: int
    m: int
    unit: str
    passes: Callable[[], tuple[float, float, float]]
    # The pipeline's real per-stage costs and transfer delays (None without a builder): the
    # cross-datacenter formulas read the WAN boundaries from it (schedules/cross_dc.py).
    timing: Callable[[], Timing | None] = lambda: None


@dataclass(frozen=True)
class Timing:
    """What a latency-aware order needs, from the builder: seconds of one unit's forward (``fwd``)
    and full backward (``bwd``) on each stage, the seconds a transfer on each stage boundary takes
    from send to arrival (``delay``, p-1 entries: latency plus size over bandwidth, the same both
    ways), which boundaries cross datacenters (``wan``) and the cap on micro-batches in flight per
    stage (``max_in_flight``, 0 = none)."""

    fwd: tuple[float, ...]
    bwd: tuple[float, ...]
    delay: tuple[float, ...]
    wan: tuple[bool, ...]
    max_in_flight: int = 0

    @property
    def p(self) -> int:
        return len(self.fwd)


class _Parallelism(Protocol):
    pp: int
    vpp: int
    dp: int | None
    token_slices: int


class _Training(Protocol):
    global_batch: int
    micro_batch: int


class ScenarioLike(Protocol):
    """The fields of a Scenario that schedule validation reads (no import of the config layer)."""

    parallelism: _Parallelism
    training: _Training


# A validation problem: (dotted field name, message) — the config layer raises it as ScenarioError.
Problem = tuple[str, str]


def micro_batch_units(sc: ScenarioLike) -> tuple[int, int, int]:
    """dp, micro-batches per pipeline and pipeline units (micro-batches x token slices) of ``sc``,
    assuming the generic divisibility rules already passed (as in the config layer's rules)."""
    dp = sc.parallelism.dp or 1
    mb = sc.training.global_batch // (sc.training.micro_batch * dp)
    return dp, mb, mb * sc.parallelism.token_slices


def critical_path(orders: list[list], finish: Callable[[int, Op, float], float | None],
                  what: str) -> float:
    """Makespan of per-rank program orders under ideal costs, independent of the engine.

    Ranks run their ops in order; ``finish(rank, op, clock)`` returns when ``op`` ends if its
    inputs are ready (and records that end for the ops that depend on it), or None while they
    are not.  Ranks advance round-robin until every op has run; no progress in a full round is a
    deadlock of the order — a schedule bug, never user input."""
    pos = [0] * len(orders)
    clock = [0.0] * len(orders)
    remaining = sum(len(o) for o in orders)
    while remaining:
        progressed = False
        for r, order in enumerate(orders):
            while pos[r] < len(order):
                end = finish(r, order[pos[r]], clock[r])
                if end is None:
                    break
                clock[r] = end
                pos[r] += 1
                remaining -= 1
                progressed = True
        if not progressed:
            raise RuntimeError(f"{what} order deadlocks")
    return max(clock)
