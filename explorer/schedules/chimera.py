"""Chimera (Li & Hoefler, "Chimera: Efficiently Training Large-Scale Neural Networks with
Bidirectional Pipelines", SC21, Sec. 3.1-3.5, Fig. 3 and Table 2).

Two pipelines run in opposite directions over the same p ranks (p even): the down pipeline maps
stage s to rank s, the up pipeline stage s to rank p-1-s, so every rank holds two stages (two weight
replicas, whose gradients the paper all-reduces with each other, Sec. 3.2: priced as each
gradient bucket's all-reduce between ranks s and p-1-s after its data-parallel reduction,
explorer/taskgraph/techniques/pair_sync.py, as for DualPipe's two copies).  The m micro-batches
of an iteration are split evenly: the first half flows down (direction 0), the second up
(direction 1).  A *basic unit* of p micro-batches (p/2 per direction, the paper's N = D) is a
forward block followed by a backward block; more micro-batches concatenate basic units directly
(Sec. 3.5, "direct concatenation"), the next unit's forwards filling the previous unit's
cool-down bubbles.  Backwards are full (no B/W split); the pipeline flushes before the optimizer.

The per-rank order is built as Chimera's public implementation builds its schedule table
(``ChimeraBlock`` / ``ChimeraScheduleManager``): in a forward block micro-batch i of each direction
reaches stage s at slot s + 2i (the two directions use slots of opposite parity on every rank —
why p must be even, Sec. 3.1 "no conflict"; Fig. 3 draws it); a backward block is the same from the
other end; the blocks are merged pairwise from the last: the first half of the earlier block, then
its second half with the later block's slots moved into its idle cells.  A rank's order is the
order of its cells in the merged table; the engine then runs it as soon as dependencies allow.

Table 2 (Chimera row): bubble ratio (D-2)/(2N+D-2), weights 2·Mθ, activations between (D/2+1)·Ma
and D·Ma (D stages = p, N micro-batches = m; Mθ, Ma one stage's weights and one micro-batch's
activations); Sec. 2: (D-2)/(3N/2+D-2) when a backward costs two forwards.  The order reproduces
Fig. 3 cell by cell at equal costs (tests/test_chimera_2bw.py).  Not modelled: forward doubling and
backward halving (Sec. 3.5), more than two pipelines (Sec. 3.6).
"""
from __future__ import annotations

from functools import lru_cache

from .base import (
    BubbleInputs,
    DirectedOp,
    Problem,
    ScenarioLike,
    critical_path,
    directed_ops,
    idle_share,
    micro_batch_units,
)
from .dualpipe import peak_activations

__all__ = ["chimera", "chimera_order", "in_flight", "peak_activations", "bubble", "rule", "ideal_makespan"]

Slot = list[DirectedOp | None]          # one time slot of the table: the op on every rank, or idle


def _block(kind: str, p: int, first: int) -> list[Slot]:
    """A forward (``kind`` "F") or backward ("B") block of p/2 micro-batches per direction, numbered
    from ``first`` in each: micro-batch i is at its s-th stage (counted from where the pass enters)
    in slot s + 2i.  Forwards of direction 0 enter at rank 0, of direction 1 at rank p-1; backwards
    enter where their forwards left."""
    h = p // 2
    table: list[Slot] = [[None] * p for _ in range(p + 2 * h - 2)]
    ops = (directed_ops(kind, 0, first + h), directed_ops(kind, 1, first + h))
    for d in (0, 1):
        from_top = (d == 0) == (kind == "F")
        for i in range(h):
            for s in range(p):
                table[s + 2 * i][s if from_top else p - 1 - s] = ops[d][first + i]
    return table


