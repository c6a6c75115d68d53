"""What a layer split costs under DualPipe, rank pair by rank pair (dualpipe_split.py searches it).

Rank r holds chunk r of direction 0 and chunk q = p-1-r of direction 1 (DeepSeek-V3 report Sec.
3.2.1; layout.Layout), and rank q the same two chunks the other way round, so the p ranks form p/2
pairs that hold the same layers.  Per pair r, for chunks x (chunk r) and y (chunk q):

- seconds per unit of each direction: fused(x, y) + fused(y, x) (split_cost.fused_seconds, the
  steady state's two F&B ops), plus the blocking sends of the busier of the two ranks;
- each chunk's own forward and backward (split_cost.unit_seconds: its unfused passes in the warm-up
  and the drain);
- bytes per GPU of the fuller rank: what both chunks hold (weights, gradients, optimizer state),
  their activations at the rank's peak, the largest dot product of the counts in flight
  (schedules/dualpipe.live_vectors, PP+1 micro-batches in all) with the chunks' bytes per unit, and
  one recomputed layer (analysis/memory.class_memory's terms; not its ZeRO-3 working set).

All three grow with either chunk, which the exact feasibility test :meth:`Pairs.fits` relies on.
"""
from __future__ import annotations

import numpy as np

from ..schedules.dualpipe import _orders, live_vectors, order_makespan
from .partition import _TOL
from .split_cost import SplitCosts, fused_seconds, unit_seconds

# Columns of Pairs.chunks beyond split_cost.FIELDS: bytes held, activation bytes per unit.
HELD, ACT = 7, 8
_LIVE: dict[int, np.ndarray] = {}


def bounds_of(counts) -> np.ndarray:
    """Chunk boundaries (0, then the running sum) of per-chunk layer counts."""
    return np.concatenate(([0], np.cumsum(counts))).astype(np.int64)


