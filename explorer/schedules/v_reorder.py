"""The reordering step of Qi et al., "Pipeline Parallelism with Controllable Memory" (NeurIPS 2024,
Sec. 3: "repeating, squeezing and reordering"; the repository's
reorder_greedily_without_increasing_peak_mem): fill a V schedule's idle units with passes that are
ready, without raising any rank's peak activations.

The orders run at unit time, every pass one unit, all ranks in step.  A rank whose next pass is not
ready takes the first later pass of its order that is (its input done) and that keeps its
activations within the order's own peak for the rest of the order: live + that pass + the highest
the passes it overtakes reach <= peak.  So the warm-up fills with forwards up to the peak and the
cool-down with what is ready, the peak never grows, and the rest of the order always stays within
it (it never stalls on memory).  A pass taken early was ready, so no cycle forms.

Cost: O(passes x log passes).  Per rank a segment tree holds the activation change of each pass
(+1 a forward, -1 a weight-gradient pass, 0 else; 0 once run out of order) and answers the highest
prefix from the rank's first unrun pass to a position; the passes that are ready wait in one heap
per kind by position, and only each heap's first needs checking: the highest prefix grows with the
position, so if the first ready pass of a kind would overflow, every later one of that kind would.
"""
from __future__ import annotations

import heapq
from collections.abc import Sequence

from .base import ChunkOp

DELTA = {"F": 1, "B": 0, "W": -1}        # a chunk's activations: a forward keeps them, its W frees them


class _Prefix:
    """Running activation changes of one rank's order: highest prefix sum before a position."""

    def __init__(self, deltas: Sequence[int]) -> None:
        size = 1
        while size < max(1, len(deltas)):
            size *= 2
        self.size = size
        self.total = [0] * (2 * size)
        self.best = [0] * (2 * size)           # highest prefix sum inside the node (the empty one: 0)
        for i, d in enumerate(deltas):
            self.total[size + i] = d
            self.best[size + i] = max(0, d)
        for n in range(size - 1, 0, -1):
            self._pull(n)

    def _pull(self, n: int) -> None:
        a, b = 2 * n, 2 * n + 1
        self.total[n] = self.total[a] + self.total[b]
        self.best[n] = max(self.best[a], self.total[a] + self.best[b])

    def clear(self, i: int) -> None:
        """The pass at ``i`` ran: it no longer changes what the rest reaches."""
        n = self.size + i
        self.total[n] = self.best[n] = 0
        n //= 2
        while n:
            self._pull(n)
            n //= 2

    def between(self, i: int, j: int) -> int:
        """Highest prefix sum of the changes at positions i .. j-1 (0 for none)."""
        lo, hi = self.size + i, self.size + j
        left: list[int] = []
        right: list[int] = []
        while lo < hi:
            if lo & 1:
                left.append(lo)
                lo += 1
            if hi & 1:
                hi -= 1
                right.append(hi)
            lo //= 2
            hi //= 2
        run = best = 0
        for n in left + right[::-1]:
            best = max(best, run + self.best[n])
            run += self.total[n]
        return best


def reorder(orders: Sequence[Sequence[ChunkOp]], p: int) -> tuple[tuple[ChunkOp, ...], ...]:
    """``orders`` (rank r: its passes of chunk 0 = stage r and chunk 1 = stage 2p-1-r) reordered as
    the module docstring says; every rank's peak activations stay its order's."""
    deltas = [[DELTA[op.kind] for op in o] for o in orders]
    caps = []
    for d in deltas:
        running = peak = 0
        for x in d:
            running += x
            peak = max(peak, running)
        caps.append(peak)
    trees = [_Prefix(d) for d in deltas]
    where = {(r, op): j for r, o in enumerate(orders) for j, op in enumerate(o)}
    ready: list[dict[str, list[int]]] = [{"F": [], "B": [], "W": []} for _ in range(p)]
    for j, op in enumerate(orders[0]):
        if op.kind == "F" and op.chunk == 0:                  # stage 0's forwards wait for nothing
            ready[0]["F"].append(j)
    heapq.heapify(ready[0]["F"])
    live = [0] * p
    head = [0] * p                                            # each rank's first position not run
    done = [bytearray(len(o)) for o in orders]
    left = sum(len(o) for o in orders)
    out: list[list[ChunkOp]] = [[] for _ in range(p)]

    def at(stage: int) -> tuple[int, int]:                   # (rank, local chunk) of a stage
        return (stage, 0) if stage < p else (2 * p - 1 - stage, 1)

    def release(r: int, op: ChunkOp, woke: list[tuple[int, str, int]]) -> None:
        """The passes ``op`` (just run on rank r) makes ready."""
        s = r if op.chunk == 0 else 2 * p - 1 - r
        nexts: list[tuple[str, int]] = []
        if op.kind == "F":
            nexts.append(("F", s + 1) if s < 2 * p - 1 else ("B", s))       # the loss: own backward
        elif op.kind == "B":
            nexts.append(("W", s))
            if s > 0:
                nexts.append(("B", s - 1))
        for kind, stage in nexts:
            rr, c = at(stage)
            woke.append((rr, kind, where[(rr, ChunkOp(kind, op.mb, c))]))

    while left:
        woke: list[tuple[int, str, int]] = []
        for r in range(p):
            pick = None
            heads = [(heap[0], kind) for kind, heap in ready[r].items() if heap]
            if not heads:
                continue
            first, kind = min(heads)
            if first == head[r]:
                pick = (kind, first)          # the order's own next pass: within the peak (invariant)
            else:
                for j, kind in sorted(heads):
                    # The passes before the rank's first unrun one have all run: only those from
                    # it on count (they are cleared from the tree only when run out of order).
                    if live[r] + DELTA[kind] + trees[r].between(head[r], j) <= caps[r]:
                        pick = (kind, j)
                        break
            if pick is None:
                continue
            kind, j = pick
            heapq.heappop(ready[r][kind])
            if j != head[r]:
                trees[r].clear(j)
            done[r][j] = 1
            while head[r] < len(done[r]) and done[r][head[r]]:
                head[r] += 1
            op = orders[r][j]
            live[r] += DELTA[kind]
            out[r].append(op)
            left -= 1
            release(r, op, woke)
        for rr, kind, j in woke:                              # ready from the next unit on
            heapq.heappush(ready[rr][kind], j)
    return tuple(tuple(o) for o in out)
