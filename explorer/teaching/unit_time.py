"""The textbook diagram of a pipeline schedule: every pass one time unit, communication free.

The papers draw their schedules this way — F = B = W = 1, a full (unsplit) backward B + W = 2, a
fused DualPipe pair the sum of its passes (GPipe: Huang et al. 2019 Fig. 2; 1F1B and interleaved:
Narayanan et al. SC21 Fig. 3-4; ZB-H1/ZB-H2: Qi et al. ICLR 2024 Fig. 2-3; DualPipe: DeepSeek-V3
report Fig. 5).  :func:`unit_grid` runs each rank's program order from the registry (the same
orders the engine runs) on the pipeline layout of explorer/taskgraph/layout.py: a forward waits for
the forward of the previous position of its lane, a backward for the next position's backward (the
last position's for its own forward), a weight-gradient pass for its own input-gradient pass, and
every op for the previous op of its rank.  Its cells are what the app's step-through draws in its
textbook mode.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..schedules.registry import INTERLEAVED
from ..schedules.registry import get as get_schedule
from ..taskgraph.layout import Fused, Pass, layout_for, normalise

UNIT = {"F": 1, "Bi": 1, "W": 1, "B": 2}        # B = a full backward (B + W)


@dataclass(frozen=True)
class Cell:
    """One op on one rank: when it starts and how many units it lasts, and what to print in it."""

    rank: int
    start: int
    units: int
    kind: str                  # F | B | Bi | W | F&B
    mb: int                    # the micro-batch (0-based); for F&B the forward's
    lane: int                  # DualPipe's direction (0: from rank 0), else 0
    chunk: int                 # the rank's local chunk (virtual stage)
    label: str                 # "3" for micro-batch 3 (1-based, as the papers number them)
    ready: int = 0             # when its inputs existed (it may start later: its rank was busy)
    source: int = -1           # the rank whose op released it last (-1: its own rank, or none)
    b_mb: int = -1             # for F&B: the backward's micro-batch and direction
    b_lane: int = -1
    wait_kind: str = ""        # the pass whose input arrived last (F: activations, else gradient)
    wait_mb: int = -1          # and its micro-batch


def unit_grid(schedule: str, p: int, m: int, v: int = 1) -> list[Cell]:
    """Every op of ``schedule`` on ``p`` ranks and ``m`` micro-batches (``v`` chunks per rank) at
    unit cost, in start order per rank."""
    sch = get_schedule(schedule)
    lay = layout_for(sch, p, v)
    orders = [[normalise(op, sch) for op in sch.order(r, p, m, v)] for r in range(p)]
    f_end: dict[tuple[int, int, int], tuple[int, int]] = {}   # (lane, mb, position) -> (end, rank)
    b_end: dict[tuple[int, int, int], tuple[int, int]] = {}
    bi_end: dict[tuple[int, int, int, int], tuple[int, int]] = {}
    cells: list[Cell] = []

    def ready(ps: Pass, r: int) -> tuple[int, int] | None:
        """(when, by which rank) the inputs of ``ps`` on rank ``r`` exist, or None if not yet."""
        pos = lay.position(r, ps.lane, ps.local)
        if ps.kind == "F":
            return (0, -1) if pos == 0 else f_end.get((ps.lane, ps.mb, pos - 1))
        if ps.kind == "W":
            return bi_end.get((r, ps.lane, ps.mb, ps.local))
        if pos == lay.length - 1:
            return f_end.get((ps.lane, ps.mb, pos))
        return b_end.get((ps.lane, ps.mb, pos + 1))

    def record(ps: Pass, r: int, end: int) -> None:
        pos = lay.position(r, ps.lane, ps.local)
        if ps.kind == "F":
            f_end[(ps.lane, ps.mb, pos)] = (end, r)
        elif ps.kind in ("B", "Bi"):
            b_end[(ps.lane, ps.mb, pos)] = (end, r)
            bi_end[(r, ps.lane, ps.mb, ps.local)] = (end, r)

    pos = [0] * p
    clock = [0] * p
    remaining = sum(len(o) for o in orders)
    while remaining:
        progressed = False
        for r in range(p):
            while pos[r] < len(orders[r]):
                op = orders[r][pos[r]]
                parts = (op.f, op.b) if isinstance(op, Fused) else (op,)
                deps = [d for ps in parts if (d := ready(ps, r)) is not None]
                if len(deps) < len(parts):
                    break
                (when, by), waited = max(zip(deps, parts, strict=True), key=lambda d: d[0])
                start = max(clock[r], when)
                units = sum(UNIT[ps.kind] for ps in parts)
                for ps in parts:
                    record(ps, r, start + units)
                first, last = parts[0], parts[-1]
                fused = isinstance(op, Fused)
                cells.append(Cell(r, start, units, "F&B" if fused else first.kind, first.mb, first.lane,
                                  first.local, str(first.mb + 1), when, -1 if by == r else by,
                                  last.mb if fused else -1, last.lane if fused else -1,
                                  waited.kind, waited.mb))
                clock[r] = start + units
                pos[r] += 1
                remaining -= 1
                progressed = True
        if not progressed:
            raise RuntimeError(f"{schedule} order deadlocks at unit time")
    return sorted(cells, key=lambda c: (c.rank, c.start))


DRAWN_MICRO_BATCHES = 12   # enough for the steady state, few enough to read


def textbook_micro_batches(schedule: str, p: int, m: int) -> int:
    """How many of a scenario's ``m`` micro-batches the textbook diagram draws: at most
    DRAWN_MICRO_BATCHES, but never fewer than the schedule needs — interleaving takes groups of
    p (Megatron's rule), DualPipe an even number of at least 2p (its reference implementation)."""
    sch = get_schedule(schedule)
    if sch.two_directions:
        drawn = min(m, max(DRAWN_MICRO_BATCHES, 2 * p))
        return drawn - drawn % 2
    if sch.fused_pairs:                # DualPipeV: at least 2p (its reference's num_chunks >= 2 ranks)
        return min(m, max(DRAWN_MICRO_BATCHES, 2 * p))
    drawn = min(m, DRAWN_MICRO_BATCHES)
    if sch.name == INTERLEAVED and m >= p:
        drawn = max(p, drawn - drawn % p)
    return drawn


def makespan(cells: list[Cell]) -> int:
    return max(c.start + c.units for c in cells)


def as_rows(cells: list[Cell], p: int) -> list[str]:
    """The grid as text, one row per rank and one character per unit: the micro-batch (1-9, then
    a-z) in the kind's case — upper for forwards, lower for backward units, '*' for weight
    gradients, '.' for idle (how the tests write the papers' figures)."""
    width = makespan(cells)
    rows = [["."] * width for _ in range(p)]
    for c in cells:
        digit = "123456789abcdefghijklmnopqrstuvwxyz"[c.mb % 35]
        ch = {"F": digit.upper(), "B": digit.lower(), "Bi": digit.lower(), "W": "*", "F&B": "#"}[c.kind]
        for t in range(c.start, c.start + c.units):
            rows[c.rank][t] = ch
    return ["".join(r) for r in rows]
