"""Layer partitioning: which contiguous layers each pipeline chunk holds.

Megatron-LM splits layers uniformly over the pipeline (Narayanan et al. SC21 Sec. 2.2); real
models are not uniform — the first stage also embeds, the last computes the output layer and the
loss, MoE models mix dense and expert layers — so the split here balances the cost of each chunk
(the given ``parallelism.stage_layers`` win when set).
"""
from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate

import numpy as np


def split_layers(costs: list[float], chunks: int, first_extra: float, last_extra: float,
                 stages: int | None = None, extras: Sequence[float] | None = None) -> tuple[int, ...]:
    """Contiguous split of layers into ``chunks`` chunks (>= 1 layer each).

    The first chunk also carries ``first_extra`` (embedding), the last ``last_extra`` (output layer
    and loss), and chunk k ``extras[k]`` when given (work its stage does per unit whatever its
    layers: pipeline sends that block the compute stream).  With one chunk per stage (``stages``
    None or equal to ``chunks``) the split minimises the largest chunk cost; among optimal splits
    the one closest to evenly spaced cumulative cost is kept, so slack goes to the chunks with the
    edge work (Llama 3 405B puts 126 layers on 16 stages as 7, 8 x 14, 7 for this reason).

    Interleaved schedules (``stages`` < ``chunks``; chunk k runs on stage k mod stages, Narayanan et
    al. SC21 Sec. 2.2) are paced round by round (virtual stage r = chunks r*p .. r*p+p-1) and by
    the busiest *stage*, the sum of its chunks, so a split that only balances chunks can leave
    both unbalanced (24 layers in 12 chunks as 3 x 6, 1 x 6 puts 7 layers on stage 0 and 3-layer
    chunks in the first rounds).  Candidates are then compared by the sum over rounds of the
    round's largest chunk, then the largest stage total, then the largest chunk, then their order
    (a candidate whose largest chunk exceeds the first one's is not taken):
    the min-max-chunk split above, Megatron-LM's uniform split (the same number of layers per
    virtual stage) with the remainder spread where it costs least, and the uniform split with one
    layer less on a chunk whose embedding or output-layer work is heavy (>= half a layer).

    Costs: prefix sums and bisection, O(chunks log n) per greedy probe of a cap; the least feasible
    cap is found among the chunk costs between the mean chunk and the mean plus the largest layer
    (about a dozen probes, :func:`_least_cap`), or by bisection on the cap for very long lines (at
    most 60 probes, to a bracket of 1e-12 relative, a thousandth of the comparisons' tolerance).

    >>> split_layers([1.0] * 24, 12, 0.0, 0.5, stages=4)
    (2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2)
    """
    if chunks == 1:
        return (len(costs),)
    line = _Line.of(costs, chunks, first_extra, last_extra, extras)
    best = _min_max_split(line, costs)
    if stages is None or stages >= chunks:
        return tuple(best)
    return _interleaved_split(line, best, stages, first_extra, last_extra)


# Relative tolerance of cost comparisons: summation-order noise never decides a split.
_TOL = 1e-9
# Bisection steps on the cap: 60 halvings take any starting interval below float resolution.
_BISECTION_STEPS = 60


@dataclass(frozen=True)
class _Line:
    """Layers in order as prefix sums of their costs, with the edge work of the first and last chunk."""

    prefix: tuple[float, ...]
    extras: tuple[float, ...]
    chunks: int

    @staticmethod
    def of(costs: list[float], chunks: int, first_extra: float, last_extra: float,
           per_chunk: Sequence[float] | None = None) -> _Line:
        extras = [0.0] * chunks if per_chunk is None else [float(x) for x in per_chunk]
        extras[0] += first_extra
        extras[-1] += last_extra
        return _Line(tuple([0.0, *accumulate(costs)]), tuple(extras), chunks)

    @property
    def n(self) -> int:
        return len(self.prefix) - 1

    def greedy(self, cap: float) -> list[int] | None:
        """Each chunk takes as many layers as fit under ``cap`` (at least one, leaving one for every
        later chunk); feasible when the last chunk, which takes the rest, fits too."""
        prefix, extras, n, chunks = self.prefix, self.extras, self.n, self.chunks
        out: list[int] = []
        i, tol = 0, cap * (1 + _TOL)
        for j in range(chunks - 1):
            x, at = extras[j], prefix[i]
            end = bisect_right(prefix, at + tol - x, i) - 1
            # Settle the rounding of the bisection target on the chunk's own sum.
            while end < n and prefix[end + 1] - at + x <= tol:
                end += 1
            while end > i and prefix[end] - at + x > tol:
                end -= 1
            # At most what leaves one layer for every later chunk, at least one layer.
            if end > n - (chunks - j - 1):
                end = n - (chunks - j - 1)
            if end < i + 1:
                end = i + 1
            out.append(end - i)
            i = end
        out.append(n - i)
        return out if prefix[n] - prefix[i] + extras[-1] <= tol else None

    def chunk_costs(self, counts: list[int] | tuple[int, ...]) -> list[float]:
        ends = list(accumulate(counts))
        return [self.extras[k] + self.prefix[e] - self.prefix[e - c]
                for k, (c, e) in enumerate(zip(counts, ends, strict=True))]