def _merge(former: list[Slot], latter: list[Slot]) -> list[Slot]:
    """The implementation's ``_merge_chimera_block``: the first half of ``former`` as it is, then its
    second half slot by slot with ``latter``'s next slot moved into the ranks where ``former`` idles;
    two consecutive slots of the same shape (busy/idle on the same ranks) advance together."""
    out = former[: len(former) // 2]
    fid, lid = len(former) // 2, 0
    n = len(former[0])

    def same_shape(table: list[Slot], k: int) -> bool:
        nxt = k + 1
        return nxt < len(table) and all((table[nxt][r] is None) == (table[k][r] is None) for r in range(n))

    while fid < len(former):
        double_former, double_latter = same_shape(former, fid), same_shape(latter, lid)
        row = list(former[fid])
        moved = False
        for r in range(n):
            if row[r] is None and latter[lid][r] is not None:
                row[r] = latter[lid][r]
                moved = True
        out.append(row)
        if double_former:
            out.append(former[fid + 1])
        if moved and double_latter:
            out.append(latter[lid + 1])
        if moved:
            lid += double_latter + 1
        fid += double_former + 1
    return out + latter[lid:]


@lru_cache(maxsize=32)
def _table(p: int, m: int) -> tuple[tuple[DirectedOp | None, ...], ...]:
    """The merged schedule table of m micro-batches (m/p basic units) on p ranks."""
    if p < 2 or p % 2 or m < p or m % p:
        raise ValueError(f"chimera needs an even number of stages and whole basic units of p micro-batches "
                         f"(got p = {p}, m = {m})")
    h = p // 2
    blocks: list[list[Slot]] = []
    for k in range(m // p):
        blocks += [_block("F", p, k * h), _block("B", p, k * h)]
    for i in range(len(blocks) - 1, 0, -1):
        blocks[i - 1] = _merge(blocks[i - 1], blocks[i])
    table = tuple(tuple(slot) for slot in blocks[0])
    held = sum(op is not None for slot in table for op in slot)
    if held != 2 * m * p:               # every F and B of every micro-batch on every stage, once
        raise RuntimeError(f"Chimera table for p={p}, m={m} holds {held} ops, not {2 * m * p}")
    return table


def chimera_order(rank: int, p: int, m: int) -> list[DirectedOp]:
    """Program order of ``rank`` for p ranks (even) and m micro-batches (a multiple of p): its cells
    of the merged table, in slot order."""
    return [op for slot in _table(p, m) if (op := slot[rank]) is not None]


def chimera(stage: int, p: int, m: int, v: int = 1) -> list[DirectedOp]:
    """The registry's order signature: ``chimera_order`` of rank ``stage`` (``v`` is ignored)."""
    return chimera_order(stage, p, m)


def ideal_makespan(p: int, m: int, F: float, B: float) -> float:
    """Makespan of the Chimera order with free communication, every forward costing F and every
    full backward B on every rank: each op starts when its rank's previous op and its upstream
    (forward) or downstream (backward) pass of the same micro-batch are done."""
    orders = [chimera_order(r, p, m) for r in range(p)]
    f_end: dict[tuple[int, int, int], float] = {}
    b_end: dict[tuple[int, int, int], float] = {}

    def finish(r: int, op: DirectedOp, clock: float) -> float | None:
        step = 1 if op.direction == 0 else -1
        if op.kind == "F":
            up = r - step
            t = 0.0 if not 0 <= up < p else f_end.get((op.direction, op.mb, up))
        else:
            down = r + step
            key = (op.direction, op.mb, down)
            t = f_end.get((op.direction, op.mb, r)) if not 0 <= down < p else b_end.get(key)
        if t is None:
            return None
        end = max(clock, t) + (F if op.kind == "F" else B)
        (f_end if op.kind == "F" else b_end)[(op.direction, op.mb, r)] = end
        return end

    return critical_path(orders, finish, "Chimera")


def in_flight(stage: int, p: int, m: int, v: int = 1) -> int:
    """Micro-batches (both directions) whose activations rank ``stage`` holds at its peak:
    p/2 + 1 + min(stage, p-1-stage) — Table 2's range, (D/2+1)·Ma on the edge ranks up to D·Ma in
    the middle, for one basic unit and for directly concatenated ones (the next unit's forwards
    start only as the previous unit's backwards free their activations).  The registry's tests
    replay the order (``peak_activations``) to check it."""
    return p // 2 + 1 + min(stage, p - 1 - stage)


def bubble(b: BubbleInputs) -> tuple[float, str]:
    """Chimera's bubble: the exact idle share of the order under ideal costs (every rank runs m
    forwards and m full backwards, so 1 - m(F+B+W)/T with T the critical path), and the paper's
    closed forms beside it (D = p stages, N = m micro-batches): Table 2's (D-2)/(2N+D-2), D-2 idle
    slots when a forward and a backward take equal time (Sec. 2; the order's critical path gives it
    exactly, any N), and Sec. 2's (D-2)/(3N/2+D-2) for one basic unit with a backward twice the
    forward (again exact).  More units with a longer backward leave intermediate bubbles (direct
    concatenation, Sec. 3.5), which the paper's forward doubling removes — not modelled here."""
    p, m = b.p, b.m
    F, B, W = b.passes()
    T = ideal_makespan(p, m, F, B + W)
    val = idle_share(m * (F + B + W), T)
    equal = (p - 2) / (2 * m + p - 2)
    doubled = (p - 2) / (3 * m / 2 + p - 2)
    unit = "one basic unit" if m == p else f"{m // p} directly concatenated units"
    # Beyond one unit, each concatenated unit idles its ranks again while its forwards wait for the
    # previous unit's backwards: the paper's forward doubling (Sec. 3.5) removes that and is not
    # modelled, which a reader comparing the card with Table 2's few percent must be told.
    gap = (f"; with {m // p} units concatenated directly each unit idles its ranks again (the paper's "
           f"forward doubling, Sec. 3.5, which removes those gaps, is not modelled here), so the card "
           f"exceeds Table 2's" if m > p else "")
    return val, (f"1 - m(F+B)/T = {val:.1%}, T the critical path of the Chimera order with p = {p}, m = {m} "
                 f"({unit}; F = {F * 1e3:.3g} ms, full B = {(B + W) * 1e3:.3g} ms); Li & Hoefler SC21 "
                 f"give (D-2)/(2N+D-2) = {equal:.1%} for equal forward and backward (Table 2) and "
                 f"(D-2)/(3N/2+D-2) = {doubled:.1%} for one basic unit with B = 2F (Sec. 2){gap}; the two "
                 f"weight replicas' gradient all-reduce (Sec. 3.2) is data-parallel time, not bubble")


def rule(sc: ScenarioLike) -> Problem | None:
    """Two pipelines need an even number of stages (Sec. 3.1: the merge is conflict-free only then)
    and whole basic units of p micro-batches, p/2 per direction (Sec. 3.5: N = K·D)."""
    p, t = sc.parallelism, sc.training
    if p.pp % 2 or p.pp < 2:
        return "parallelism.pp", f"chimera needs an even number of stages >= 2 (got {p.pp})"
    dp, _, units = micro_batch_units(sc)
    if units % p.pp:
        step = p.pp * t.micro_batch * dp
        return "training.global_batch", (f"{t.global_batch} gives {units} micro-batches per pipeline; "
                                         f"chimera schedules whole basic units of pp = {p.pp} micro-batches "
                                         f"(half from each end); use a multiple of {step}")
    return None

