"""V-shaped zero-bubble schedules: ZB-V, V-Half and V-Min (Qi, Wan, Amar & Lin, "Pipeline
Parallelism with Controllable Memory", NeurIPS 2024, arXiv 2405.15362; ZB-V also in the
zero-bubble repository sail-sg/zero-bubble-pipeline-parallelism).

Placement (the registry's ``placement="v"``): a model of 2p stages on p ranks, rank r holding
stage r (local chunk 0) and stage 2p-1-r (local chunk 1).  A micro-batch flows down the ranks
through chunk 0, turns on rank p-1 (a local hand-off, no pipeline transfer) and climbs back through
chunk 1; the loss is on rank 0, which also holds the embedding.  The backward of chunk 1 comes
first (from rank 0 down), then that of chunk 0 (from rank p-1 up).  Every backward is split into B
(input gradients) and W (weight gradients), zero-bubble style; a chunk's activations are freed by
its W.

- ZB-V: the handcrafted order of the reference implementation (``get_zb_v_schedule`` of the
  repository's ``handcrafted_zb_v``): rank r runs 2(p-r)-1 forwards of chunk 0, r pairs (F1, F0),
  p-r triples (F1, B1, W1), then the steady (F0, B0, W0, F1, B1, W1) and a cool-down.  At
  F = B = W it has no bubble but the p-1 units of its diagonal start; its peak is 2p chunks, i.e.
  p micro-batches of a whole stage: 1F1B's peak (paper Table 1, "V-ZB").
- V-Half and V-Min: the paper's V-Shape building blocks with uniform offsets (Sec. 3.1): in one
  block (one micro-batch, a period of 6 passes per rank) the forward of chunk 0 starts k passes
  later on each next rank, the forward of chunk 1 climbs back tightly (1 pass per rank), the
  backward of chunk 1 again k per rank and that of chunk 0 climbs back tightly
  (:func:`building_block`: the slots of the authors' implementation, which their runtime and
  playground run).  A rank's two lifespans sum to the same on every rank (balanced memory), about
  (k+1)p/3 chunks: k = 2 gives V-Half, k = 1 V-Min.  The block is repeated every 6 passes,
  squeezed and reordered as the authors' implementation does it (schedules/v_reorder.py), which
  gives its orders pass by pass.  Peak activations: V-Half (p+2)//2 and V-Min (p+4)//3
  micro-batches of a whole stage, 1F1B's p (the authors' playground table; the paper's 1/2 and
  1/3).  At F = B = W the idle units per rank are 3p-4 (odd p) or 3p-7 (even p >= 4) for V-Half
  and 4p-5, or 4p-7 when 3 divides p, for V-Min, against 1F1B's 6(p-1): just under the
  repository README's B/2 and 2B/3 (tests/test_vshape_paper.py).  The reordering is a greedy
  squeeze, not an optimum: near m = p V-Half's makespan is not monotone in m (p = 13: 126 units at
  m = 13, 119 at m = 14, where dropping the 14th micro-batch's passes would give 114); the orders
  are kept as the authors' algorithm makes them, so a run there can speed up with one more
  micro-batch.

An op is a :class:`ChunkOp` ``(kind, mb, chunk)``: kind F, B (input gradients) or W.
"""
from __future__ import annotations

from functools import lru_cache

from .base import BubbleInputs, ChunkOp, Problem, ScenarioLike, chunk_ops, critical_path, idle_share
from .pipeline import peak_activations
from .v_reorder import reorder


