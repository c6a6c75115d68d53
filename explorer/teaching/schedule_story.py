"""What each rank of a textbook (unit-time) diagram is doing at a given unit, and why.

The step-through of explorer/ui/views/textbook.py prints one sentence per rank under the diagram.
The sentence is read off the grid of :func:`explorer.teaching.unit_time.unit_grid`, never written
per schedule: an idle unit names the op that waits and whose output it waits for; a warm-up
forward says how many forwards the rank runs before its first backward against 1F1B's p - 1 - r
(Narayanan et al. SC21 Sec. 2.2.1) — ZB-H2's extra forwards fill 1F1B's warm-up bubble (Qi et al.
ICLR 2024 Sec. 3.2) —; a deferred weight gradient says whether it fills a wait (the point of
zero-bubble schedules) or only drains in the cool-down; a DualPipe F&B names the two directions it
overlaps (DeepSeek-V3 report Sec. 3.2.1).
"""
from __future__ import annotations

from ..schedules.registry import ONE_F_ONE_B
from .unit_time import Cell, unit_grid


def _warm_up_idle(mine: list[Cell]) -> int:
    """Idle units of one rank between its first op and its first backward."""
    back = min(c.start for c in mine if c.kind != "F")
    head = [c for c in mine if c.start < back]
    return back - min(c.start for c in head) - sum(c.units for c in head)


def _direction(lane: int, p: int, two_way: bool) -> str:
    return f" from rank {0 if lane == 0 else p - 1}" if two_way else ""


def _upstream(c: Cell, p: int, two_way: bool, v_shape: bool = False) -> int | None:
    """The rank a backward of ``c`` sends its input gradient to (None: the first position; its own
    rank: a V's turn, chunk 1 of rank p-1 handing to its chunk 0)."""
    if v_shape and c.chunk == 1:
        return c.rank + 1 if c.rank < p - 1 else c.rank
    if two_way and c.lane == 1:
        return c.rank + 1 if c.rank < p - 1 else None
    if c.rank > 0:
        return c.rank - 1
    return p - 1 if c.chunk > 0 else None          # interleaved: the previous chunk's last rank


def _op(c: Cell) -> str:
    if c.kind == "F&B":
        return f"forward of micro-batch {c.label} fused with the backward of micro-batch {c.b_mb + 1}"
    name = {"F": "forward", "B": "backward", "Bi": "input gradient", "W": "weight gradient"}[c.kind]
    return f"{name} of micro-batch {c.label}"


def _wait(c: Cell) -> str:
    """What ``c`` waited for: the rank and the tensor whose arrival let it start."""
    if c.source < 0:
        return "its own earlier op"
    tensor = "activations" if c.wait_kind == "F" else "gradient"
    return f"rank {c.source}'s {tensor} of micro-batch {c.wait_mb + 1} (there at unit {c.ready})"


def narrate(cells: list[Cell], p: int, rank: int, t: int, v: int = 1) -> str:
    """One sentence: what ``rank`` does during unit ``t`` of the grid ``cells`` and why."""
    mine = sorted((c for c in cells if c.rank == rank), key=lambda c: c.start)
    two_way = any(c.lane == 1 for c in cells)
    # A V placement (Qi et al. 2024): one lane, one virtual stage, yet a second chunk per rank.
    v_shape = v == 1 and not two_way and any(c.chunk > 0 for c in cells)
    if t >= mine[-1].start + mine[-1].units:
        return "done"
    now = next((c for c in mine if c.start <= t < c.start + c.units), None)
    if now is None:
        nxt = next(c for c in mine if c.start > t)
        # Two lanes (Chimera, DualPipe): name the direction, both number their micro-batches from 1.
        lane = _direction(nxt.lane, p, two_way) if nxt.kind != "F&B" else ""
        return f"idle (bubble): its {_op(nxt)}{lane} waits for {_wait(nxt)}"
    later = [c for c in mine if c.start > now.start]
    first_back = next((c for c in mine if c.kind != "F"), None)
    if now.kind == "F":
        chunk = f" (chunk {now.chunk + 1} of {v})" if v > 1 else ""
        if v_shape:
            chunk = f" (stage {rank if now.chunk == 0 else 2 * p - 1 - rank} of the V's {2 * p})"
        if first_back is None or now.start < first_back.start:
            n = sum(c.kind == "F" and c.start < (first_back.start if first_back else 10**9) for c in mine)
            k = sum(c.kind == "F" and c.start <= now.start for c in mine)
            extra = ""
            if v == 1 and not two_way and not v_shape and n > p - rank:
                more = n - p + rank
                m = sum(c.kind == "F" for c in mine)
                fills = _warm_up_idle(mine) < _warm_up_idle([c for c in unit_grid(ONE_F_ONE_B, p, m)
                                                             if c.rank == rank])
                extra = (f"; 1F1B runs p - r = {p - rank}, and "
                         + (f"the {more} extra fill the wait 1F1B has before its first gradient arrives, "
                            "at the cost of more activations in memory" if fills
                            else f"the {more} extra only hold more activations: they do not shorten "
                            "the wait for the first gradient"))
            return (f"warm-up: forward {k} of {n} before its first backward — micro-batch {now.label}"
                    f"{_direction(now.lane, p, two_way)}{chunk}{extra}")
        return f"steady state: {_op(now)}{_direction(now.lane, p, two_way)}{chunk}"
    if now.kind == "F&B":
        return (f"forward of micro-batch {now.label}{_direction(now.lane, p, True)} overlapped with the "
                f"backward of micro-batch {now.b_mb + 1}{_direction(now.b_lane, p, True)}: while one "
                "computes, the other's all-to-all and pipeline sends run")
    if now.kind == "W":
        what = f"{_op(now)}{_direction(now.lane, p, two_way)}"
        following = later[0] if later else None
        if following is not None and following.kind != "W" and following.ready > now.start:
            return f"{what}, deferred: it fills the wait for {_wait(following)}"
        if all(c.kind == "W" for c in later):
            return f"{what}, deferred: the weight gradients left over drain in the cool-down"
        return f"{what}, deferred so that its input gradient could go on at once"
    stage = "cool-down" if not any(c.kind in ("F", "F&B") for c in later) else "steady state"
    if now.kind == "Bi":
        up = _upstream(now, p, two_way, v_shape)
        to = (f"sent on to rank {up} at once" if up is not None and up != rank else
              "handed to its own first chunk at once (the V's turn)" if up == rank else
              "the end of its backward chain")
        return f"{stage}: {_op(now)}{_direction(now.lane, p, two_way)}, {to}; its weight gradient waits"
    return f"{stage}: {_op(now)}{_direction(now.lane, p, two_way)} (input and weight gradients together)"