def _min_max_split(line: _Line, costs: list[float]) -> list[int]:
    """The split minimising the largest chunk (the least feasible cap: :func:`_least_cap`), or the
    evenly spaced one when it is as good (slack then goes to the chunks with edge work)."""
    prefix, extras, n, chunks = line.prefix, line.extras, line.n, line.chunks
    hi = _least_cap(line, max(max(costs), max(extras)), (prefix[n] + sum(extras)) * (1 + 1e-6), max(costs))
    # hi is the optimal cap up to rounding noise; one more tolerance step makes every chunk whose
    # cost equals the optimum fit for certain, so the greedy packs the front chunks full.
    best = line.greedy(hi * (1 + _TOL))
    assert best is not None
    # Evenly spaced alternative: assign each layer by the midpoint of its cumulative cost.
    total = prefix[n] + sum(extras)
    counts = [0] * chunks
    acc = extras[0]                      # summed layer by layer: exact ties decide as before
    width, top = total / chunks, chunks - 1
    for c in costs:
        k = int((acc + c / 2) / width)
        counts[k if k < top else top] += 1
        acc += c
    if min(counts) >= 1 and max(line.chunk_costs(counts)) <= max(line.chunk_costs(best)) * (1 + _TOL):
        best = counts
    return best


def _bisect(line: _Line, lo: float, hi: float) -> float:
    """Bisection on the cap between ``lo`` and a feasible ``hi`` (up to 60 greedy probes), to a
    relative bracket of 1e-12: the reference :func:`_least_cap` agrees with."""
    for _ in range(_BISECTION_STEPS):
        mid = (lo + hi) / 2
        if line.greedy(mid) is None:
            lo = mid
        else:
            hi = mid
        if hi - lo <= hi * _TOL * 1e-3:
            break       # below what any comparison of the split can tell apart (_TOL)
    return hi


def _least_cap(line: _Line, lo: float, hi: float, largest: float) -> float:
    """The least feasible cap between ``lo`` and ``hi`` up to 1e-12 relative, as :func:`_bisect`
    finds it, in about a dozen greedy probes instead of some forty.

    The greedy's outcome changes only where ``cap * (1 + _TOL)`` crosses the cost of a chunk,
    ``prefix[e] - prefix[i] + extra`` (computed as the greedy computes it), and the least feasible
    cap lies between the mean chunk (no split does better: infeasible below it) and the mean plus
    the largest layer and edge work (every greedy chunk but the last ends within a layer of the
    cap: feasible there).  So the answer is ``c / (1 + _TOL)``, nudged up by 1e-13, for the least
    candidate cost ``c`` in that window whose cap is feasible: a bisection over those candidates
    (some three per layer), each probe halving them.  Where ``lo`` is feasible already every cap
    above it is (the greedy is monotone in the cap), and the bisection's arithmetic is replayed
    without probing.  Long lines, or a window the bounds do not bracket, go to :func:`_bisect`."""
    if line.greedy(lo) is not None:
        while True:                          # _bisect with every probe feasible
            hi = (lo + hi) / 2
            if hi - lo <= hi * _TOL * 1e-3:
                return hi
    n, chunks, extras = line.n, line.chunks, line.extras
    if n > _MAX_CANDIDATE_LAYERS:
        return _bisect(line, lo, hi)
    mean = (line.prefix[n] + sum(extras)) / chunks
    floor = mean / (1 + _TOL) * (1 - 1e-9)
    ceil = (mean + largest + max(extras)) * (1 + 1e-9)
    if floor > lo and line.greedy(floor) is None:
        lo = floor
    if ceil < hi and line.greedy(ceil) is not None:
        hi = ceil
    pre = np.asarray(line.prefix)
    start = pre[:-1]
    low_c, high_c = lo * (1 + _TOL) * (1 - 1e-9), hi * (1 + _TOL) * (1 + 1e-9)
    cand = []
    for x in sorted({0.0, *extras}):
        # Ends e of chunks starting at i whose cost may fall in the window (one more each side:
        # the exact filter below decides).
        a = np.maximum(np.searchsorted(pre, start + (low_c - x)) - 1, np.arange(1, n + 1))
        b = np.minimum(np.searchsorted(pre, start + (high_c - x), "right") + 1, n + 1)
        width = np.maximum(b - a, 0)
        if not width.any():
            continue
        i = np.repeat(np.arange(n), width)
        e = np.arange(width.sum()) - np.repeat(np.cumsum(width) - width, width) + a[i]
        cand.append(pre[e] - pre[i] + x)
    if not cand:
        return _bisect(line, lo, hi)
    caps = np.concatenate(cand) / (1 + _TOL) * (1 + 1e-13)
    caps = np.sort(caps[(caps > lo) & (caps < hi)])      # (np.unique's first call costs ~5 ms)
    return _least_feasible(line, caps, hi)


