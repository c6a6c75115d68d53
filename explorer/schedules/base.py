"""Types every schedule module shares: an op of a program order, the inputs of a bubble formula
and a validation problem.  No physics here: schedule modules stay pure functions of p, m, v."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NamedTuple, Protocol, TypeVar

# An op of a program order comes in three shapes.  They are named tuples: one is made per op of
# every order (millions for a deep pipeline), a tuple's speed and hashing are kept (the estimator
# memoises by op, explorer/estimate/program.py), and every field is read by name.


class ChunkOp(NamedTuple):
    """A pass of micro-batch ``mb`` on this GPU's chunk ``chunk`` (0 unless interleaved): the op of
    every one-direction schedule.  ``kind``: "F" forward, "B" backward (only its input gradients
    when the schedule splits the backward), "W" weight gradients."""

    kind: str
    mb: int
    chunk: int


class DirectedOp(NamedTuple):
    """DualPipe's pass of micro-batch ``mb`` flowing in ``direction`` (0: rank 0 -> p-1, 1: back).
    ``kind``: "F" forward, "B" full backward, "Bz" input gradients only, "W" weight gradients."""

    kind: str
    direction: int
    mb: int


class FusedOp(NamedTuple):
    """DualPipe's F&B: the ``forward`` of one direction run as one op with the full ``backward``
    of the other (DeepSeek-V3 report Sec. 3.2.1)."""

    forward: DirectedOp
    backward: DirectedOp

    @property
    def kind(self) -> str:
        return "FB"


Op = ChunkOp | DirectedOp | FusedOp

# Per (shape, kind, chunk or direction): the ops of micro-batches 0, 1, ...  Every stage's order
# holds the same ops, so they are made once and shared: indexing a table is faster than making a
# tuple, where a named tuple's constructor (a Python call) would be four times slower (measured:
# 1F1B's orders of 64 stages x 1,024 micro-batches).  A table is replaced, never extended in place,
# so that a thread reading it never sees it half-built.
_TABLES: dict[tuple[type, str, int], tuple] = {}


def chunk_ops(kind: str, chunk: int, m: int) -> tuple[ChunkOp, ...]:
    """At least ``m`` ops ``ChunkOp(kind, i, chunk)``, indexed by micro-batch ``i`` (shared)."""
    table = _TABLES.get((ChunkOp, kind, chunk), ())
    if len(table) < m:
        table = tuple(ChunkOp(kind, i, chunk) for i in range(max(m, 2 * len(table))))
        _TABLES[(ChunkOp, kind, chunk)] = table
    return table


def directed_ops(kind: str, direction: int, m: int) -> tuple[DirectedOp, ...]:
    """At least ``m`` ops ``DirectedOp(kind, direction, i)``, indexed by micro-batch ``i`` (shared)."""
    table = _TABLES.get((DirectedOp, kind, direction), ())
    if len(table) < m:
        table = tuple(DirectedOp(kind, direction, i) for i in range(max(m, 2 * len(table))))
        _TABLES[(DirectedOp, kind, direction)] = table
    return table
OpT = TypeVar("OpT", bound=Op)     # the op shape of one schedule's orders


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


# Read-only members (properties): the scenario's sections are frozen dataclasses.
class _Parallelism(Protocol):
    @property
    def pp(self) -> int: ...
    @property
    def vpp(self) -> int: ...
    @property
    def schedule(self) -> str: ...
    @property
    def dp(self) -> int | None: ...
    @property
    def token_slices(self) -> int: ...


class _Training(Protocol):
    @property
    def global_batch(self) -> int: ...
    @property
    def micro_batch(self) -> int: ...


class ScenarioLike(Protocol):
    """The fields of a Scenario that schedule validation reads (no import of the config layer)."""

    @property
    def parallelism(self) -> _Parallelism: ...
    @property
    def training(self) -> _Training: ...


# A validation problem: (dotted field name, message) — the config layer raises it as ScenarioError.
Problem = tuple[str, str]


def idle_share(busy: float, makespan: float) -> float:
    """``1 - busy / makespan``, the share of a rank's time it idles, within [0, 1]: a rank whose
    passes fill the makespan reads 0, not the -2e-16 that rounding of the difference left (DualPipe
    at pp 2 printed a bubble of "-0.0%")."""
    return min(1.0, max(0.0, 1.0 - busy / makespan))


def micro_batch_units(sc: ScenarioLike) -> tuple[int, int, int]:
    """dp, micro-batches per pipeline and pipeline units (micro-batches x token slices) of ``sc``,
    assuming the generic divisibility rules already passed (as in the config layer's rules)."""
    dp = sc.parallelism.dp or 1
    mb = sc.training.global_batch // (sc.training.micro_batch * dp)
    return dp, mb, mb * sc.parallelism.token_slices


def critical_path(orders: Sequence[Sequence[OpT]], finish: Callable[[int, OpT, float], float | None],
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