def zb_v(rank: int, p: int, m: int, v: int = 1) -> list[ChunkOp]:
    """ZB-V's order of ``rank`` (``v`` is ignored: the V placement holds 2 chunks per rank).  The
    reference builds it for max(2p-1, m) micro-batches and drops the passes of those >= m."""
    n = max(2 * p - 1, m)
    f0, f1, b0, b1, w0, w1 = (chunk_ops(k, c, n) for k, c in
                              (("F", 0), ("F", 1), ("B", 0), ("B", 1), ("W", 0), ("W", 1)))
    out: list[ChunkOp] = list(f0[:2 * (p - rank) - 1])
    i0, i1 = len(out), 0                                   # next forward of chunk 0 / chunk 1
    for _ in range(rank):
        out += [f1[i1], f0[i0]]
        i0, i1 = i0 + 1, i1 + 1
    j0 = j1 = 0                                            # next backward of chunk 0 / chunk 1
    for _ in range(p - rank):
        out += [f1[i1], b1[j1], w1[j1]]
        i1, j1 = i1 + 1, j1 + 1
    while i1 < i0 or i0 < n:                               # steady state
        if i0 < n:
            out.append(f0[i0])
            i0 += 1
        out += [b0[j0], w0[j0], f1[i1], b1[j1], w1[j1]]
        i1, j0, j1 = i1 + 1, j0 + 1, j1 + 1
    k0, k1 = j0, j1                                        # next weight pass of chunk 0 / chunk 1
    for _ in range(rank):
        out += [b0[j0], b1[j1]]
        j0, j1 = j0 + 1, j1 + 1
    for _ in range(p - rank):
        out += [b0[j0], w0[k0]]
        j0, k0 = j0 + 1, k0 + 1
    out += w1[k1:j1] + w0[k0:j0]
    return [op for op in out if op.mb < m]


@lru_cache(maxsize=64)
def building_block(p: int, k: int) -> tuple[tuple[int, int, int, int], ...]:
    """Per rank, the slots of F0, F1, B1, B0 of micro-batch 0 in the V-Shape building block with
    offset ``k`` (Qi et al. 2024 Sec. 3.1, uniform offsets; the slots are those of the authors'
    stable patterns, zbv_greedy.py ``stable_pattern_v_min`` / ``stable_pattern_v_half``): F0 on
    rank i at k·i; F1 right after the turn on rank p-1, climbing back one slot per rank; B1 from
    the loss on rank 0, k slots per rank; B0 k slots after B1 on rank p-1, climbing back one slot
    per rank.  Between the forward and the backward a gap ``d`` keeps a rank's four passes in
    distinct slots of the period of 6 (no two passes of a rank coincide once the block repeats):
    V-Min (k = 1) needs d = 2 when 3 divides p, V-Half (k = 2) d = 3 on even p, else d = 0.  The
    W take the idle slots (schedules/v_reorder.py)."""
    if k not in (1, 2):
        raise ValueError(f"V-Shape offset {k}: the papers' V-Min has 1 and V-Half 2")
    d = (2 if p % 3 == 0 else 0) if k == 1 else (3 if p % 2 == 0 else 0)
    rows = []
    for i in range(p):
        f0 = k * i
        f1 = (k + 1) * p - i - k          # k(p-1) + 1 on rank p-1: the turn, then 1 slot per rank
        b1 = (k + 1) * p + d + k * i - (k - 1)   # the loss on rank 0: d + 1 slots after F1
        b0 = 2 * (k + 1) * p + d - i - k     # k slots after B1 on rank p-1, then 1 per rank
        rows.append((f0, f1, b1, b0))
    return tuple(rows)


def splice_base(p: int) -> int:
    """The micro-batch count from which a V order is spliced rather than reordered (:func:`reordered`):
    from p + 2 micro-batches the order of m + 1 is that of m with one steady period inserted on every
    rank (measured for both offsets on p = 2..32: V-Half from m = p + 2, V-Min earlier); p + 4 keeps
    a margin of two."""
    return p + 4


@lru_cache(maxsize=64)
def _reordered_directly(p: int, m: int, k: int) -> tuple[tuple[ChunkOp, ...], ...]:
    return reorder(building_block(p, k), m)


@lru_cache(maxsize=64)
def reordered(p: int, m: int, k: int) -> tuple[tuple[ChunkOp, ...], ...]:
    """Every rank's order of the building block with offset ``k``, repeated for ``m`` micro-batches,
    squeezed and reordered as the paper does it (schedules/v_reorder.py).  Depends on the count as a
    whole (registry ``count_shaped``).

    The reordering moves warm-up and cool-down passes only (steady-state passes never move), so once
    the two ends no longer meet, one more micro-batch inserts one steady period of 6 passes on each
    rank and shifts what follows by one micro-batch.  Beyond :func:`splice_base` the order is spliced
    from the reorderings of the base count and the next: the base's passes up to where the next
    inserts its period, that period repeated with its micro-batches shifted by one per repeat, then
    the rest of the base's shifted by the count added.  The same order as reordering the whole count
    (tests/test_vshape_splice.py checks it pass by pass); O(p m) instead of a reordering of p m passes."""
    base = splice_base(p)
    if m <= base + 1:
        return _reordered_directly(p, m, k)
    a, b = _reordered_directly(p, base, k), _reordered_directly(p, base + 1, k)
    d = m - base
    out = []
    for ra, rb in zip(a, b, strict=True):
        i = next((j for j, (x, y) in enumerate(zip(ra, rb, strict=False)) if x != y), len(ra))
        period, rest = rb[i:i + 6], ra[i:]
        if len(rb) != len(ra) + 6 or rb[i + 6:] != tuple(_shifted(op, 1) for op in rest):
            return _reordered_directly(p, m, k)      # not one inserted period: reorder it all
        out.append(ra[:i] + tuple(_shifted(op, t) for t in range(d) for op in period)
                   + tuple(_shifted(op, d) for op in rest))
    return tuple(out)