# Candidates closer than this (relative) are one cluster: the same chunk cost reached from
# different first layers, apart by summation noise only.
_CLUSTER = 1e-12


def _least_feasible(line: _Line, caps: np.ndarray, hi: float) -> float:
    """The least of the sorted ``caps`` whose greedy is feasible (``hi`` if none is).

    Feasibility is monotone in the cap, so a bisection finds it; equal-layer models give many
    candidates that are one chunk cost up to rounding (one per first layer), so the bisection runs
    over clusters of near-equal candidates first (probing each cluster's largest), then inside the
    one found: its least candidate is feasible as a rule (one probe), else a bisection inside it."""
    if not caps.size:
        return hi
    starts = np.flatnonzero(np.concatenate(([True], caps[1:] - caps[:-1] > caps[1:] * _CLUSTER)))
    ends = np.append(starts[1:], caps.size)             # cluster c holds caps[starts[c]:ends[c]]
    lo_c, hi_c, found = 0, len(starts), None
    while lo_c < hi_c:                                # least cluster whose largest cap is feasible
        c = (lo_c + hi_c) // 2
        if line.greedy(float(caps[ends[c] - 1])) is None:
            lo_c = c + 1
        else:
            found, hi_c = c, c
    if found is None:
        return hi
    inside = caps[starts[found]:ends[found]]
    best = float(inside[-1])
    if inside.size > 1 and line.greedy(float(inside[0])) is not None:
        return float(inside[0])
    inside = inside[1:-1]                             # first infeasible, last feasible: between them
    while inside.size:
        k = inside.size // 2
        mid = float(inside[k])
        if line.greedy(mid) is None:
            inside = inside[k + 1:]
        else:
            best = mid
            inside = inside[:k]
    return best


# Above this many layers the window's candidates are not enumerated (plain bisection).
_MAX_CANDIDATE_LAYERS = 4096


def _score(line: _Line, counts: list[int] | tuple[int, ...], stages: int) -> tuple[float, float, float]:
    """(sum over virtual-stage rounds of the round's slowest chunk, largest stage total, largest
    chunk).  Interleaved 1F1B passes every micro-batch through the rounds in order, each at the
    pace of its slowest chunk, so the rounds' maxima add up (SC21 Sec. 2.2.2: the bubble is (p-1)
    chunk times); the stage totals pace the steady state."""
    cc = line.chunk_costs(counts)
    per = [0.0] * stages
    for k, c in enumerate(cc):
        per[k % stages] += c
    rounds = sum(max(cc[r:r + stages]) for r in range(0, line.chunks, stages))
    return rounds, max(per), max(cc)


def _better(a: tuple[float, ...], b: tuple[float, ...]) -> bool:
    """Lexicographically smaller, with the relative tolerance."""
    for x, y in zip(a, b, strict=True):
        if x < y * (1 - _TOL):
            return True
        if x > y * (1 + _TOL):
            return False
    return False


