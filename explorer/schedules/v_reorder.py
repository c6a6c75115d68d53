"""Repeating, squeezing and reordering of a V-Shape building block (Qi, Wan, Amar & Lin, "Pipeline
Parallelism with Controllable Memory", NeurIPS 2024, arXiv 2405.15362, Sec. 3: a schedule is a
building block repeated every 6 passes, squeezed, and reordered without raising the peak memory).

The steps are those of the authors' implementation of V-Half and V-Min, which their training
runtime and their scheduler playground run (sail-sg/zero-bubble-pipeline-parallelism,
megatron/core/pipeline_parallel/zerobubble/scheduler/zbv_greedy.py; ``v_schedule_greedy.py`` of
the tag zero-bubble-v0.1.0): implementing the same steps gives the same grid cell by cell
(tests/test_vshape_paper.py compares it with the numbers that implementation gives).

A rank's passes are held as start times in unit slots, per kind (:data:`KINDS`) and micro-batch:
F0 and F1 the forwards of the rank's chunks 0 (stage r) and 1 (stage 2p-1-r), B1 and B0 the
input-gradient passes (B1 first: it flows from the loss on rank 0 down, B0 climbs back up), W the
weight-gradient passes.  One reordering pass (:func:`_reorder_pass`) visits every pass in order of
time (then rank, kind, micro-batch) and moves it to the earliest free slot after its inputs where
its rank's peak activations (every forward +1, every W -1) stay within the highest any rank had
before the pass began; passes of the steady state (from rank 0's first B0 to the first last
forward) never move.  The order is:

1. the block repeated for m micro-batches (micro-batch j's passes 6j later);
2. W placed in idle slots, then a reordering pass that moves warm-up and cool-down passes (the
   warm-up fills with forwards), then a squeeze (every pass as early as its inputs, its rank's
   previous pass and its own previous micro-batch allow, at unit cost);
3. W dropped, a second reordering pass over the cool-down with W counted implicitly (a pending W
   runs in every idle slot), W placed again and a second squeeze;
4. W placed once more per chunk (an idle slot takes chunk 1's pending W before chunk 0's): each
   rank's order is its passes sorted by start time.

Cost: a pass that may move checks its rank's peak over the slots it would overtake, O(passes x
window) in all; steady-state passes cost O(log passes) each.
"""
from __future__ import annotations

import heapq
from collections.abc import Iterator, Sequence

from .base import ChunkOp

PERIOD = 6                 # slots per micro-batch in a block: F, B, W of each of the two chunks
KINDS = (("F", 0), ("F", 1), ("B", 1), ("B", 0), ("W", 1), ("W", 0))    # index: the kind
F0, F1, B1, B0 = range(4)

Times = list[list[int]]                # [kind][micro-batch] -> start slot, of one rank


def repeat(block: Sequence[Sequence[int]], m: int) -> list[Times]:
    """Every rank's F0, F1, B1, B0 start slots: the block's, 6 slots later per micro-batch."""
    return [[[t + PERIOD * j for j in range(m)] for t in row[:4]] for row in block]


def place_w(rank: Times, split: bool) -> Times:
    """``rank``'s four passes with its W placed: each idle slot (up to its last pass) runs the W of
    the oldest pending B, then the rest run after its last pass.  ``split``: one W list per chunk
    (an idle slot prefers chunk 1's pending W); else one list for both chunks, in B order."""
    kind_at: dict[int, int] = {}
    for k in range(4):                       # a slot held twice keeps its larger kind, as sorted would
        for t in rank[k]:
            kind_at[t] = k
    pending = [0, 0]                         # pending W of chunk 1 (after B1), of chunk 0 (after B0)
    lists: list[list[int]] = [[], []] if split else [[]]
    last = max(kind_at, default=-1)
    for t in range(last + 1):
        kind = kind_at.get(t)
        if kind is not None:
            if kind in (B1, B0):
                pending[kind - B1 if split else 0] += 1
            continue
        for w, n in enumerate(pending):
            if n:
                lists[w].append(t)
                pending[w] -= 1
                break
    t = last
    for w, n in enumerate(pending):
        for _ in range(n):
            t += 1
            lists[w].append(t)
    return [list(x) for x in rank[:4]] + lists


