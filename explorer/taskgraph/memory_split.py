"""A layer split that fits the GPU's memory, when the time-balanced one does not.

The time-balanced split (partition.py, v_split.py) evens the stages' seconds, but a pipeline's
stages do not hold the same activations: under 1F1B stage s keeps p - s micro-batches in flight
(Narayanan et al., SC21, Sec. 2.2.1), under the interleaved schedule the first stage the most chunk
micro-batches, so the first stages run out of memory first.  Practitioners move layers off them:
Llama 3 405B ran "one Transformer layer less on the first and the last stage" to balance memory
(Llama Team 2024, Sec. 3.3.2); ParDNN (Qararyah et al., 2021) and PipeDream's partitioner
(Narayanan et al., SOSP 2019, Sec. 3.1) minimise the slowest stage subject to every stage fitting.

Here the objective is the same — the least (largest stage seconds, largest chunk seconds, sum of
squared stage seconds) among splits whose every stage fits — searched by local moves from the
time-balanced split: each move shifts a run of chunk boundaries by one layer (a layer passes
from one chunk to another, the chunks between keep their counts), the move taken is the one that
most reduces the largest excess over the GPU's memory, then, once every stage fits, moves that
keep every stage within it while they make the pipeline faster.  A local search, not an exact one:
it can stop short of a split that fits (tests/test_memory_split.py checks small cases against
exhaustive enumeration); when no fitting split is found, the time-balanced split is kept and the
run reports that it does not fit.

A stage's bytes are those class_memory counts (analysis/memory.py) for its chunks: weights,
gradients and optimizer state as ZeRO shards them, the activations of the schedule's in-flight
units (registry ``in_flight``) — of its largest chunk when a stage holds several (interleaved, V:
an upper bound; exact with one chunk per stage or chunks of equal bytes) — and one recomputed
layer's working set; ZeRO-3's gathered working set and PipeDream's stashed weight versions are
not counted (SplitCosts.held, as DualPipe's pair split counts them).
"""
from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

import numpy as np

from .split_cost import SplitCosts, fused_seconds, unit_seconds

# Relative tolerance of every comparison (partition._TOL's): summation noise never decides a move.
_TOL = 1e-9
# Longest run of boundaries one move shifts: a layer passes across up to this many chunks at once.
MAX_RUN = 16


@lru_cache(maxsize=256)
def stage_of_chunks(chunks: int, stages: int, v_shape: bool) -> tuple[int, ...]:
    """The stage (rank) of each chunk: chunk k on k mod stages (one direction, interleaved: SC21
    Sec. 2.2.2), or on min(k, 2p-1-k) for a V of 2p chunks (Qi et al. 2024, Sec. 3)."""
    if v_shape:
        return tuple(min(k, chunks - 1 - k) for k in range(chunks))
    return tuple(k % stages for k in range(chunks))


def fit_memory(c: SplitCosts, counts: Sequence[int], stage_of: Sequence[int], in_flight: Sequence[int],
               extras: Sequence[float] | None = None, fused: bool = False) -> tuple[int, ...]:
    """``counts`` when every stage fits (or memory is not weighed: infinite capacity), else the
    split the module docstring's moves find whose every stage fits, or ``counts`` when they find
    none.  ``in_flight[s]``: the units of a chunk's activations stage s holds at its peak;
    ``extras``: per chunk, work it does per unit whatever its layers (blocking sends)."""
    counts = tuple(int(x) for x in counts)
    if not np.isfinite(c.capacity) or len(counts) < 2 or len(c.held) != sum(counts):
        return counts
    plan = _Plan(c, stage_of, in_flight, extras, fused)
    start = np.concatenate(([0], np.cumsum(counts)))[None, :]
    if plan.excess(start)[0] <= 0.0 or plan.hopeless():
        return counts
    bounds = plan.search(start[0])
    return counts if bounds is None else tuple(int(x) for x in np.diff(bounds))


