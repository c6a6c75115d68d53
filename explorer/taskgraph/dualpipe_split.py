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
largest chunk (each the best of :func:`_search`: moves from a start while they improve the score,
then the exact feasibility test dualpipe_pairs.Pairs.fits for a split whose largest pair, then
largest chunk, is lower still); with them the starts — the least-chunk split (partition.
split_layers), Megatron-LM's uniform ones and a split of pair totals (:func:`_paired`) — are
candidates, and of those no other beats on both the largest pair and the largest chunk the one
whose iteration is shortest is kept (Pairs.seconds: the critical path of the reference order; so
the split depends on the number of units).  Every split keeps each rank within the GPU's memory
when some split can (a deliberate constraint: without the report's memory recipe DeepSeek-V3
piles its layers onto the chunks whose ranks hold few micro-batches); the moves prefer the
smaller largest rank memory, then evener ranks and chunks (sums of squares); every comparison is
to a relative 1e-9.  Costs: a few exact tests (each a pass over the p/2 pairs) and moves over
p * MAX_RUN candidates each, some 5 to 40 ms a split, memoised per pricing in the estimator.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np

from .dualpipe_pairs import ACT, HELD, Pairs, bounds_of
from .partition import _TOL, _better, split_layers
from .split_cost import SplitCosts

_MOVES: dict[tuple[int, int], np.ndarray] = {}
_NEAR: dict[tuple[int, int], np.ndarray] = {}
# Longest run of boundaries a move shifts: a layer passes across up to this many chunks at once.
MAX_RUN = 8


def pair_split(c: SplitCosts, p: int, units: int) -> tuple[int, ...]:
    """Layers per chunk for DualPipe on ``p`` ranks (p even, one chunk per rank and direction) and
    ``units`` pipeline units per iteration."""
    n = len(c.layers)
    line = Pairs(c, p)
    per, first, last = c.unit_seconds()
    paired = _paired(per, first, last, p)
    evenly = _even(n, p)
    least_chunk = list(split_layers(per, p, first, last))
    line.least_chunk = line.score(least_chunk)[1]        # no split has a smaller largest chunk
    starts = [least_chunk, *evenly, paired]
    fitting = [s for s in starts if _fits(line, s)] or _lighter(line, paired)
    if not fitting and _may_fit(line):
        found = line.fits(np.inf, np.inf)
        fitting = [found] if found is not None else []
    if not fitting:
        line.memory_cap = np.inf          # no split fits the GPU: the split weighs time alone
        fitting = starts
    timed: dict[tuple[int, ...], float] = {}

    def seconds(split: list[int]) -> float:
        key = tuple(split)
        if key not in timed:
            timed[key] = line.seconds(split, units)
        return timed[key]

    candidates: list[list[int]] = []
    for split in _trade_offs(line, min(fitting, key=line.score)):
        candidates.append(split)
        if len(candidates) > 1 and units / 2 * line.score(split)[0] >= seconds(candidates[0]):
            break                # a rank pair alone runs this long; the next splits' pairs are larger
    # The starts, as they are, join: splits of equal largest pair and chunk can differ in time.
    candidates += [s for s in fitting if s not in candidates]
    # The splits another beats on both the largest pair and the largest chunk are left out; the
    # others are timed (a larger pair may buy a shorter warm-up and drain, and which wins depends on
    # the units).
    scores = [line.score(s)[:2] for s in candidates]
    candidates = [s for s, sc in zip(candidates, scores, strict=True)
                  if not any(_dominates(o, sc) for o in scores)]
    if len(candidates) == 1:
        return tuple(candidates[0])
    times = [seconds(s) for s in candidates]
    keep = 0
    for k in range(1, len(candidates)):
        if times[k] < times[keep] * (1 - _TOL):
            keep = k
    return tuple(candidates[keep])


def _dominates(a: tuple[float, ...], b: tuple[float, ...]) -> bool:
    """``a`` no worse than ``b`` in both criteria (to the tolerance) and better in one."""
    return all(x <= y * (1 + _TOL) for x, y in zip(a, b, strict=True)) and \
        any(x < y * (1 - _TOL) for x, y in zip(a, b, strict=True))


def _fits(line: Pairs, counts: list[int]) -> bool:
    return line.score(counts)[2] <= line.memory_cap * (1 + _TOL)


