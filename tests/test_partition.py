"""The layer split's search (explorer/taskgraph/partition.py) against its plain reference.

The least feasible cap is found from a window of candidate chunk costs in a dozen greedy probes;
the plain bisection on the cap (``_bisect``, some forty probes) is the reference, and the split
each cap gives must be the same.  The interleaved split's pick among trials (``_first_best``) must
be the left-to-right scan with ``_better`` it inlines.
"""
from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from explorer.taskgraph import partition as P


def _layers(rng: random.Random, n: int) -> list[float]:
    """Costs of the kinds real models have: uniform, two kinds (dense then MoE), few values, noise."""
    kind = rng.random()
    if kind < 0.4:
        return [rng.choice([1.0, 0.37, 3.3e-3, 12.5])] * n
    if kind < 0.6:
        k = rng.randint(0, n)
        return [rng.uniform(0.1, 2)] * k + [rng.uniform(0.1, 2)] * (n - k)
    if kind < 0.8:
        return [rng.choice([1.0, 2.0, 0.5]) for _ in range(n)]
    return [rng.uniform(0.01, 3) for _ in range(n)]


def _case(seed: int) -> tuple[list[float], int, float, float]:
    rng = random.Random(seed)
    n = rng.randint(2, 160)
    costs = _layers(rng, n)
    chunks = rng.randint(2, n)
    edge = [0.0, rng.uniform(0, 3), float(rng.randint(0, 3)), 0.5]
    return costs, chunks, rng.choice(edge) * costs[0], rng.choice(edge) * costs[-1]


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.integers(0, 2**31))
def test_least_cap_gives_the_split_the_bisection_gives(seed):
    costs, chunks, first, last = _case(seed)
    line = P._Line.of(costs, chunks, first, last)
    lo, hi = max(max(costs), first, last), (line.prefix[-1] + first + last) * (1 + 1e-6)
    ref = P._bisect(line, lo, hi)
    got = P._least_cap(line, lo, hi, max(costs))
    assert abs(got / ref - 1) < 1e-11
    assert line.greedy(got * (1 + P._TOL)) == line.greedy(ref * (1 + P._TOL))


def test_least_cap_on_uniform_layers_is_the_balanced_cap():
    # 126 equal layers on 16 chunks, no edge work: 8 layers on the largest chunk (126 = 14 x 8 + 2 x 7).
    line = P._Line.of([1.0] * 126, 16, 0.0, 0.0)
    cap = P._least_cap(line, 1.0, 126 * (1 + 1e-6), 1.0)
    assert cap == pytest.approx(8.0, rel=1e-9)
    assert max(line.greedy(cap * (1 + P._TOL))) == 8


def _scan(columns: list[list[float]]) -> int:
    """The reference pick: a left-to-right scan replacing the kept trial when _better."""
    keep = 0
    for t in range(1, len(columns[0])):
        if P._better(tuple(c[t] for c in columns), tuple(c[keep] for c in columns)):
            keep = t
    return keep


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.lists(st.tuples(st.sampled_from([1.0, 1.0 + 5e-10, 1.0 - 5e-10, 2.0, 0.5, 1.0 + 3e-9]),
                          st.sampled_from([3.0, 3.0 + 2e-9, 2.0, 4.0]),
                          st.sampled_from([1.0, 1.0 - 4e-10, 0.9])), min_size=1, max_size=40))
def test_first_best_is_the_scan_with_better(scores):
    columns = [list(c) for c in zip(*scores, strict=True)]
    assert P._first_best(*columns) == _scan(columns)


def test_one_chunk_holds_every_layer():
    assert P.split_layers([1.0, 2.0, 3.0], 1, 5.0, 7.0) == (3,)
    assert P.split_layers([1.0] * 126, 1, 0.0, 0.0, stages=1) == (126,)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(st.integers(0, 2**31))
def test_round_scores_are_score_to_the_last_bit(seed):
    # _spread scores every trial at once; its rounds and stage totals must be _score's own floats
    # (equal, not close), so that the pick cannot depend on which path scored it.
    rng = random.Random(seed)
    stages = rng.randint(1, 16)
    chunks = rng.randint(stages + 1, 8 * stages)          # a multiple of stages or a ragged last round
    n = chunks + rng.randint(0, 3 * chunks)
    costs = _layers(rng, n)
    line = P._Line.of(costs, chunks, rng.uniform(0, 2), rng.uniform(0, 2))
    trials = []
    for _ in range(rng.randint(1, 6)):
        cuts = sorted(rng.sample(range(1, n), chunks - 1))
        trials.append([b - a for a, b in zip([0, *cuts], [*cuts, n], strict=True)])
    cc = np.array([line.chunk_costs(t) for t in trials])
    rounds, per = P._round_scores(cc, stages)
    for k, t in enumerate(trials):
        ref_rounds, ref_stage, _ = P._score(line, t, stages)
        assert rounds[k] == ref_rounds
        assert per[k].max() == ref_stage


def _spread_reference(line, base, spare, stages):
    """_spread as its docstring says, one scalar _score per trial and the _better scan."""
    out, free = list(base), list(range(line.chunks))
    for _ in range(spare):
        scores = []
        for f in free:
            trial = list(out)
            trial[f] += 1
            scores.append(P._score(line, trial, stages))
        keep = 0
        for t in range(1, len(scores)):
            if P._better(scores[t], scores[keep]):
                keep = t
        out[free[keep]] += 1
        del free[keep]
    return out


@settings(max_examples=200, deadline=None, derandomize=True)
@given(st.integers(0, 2**31))
def test_spread_picks_what_scoring_each_trial_alone_picks(seed):
    rng = random.Random(seed)
    stages = rng.randint(1, 12)
    chunks = stages * rng.randint(2, 4)
    base_layers = rng.randint(1, 3)
    spare = rng.randint(0, chunks)
    n = chunks * base_layers + spare
    line = P._Line.of(_layers(rng, n), chunks, rng.choice([0.0, 0.5, 2.0]), rng.choice([0.0, 0.5, 3.0]))
    base = [base_layers] * chunks
    assert P._spread(line, base, spare, stages) == _spread_reference(line, base, spare, stages)