class Pairs:
    """A model's pieces as prefix sums, and what a split of them costs on ``p`` DualPipe ranks."""

    def __init__(self, c: SplitCosts, p: int) -> None:
        rows = np.hstack([c.layers, c.held])
        self.prefix = np.vstack([np.zeros((1, rows.shape[1])), np.cumsum(rows, axis=0)])
        self.first = np.concatenate([c.first, c.first_held])
        self.last = np.concatenate([c.last, c.last_held])
        self.p, self.sm, self.n = p, c.sm, len(c.layers)
        self.sends = c.rank_sends() if c.sends else np.zeros((p, 2, 2))   # (rank, direction, F | B)
        per_rank = self.sends.sum(axis=(1, 2))
        self.pair_sends = np.maximum(per_rank, per_rank[::-1])[:p // 2]
        self.live = _live(p)
        self.memory_cap = c.capacity            # bytes a rank may hold (np.inf: memory not weighed)
        self.least_chunk = 0.0                  # no split's largest chunk is smaller (when known)
        self.transient = c.transient
        self._bounds: tuple[float, float] | None = None           # _lower_bounds(), when first asked
        self._run_table: np.ndarray | None = None                  # _runs(), when first asked
        self._scores: dict[tuple[int, ...], tuple[float, ...]] = {}    # score() of each split asked

    def chunks(self, bounds: np.ndarray) -> np.ndarray:
        """(..., p, FIELDS + 2) each chunk's pieces for boundaries (..., p+1)."""
        at = _rows(self.prefix, bounds)          # one gather: chunk k is at[k + 1] - at[k]
        v = at[..., 1:, :] - at[..., :-1, :]
        v[..., 0, :] += self.first
        v[..., -1, :] += self.last
        return v

    def pair(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Seconds of the F&B ops of a rank holding chunks ``x`` and ``y``, per unit of each direction."""
        return fused_seconds(x, y, self.sm) + fused_seconds(y, x, self.sm)

    def memory(self, x: np.ndarray, y: np.ndarray, r) -> np.ndarray:
        """Bytes of the fuller rank of pair ``r`` (rank r holds ``x`` in direction 0 and ``y`` in
        direction 1; rank p-1-r the other way round); ``r`` may be an array of pairs matching the
        chunks' second-last axis."""
        held = x[..., HELD] + y[..., HELD]
        mine, theirs = self.live[r], self.live[self.p - 1 - np.asarray(r)]
        if self.live.shape[1] == 1:
            # One vector in flight per rank (DualPipe's orders): the max over it is itself.
            act_r = x[..., ACT] * mine[..., 0, 0] + y[..., ACT] * mine[..., 0, 1]
            act_q = y[..., ACT] * theirs[..., 0, 0] + x[..., ACT] * theirs[..., 0, 1]
            return held + np.maximum(act_r, act_q) + self.transient
        act_r = (x[..., None, ACT] * mine[..., 0] + y[..., None, ACT] * mine[..., 1]).max(axis=-1)
        act_q = (y[..., None, ACT] * theirs[..., 0] + x[..., None, ACT] * theirs[..., 1]).max(axis=-1)
        return held + np.maximum(act_r, act_q) + self.transient

    def columns(self, bounds: np.ndarray) -> tuple[np.ndarray, ...]:
        """Per split (rows of ``bounds``): largest pair, largest chunk, largest rank memory, sum of
        squared pairs, sum of squared chunks."""
        v = self.chunks(bounds)
        h = self.p // 2
        x, y = v[:, :h], v[:, ::-1][:, :h]
        pairs = self.pair(x, y) + self.pair_sends
        own = unit_seconds(v, self.sm)
        mem = self.memory(x, y, np.arange(h)).max(axis=1)
        return pairs.max(axis=1), own.max(axis=1), mem, (pairs * pairs).sum(axis=1), (own * own).sum(axis=1)

    def score(self, counts) -> tuple[float, ...]:
        """:meth:`columns` of one split (memoised: the search asks the same splits again)."""
        key = tuple(int(c) for c in counts)
        got = self._scores.get(key)
        if got is None:
            got = self._scores[key] = tuple(float(c[0]) for c in self.columns(bounds_of(key)[None, :]))
        return got

    def maxima_moved(self, bounds: np.ndarray, cand: np.ndarray, near: np.ndarray) -> tuple[np.ndarray, ...]:
        """The first three :meth:`columns` (largest pair, chunk, rank memory) of the splits
        ``cand`` (C, p+1), each ``bounds`` with only the chunks ``near`` (C, W) changed (a move's
        run of chunks k1-1 .. k2; an index may repeat).  Those chunks and their pairs (a run of
        pairs too: the chunks' mirrors p-1-k meet theirs at the middle) are priced anew, each the
        float :meth:`columns` computes for it; the others keep ``bounds``'s values, whose largest
        outside the run comes from prefix and suffix maxima.  A maximum is exact whatever the
        order, so these are :meth:`columns`'s numbers bit for bit (tests/test_split_speed.py)."""
        p, h, sm, c = self.p, self.p // 2, self.sm, len(cand)
        v0 = self.chunks(bounds[None, :])[0]
        x0, y0 = v0[:h], v0[::-1][:h]
        rows = np.arange(c)[:, None]
        runs = self._runs()
        pr = np.minimum(near, p - 1 - near)
        w = self.n + 1                                               # runs is (w * w, fields)
        x = _rows(runs, cand[rows, pr] * w + cand[rows, pr + 1])      # chunk r of each pair r moved
        y = _rows(runs, cand[rows, p - 1 - pr] * w + cand[rows, p - pr])  # chunk p-1-r
        # Chunk k of a move is chunk r (k < p/2) or p-1-r of its pair r.
        own = unit_seconds(np.where((near == pr)[..., None], x, y), sm)
        pairs = self.pair(x, y) + self.pair_sends[pr]
        mem = self.memory(x, y, pr)
        base = (self.pair(x0, y0) + self.pair_sends, unit_seconds(v0, sm), self.memory(x0, y0, np.arange(h)))
        runs_of = ((pr.min(axis=1), pr.max(axis=1)), (near.min(axis=1), near.max(axis=1)),
                   (pr.min(axis=1), pr.max(axis=1)))
        out = []
        for moved, b0, (lo, hi) in zip((pairs, own, mem), base, runs_of, strict=True):
            before = np.concatenate(([-np.inf], np.maximum.accumulate(b0)))       # max of b0[:i]
            after = np.concatenate((np.maximum.accumulate(b0[::-1])[::-1], [-np.inf]))  # of b0[i:]
            out.append(np.maximum(np.maximum(before[lo], after[hi + 1]), moved.max(axis=1)))
        return tuple(out)

    def _runs(self) -> np.ndarray:
        """((n+1) * (n+1), FIELDS + 2) at row a * (n+1) + b the chunk of layers [a, b) as
        :meth:`chunks` prices it: the difference of the prefix sums, the embedding's pieces added
        when a = 0 (only chunk 0 starts there) and the output layer's when b = n (only chunk p-1
        ends there; chunks are never empty in a move's candidates), in chunks' order: the same
        floats (built once)."""
        if self._run_table is None:
            pre = self.prefix
            t = pre[None, :, :] - pre[:, None, :]
            t[0] += self.first
            t[:, -1] += self.last
            self._run_table = t.reshape(-1, t.shape[-1])
        return self._run_table

    def allowed(self, x: np.ndarray, y: np.ndarray, r: int, pair_cap: float, chunk_cap: float) -> np.ndarray:
        """Whether pair ``r`` with chunks ``x`` (chunk r) and ``y`` (chunk p-1-r) keeps within the
        caps (relative tolerance 1e-9) and the memory cap (an infinite cap is not evaluated)."""
        ok = np.ones(np.broadcast_shapes(x.shape[:-1], y.shape[:-1]), bool)
        if pair_cap < np.inf:
            ok &= self.pair(x, y) + self.pair_sends[r] <= pair_cap * (1 + _TOL)
        if chunk_cap < np.inf:
            tc = chunk_cap * (1 + _TOL)
            ok &= (unit_seconds(x, self.sm) <= tc) & (unit_seconds(y, self.sm) <= tc)
        if self.memory_cap < np.inf:
            ok &= self.memory(x, y, r) <= self.memory_cap * (1 + _TOL)
        return ok

    def seconds(self, counts, units: int) -> float:
        """The iteration's seconds with these chunks: the critical path of the reference order
        (schedules/dualpipe.order_makespan) over ``ref`` = 2p units, its least count, each rank's
        passes priced as the engine prices them (unfused: parts plus contention; F&B:
        fused_seconds; each followed by its blocking send), plus the steady state's largest rank
        pair for every further two units."""
        p, sm, snd = self.p, self.sm, self.sends
        v = self.chunks(bounds_of(counts))
        fwd = v[:, 0] + v[:, 1] + sm * v[:, 2]
        bwd = v[:, 3] - v[:, 6] + v[:, 4] + sm * v[:, 5]
        wgt = v[:, 6]
        own = [(r, p - 1 - r) for r in range(p)]       # rank r's chunk of direction 0 and 1
        f = [(fwd[a] + snd[r, 0, 0], fwd[b] + snd[r, 1, 0]) for r, (a, b) in enumerate(own)]
        bz = [(bwd[a] + snd[r, 0, 1], bwd[b] + snd[r, 1, 1]) for r, (a, b) in enumerate(own)]
        fb = [(float(fused_seconds(v[a], v[b], sm)) + snd[r, 0, 0] + snd[r, 1, 1],
               float(fused_seconds(v[b], v[a], sm)) + snd[r, 1, 0] + snd[r, 0, 1])
              for r, (a, b) in enumerate(own)]
        ref = min(units, 2 * p)
        T = order_makespan(p, ref, f, bz, [(wgt[a], wgt[b]) for a, b in own], fb)
        return T + (units - ref) / 2 * max(x + y for x, y in fb)

    def fits(self, pair_cap: float, chunk_cap: float) -> list[int] | None:
        """A split within the caps (:meth:`allowed`), or None when there is none.

        Pairs are taken from the outside in: pair r takes a front run [i, i+a) and a back run
        [n-j-b, n-j).  After each pair only the states (i, j) no other state dominates are kept
        (more layers taken at both ends, with enough left for the inner pairs, leaves a sub-run
        of what the inner pairs may take, and costs only grow with a run); for every state and
        front run the longest back run that fits is kept (costs are monotone in it).  The
        innermost pair is one contiguous run, split in two."""
        if self._below_bounds(pair_cap, chunk_cap):
            return None
        n, h, pre = self.n, self.p // 2, self.prefix
        si, sj = np.zeros(1, np.int64), np.zeros(1, np.int64)
        trail = []
        for r in range(h - 1):
            room = n - 2 * (h - 1 - r) - si - sj          # layers this pair may take, front + back
            first, last = (self.first, self.last) if r == 0 else (0.0, 0.0)
            # A front run that fits with the least back run (one layer) may grow that one; those
            # runs are a prefix of 1 .. room-1 (costs grow with the run).
            src, a = _ranges(self._longest_front(si, sj, np.maximum(room - 1, 0), first, last, r,
                                                 pair_cap, chunk_cap))
            if not len(a):
                return None
            i0, j0 = si[src], sj[src]
            x = _rows(pre, i0 + a) - _rows(pre, i0) + first
            lo = self._longest_back(x, j0, room[src] - a, last, r, pair_cap, chunk_cap)
            ni, nj = i0 + a, j0 + lo
            order = np.lexsort((-nj, ni))                 # by front taken, most back taken first
            ni, nj, src, a, b = ni[order], nj[order], src[order], a[order], lo[order]
            # Undominated: more back taken than every state that took more at the front.
            best_after = np.maximum.accumulate(nj[::-1])[::-1]
            keep = np.append(nj[:-1] > best_after[1:], True)
            trail.append((src[keep], a[keep], b[keep]))
            si, sj = ni[keep], nj[keep]
        return self._middle(si, sj, trail, pair_cap, chunk_cap)

    def _below_bounds(self, pair_cap: float, chunk_cap: float) -> bool:
        """Whether a cap is below a lower bound of every split's largest pair or chunk, so that
        :meth:`fits` has no split to find (most of its calls prove that none is better).

        By pigeonhole, pair 0 (both ends) takes some t0 >= 2 layers and another pair at least
        ceil((n - t0) / (p/2 - 1)); some chunk at least ceil(n / p), and chunks 0 and p-1 one
        layer besides their ends.  A pair of t layers (a >= 1 in one chunk) costs at least the
        pair of the least runs of a and t - a layers (field by field the least over positions,
        of the same prefix differences its chunks are priced from): with fields that never
        decrease with a run, float sums and maxima are monotone, so each bound is at most the
        float any split computes (no margin needed).  The bounds are computed once."""
        if self._bounds is None:
            self._bounds = self._lower_bounds()
        pair_lb, chunk_lb = self._bounds
        return pair_lb > pair_cap * (1 + _TOL) or chunk_lb > chunk_cap * (1 + _TOL)

    def _lower_bounds(self) -> tuple[float, float]:
        """(largest pair, largest chunk) no split is below (see :meth:`_below_bounds`)."""
        n, p, h, pre, sm = self.n, self.p, self.p // 2, self.prefix, self.sm
        if n < p or np.any(pre[1:] < pre[:-1]) or min(self.first.min(), self.last.min(), sm) < 0:
            return -np.inf, -np.inf                    # no split, or not monotone: no bound
        least = [np.zeros(pre.shape[1])]              # field by field the least run of a layers

        def run(a: int) -> np.ndarray:
            while len(least) <= a:
                k = len(least)
                least.append((pre[k:] - pre[:-k]).min(axis=0))
            return least[a]

        def pair_of(t: int, first, last) -> float:     # the least pair of t layers (t >= 2)
            run(t)
            a = np.arange(1, t)
            runs = np.array(least)
            return float(self.pair(runs[a] + first, runs[t - a] + last).min())

        sends = self.pair_sends
        if h == 1:
            pair_lb = pair_of(n, self.first, self.last) + sends[0]
        else:
            # min over t0 of max(ends(t0), others(t0)): ends never decreases with t0 and others
            # never grows, so the least is where they cross (a binary search for the first t0
            # whose ends reach the others').
            rest = float(sends[1:].min())

            def ends(t0: int) -> float:
                return pair_of(t0, self.first, self.last) + float(sends[0])

            def others(t0: int) -> float:
                return pair_of(-(-(n - t0) // (h - 1)), 0.0, 0.0) + rest

            lo, hi = 2, n - 2 * (h - 1)
            while lo < hi:
                mid = (lo + hi) // 2
                if ends(mid) >= others(mid):
                    hi = mid
                else:
                    lo = mid + 1
            pair_lb = max(ends(lo), others(lo))
            if lo > 2:
                pair_lb = min(pair_lb, max(ends(lo - 1), others(lo - 1)))
        chunk_lb = max(float(unit_seconds(run(-(-n // p)), sm)), float(unit_seconds(run(1) + self.first, sm)),
                       float(unit_seconds(run(1) + self.last, sm)))
        return float(pair_lb), chunk_lb

    def _longest_front(self, si: np.ndarray, sj: np.ndarray, top: np.ndarray, first, last, r: int,
                       pair_cap: float, chunk_cap: float) -> np.ndarray:
        """Per state (front ``si``, back ``sj`` taken so far): the longest front run (0 .. ``top``)
        whose every shorter run keeps pair ``r`` within the caps beside a back run of one layer.
        Costs grow with the run, so the runs that fit are a prefix: runs of 1 .. w layers are
        tried at once, w growing fourfold while a state still fits at its widest, and a wider
        try evaluates only the states that fitted every run so far (each run's cost is the float
        fits priced for it before: the same runs fit)."""
        n, pre = self.n, self.prefix
        lead = np.zeros(len(si), np.int64)
        rows = np.flatnonzero(top > 0)
        done, width = 0, 8
        limit = int(top.max()) if len(top) else 0
        y = pre[n - sj] - pre[n - sj - 1] + last
        while len(rows) and done < limit:
            a = np.arange(done + 1, min(width, limit) + 1)
            i0 = si[rows, None]
            x = _rows(pre, i0 + np.minimum(a, top[rows, None])) - _rows(pre, i0) + first
            fit = self.allowed(x, y[rows, None], r, pair_cap, chunk_cap) & (a <= top[rows, None])
            full = fit.all(axis=1)
            lead[rows] = done + np.where(full, fit.shape[1], np.argmin(fit, axis=1))
            done += len(a)
            rows = rows[full]
            width *= 4
        return np.minimum(lead, top)

    def _longest_back(self, x: np.ndarray, j0: np.ndarray, top: np.ndarray, last, r: int, pair_cap: float,
                      chunk_cap: float) -> np.ndarray:
        """Per front run ``x`` (the back taken so far ``j0``, at most ``top`` more layers): the
        longest back run that keeps pair ``r`` within the caps, at least 1 (the caller checked it).
        Costs grow with the run, so the runs that fit are a prefix: back runs of 1 .. w layers are
        tried at once, w growing fourfold while a row still fits at its widest; a wider try
        evaluates only the rows that fitted every run so far, on the runs not tried yet (each
        row's cost of each run is computed as before, element by element: the same floats)."""
        n, pre = self.n, self.prefix
        lead = np.zeros(len(x), np.int64)
        rows = np.arange(len(x))               # rows whose every run tried so far fits
        done, width = 0, 8
        limit = int(top.max())
        while True:
            b = np.arange(done + 1, min(width, limit) + 1)
            end = n - j0[rows, None]
            y = _rows(pre, end) - _rows(pre, np.maximum(end - b, 0)) + last
            fit = self.allowed(x[rows, None], y, r, pair_cap, chunk_cap) & (b <= top[rows, None])
            full = fit.all(axis=1)
            lead[rows] = done + np.where(full, fit.shape[1], np.argmin(fit, axis=1))
            done += len(b)
            rows = rows[full]
            if done >= limit or not len(rows):
                return np.minimum(lead, top)
            width *= 4

    def _middle(self, si: np.ndarray, sj: np.ndarray, trail: list, pair_cap: float,
                chunk_cap: float) -> list[int] | None:
        """The innermost pair for states (si, sj): its run split in two so that it fits; the whole
        split, read back through ``trail``, or None."""
        n, pre, h = self.n, self.prefix, self.p // 2
        length = n - si - sj
        src, a = _ranges(np.maximum(length - 1, 0))
        i0, j0 = si[src], sj[src]
        x = _rows(pre, i0 + a) - _rows(pre, i0) + (self.first if h == 1 else 0.0)
        y = _rows(pre, n - j0) - _rows(pre, i0 + a) + (self.last if h == 1 else 0.0)
        hits = np.flatnonzero(self.allowed(x, y, h - 1, pair_cap, chunk_cap))
        if not len(hits):
            return None
        state, mid = int(src[hits[0]]), int(a[hits[0]])
        front, back = [mid], [int(length[state]) - mid]
        for srcs, fa, fb in reversed(trail):
            front.append(int(fa[state]))
            back.append(int(fb[state]))
            state = int(srcs[state])
        return front[::-1] + back


def _live(p: int) -> np.ndarray:
    """(p, K, 2) per rank its undominated (direction 0, direction 1) counts in flight, padded with
    zeros (memoised); the order over 2p units has them all (more units repeat the steady state)."""
    got = _LIVE.get(p)
    if got is None:
        live = [live_vectors(o) for o in _orders(p, 2 * p)]
        got = _LIVE[p] = np.zeros((p, max(map(len, live)), 2))
        for r, vs in enumerate(live):
            got[r, :len(vs)] = vs
    return got


def _ranges(counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For counts c_k: (k, 1..c_k) flattened: every state k with each of its run lengths."""
    src = np.repeat(np.arange(len(counts)), counts)
    return src, np.arange(len(src)) - np.repeat(np.cumsum(counts) - counts, counts) + 1


def _rows(table: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """``table[idx]`` (rows of a 2-D table at integer indices of any shape): np.take copies the
    same floats several times faster than fancy indexing on these shapes."""
    return np.take(table, idx, axis=0)
