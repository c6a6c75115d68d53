"""A fitting layer split built directly, for models whose layers all hold the same bytes.

memory_split.fit_memory's local moves start from the time-balanced split and shift one layer at a
time towards a split that fits; on long interleaved lines (32-128 chunks) they can stall with some
stage still over although a fitting split exists.  When every layer holds the same state and the
same activation bytes per unit (a dense transformer's identical blocks), a stage's bytes depend
only on how many layers each of its chunks holds, not on which:

    bytes(x) = w * sum(x) + state of its edge work + max_v  v . (a * x + activations of its edges)

with x its chunks' layer counts, w and a one layer's state and activation bytes per unit, and v
the count vectors its order passes through (schedules/live.py).  Stages are then independent, and
every coefficient is non-negative, so a stage that fits with x fits with fewer layers in any
chunk: the fitting counts of a stage are closed downwards.  Hence the construction:

1. per stage, as many layers as fit, added one at a time to the chunk whose layer raises the
   stage's bytes least (the chunk with fewer layers on a tie);
2. if the stages together hold fewer layers than the model has, no split is found here;
3. else layers are taken back, one at a time, from the chunk with the most seconds on the stage
   with the most seconds (among chunks above their least), until the model's count is left —
   the stage seconds a layer split is judged by evened as far as the capacities let.

The result fits by construction (a subset of what fit) and is where fit_memory's moves start to
make the pipeline faster while every stage stays within memory.  Step 1 is greedy, so a stage of
several chunks may hold a layer less than it could; tests/test_memory_split.py checks the
construction against an exact count of every stage's fitting counts.
"""
from __future__ import annotations

import numpy as np

# Relative tolerance of "all layers hold the same bytes".
_TOL = 1e-9


def uniform_fitting_split(held: np.ndarray, seconds: np.ndarray, edge: np.ndarray, groups: np.ndarray,
                          vectors: np.ndarray, least: np.ndarray, cap: float) -> np.ndarray | None:
    """Chunk bounds (length chunks + 1, from 0 to the layer count) of a split whose every stage
    fits in ``cap`` bytes, or None when the layers differ in bytes or the construction finds none.

    ``held`` (layers, 2): each layer's state bytes and activation bytes per unit; ``seconds``
    (layers,): each layer's seconds per unit; ``edge`` (3, chunks): each chunk's edge seconds,
    state and activation bytes; ``groups`` (stages, width): each stage's chunks, padded with the
    chunk count; ``vectors`` (stages, K, width): its count vectors; ``least`` (chunks,): the
    fewest layers each chunk may hold."""
    n, chunks = len(held), edge.shape[1]
    if n == 0 or not np.allclose(held, held[0], rtol=_TOL, atol=0.0):
        return None
    w, a = float(held[0, 0]), float(held[0, 1])
    slots = [g[g < chunks] for g in groups]

    def most(top: int) -> np.ndarray | None:
        """Step 1 with no chunk above ``top`` layers: per chunk the layers its stages hold."""
        counts = np.full(chunks, n, dtype=np.int64)
        for s, x in enumerate(slots):
            got = _stage_most(w, a, edge[1, x].sum(), edge[2, x], vectors[s][:, :len(x)], least[x],
                              n, cap, top)
            if got is None:
                return None
            # A chunk two stages hold (Chimera's two directions) keeps what both fit: fewer
            # layers in a chunk still fit every stage that holds it (closed downwards).
            counts[x] = np.minimum(counts[x], got)
        return counts

    # The least cap on a chunk's layers under which the stages still hold the model (bisection:
    # what they hold grows with the cap) — the chunks as even as memory lets, which an
    # interleaved pipeline's warm-up and cool-down are timed by, not only its stages.
    lo, hi = max(-(-n // chunks), int(least.max())), n
    counts = most(hi)
    if counts is None or counts.sum() < n:
        return None
    while lo < hi:
        mid = (lo + hi) // 2
        got = most(mid)
        if got is not None and got.sum() >= n:
            counts, hi = got, mid
        else:
            lo = mid + 1
    _take_back(counts, int(counts.sum()) - n, float(np.mean(seconds)), edge[0], groups, least)
    return np.concatenate(([0], np.cumsum(counts)))


def _stage_most(w: float, a: float, state_edge: float, act_edge: np.ndarray, vecs: np.ndarray,
                least: np.ndarray, n: int, cap: float, top: int) -> np.ndarray | None:
    """Step 1 for one stage: its chunks' counts after adding, one layer at a time, the layer that
    raises its bytes least while they stay within ``cap`` (None when even ``least`` does not)."""
    # Plain floats: a stage has a few chunks and count vectors, where numpy's per-call cost
    # would dominate.  ``acts`` holds each vector's activation bytes at the current counts.
    x = [int(v) for v in least]
    vl = vecs.tolist()
    acts = [sum(v[j] * (a * x[j] + float(act_edge[j])) for j in range(len(x))) for v in vl]
    total = sum(x)
    if w * total + state_edge + max(acts) > cap:
        return None
    while total < n:
        best: tuple[float, int, int] | None = None
        for j in range(len(x)):
            if x[j] >= top:
                continue
            need = w * (total + 1) + state_edge + max(b + a * v[j] for b, v in zip(acts, vl, strict=True))
            # Least bytes first, then the chunk with fewer layers, then the earlier chunk.
            if need <= cap and (best is None or (need, x[j]) < best[:2]):
                best = (need, x[j], j)
        if best is None:
            break
        j = best[2]
        x[j] += 1
        total += 1
        acts = [b + a * v[j] for b, v in zip(acts, vl, strict=True)]
    return np.array(x, dtype=np.int64)


def _take_back(counts: np.ndarray, extra: int, per_layer: float, edge_seconds: np.ndarray,
               groups: np.ndarray, least: np.ndarray) -> None:
    """Step 3, in place: remove ``extra`` layers, each from the chunk with the most seconds on the
    stage with the most seconds that still has a chunk above its least."""
    chunks = len(counts)
    slots = [g[g < chunks] for g in groups]
    while extra > 0:
        chunk_s = counts * per_layer + edge_seconds
        stage_s = np.array([chunk_s[x].sum() if (counts[x] > least[x]).any() else -np.inf for x in slots])
        x = slots[int(np.argmax(stage_s))]
        spare = x[counts[x] > least[x]]
        counts[spare[int(np.argmax(chunk_s[spare]))]] -= 1
        extra -= 1
