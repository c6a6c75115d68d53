"""The faster DualPipe split search and link check give the numbers the step-by-step code gave.

Issue 35 item 5 (estimator and search speed): the DualPipe split prices a pair's memory for every
share of its layers at once (dualpipe_split._pair_memory, used by _lighter), widens the longest
back run only for the rows that still fit (dualpipe_pairs.Pairs._longest_back), and the link check
memoises each layout's per-pass communication seconds (pricing/link_check._per_pass).  Each is
compared here with the step-by-step reference it replaces, to the last bit (==, not approx).
"""
from __future__ import annotations

import dataclasses
import random

import numpy as np
import pytest

from explorer.cli import load_scenario
from explorer.pricing import link_check
from explorer.pricing.chunk_basis import BWD, FWD
from explorer.pricing.profile import row_profile
from explorer.taskgraph import dualpipe_split as DS
from explorer.taskgraph.dualpipe_pairs import Pairs, bounds_of
from explorer.taskgraph.partition import _TOL
from explorer.taskgraph.split_cost import SplitCosts


def _costs(rng: random.Random, n: int, capacity: float = np.inf) -> SplitCosts:
    """Two kinds of layer in one model (a dense run, then a heavier one), random ends and bytes."""
    kinds = [np.array([rng.uniform(0.1, 2) for _ in range(7)]) for _ in range(2)]
    cut = rng.randint(0, n)
    layers = np.stack([kinds[0] if i < cut else kinds[1] for i in range(n)])
    layers[:, 6] = layers[:, 3] * 0.3
    held = np.stack([[rng.uniform(1, 3), rng.uniform(1, 3)] for _ in range(n)])
    edge = [np.array([rng.uniform(0, 3) for _ in range(7)]) for _ in range(2)]
    return SplitCosts(layers, edge[0], edge[1], rng.choice([0.0, 0.15]), (), held,
                      np.array([rng.uniform(0, 2), 1.0]), np.array([rng.uniform(0, 2), 1.0]), capacity)


def _random_counts(rng: random.Random, n: int, p: int) -> list[int]:
    cuts = sorted(rng.sample(range(1, n), p - 1))
    return [b - a for a, b in zip((0, *cuts), (*cuts, n), strict=True)]