class _Memory:
    """One rank's activations after each slot up to its last pass (+1 a forward, -1 a W) and its
    pending W (with four kinds the W are implicit: a pending one runs in each idle slot, the
    implementation's memory estimate), kept up to date as passes move earlier: a move re-runs the
    slots from its new one until the state meets the old one again (after that nothing changes),
    so a check costs the slots it overtakes, not the rank's whole order."""

    def __init__(self, rank: Times) -> None:
        self.implicit = len(rank) == 4
        last = max((t for ts in rank for t in ts), default=-1)
        self.kind = [-1] * (last + 1)                 # the kind in each slot, -1 idle
        for k, ts in enumerate(rank):
            for t in ts:
                self.kind[t] = k
        self.live = [0] * (last + 1)
        self.pend = [0] * (last + 1)
        live = pend = 0
        for u, k in enumerate(self.kind):
            live, pend = self._step(k, live, pend)
            self.live[u], self.pend[u] = live, pend

    def _step(self, k: int, live: int, pend: int) -> tuple[int, int]:
        if k < 0:
            return (live - 1, pend - 1) if pend and self.implicit else (live, pend)
        if k < B1:
            return live + 1, pend
        if k <= B0:
            return live, pend + self.implicit
        return live - 1, pend

    def move(self, t: int, s: int, cap: int) -> bool:
        """Move the pass in slot ``t`` to the idle slot ``s`` < t if the activations stay within
        ``cap`` (they were before: only the slots from s on can change); else change nothing."""
        k = self.kind[t]
        if not self.implicit and self.kind[s] < 0:
            # Explicit W: the walk below adds the pass's +1 (forward), 0 (B) or -1 (W) to every slot
            # from s to t-1 and meets the old state at t.  No slot is over ``cap`` (the most any rank
            # held before the pass, and no move goes over it), so a forward fits unless a slot from s
            # to t-1 is at ``cap`` already: one search of the list, from s, that stops at the first.
            d = 1 if k < B1 else 0 if k <= B0 else -1
            if d > 0:
                try:
                    self.live.index(cap, s, t)
                    return False
                except ValueError:
                    pass
            if d:
                self.live[s:t] = [x + d for x in self.live[s:t]]
            self.kind[s], self.kind[t] = k, -1
            return True
        live, pend = (self.live[s - 1], self.pend[s - 1]) if s else (0, 0)
        new: list[tuple[int, int]] = []
        for u in range(s, len(self.kind)):
            live, pend = self._step(k if u == s else -1 if u == t else self.kind[u], live, pend)
            if live > cap:
                return False
            if u > t and live == self.live[u] and pend == self.pend[u]:
                break
            new.append((live, pend))
        self.kind[s], self.kind[t] = k, -1
        for u, (live, pend) in enumerate(new, start=s):
            self.live[u], self.pend[u] = live, pend
        return True


def _nth_b(rank: Times, n: int) -> int:
    """The slot of the rank's n-th B (0-based) of either chunk: the n-th smallest of its two
    sorted B lists, by bisection on how many come from B1."""
    a, b = rank[B1], rank[B0]
    lo, hi = max(0, n + 1 - len(b)), min(n + 1, len(a))
    while lo < hi:                       # i from a and n+1-i from b: too few from a if a[i] < b[n-i]
        i = (lo + hi) // 2
        if a[i] < b[n - i]:
            lo = i + 1
        else:
            hi = i
    return max(a[lo - 1] if lo else -1, b[n - lo] if n - lo >= 0 else -1)


def _inputs_done(ranks: list[Times], r: int, k: int, j: int) -> int:
    """Latest start among the pass's inputs as the reordering reads them: the same kind on the
    neighbour rank (F0, B1 from rank r-1; F1, B0 from rank r+1), the rank's previous kind of the
    same micro-batch (F0 -> F1 -> B1 -> B0), the rank's j-th B of either chunk for a W, and its own
    previous micro-batch; -1 for none."""
    rank = ranks[r]
    t = -1
    if k in (F0, B1) and r > 0:
        t = ranks[r - 1][k][j]
    if k in (F1, B0) and r + 1 < len(ranks):
        t = max(t, ranks[r + 1][k][j])
    if k in (F1, B1, B0):
        t = max(t, rank[k - 1][j])
    if k == 4:
        t = max(t, _nth_b(rank, j))
    if j > 0:
        t = max(t, rank[k][j - 1])
    return t