class _Plan:
    """Prefix sums of the layers' seconds, state and activation bytes, and what a split costs."""

    def __init__(self, c: SplitCosts, stage_of: Sequence[int], in_flight: Sequence[int],
                 extras: Sequence[float] | None, fused: bool) -> None:
        self._c, self._extras, self._fused = c, extras, fused
        self.chunks = k = len(stage_of)
        self.n = len(c.held)
        self.state = np.concatenate(([0.0], np.cumsum(c.held[:, 0])))
        self.act = np.concatenate(([0.0], np.cumsum(c.held[:, 1])))
        # Per chunk the ends' work: row 0 seconds (filled by _time, when a search needs it), row 1
        # state bytes, row 2 activation bytes per unit.
        edge = np.zeros((3, k))
        edge[1, 0] += c.first_held[0]
        edge[1, -1] += c.last_held[0]
        edge[2, 0] += c.first_held[1]
        edge[2, -1] += c.last_held[1]
        self.edge = edge
        self.stages = int(max(stage_of)) + 1
        self.groups = _groups(tuple(stage_of))
        self.in_flight = np.asarray(in_flight, dtype=float)[:self.stages]
        self.cap = c.capacity - c.transient
        # V placements may leave rank 0's two chunks without a layer (v_split.py); lines may not.
        self.least = np.ones(k, dtype=np.int64)
        if len(set(stage_of)) < k and stage_of[0] == stage_of[-1]:
            self.least[0] = self.least[-1] = 0
        self._held = c.held
        self.seconds = np.zeros(0)

    def _time(self) -> None:
        """The layers' seconds as prefix sums and the ends' (and sends') seconds per chunk: what a
        search compares splits by once memory is settled (priced only for a search)."""
        c = self._c
        if self._fused:       # DualPipeV weighs a layer by its fused F&B (v_split.py)
            per = fused_seconds(c.layers, c.layers, c.sm)
            first = float(fused_seconds(c.first, c.first, c.sm))
            last = float(fused_seconds(c.last, c.last, c.sm))
        else:
            per = unit_seconds(c.layers, c.sm)
            first, last = float(unit_seconds(c.first, c.sm)), float(unit_seconds(c.last, c.sm))
        self.seconds = np.concatenate(([0.0], np.cumsum(per)))
        self.edge[0] = 0.0 if self._extras is None else np.asarray(self._extras, dtype=float)
        self.edge[0, 0] += first
        self.edge[0, -1] += last

    def _chunks(self, bounds: np.ndarray, prefix: np.ndarray, row: int) -> np.ndarray:
        """(splits, chunks + 1) per chunk the sum of ``prefix``'s column plus its edge work, and a
        zero column (the padding of :attr:`groups`)."""
        v = prefix[bounds[:, 1:]] - prefix[bounds[:, :-1]] + self.edge[row]
        return np.concatenate([v, np.zeros((len(v), 1))], axis=1)

    def excess(self, bounds: np.ndarray) -> np.ndarray:
        """Per split (rows of ``bounds``) the largest bytes any stage holds beyond the GPU's, or 0."""
        state = self._chunks(bounds, self.state, 1)[:, self.groups].sum(axis=2)
        peak = self._chunks(bounds, self.act, 2)[:, self.groups].max(axis=2)
        mem = state + self.in_flight * peak
        return np.maximum(mem.max(axis=1) - self.cap, 0.0)

    def columns(self, bounds: np.ndarray) -> tuple[np.ndarray, ...]:
        """Per split: largest excess over memory, largest stage seconds, largest chunk seconds,
        sum of squared stage seconds (the order moves are compared in)."""
        if not len(self.seconds):
            self._time()
        cc = self._chunks(bounds, self.seconds, 0)
        per = cc[:, self.groups].sum(axis=2)
        return self.excess(bounds), per.max(axis=1), cc.max(axis=1), (per * per).sum(axis=1)

    def hopeless(self) -> bool:
        """True when no split can fit, by a bound: a stage of L layers in its c chunks holds at
        least L of the lightest layer's state (plus the ends' on the stages of the first and last
        chunk) and, per unit in flight, its largest chunk's activations — at least ceil(L / c) of
        the lightest layer's, and at least an end's; the most layers each stage can so hold must
        add up to the model's."""
        w, a = float(self._held[:, 0].min()), float(self._held[:, 1].min())
        real = self.groups < self.chunks                               # (stages, width)
        n_chunks = real.sum(axis=1)
        ends = np.where(real, self.edge[1, np.minimum(self.groups, self.chunks - 1)], 0.0).sum(axis=1)
        end_act = np.where(real, self.edge[2, np.minimum(self.groups, self.chunks - 1)], 0.0).max(axis=1)
        least = np.where(real, self.least[np.minimum(self.groups, self.chunks - 1)], 0).sum(axis=1)
        L = np.arange(self.n + 1)[None, :]
        peak = np.maximum(np.ceil(L / n_chunks[:, None]) * a, end_act[:, None])
        need = ends[:, None] + L * w + self.in_flight[:, None] * peak          # (stages, n + 1)
        ok = need <= self.cap
        if not ok[:, 0].all():
            return True
        most = ok.sum(axis=1) - 1                  # need grows with L: the feasible L are 0..most
        return bool((most < least).any() or most.sum() < self.n)

    def search(self, bounds: np.ndarray) -> np.ndarray | None:
        """The bounds after the moves (module docstring), or None when no stage-fitting split was
        reached."""
        k = self.chunks
        moves = _moves(k, min(MAX_RUN if k <= 32 else MAX_RUN // 2, k - 1))
        current = tuple(float(x[0]) for x in self.columns(bounds[None, :]))
        for _ in range(4 * self.n + 16):
            cand = bounds + moves
            sizes = np.diff(cand, axis=1)
            ok = np.all(sizes >= self.least, axis=1)
            if not ok.any():
                break
            cand = cand[ok]
            cols = self.columns(cand)
            keep = np.arange(len(cand))
            if current[0] > 0.0:                 # first fit: the move that most reduces the excess
                x = cols[0]
                keep = keep[x <= x.min() + self.cap * _TOL]
            else:                                # then stay within memory
                keep = keep[cols[0] <= 0.0]
            for col in cols[1:]:
                if not len(keep):
                    break
                x = col[keep]
                keep = keep[x <= x.min() * (1 + _TOL)]
            if not len(keep):
                break
            j = int(keep[0])
            got = tuple(float(col[j]) for col in cols)
            if not _better(got, current, self.cap):
                break
            bounds, current = cand[j], got
        return bounds if current[0] <= 0.0 else None


def _better(a: tuple[float, ...], b: tuple[float, ...], cap: float) -> bool:
    """``a`` before ``b``: less excess (by more than the tolerance of the GPU's bytes), then,
    lexicographically with the relative tolerance, the seconds."""
    if a[0] < b[0] - cap * _TOL:
        return True
    if a[0] > b[0] + cap * _TOL:
        return False
    for x, y in zip(a[1:], b[1:], strict=True):
        if x < y * (1 - _TOL):
            return True
        if x > y * (1 + _TOL):
            return False
    return False


_MOVES: dict[tuple[int, int], np.ndarray] = {}


@lru_cache(maxsize=256)
def _groups(stage_of: tuple[int, ...]) -> np.ndarray:
    """(stages, width) each stage's chunks as indices, padded with len(stage_of) — a column of
    zeros in _Plan._chunks — so a stage's sums and maxima are gathers, not a mask."""
    k = len(stage_of)
    per_stage = [[c for c, s in enumerate(stage_of) if s == st] for st in range(max(stage_of) + 1)]
    width = max(len(x) for x in per_stage)
    return np.array([x + [k] * (width - len(x)) for x in per_stage], dtype=np.int64)


def _moves(chunks: int, run: int) -> np.ndarray:
    """(moves, chunks + 1) every run of up to ``run`` inner boundaries k1..k2 shifted one layer
    either way (memoised)."""
    got = _MOVES.get((chunks, run))
    if got is None:
        rows = []
        for k1 in range(1, chunks):
            for k2 in range(k1, min(chunks, k1 + max(run, 1))):
                for d in (1, -1):
                    r = np.zeros(chunks + 1, np.int64)
                    r[k1:k2 + 1] = d
                    rows.append(r)
        got = _MOVES[(chunks, run)] = np.array(rows, np.int64).reshape(-1, chunks + 1)
    return got