def _lighter_reference(line: Pairs, counts: list[int]) -> list[list[int]]:
    """dualpipe_split._lighter as it was: every move priced on the whole split."""
    counts = list(counts)
    p, cap = line.p, line.memory_cap * (1 + _TOL)
    for r in range(p // 2):
        q = p - 1 - r
        for _ in range(counts[r] + counts[q]):
            v = line.chunks(bounds_of(counts))
            if float(line.memory(v[r], v[q], r)) <= cap:
                break
            options = []
            for src, dst in ((r, q), (q, r)):
                if counts[src] > 1:
                    trial = list(counts)
                    trial[src] -= 1
                    trial[dst] += 1
                    w = line.chunks(bounds_of(trial))
                    options.append((float(line.memory(w[r], w[q], r)), trial))
            if not options or min(options)[0] >= float(line.memory(v[r], v[q], r)):
                break
            counts = min(options)[1]
    return [counts] if line.score(counts)[2] <= cap else []


@pytest.mark.parametrize("seed", range(12))
def test_pair_memory_is_the_memory_of_each_share_of_the_pairs_layers(seed):
    rng = random.Random(seed)
    p = rng.choice([2, 4, 6, 8])
    n = rng.randint(p + 2, 40)
    line = Pairs(_costs(rng, n), p)
    counts = _random_counts(rng, n, p)
    for r in range(p // 2):
        q = p - 1 - r
        t = counts[r] + counts[q]
        got = DS._pair_memory(line, counts, r)
        assert len(got) == t + 1
        for a in range(1, t):
            trial = list(counts)
            trial[r], trial[q] = a, t - a
            v = line.chunks(bounds_of(trial))
            assert got[a] == float(line.memory(v[r], v[q], r))


@pytest.mark.parametrize("seed", range(30))
def test_lighter_moves_layers_as_the_move_by_move_walk_did(seed):
    """Memory caps between the least and the largest rank memory of random splits, so that some
    pairs move layers and some splits end within the cap, others not."""
    rng = random.Random(100 + seed)
    p = rng.choice([2, 4, 6, 8])
    n = rng.randint(p + 2, 40)
    line = Pairs(_costs(rng, n), p)
    counts = _random_counts(rng, n, p)
    mem = [line.score(_random_counts(rng, n, p))[2] for _ in range(8)] + [line.score(counts)[2]]
    line.memory_cap = rng.uniform(min(mem) * 0.9, max(mem))
    assert DS._lighter(line, counts) == _lighter_reference(line, counts)


def test_lighter_cases_above_move_layers_and_both_outcomes_occur():
    """The cases of the test above are not trivial: layers move, and both outcomes occur."""
    moved = fits = misses = 0
    for seed in range(30):
        rng = random.Random(100 + seed)
        p = rng.choice([2, 4, 6, 8])
        n = rng.randint(p + 2, 40)
        line = Pairs(_costs(rng, n), p)
        counts = _random_counts(rng, n, p)
        mem = [line.score(_random_counts(rng, n, p))[2] for _ in range(8)] + [line.score(counts)[2]]
        line.memory_cap = rng.uniform(min(mem) * 0.9, max(mem))
        out = DS._lighter(line, counts)
        fits += bool(out)
        misses += not out
        moved += bool(out) and out[0] != counts
    assert moved >= 3 and fits >= 3 and misses >= 3


def _back_case(seed: int):
    """Random front runs, back runs taken and caps on a random model (pair r not the innermost)."""
    rng = random.Random(500 + seed)
    p = rng.choice([4, 6, 8])
    n = rng.randint(p + 8, 120)
    line = Pairs(_costs(rng, n), p)
    ref = line.score(_random_counts(rng, n, p))
    caps = (ref[0] * rng.uniform(0.8, 1.2), ref[1] * rng.uniform(0.8, 1.2))
    line.memory_cap = ref[2] * rng.uniform(0.8, 1.5)
    rows = 60
    i0 = np.array([rng.randint(0, n // 4) for _ in range(rows)])
    a = np.array([rng.randint(1, n // 4) for _ in range(rows)])
    j0 = np.array([rng.randint(0, n // 4) for _ in range(rows)])
    top = np.maximum(n - i0 - a - j0 - 1, 1)
    x = line.prefix[i0 + a] - line.prefix[i0]
    return line, x, j0, top, rng.randrange(p // 2 - 1), caps


@pytest.mark.parametrize("seed", range(20))
def test_longest_back_run_is_the_run_by_run_scan(seed):
    """Pairs._longest_back: per front run, the most back layers (1 .. top) whose every shorter run
    keeps the pair within its caps, scanned one run at a time."""
    line, x, j0, top, r, caps = _back_case(seed)
    pre, n = line.prefix, line.n
    got = line._longest_back(x, j0, top, 0.0, r, *caps)
    for k in range(len(x)):
        lead = 0
        for b in range(1, int(top[k]) + 1):
            y = pre[n - j0[k]] - pre[max(n - j0[k] - b, 0)]
            if not bool(line.allowed(x[k], y, r, *caps)):
                break
            lead = b
        assert got[k] == lead


def test_longest_back_cases_above_hold_short_long_and_whole_runs():
    """The cases above are not trivial: runs end within the first width, beyond it, and at ``top``."""
    got = [(line._longest_back(x, j0, top, 0.0, r, *caps), top)
           for line, x, j0, top, r, caps in map(_back_case, range(20))]
    assert sum(int(((g < top) & (g <= 8)).sum()) for g, top in got) > 50
    assert sum(int(((g < top) & (g > 8)).sum()) for g, top in got) > 50
    assert sum(int((g == top).sum()) for g, top in got) > 50


def _per_pass_reference(prof) -> np.ndarray:
    """link_check.comm_seconds' per-pass seconds as it computed them for every row."""
    f = prof.feat[prof.holds]
    comm_f = f[..., FWD][..., link_check._COMM].sum(-1) + f[..., link_check._HIDDEN_F].sum(-1)
    comm_b = f[..., BWD][..., link_check._COMM].sum(-1) + f[..., link_check._HIDDEN_B].sum(-1)
    kinds = np.stack([comm_f, comm_b, comm_b, np.zeros_like(comm_b)], axis=-1).reshape(prof.p, -1)
    fused = (comm_f[:, :, None] + comm_b[:, None, :]).reshape(prof.p, -1)
    return np.concatenate([kinds, fused], axis=1)


@pytest.mark.parametrize("sets", [(), ("parallelism.schedule=1f1b", "parallelism.vpp=1"),
                                  ("parallelism.schedule=zb-h1", "parallelism.vpp=1")])
def test_link_check_per_pass_seconds_are_memoised_per_layout(sets):
    prof = row_profile(load_scenario("llama3-405b-16k", sets))
    got = link_check._per_pass(prof.layout, prof.p)
    assert np.array_equal(got, _per_pass_reference(prof))
    assert got.any()
    assert link_check._per_pass(prof.layout, prof.p) is got          # the second row reads the memo


def test_link_check_memo_never_serves_another_layout_under_the_same_key():
    """After keys.clear() (a long session) an integer key names another layout: the memo's entry
    is used only for the layout it was computed for."""
    prof = row_profile(load_scenario("llama3-405b-16k"))
    link_check._per_pass(prof.layout, prof.p)
    other = dataclasses.replace(prof.layout, feat=prof.layout.feat * 2.0)    # same key, other numbers
    assert other.key == prof.layout.key
    got = link_check._per_pass(other, prof.p)
    assert np.array_equal(got, 2.0 * _per_pass_reference(prof))


def _moved_case(seed: int):
    """A random model (two kinds of layer: many moves tie), split and the valid moves from it."""
    rng = random.Random(700 + seed)
    p = rng.choice([20, 24, 32])
    n = rng.randint(p + 4, 130)
    line = Pairs(_costs(rng, n), p)
    bounds = bounds_of(_random_counts(rng, n, p))
    cand = bounds + DS.boundary_moves(p)
    valid = np.all(cand[:, 1:] > cand[:, :-1], axis=1)
    return rng, line, bounds, cand[valid], DS._near(p)[valid]


@pytest.mark.parametrize("seed", range(12))
def test_moved_maxima_are_the_columns_of_every_move_bit_for_bit(seed):
    """Pairs.maxima_moved prices only the run of chunks a move changes (dualpipe_split._best_move
    with more pairs than a move changes chunks): the largest pair, chunk and rank memory equal
    Pairs.columns of the whole split, to the last bit."""
    _, line, bounds, cand, near = _moved_case(seed)
    got = line.maxima_moved(bounds, cand, near)
    want = line.columns(cand)
    assert len(cand) >= 20
    for g, w in zip(got, want[:3], strict=True):
        assert np.array_equal(g, w)
    assert len(np.unique(got[0])) > 3             # the moves do change the largest pair


def _best_move_reference(line: Pairs, bounds, moves, limit: float, memory_cap: float):
    """dualpipe_split._best_move as it was: every column of every move, lexicographically."""
    cand = bounds + moves
    cand = cand[np.all(cand[:, 1:] > cand[:, :-1], axis=1)]
    cols = line.columns(cand)
    keep = np.flatnonzero((cols[1] <= limit) & (cols[2] <= memory_cap))
    if not len(keep):
        return None
    for col in cols:
        col = col[keep]
        keep = keep[col <= col.min() * (1 + _TOL)]
    return cand[keep[0]]


@pytest.mark.parametrize("seed", range(16))
def test_best_move_is_the_move_every_column_chose(seed):
    """The best move from the cheap maxima, then the sums of squares of the splits still tied,
    is the move of the lexicographic choice over every column (caps from none to tight)."""
    rng, line, bounds, cand, _ = _moved_case(seed)
    cols = line.columns(cand)
    limit = float(np.quantile(cols[1], rng.choice([0.3, 1.0])))
    line.memory_cap = float(np.quantile(cols[2], rng.choice([0.5, 1.0])))
    got = DS._best_move(line, bounds, DS.boundary_moves(line.p), limit, line.memory_cap)
    want = _best_move_reference(line, bounds, DS.boundary_moves(line.p), limit, line.memory_cap)
    assert (got is None and want is None) or np.array_equal(got, want)


def test_best_move_cases_above_tie_on_the_maxima():
    """The cases above are not decided by the largest pair alone: in some, several moves tie on
    all three maxima and the sums of squares choose."""
    tied = 0
    for seed in range(16):
        _, line, bounds, cand, near = _moved_case(seed)
        m = line.maxima_moved(bounds, cand, near)
        keep = np.arange(len(cand))
        for col in m:
            col = col[keep]
            keep = keep[col <= col.min() * (1 + _TOL)]
        tied += len(keep) > 1
    assert tied >= 3


@pytest.mark.parametrize("seed", range(12))
def test_longest_front_run_is_the_run_by_run_scan(seed):
    """Pairs._longest_front: per state, the most front layers (0 .. top) whose every shorter run
    keeps the pair within its caps beside a back run of one layer, scanned one run at a time (what
    fits kept of every front run before: the runs that fit are this prefix)."""
    line, _, j0, _, r, caps = _back_case(seed)
    rng = random.Random(900 + seed)
    pre, n = line.prefix, line.n
    si = np.array([rng.randint(0, n // 4) for _ in range(len(j0))])
    top = np.array([rng.randint(0, n - i - j - 1) for i, j in zip(si, j0, strict=True)])
    got = line._longest_front(si, j0, top, 0.0, 0.0, r, *caps)
    fronts = []
    for k in range(len(si)):
        y = pre[n - j0[k]] - pre[n - j0[k] - 1]
        ok = [bool(line.allowed(pre[si[k] + a] - pre[si[k]], y, r, *caps)) for a in range(1, int(top[k]) + 1)]
        lead = next((a for a, fit in enumerate(ok) if not fit), len(ok))
        assert got[k] == lead
        assert not any(ok[lead:])                 # the runs that fit are a prefix: fits lost none
        fronts.append(lead)
    assert any(0 < f < t for f, t in zip(fronts, top, strict=True))
    assert any(f == t > 0 for f, t in zip(fronts, top, strict=True))


@pytest.mark.parametrize("seed", range(16))
def test_lower_bounds_are_below_every_split_and_fits_answers_as_without_them(seed):
    """Pairs._lower_bounds (fits' shortcut to None): no split's largest pair or chunk is below
    them, and fits gives the split it gives without the shortcut, for caps around the bounds."""
    rng = random.Random(1100 + seed)
    p = rng.choice([2, 4, 6, 8, 16])
    n = rng.randint(p + 2, 60)
    line = Pairs(_costs(rng, n), p)
    pair_lb, chunk_lb = line._lower_bounds()
    for _ in range(40):
        s = line.score(_random_counts(rng, n, p))
        assert s[0] >= pair_lb and s[1] >= chunk_lb
    caught = 0
    for _ in range(6):
        caps = (pair_lb * rng.uniform(0.97, 1.15), chunk_lb * rng.uniform(0.97, 1.3))
        got = line.fits(*caps)
        line._bounds = (-np.inf, -np.inf)                 # the DP alone
        want = line.fits(*caps)
        line._bounds = None
        assert got == want
        caught += line._below_bounds(*caps)
    assert caught < 6


def test_lower_bounds_decide_some_fits_alone_and_are_tight_for_equal_layers():
    """The shortcut is taken (caps below a bound), and for equal layers the pair bound is what the
    best split reaches (most of fits' proofs are then free)."""
    rng = random.Random(5)
    c = _costs(rng, 40)
    c = SplitCosts(np.tile(c.layers[:1], (40, 1)), c.first, c.last, c.sm, (), np.tile(c.held[:1], (40, 1)),
                   c.first_held, c.last_held, c.capacity)
    line = Pairs(c, 8)
    pair_lb, chunk_lb = line._lower_bounds()
    assert line._below_bounds(pair_lb * 0.999, np.inf) and line._below_bounds(np.inf, chunk_lb * 0.999)
    assert not line._below_bounds(pair_lb, chunk_lb)
    best = DS.pair_split(c, 8, 64)
    assert line.score(list(best))[0] == pytest.approx(pair_lb, rel=0.02)