def _reorder_pass(ranks: list[Times], with_w: bool) -> list[Times]:
    """One reordering pass (module docstring), in place; ``with_w``: the W are explicit and the
    warm-up moves too (else only the cool-down does)."""
    if with_w:
        ranks[:] = [place_w(r, split=False) for r in ranks]
    memory = [_Memory(r) for r in ranks]
    cap = max(max(x.live, default=0) for x in memory)
    m = len(ranks[0][F0])
    taken: list[set[int]] = [set() for _ in ranks]
    phase = 0                     # 0 warm-up, 1 steady (from rank 0's first B0), 2 cool-down
    for t, r, k, j in _in_order(ranks):
        if phase == 0 and k == B0 and r == 0:
            phase = 1
        if phase == 1 or (phase == 0 and not with_w):
            if phase == 1 and k == F0 and j == m - 1:
                phase = 2
            taken[r].add(t)
            continue
        for s in range(_inputs_done(ranks, r, k, j) + 1, t):
            if s not in taken[r] and memory[r].move(t, s, cap):
                ranks[r][k][j] = s
                break
        taken[r].add(ranks[r][k][j])
    if not with_w:
        ranks[:] = [place_w(r, split=False) for r in ranks]
    return squeeze(ranks)


def _in_order(ranks: list[Times]) -> Iterator[tuple[int, int, int, int]]:
    """Every pass as (start, rank, kind, micro-batch), in that order, each with the start it had
    when the walk reached its predecessor in its list (a pass moves only once reached).  With every
    list in order of start (as repeat and squeeze leave them) that is a sort of the starts given;
    else a merge of the lists, each read as it goes."""
    if all(a <= b for rank in ranks for ts in rank for a, b in zip(ts, ts[1:], strict=False)):
        who = [(r, k, j) for r in range(len(ranks)) for k, ts in enumerate(ranks[r]) for j in range(len(ts))]
        n = len(who)
        starts = [t for rank in ranks for ts in rank for t in ts]
        for x in sorted([t * n + i for i, t in enumerate(starts)]):
            r, k, j = who[x % n]
            yield x // n, r, k, j
        return
    heads = [(ts[0], r, k, 0) for r, rank in enumerate(ranks) for k, ts in enumerate(rank) if ts]
    heapq.heapify(heads)
    while heads:
        t, r, k, j = heapq.heappop(heads)
        if j + 1 < len(ranks[r][k]):
            heapq.heappush(heads, (ranks[r][k][j + 1], r, k, j + 1))
        yield t, r, k, j


def squeeze(ranks: list[Times]) -> list[Times]:
    """Every pass as early as it can go in the given order at unit cost (the paper's squeezing):
    after its rank's previous pass, its own previous micro-batch, the neighbour's pass of its kind
    and the rank's previous kind of the same micro-batch (not for W).

    The passes are taken in order of (start, rank, kind, micro-batch): each numbered in order of
    (rank, kind, micro-batch) and sorted as one integer, start x passes + number (a sort of plain
    integers, not of tuples: this is most of a reordering's time at 64 ranks and 512 micro-batches)."""
    p = len(ranks)
    who: list[tuple[int, int, int]] = [(r, k, j) for r in range(p) for k, ts in enumerate(ranks[r])
                                       for j in range(len(ts))]
    n = len(who)
    starts = [t for rank in ranks for ts in rank for t in ts]
    keys = sorted([t * n + i for i, t in enumerate(starts)])
    end = [[[0] * len(ts) for ts in rank] for rank in ranks]
    last = [0] * p
    for x in keys:
        r, k, j = who[x % n]
        mine = end[r]
        t = last[r]
        if k < 4:
            if k == F0 or k == B1:
                if r > 0 and end[r - 1][k][j] > t:
                    t = end[r - 1][k][j]
            elif r + 1 < p and end[r + 1][k][j] > t:          # F1, B0
                t = end[r + 1][k][j]
            if k != F0 and mine[k - 1][j] > t:
                t = mine[k - 1][j]
        if j > 0 and mine[k][j - 1] > t:
            t = mine[k][j - 1]
        mine[k][j] = last[r] = t + 1
    return [[[e - 1 for e in ends] for ends in rank] for rank in end]


def reorder(block: Sequence[Sequence[int]], m: int) -> tuple[tuple[ChunkOp, ...], ...]:
    """Every rank's order of ``m`` micro-batches of ``block`` (per rank the slots of F0, F1, B1,
    B0 of micro-batch 0): repeated, reordered and squeezed twice, W placed per chunk."""
    ranks = repeat(block, m)
    ranks = [r[:4] for r in _reorder_pass(ranks, with_w=True)]
    ranks = [place_w(r[:4], split=True) for r in _reorder_pass(ranks, with_w=False)]
    out = []
    for rank in ranks:
        timed = sorted((t, k, j) for k, ts in enumerate(rank) for j, t in enumerate(ts))
        out.append(tuple(ChunkOp(KINDS[k][0], j, KINDS[k][1]) for _, k, j in timed))
    return tuple(out)
