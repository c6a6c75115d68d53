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
    fill = _Fill(w, a, edge, groups, vectors, least, n, cap)

    def most(top: int) -> np.ndarray | None:
        """Step 1 with no chunk above ``top`` layers: per chunk the layers its stages hold."""
        got = fill.most(top)
        if got is None:
            return None
        # A chunk two stages hold (Chimera's two directions) keeps what both fit: fewer layers in
        # a chunk still fit every stage that holds it (closed downwards).
        counts = np.full(chunks, n, dtype=np.int64)
        np.minimum.at(counts, groups[fill.real], got[fill.real])
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


class _Fill:
    """Step 1, each stage on its own (the construction is independent stage by stage)."""

    # Count vectors per stage up to which a stage is filled in plain floats, one stage at a time;
    # more, and every stage at once on arrays (numpy's per-call cost outweighs a few floats'
    # arithmetic, not a stage's tens of vectors).  Both do the same operations in the same order.
    FLOATS_UP_TO = 2

    def __init__(self, w: float, a: float, edge: np.ndarray, groups: np.ndarray, vectors: np.ndarray,
                 least: np.ndarray, n: int, cap: float) -> None:
        chunks = edge.shape[1]
        self.w, self.n, self.cap = w, n, cap
        self.real = groups < chunks                                   # (stages, width)
        at = np.minimum(groups, chunks - 1)
        self.least = np.where(self.real, least[at], 0)
        self.act_edge = np.where(self.real, edge[2, at], 0.0)
        self.state_edge = np.array([edge[1, g[g < chunks]].sum() for g in groups])
        # Padding slots and padding vectors are zeros: they add 0.0 to a sum and never win a max
        # over a stage's own (non-negative) vectors.
        self.vectors = vectors                                        # (stages, K, width)
        self.step = a * vectors                                       # one layer's activations
        self.a = a
        self._floats = vectors.shape[1] <= self.FLOATS_UP_TO
        if self._floats:
            # Per stage: its chunks' slots, its activations per count vector before any layer
            # (slot by slot from zero, as _most_arrays sums them) and one layer's per slot.
            self._slots: list[list[int]] = [np.flatnonzero(r).tolist() for r in self.real]
            start: np.ndarray = np.zeros(vectors.shape[:2])
            for j in range(groups.shape[1]):
                start = start + vectors[:, :, j] * (a * self.least[:, j] + self.act_edge[:, j])[:, None]
            self._start: list[list[float]] = start.tolist()           # (stages, K)
            self._step: list[list[list[float]]] = self.step.transpose(0, 2, 1).tolist()  # (stages, width, K)
            self._least: list[list[int]] = self.least.tolist()
            self._edge: list[float] = self.state_edge.tolist()

    def most(self, top: int) -> np.ndarray | None:
        """(stages, width) the layers each stage's chunks hold after adding, one at a time, the
        layer that raises the stage's bytes least while they stay within the cap and no chunk
        exceeds ``top`` (the chunk with fewer layers, then the earlier one, on a tie); None when
        some stage does not fit even its chunks' least."""
        if not self._floats:
            return self._most_arrays(top)
        out = []
        for s in range(len(self._slots)):
            x = self._stage_most(s, top)
            if x is None:
                return None
            out.append(x)
        return np.array(out, dtype=np.int64)

    def _stage_most(self, s: int, top: int) -> list[int] | None:
        """:meth:`most` of stage ``s`` in plain floats."""
        w, cap, n = self.w, self.cap, self.n
        slots = self._slots[s]
        x = list(self._least[s])
        acts = self._start[s]
        total = sum(x)
        edge = self._edge[s]
        if w * total + edge + max(acts) > cap:
            return None
        step = self._step[s]
        if len(acts) == 1:
            # One count vector: its activations are one float (the max of one sum is that sum).
            act, one = acts[0], [v[0] for v in step]
            while total < n:
                base = w * (total + 1) + edge
                best, least_need = -1, 0.0
                for j in slots:
                    if x[j] < top:
                        need = base + (act + one[j])
                        if need <= cap and (best < 0 or need < least_need or
                                            (need == least_need and x[j] < x[best])):
                            best, least_need = j, need
                if best < 0:
                    break
                x[best] += 1
                total += 1
                act = act + one[best]
            return x
        while total < n:
            base = w * (total + 1) + edge
            best, least_need = -1, 0.0
            for j in slots:
                if x[j] < top:
                    need = base + max([u + v for u, v in zip(acts, step[j], strict=True)])
                    if need <= cap and (best < 0 or need < least_need or
                                        (need == least_need and x[j] < x[best])):
                        best, least_need = j, need
            if best < 0:
                break
            x[best] += 1
            total += 1
            acts = [u + v for u, v in zip(acts, step[best], strict=True)]
        return x

    def _most_arrays(self, top: int) -> np.ndarray | None:
        """:meth:`most` for every stage at once: each round adds to every stage still below its cap
        the layer that raises its bytes least (the same arithmetic, in the same order, as adding
        them one stage at a time)."""
        w, cap, n = self.w, self.cap, self.n
        x = self.least.copy()
        acts = np.zeros(self.vectors.shape[:2])
        for j in range(x.shape[1]):
            acts = acts + self.vectors[:, :, j] * (self.a * x[:, j] + self.act_edge[:, j])[:, None]
        total = x.sum(axis=1)
        if (w * total + self.state_edge + acts.max(axis=1) > cap).any():
            return None
        rows = np.arange(len(x))
        active = total < n
        while active.any():
            need = w * (total + 1)[:, None] + self.state_edge[:, None] + \
                (acts[:, :, None] + self.step).max(axis=1)
            ok = self.real & (x < top) & (need <= cap) & active[:, None]
            has = ok.any(axis=1)
            least_need = np.where(ok, need, np.inf).min(axis=1)
            tie = ok & (need == least_need[:, None])
            fewest = np.where(tie, x, np.iinfo(np.int64).max).min(axis=1)
            j = np.argmax(tie & (x == fewest[:, None]), axis=1)
            s = rows[has]
            j = j[has]
            x[s, j] += 1
            total[s] += 1
            acts[s] = acts[s] + self.step[s, :, j]
            active = has & (total < n)
        return x


def _take_back(counts: np.ndarray, extra: int, per_layer: float, edge_seconds: np.ndarray,
               groups: np.ndarray, least: np.ndarray) -> None:
    """Step 3, in place: remove ``extra`` layers, each from the chunk with the most seconds on the
    stage with the most seconds that still has a chunk above its least."""
    chunks = len(counts)
    real = groups < chunks
    at = np.where(real, groups, chunks)          # padding slots read a zero chunk
    floor = np.append(least, np.iinfo(np.int64).max)
    while extra > 0:
        chunk_s = np.append(counts * per_layer + edge_seconds, 0.0)
        have = np.append(counts, 0)
        above = real & (have[at] > floor[at])                    # (stages, width)
        stage_s = np.where(above.any(axis=1), chunk_s[at].sum(axis=1), -np.inf)
        s = int(np.argmax(stage_s))
        seconds = np.where(above[s], chunk_s[at[s]], -np.inf)
        counts[at[s, int(np.argmax(seconds))]] -= 1
        extra -= 1