def _shifted(op: ChunkOp, by: int) -> ChunkOp:
    return ChunkOp(op.kind, op.mb + by, op.chunk)


def v_half(rank: int, p: int, m: int, v: int = 1) -> list[ChunkOp]:
    """V-Half's order: the building block with offset 2, reordered: (p+2)//2 micro-batches of
    activations at its peak (half of 1F1B's p), bubble just under B/2 with B 1F1B's (p-1)/(m+p-1)
    (README of the repository)."""
    return list(reordered(p, m, 2)[rank])


def v_min(rank: int, p: int, m: int, v: int = 1) -> list[ChunkOp]:
    """V-Min's order: the building block with offset 1, reordered: (p+4)//3 micro-batches of
    activations at its peak (a third of 1F1B's), bubble just under 2B/3."""
    return list(reordered(p, m, 1)[rank])


ORDERS = {"zb-v": zb_v, "v-half": v_half, "v-min": v_min}


def in_flight(order_of, settled=None):
    """The registry's in_flight for an order: chunk-micro-batches whose activations the rank holds
    at its peak, replayed from the order at one unit per chunk.  ``settled(p)``: a count from which
    more micro-batches only add steady periods, each freeing what it adds, so the peak is that
    count's (V-Half, V-Min: splice_base(p) + 2, from where :func:`reordered` splices; ZB-V: 2p + 2,
    its building block repeated) — replayed there instead of on the whole order
    (tests/test_vshape_splice.py checks it against the whole replay)."""

    def count(stage: int, p: int, m: int, v: int = 1) -> int:
        if settled is not None:
            m = min(m, settled(p))
        return round(peak_activations(order_of(stage, p, m, v), [1.0, 1.0]))

    return count


def reordered_settled(p: int) -> int:
    """The micro-batch count from which a reordered V's peak no longer moves (:func:`in_flight`)."""
    return splice_base(p) + 2


def zb_v_settled(p: int) -> int:
    """The micro-batch count from which ZB-V's peak no longer moves (:func:`in_flight`)."""
    return 2 * p + 2


SETTLED = {"zb-v": zb_v_settled, "v-half": reordered_settled, "v-min": reordered_settled}


def ideal_makespan(schedule: str, p: int, m: int, F: float, B: float, W: float) -> float:
    """Makespan of a V order with free communication and every chunk's passes costing F, B (input
    gradients) and W: each pass starts when its rank's previous pass and its input (the previous
    stage's forward, the next stage's input gradient, its own B for a W) are done; the turn on rank
    p-1 and the loss on rank 0 are local.  Independent of the engine.

    Beyond the count from which one more micro-batch inserts one steady period on every rank
    (:data:`SETTLED`), the makespan is folded: evaluated at four counts a further p past it, and
    when their three differences agree (one period's seconds) extrapolated linearly to ``m`` —
    the walk of a million micro-batches' orders took 141 s and 10 GB for V-Half's bubble formula
    alone.  Where the differences do not agree the whole order is walked."""
    base = SETTLED[schedule](p) + p
    if m > base + 3 + FOLD_MARGIN:
        t = [_walked_makespan(schedule, p, base + i, F, B, W) for i in range(4)]
        d = [t[i + 1] - t[i] for i in range(3)]
        if max(d) - min(d) <= 1e-12 * t[3]:
            return t[3] + (m - base - 3) * d[2]
    return _walked_makespan(schedule, p, m, F, B, W)


