"""uniform_split._Fill fills a stage in plain floats when it passes through few count vectors and
on arrays otherwise (explorer/taskgraph/uniform_split.py): the two do the same operations in the
same order, so every cap on a chunk gives the same layer counts, bit for bit."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from explorer.schedules import registry
from explorer.taskgraph.live_slots import live_arrays
from explorer.taskgraph.split import split_live
from explorer.taskgraph.uniform_split import _Fill


class _Floats(_Fill):
    """A fill in plain floats however many count vectors a stage passes through."""

    FLOATS_UP_TO = 1 << 30


@settings(max_examples=120, deadline=None)
@given(st.sampled_from(["1f1b", "interleaved", "chimera", "zb-v", "v-half", "gpipe"]), st.integers(2, 8),
       st.integers(1, 3), st.integers(0, 40), st.randoms(use_true_random=False))
def test_floats_and_arrays_fill_alike(schedule, p, v, spare, rnd):
    sched = registry.get(schedule)
    v = v if schedule == "interleaved" else 1
    p += p % 2 if schedule == "chimera" else 0          # Chimera pairs its stages
    held = split_live(sched, p, 2 * p, v)
    groups, vectors, _ = live_arrays(held)
    k = 1 + max(max(x) for x in held.slots)
    n = k + spare
    w, a = rnd.uniform(0.5, 1.5), rnd.uniform(0.5, 1.5)
    edge = np.zeros((3, k))
    edge[1:, 0] = rnd.uniform(0, 2), rnd.uniform(0, 2)
    edge[1:, -1] = rnd.uniform(0, 2), rnd.uniform(0, 2)
    least = np.ones(k, dtype=np.int64)
    top = max(sum(x) for vecs in held.vectors for x in vecs)
    cap = rnd.uniform(0.2, 1.2) * n * (w + a * top) / p
    fill = _Fill(w, a, edge, groups, vectors, least, n, cap)
    floats = _Floats(w, a, edge, groups, vectors, least, n, cap)
    for limit in range(1, n + 1):
        want, got = fill._most_arrays(limit), floats.most(limit)
        assert (want is None) == (got is None)
        if want is not None:
            assert got is not None and got.shape == want.shape and (got == want).all()