def _even(n: int, p: int) -> list[list[int]]:
    """Megatron-LM's uniform splits: the remainder on the last chunks, and ceil(n/p) layers a chunk
    with the rest on the last (the output layer's) chunk."""
    base, rem = divmod(n, p)
    out = [[base + (1 if k >= p - rem else 0) for k in range(p)]]
    top = -(-n // p)
    if rem and n - (p - 1) * top >= 1:
        out.append([top] * (p - 1) + [n - (p - 1) * top])
    return out


def _may_fit(line: Pairs) -> bool:
    """False when no split keeps every rank within the GPU's memory, by a bound: rank r holds its
    pair's layers' bytes and, from each count in flight (l0 of chunk r, l1 of chunk p-1-r: both
    ranks of the pair hold the same), their activations, at least with the pair's t layers as
    one on the heavier-weighted chunk and t-1 on the other, each layer at the least bytes a layer
    has (pair 0 adds the ends'); the pairs fit the cap only if the layers they may then hold add
    up to the model's."""
    pre, cap = line.prefix, line.memory_cap - line.transient
    held = float((pre[1:, HELD] - pre[:-1, HELD]).min())
    act = float((pre[1:, ACT] - pre[:-1, ACT]).min())
    total = 0
    for r in range(line.p // 2):
        l0, l1 = line.live[r][np.argmax(line.live[r].min(axis=-1))]      # the vector with the most in both
        lo, hi = min(l0, l1), max(l0, l1)
        ends = 0.0
        if r == 0:
            ends = line.first[HELD] + line.last[HELD] + l0 * line.first[ACT] + l1 * line.last[ACT]
        # held * t + act * (lo * (t - 1) + hi) + ends <= cap
        room = cap - ends - act * (hi - lo)
        t = int(np.floor(room / (held + act * lo))) if held + act * lo > 0 else line.n
        if t < 2:
            return False
        total += t
    return total >= line.n


def _paired(per: list[float], first: float, last: float, p: int, edge_floor: float = 2.0) -> list[int]:
    """A start near the least largest rank pair: each pair's layers in proportion to what its cost
    may hold besides the ends' work (pair 0 runs both ends), rounded to sum to the layers (largest
    remainders first), then halved between the pair's two chunks, the larger half away from the
    heavier end.  Layers weigh their mean seconds: a start for the search, not its answer.  Every
    pair holds at least two layers, pair 0 (both ends) at least ``edge_floor``."""
    n, h = len(per), p // 2
    mean = sum(per) / n
    share = [(sum(per) + first + last) / h - (first + last if r == 0 else 0.0) for r in range(h)]
    want = [max(x, 0.0) / mean for x in share]
    scale = n / sum(want) if sum(want) > 0 else 0.0
    exact = [max(edge_floor if r == 0 else 2.0, x * scale) for r, x in enumerate(want)]
    totals = [int(x) for x in exact]
    for r in sorted(range(h), key=lambda r: totals[r] - exact[r])[:max(0, n - sum(totals))]:
        totals[r] += 1
    while sum(totals) > n:                              # the floor of 2 layers a pair overshot
        r = max(range(h), key=lambda r: (totals[r], -r))
        totals[r] -= 1
    counts = [0] * p
    for r, t in enumerate(totals):
        small, big = t // 2, t - t // 2
        heavier_back = r > 0 or last >= first
        counts[r], counts[p - 1 - r] = (big, small) if heavier_back else (small, big)
    return counts


def _lighter(line: Pairs, counts: list[int]) -> list[list[int]]:
    """``counts`` with each pair's layers moved, one at a time, to whichever of its two chunks its
    ranks hold fewer micro-batches of while the pair needs more memory than the GPU has (the pair's
    seconds barely change: they are nearly the sum of its chunks'); [that split] when it then fits,
    else [].  A move within pair r changes only its own two chunks (the layers before chunk r and
    after chunk p-1-r stay), so the pair's memory for every share of its layers is priced at once
    (:func:`_pair_memory`) and the moves walk over those numbers."""
    counts = list(counts)
    p, cap = line.p, line.memory_cap * (1 + _TOL)
    for r in range(p // 2):
        q = p - 1 - r
        t = counts[r] + counts[q]
        mem = _pair_memory(line, counts, r)          # mem[a]: chunk r holds a layers, chunk q t - a
        for _ in range(t):
            a = counts[r]
            here = mem[a]
            if here <= cap:
                break
            # The options as (memory, trial split): equal memories go to the smaller list, the
            # move from chunk r (its count drops first).
            options = [(mem[a - 1], a - 1)] if a > 1 else []
            if t - a > 1:
                options.append((mem[a + 1], a + 1))
            if not options or min(options)[0] >= here:
                break
            counts[r] = min(options)[1]
            counts[q] = t - counts[r]
    return [counts] if line.score(counts)[2] <= cap else []


def _pair_memory(line: Pairs, counts: list[int], r: int) -> list[float]:
    """Pair r's memory (Pairs.memory of its chunks, as Pairs.chunks prices them: the same floats)
    for chunk r holding a = 0 .. t layers and chunk p-1-r the other t - a of its pair's t."""
    p, q = line.p, line.p - 1 - r
    start, end = sum(counts[:r]), line.n - sum(counts[q + 1:])
    a = np.arange(counts[r] + counts[q] + 1)
    pre = line.prefix
    x = pre[start + a] - pre[start]
    y = pre[end] - pre[end - (a[-1] - a)]
    if r == 0:
        x += line.first
    if q == p - 1:
        y += line.last
    return line.memory(x, y, r).tolist()


def _trade_offs(line: Pairs, start: list[int]):
    """The splits of least largest rank pair for ever tighter bounds on the largest chunk: the
    first unbounded, each next one's chunks below the previous one's largest; they end when no
    split has smaller chunks."""
    split = _search(line, start, np.inf)
    while True:
        yield split
        if line.score(split)[1] <= line.least_chunk * (1 + _TOL):
            return                                  # no split has smaller chunks
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
            if k and s[1] <= line.least_chunk * (1 + _TOL):
                break                               # no split has smaller chunks
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
    """Take the best move (:func:`boundary_moves`) that keeps every chunk within ``bound`` and every rank
    within the memory cap while it improves the score (each move improves it by more than the
    tolerance, so the loop ends; bounded anyway)."""
    moves = boundary_moves(line.p)
    current = line.score(np.diff(bounds))
    limit, memory_cap = bound * (1 + _TOL), line.memory_cap * (1 + _TOL)
    for _ in range(4 * line.n + 16):
        pick = _best_move(line, bounds, moves, limit, memory_cap)
        if pick is None:
            break
        got = line.score(np.diff(pick))
        if not _better(got, current):
            break
        bounds, current = pick, got
    return bounds


def _best_move(line: Pairs, bounds: np.ndarray, moves: np.ndarray, limit: float,
               memory_cap: float) -> np.ndarray | None:
    """The boundaries after the best of ``moves`` within the caps (lexicographic score; ties: the
    first), or None when none stays within them."""
    cand = bounds + moves
    valid = np.all(cand[:, 1:] > cand[:, :-1], axis=1)
    cand = cand[valid]
    near = _near(line.p)
    if near.shape[1] < line.p // 2:
        # A move changes one run of at most MAX_RUN + 1 chunks: the largest pair, chunk and rank
        # memory come from those and the unchanged rest (Pairs.maxima_moved, the same floats as
        # Pairs.columns); the sums of squares, the last criteria, only for the splits still tied.
        cols: tuple[np.ndarray, ...] = line.maxima_moved(bounds, cand, near[valid])
    else:
        cols = line.columns(cand)
    keep = np.flatnonzero((cols[1] <= limit) & (cols[2] <= memory_cap))
    if not len(keep):
        return None
    for col in cols:
        col = col[keep]
        keep = keep[col <= col.min() * (1 + _TOL)]
    if len(cols) == 3 and len(keep) > 1:
        full, sub = line.columns(cand[keep]), np.arange(len(keep))
        for col in full[3:]:
            col = col[sub]
            sub = sub[col <= col.min() * (1 + _TOL)]
        keep = keep[sub]
    return cand[keep[0]]


def boundary_moves(p: int, run: int = MAX_RUN) -> np.ndarray:
    """(moves, p+1) every run of up to ``run`` inner boundaries k1..k2 moved one layer either way
    (memoised)."""
    got = _MOVES.get((p, run))
    if got is None:
        runs = _runs(p, run)
        if not runs:                          # one chunk: no inner boundary
            got = _MOVES[(p, run)] = np.array([])
            return got
        k1, k2, d = (np.array(x, dtype=np.int64) for x in zip(*runs, strict=True))
        at = np.arange(p + 1)
        got = _MOVES[(p, run)] = ((at >= k1[:, None]) & (at <= k2[:, None])) * d[:, None]
    return got


def _runs(p: int, run: int) -> list[tuple[int, int, int]]:
    """(k1, k2, direction) of each row of :func:`boundary_moves`, in its order."""
    return [(k1, k2, d) for k1 in range(1, p) for k2 in range(k1, min(p, k1 + run)) for d in (1, -1)]


@lru_cache(maxsize=64)
def move_givers(chunks: int, run: int) -> np.ndarray:
    """Per row of :func:`boundary_moves` the chunk that loses a layer: boundaries k1..k2 shifted
    right take chunk k2's first layer, shifted left chunk k1-1's last."""
    return np.array([k2 if d > 0 else k1 - 1 for k1, k2, d in _runs(chunks, run)], dtype=np.int64)


def _near(p: int, run: int = MAX_RUN) -> np.ndarray:
    """(moves, run + 1) per row of :func:`boundary_moves` the chunks it changes (k1-1 .. k2 for boundaries
    k1..k2; padded by repeating k2), memoised."""
    got = _NEAR.get((p, run))
    if got is None:
        moves = boundary_moves(p, run)
        rows = []
        for m in moves:
            moved = np.flatnonzero(m)
            k1, k2 = int(moved[0]), int(moved[-1])
            chunks = list(range(k1 - 1, k2 + 1))
            rows.append(chunks + [k2] * (run + 1 - len(chunks)))
        got = _NEAR[(p, run)] = np.array(rows, np.int64)
    return got