# Fold only counts beyond the four it evaluates by this many: nearer, walking the order costs as much.
FOLD_MARGIN = 8


def _walked_makespan(schedule: str, p: int, m: int, F: float, B: float, W: float) -> float:
    """:func:`ideal_makespan` by walking every rank's whole order."""
    order_of = ORDERS[schedule]
    orders = [order_of(r, p, m) for r in range(p)]
    f_end: dict[tuple[int, int], float] = {}          # (micro-batch, stage 0..2p-1) -> end
    b_end: dict[tuple[int, int], float] = {}
    cost = {"F": F, "B": B, "W": W}

    def stage(r: int, c: int) -> int:
        return r if c == 0 else 2 * p - 1 - r

    def finish(r: int, op: ChunkOp, clock: float) -> float | None:
        s = stage(r, op.chunk)
        t: float | None
        if op.kind == "F":
            t = 0.0 if s == 0 else f_end.get((op.mb, s - 1))
        elif op.kind == "B":
            t = f_end.get((op.mb, s)) if s == 2 * p - 1 else b_end.get((op.mb, s + 1))
        else:
            t = b_end.get((op.mb, s))
        if t is None:
            return None
        end = max(clock, t) + cost[op.kind]
        if op.kind != "W":
            (f_end if op.kind == "F" else b_end)[(op.mb, s)] = end
        return end

    return critical_path(orders, finish, schedule)


# The papers' closed forms at F = B = W, as shares of 1F1B's bubble B = (p-1)/(m+p-1) (the
# repository README's table: ZBV 0, V-Half B/2, V-Min 2B/3 + O(n); the orders here idle slightly
# less, see the module docstring), and their peak activations in micro-batches of a whole stage
# (Qi et al. 2024 and its playground's table: V-ZB p, V-Half (p+2)//2, V-Min (p+4)//3; 1F1B p),
# which the orders here reach exactly.
PAPER_BUBBLE_OF_1F1B = {"zb-v": 0.0, "v-half": 1 / 2, "v-min": 2 / 3}
PAPER_PEAK = {"zb-v": lambda p: p, "v-half": lambda p: (p + 2) // 2, "v-min": lambda p: (p + 4) // 3}


def bubble_of(schedule: str):
    """The registry's bubble for ``schedule``: the exact idle share of its order under ideal costs,
    1 - 2m(F+B+W)/T per rank (each rank runs both chunks' passes; F, B, W are one chunk's, half a
    stage's), with the paper's closed form beside it (:data:`PAPER_BUBBLE_OF_1F1B`)."""

    def bubble(b: BubbleInputs) -> tuple[float, str]:
        p, m = b.p, b.m
        F, B, W = b.passes()
        T = ideal_makespan(schedule, p, m, F, B, W)
        val = idle_share(2 * m * (F + B + W), T)
        share = PAPER_BUBBLE_OF_1F1B[schedule]
        paper = share * (p - 1) / (m + p - 1)
        return val, (f"1 - 2m(F+B+W)/T = {val:.1%}, T the critical path of the {schedule} order with "
                     f"p = {p} ranks (2p = {2 * p} stages), m = {m} {b.unit}, F = {F * 1e3:.3g} ms, "
                     f"B = {B * 1e3:.3g} ms, W = {W * 1e3:.3g} ms per chunk; at F = B = W Qi et al. 2024 "
                     f"give {share:.2g} of 1F1B's (p-1)/(m+p-1): {paper:.1%}")

    return bubble


zb_v_bubble = bubble_of("zb-v")
v_half_bubble = bubble_of("v-half")
v_min_bubble = bubble_of("v-min")


def rule(sc: ScenarioLike) -> Problem | None:
    """The V placement folds the model over the ranks, two chunks each: it needs a pipeline (pp > 1:
    on one GPU both chunks' passes run back to back, 1F1B's timeline with more activations held,
    as the interleaved schedule, DualPipe and Chimera refuse it too).  Virtual stages are refused by
    the registry's generic rule (vpp > 1 needs an interleaving schedule); any micro-batch count runs."""
    if sc.parallelism.pp < 2:
        return ("parallelism.schedule", f"{sc.parallelism.schedule} folds the model over pp > 1 ranks "
                                        f"(got pp={sc.parallelism.pp}); use 1f1b or raise pp")
    return None