def _spread(line: _Line, base: list[int], spare: int, stages: int) -> list[int] | None:
    """Hand out ``spare`` layers one at a time to the chunk where they cost least (score; ties:
    the lower index), each chunk at most one.

    Every free chunk's trial is scored at once over a (trials x chunks) array, with the arithmetic
    of :func:`_score` in its order (so the pick is the same to the last bit): a 64-chunk split
    with 62 layers to hand out took 62 x 64 scalar scores before.  A trial that grows chunk f
    keeps the chunks before f, and moves those after it one layer on: three vectors of chunk
    costs (each ``_Line.chunk_costs``'s expression on its own ends) make every trial's row."""
    chunks = line.chunks
    if min(base) < 1 or spare > chunks:
        return None
    out = list(base)
    free = list(range(chunks))
    prefix, extras = np.asarray(line.prefix), np.asarray(line.extras)
    index = np.arange(chunks)
    for _ in range(spare):
        counts = np.asarray(out)
        end = np.cumsum(counts)
        start = end - counts
        kept = extras + prefix[end] - prefix[start]              # chunks before the one that grows
        grown = extras + prefix[end + 1] - prefix[start]         # the one that takes the layer
        moved = extras + prefix[end + 1] - prefix[start + 1]     # chunks after it, a layer later
        f = np.asarray(free)
        cc = np.where(index < f[:, None], kept, moved)
        cc[np.arange(len(f)), f] = grown[f]
        rounds, per = _round_scores(cc, stages)
        t = _first_best(rounds.tolist(), per.max(axis=1).tolist(), cc.max(axis=1).tolist())
        out[free[t]] += 1
        del free[t]
    return out


def _round_scores(cc: np.ndarray, stages: int) -> tuple[np.ndarray, np.ndarray]:
    """Per trial (row of ``cc``, its chunk costs): the sum over rounds of the round's largest chunk
    and each stage's total, added round after round in :func:`_score`'s order."""
    trials, chunks = cc.shape
    if chunks % stages == 0:
        # (trials, rounds, stages); the stage totals added round by round (numpy's own sum over an
        # axis may add pairwise, which is not _score's order).
        by_round = cc.reshape(trials, -1, stages)
        per = by_round[:, 0].copy()
        for k in range(1, by_round.shape[1]):
            per += by_round[:, k]
        peaks = by_round.max(axis=2)
    else:                                  # a last, shorter round (any stages < chunks)
        per = np.zeros((trials, stages))
        peaks = np.empty((trials, -(-chunks // stages)))
        for k, r in enumerate(range(0, chunks, stages)):
            seg = cc[:, r:r + stages]
            per[:, :seg.shape[1]] += seg
            peaks[:, k] = seg.max(axis=1)
    rounds = peaks[:, 0]
    for k in range(1, peaks.shape[1]):
        rounds = rounds + peaks[:, k]
    return rounds, per


def _first_best(*columns: list[float]) -> int:
    """The trial a left-to-right scan keeps: each trial replaces the kept one when its score (one
    value per column) is :func:`_better`; that comparison inlined over the columns, since a
    64-chunk split scans 64 trials 62 times."""
    lo, hi = 1 - _TOL, 1 + _TOL
    keep = 0
    for t in range(1, len(columns[0])):
        for col in columns:
            x, y = col[t], col[keep]
            if x < y * lo:
                keep = t
                break
            if x > y * hi:
                break
    return keep


def _interleaved_split(line: _Line, best: list[int], stages: int, first_extra: float,
                       last_extra: float) -> tuple[int, ...]:
    """Among the min-max split and Megatron-LM's uniform split (remainder spread where it costs
    least; one layer less on a chunk with heavy edge work), the best by :func:`_score`."""
    n, chunks = line.n, line.chunks
    base, rem = divmod(n, chunks)
    keep = list(best)
    candidates = [keep, _spread(line, [base] * chunks, rem, stages)]
    mean = line.prefix[n] / n
    if base > 1 and max(first_extra, last_extra) >= mean / 2:
        # One layer less on the chunk(s) whose edge work is heavy (at least half a layer).
        lighter = [base] * chunks
        spare = rem
        for k, e in ((0, first_extra), (chunks - 1, last_extra)):
            if e >= mean / 2:
                lighter[k] -= 1
                spare += 1
        candidates.append(_spread(line, lighter, spare, stages))
    # A candidate may not enlarge the largest chunk: it sets the warm-up and cool-down, (p-1) chunk
    # times (SC21 Sec. 2.2.2), which the round sum only approximates.
    cap = max(line.chunk_costs(keep)) * (1 + _TOL)
    for cand in candidates[1:]:
        if cand is not None and max(line.chunk_costs(cand)) <= cap and \
                _better(_score(line, cand, stages), _score(line, keep, stages)):
            keep = cand
    return tuple(keep)
