"""DualPipe's layer split: what each *rank* runs, not each chunk.

Rank r holds chunk r of one direction and chunk p-1-r of the other (DeepSeek-V3 report Sec. 3.2.1),
and in the steady state runs every forward of one fused with a backward of the other (F&B), so its
seconds per pair of units are fused(F of chunk r, B of chunk q) + fused(F of chunk q, B of chunk r),
q = p-1-r (dualpipe_pairs.py).  Balancing chunks one by one does not balance that: with the output
layer on chunk p-1 the old split packed 5 layers on chunks 0-10 and 1 on chunks 12-15 (DeepSeek-V3
at top-4), so ranks 5-10 ran 10 MoE layers and rank 0 six.  The chunks' own unfused passes pace the
warm-up and the drain, (p/2 - 1) passes long (the report's bubble (PP/2-1)(F&B+B-3W)), so a split
that evens the ranks with one heavy chunk can lose more there than it gains in the steady state
(top-7: three MoE layers beside the output layer and the MTP block).

So :func:`_trade_offs` gives the splits of least largest rank pair for ever tighter bounds on the
largest chunk (each the best of :meth:`_search`), and of these and the uniform split the one whose
iteration is shortest is kept (dualpipe_pairs.Pairs.seconds: the critical path of the reference
order; the split depends on the number of units).  Every split keeps each rank within the GPU's
memory when some split can; ties go to the smaller largest rank memory, then the evener ranks and
chunks (sums of squares); every comparison is to a relative 1e-9.
"""
from __future__ import annotations

import numpy as np

from .dualpipe_pairs import Pairs, bounds_of
from .partition import _TOL, _better, split_layers
from .split_cost import SplitCosts

_MOVES: dict[int, np.ndarray] = {}


def pair_split(c: SplitCosts, p: int, units: int) -> tuple[int, ...]:
    """Layers per chunk for DualPipe on ``p`` ranks (p even, one chunk per rank and direction) and
    ``units`` pipeline units per iteration."""
    n = len(c.layers)
    line = Pairs(c, p)
    base, rem = divmod(n, p)
    uniform = [base + (1 if k >= p - rem else 0) for k in range(p)]
    per, first, last = c.unit_seconds()
    starts = [list(split_layers(per, p, first, last)), uniform]
    fitting = [s for s in starts if line.score(s)[2] <= line.memory_cap * (1 + _TOL)]
    if not fitting:
        found = line.fits(np.inf, np.inf)
        if found is None:
            line.memory_cap = np.inf          # nothing fits the GPU: the split weighs time alone
            fitting = starts
        else:
            fitting = [found]
    start = min(fitting, key=line.score)
    best, best_t = None, np.inf
    if uniform in fitting:
        best, best_t = uniform, line.seconds(uniform, units)
    for split in _trade_offs(line, start):
        if units / 2 * line.score(split)[0] >= best_t:
            break                # a rank pair alone runs this long; the next splits' pairs are larger
        t = line.seconds(split, units)
        if t < best_t * (1 - _TOL):
            best, best_t = split, t
    assert best is not None
    return tuple(best)


def _trade_offs(line: Pairs, start: list[int]):
    """The splits of least largest rank pair for ever tighter bounds on the largest chunk: the
    first unbounded, each next one's chunks below the previous one's largest; they end when no
    split has smaller chunks."""
    split = _search(line, start, np.inf)
    while True:
        yield split
        bound = line.score(split)[1] * (1 - 2 * _TOL)
        found = line.fits(np.inf, bound)
        if found is None:
            return
        split = _search(line, found, bound)


def _search(line: Pairs, start: list[int], bound: float) -> list[int]:
    """From ``start`` (within the caps), the split of least score (Pairs.columns' order) among those
    whose every chunk is within ``bound``: moves while they improve it (:func:`_polish`), then the
    exact test (Pairs.fits) for a split whose largest pair, then largest chunk, is lower still."""
    bounds = _polish(line, bounds_of(start), bound)
    caps = [np.inf, bound]                                # (pair, chunk) caps of the test
    for k in (0, 1):
        while True:
            s = line.score(np.diff(bounds))
            # The criterion before this one stays as it is (to the tolerance); this one must drop
            # below the current value by a tolerance: a split the moves did not reach.
            caps[k] = min(s[k] * (1 - 2 * _TOL), bound if k else np.inf)
            found = line.fits(*caps)
            if found is None:
                break
            better = _polish(line, bounds_of(found), bound)
            if not _better(line.score(np.diff(better)), s):
                break
            bounds = better
        caps[k] = line.score(np.diff(bounds))[k]
    return [int(x) for x in np.diff(bounds)]


def _polish(line: Pairs, bounds: np.ndarray, bound: float) -> np.ndarray:
    """Take the best move (:func:`_moves`) that keeps every chunk within ``bound`` and every rank
    within the memory cap while it improves the score (each move improves it by more than the
    tolerance, so the loop ends; bounded anyway)."""
    moves = _moves(line.p)
    current = line.score(np.diff(bounds))
    limit, memory_cap = bound * (1 + _TOL), line.memory_cap * (1 + _TOL)
    for _ in range(4 * line.n + 16):
        cand = bounds + moves
        cand = cand[np.all(cand[:, 1:] > cand[:, :-1], axis=1)]
        cols = line.columns(cand)
        keep = np.flatnonzero((cols[1] <= limit) & (cols[2] <= memory_cap))
        if not len(keep):
            break
        for col in cols:
            col = col[keep]
            keep = keep[col <= col.min() * (1 + _TOL)]
        pick = cand[keep[0]]
        got = line.score(np.diff(pick))
        if not _better(got, current):
            break
        bounds, current = pick, got
    return bounds


def _moves(p: int) -> np.ndarray:
    """(moves, p+1) every run of inner boundaries k1..k2 moved one layer either way (memoised)."""
    got = _MOVES.get(p)
    if got is None:
        rows = []
        for k1 in range(1, p):
            for k2 in range(k1, p):
                for d in (1, -1):
                    r = np.zeros(p + 1, np.int64)
                    r[k1:k2 + 1] = d
                    rows.append(r)
        got = _MOVES[p] = np.array(rows)
    return got
