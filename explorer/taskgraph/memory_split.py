"""A layer split that fits the GPU's memory, when the time-balanced one does not.

The time-balanced split (partition.py, v_split.py) evens the stages' seconds, but a pipeline's
stages do not hold the same activations: under 1F1B stage s keeps p - s micro-batches in flight
(Narayanan et al., SC21, Sec. 2.2.1), under the interleaved schedule the first stage the most chunk
micro-batches, so the first stages run out of memory first.  Practitioners move layers off them:
Llama 3 405B ran "one Transformer layer less on the first and the last stage" to balance memory
(Llama Team 2024, Sec. 3.3.2); ParDNN (Qararyah et al., 2021) and PipeDream's partitioner
(Narayanan et al., SOSP 2019, Sec. 3.1) minimise the slowest stage subject to every stage fitting.

Here the objective is the same — the least (largest stage seconds, largest chunk seconds, sum of
squared stage seconds) among splits whose every stage fits, leaving the memory verdict's headroom
free where some split can (analysis/verdict.py) — searched by local moves: each move shifts a run
of chunk boundaries by one layer (a layer passes from one chunk to another, the chunks between
keep their counts; only a layer leaving a stage that is over, then the slowest stage or the
largest chunk, is tried); the move taken is the one that most reduces the largest excess over
the GPU's memory, then the summed excess (so relieving one of two equally full stages counts),
then, once every stage fits, moves that keep every stage within it while they make the pipeline
faster.  Where every layer holds the same bytes the moves start from a split built to fit
(uniform_split.py); else from two starts, the time-balanced split and Megatron-LM's even one, the
faster result kept.  A local search, not an exact one: tests/test_memory_split.py checks small
cases against exhaustive enumeration (every fitting case found, 67 of 72 optimal, the rest within
6.1 %), and uniform layers on interleaved lines against an exact count of what each stage holds;
when no fitting split is found, the time-balanced split is kept and the run reports that it
does not fit.  It moves layers only when the time-balanced split does not fit: a split that fits
is never second-guessed.

A stage's bytes are those class_memory counts (analysis/memory.py) for the chunks it holds
(:class:`Live`: its local chunks of an interleaved or V placement, both directions' under
Chimera): weights, gradients and optimizer state as ZeRO shards them, the activations at the
peak of its order — the largest dot product of the count vectors it passes through
(schedules/live.py, the registry's own replay) with its chunks' bytes per unit, so the same peak
the memory estimate finds for any split — and one recomputed layer's working set; ZeRO-3's
gathered working set and PipeDream's stashed weight versions are not counted (SplitCosts.held, as
DualPipe's pair split counts them).
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .dualpipe_split import boundary_moves, move_givers
from .line_split import fitting_line
from .live_slots import Live, live_arrays
from .split_cost import SplitCosts, fused_seconds, unit_seconds
from .uniform_split import uniform_fitting_split

# Relative tolerance of every comparison (partition._TOL's): summation noise never decides a move
# nor a fit (a split uniform_split built to fit read 1.8e-15 over its cap, its sums ordered otherwise).
_TOL = 1e-9
# Bytes a split moved for memory leaves free where it can: analysis/verdict.py's headroom (the
# CUDA context and NCCL's initialisation, rounded up; the verdict reads this number).
HEADROOM_GB = 1.0
# Longest run of boundaries one move shifts: a layer passes across up to this many chunks at once.
MAX_RUN = 16


def fit_memory(c: SplitCosts, counts: Sequence[int], live: Live, extras: Sequence[float] | None = None,
               fused: bool = False) -> tuple[int, ...]:
    """``counts`` when every stage fits (or memory is not weighed: infinite capacity), else the
    split the module docstring's moves find whose every stage fits, or ``counts`` when they find
    none.  ``extras``: per chunk, work it does per unit whatever its layers (blocking sends)."""
    counts = tuple(int(x) for x in counts)
    if not np.isfinite(c.capacity) or len(counts) < 2 or len(c.held) != sum(counts):
        return counts
    plan = _Plan(c, live, extras, fused)
    start = np.concatenate(([0], np.cumsum(counts)))[None, :]
    if plan.excess(start)[0] <= plan.cap * _TOL:
        return counts
    # A split moved for memory is one to run: it leaves the verdict's headroom free where some
    # split can (the CUDA context and the allocator's slack, analysis/verdict.py), else it fits.
    # Two starts, the better result kept: the time-balanced split and the even one (Megatron-LM's
    # uniform split, the remainder on the last chunks) — a local search's end depends on its start.
    n, k = len(c.held), len(counts)
    even = np.concatenate(([0], np.cumsum([n // k + (1 if j >= k - n % k else 0) for j in range(k)])))
    full = plan.cap
    for room in (HEADROOM_GB * 1e9, 0.0):
        plan.cap = full - room
        if plan.hopeless():
            continue
        if plan.one_chunk_per_stage:
            bounds = plan.line()
            if bounds is not None:
                return tuple(int(x) for x in np.diff(bounds))
            continue
        found, closest = [], np.inf
        for begin in (start[0], even):
            bounds, left = plan.search(begin)
            closest = min(closest, left)
            if bounds is None:
                break             # the second start only to find a faster split, not a fitting one
            found.append(bounds)
        if not found:
            # The moves stalled over memory.  Where every layer holds the same bytes a split that
            # fits is built directly (uniform_split.py) and the moves, which never leave memory
            # once within it, make it faster.  Only then: the moves from the balanced start give
            # faster pipelines where they reach a fitting split (Llama 3 405B at 80-90 GB: 12.59 s
            # against 12.99-13.03 s from the built split), being nearer the time balance.
            built = plan.built()
            moved = None if built is None else plan.search(built)[0]
            if moved is not None:
                found.append(moved)
        if found:
            best = min(found, key=lambda b: tuple(float(x[0]) for x in plan.columns(b[None, :]))[2:])
            return tuple(int(x) for x in np.diff(best))
        if closest > room:
            break                 # not within the headroom of fitting: the GPU's own bytes will not do
    return counts


class _Plan:
    """Prefix sums of the layers' seconds, state and activation bytes, and what a split costs."""

    def __init__(self, c: SplitCosts, live: Live, extras: Sequence[float] | None, fused: bool) -> None:
        self._c, self._extras, self._fused = c, extras, fused
        self.chunks = k = 1 + max(max(x) for x in live.slots)
        self.n = len(c.held)
        # Prefix sums per layer of (seconds, state bytes, activation bytes per unit); the seconds
        # are filled by _time, when a search needs them.
        self.prefix = np.zeros((self.n + 1, 3))
        self.prefix[1:, 1:] = np.cumsum(c.held, axis=0)
        self._columns = np.ascontiguousarray(self.prefix.T)      # (3, n + 1): what _chunks gathers
        self._scratch = np.empty(0)                               # _chunks' buffers, grown as needed
        self._timed = False
        # Per chunk the ends' work: row 0 seconds (filled by _time, when a search needs it), row 1
        # state bytes, row 2 activation bytes per unit.
        edge = np.zeros((3, k))
        edge[1, 0] += c.first_held[0]
        edge[1, -1] += c.last_held[0]
        edge[2, 0] += c.first_held[1]
        edge[2, -1] += c.last_held[1]
        self.edge = edge
        self.groups, self.vectors, self.mean_vectors = live_arrays(live)
        self._products = np.empty(0)                              # _stages' buffer, grown as needed
        self._padded = bool((self.groups >= k).any())
        self.stages = len(self.groups)
        self.cap = c.capacity - c.transient
        # A chunk shared by two ranks' slots (Chimera's two directions) holds its layers twice.
        self.copies = sum(len(x) for x in live.slots) / k
        # V placements may leave rank 0's two chunks without a layer (v_split.py); lines may not.
        self.least = np.ones(k, dtype=np.int64)
        if live.slots[0][0] == 0 and live.slots[0][-1] == k - 1 and len(live.slots[0]) == 2 and \
                len(live.slots) * 2 == k:
            self.least[0] = self.least[-1] = 0
        self._held = c.held
        self._uniform = bool((c.held == c.held[0]).all())          # equal layers (_relieve_worst)
        self._least_need: tuple[np.ndarray, np.ndarray] | None = None       # hopeless's bound

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
        self.prefix[1:, 0] = np.cumsum(per)
        self._columns = np.ascontiguousarray(self.prefix.T)
        self._timed = True
        self.edge[0] = 0.0 if self._extras is None else np.asarray(self._extras, dtype=float)
        self.edge[0, 0] += first
        self.edge[0, -1] += last

    def _chunks(self, bounds: np.ndarray) -> np.ndarray:
        """Per split (rows of ``bounds``): (3, splits, chunks) each chunk's seconds, state bytes and
        activation bytes per unit (its layers' sums plus its edge work).  Quantity-major, so that
        every gather and difference runs over contiguous rows (strided (splits, chunks, 3) slices
        took most of a search's time)."""
        rows, width = bounds.shape
        size = 3 * rows * width
        if len(self._scratch) < 2 * size:
            # Kept for the plan's next splits: a fresh array of megabytes per call is mapped and
            # faulted in page by page (glibc returns it to the system when freed), which cost
            # several times the arithmetic.
            self._scratch = np.empty(2 * size)
        out = self._scratch[:size].reshape(3, rows, width)
        v = self._scratch[size:size + 3 * rows * (width - 1)].reshape(3, rows, width - 1)
        for i in range(3):
            np.take(self._columns[i], bounds, out=out[i])
        np.subtract(out[:, :, 1:], out[:, :, :-1], out=v)
        v += self.edge[:, None, :]
        return v

    def _stages(self, v: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per split and stage ((splits, stages) each) from the chunks' ``v``: its chunks' seconds and
        state bytes summed, and its activation peak, the largest dot product of its count vectors
        with its chunks' activation bytes (stage-major into kept buffers: a stage may pass through
        tens of count vectors)."""
        if self._padded:                      # a padding slot reads a zero chunk
            v = np.concatenate([v, np.zeros((3, v.shape[1], 1))], axis=2)
        groups = self.groups
        rows = v.shape[1]
        sec = v[0][:, groups[:, 0]]
        state = v[1][:, groups[:, 0]]
        for j in range(1, groups.shape[1]):
            sec = sec + v[0][:, groups[:, j]]
            state = state + v[1][:, groups[:, j]]
        per_chunk = np.ascontiguousarray(v[2].T)                    # (chunks, splits) activation bytes
        vectors = self.vectors                                      # (stages, K, slots)
        S, K, W = vectors.shape
        size = S * K * rows
        if len(self._products) < 2 * size:
            self._products = np.empty(2 * size)
        # (stages, K, splits): the largest over K is an elementwise maximum of rows.  Slot by slot, in
        # order (a matrix product's order varies with the batch: a split reads alike in any batch).
        dots = self._products[:size].reshape(S, K, rows)
        term = self._products[size:2 * size].reshape(S, K, rows)
        np.multiply(vectors[:, :, 0, None], per_chunk[groups[:, 0]][:, None, :], out=dots)
        for j in range(1, W):
            np.multiply(vectors[:, :, j, None], per_chunk[groups[:, j]][:, None, :], out=term)
            dots += term
        return sec, state, dots.max(axis=1).T

    def excess(self, bounds: np.ndarray) -> np.ndarray:
        """Per split (rows of ``bounds``) the largest bytes any stage holds beyond the GPU's, or 0."""
        _, state, peak = self._stages(self._chunks(bounds))
        return np.maximum(state + peak - self.cap, 0.0).max(axis=1)

    def columns(self, bounds: np.ndarray) -> tuple[np.ndarray, ...]:
        """Per split: largest excess over memory, the excesses' sum (a move that relieves one of two
        equally full stages counts), largest stage seconds, largest chunk seconds, sum of squared
        stage seconds (the order moves are compared in)."""
        return self._measured(bounds)[0]

    def _measured(self, bounds: np.ndarray) -> tuple[tuple[np.ndarray, ...], np.ndarray, np.ndarray,
                                                     np.ndarray]:
        """:meth:`columns`, and per split each stage's seconds and bytes and each chunk's seconds
        (what :meth:`_givers` reads: the search keeps the chosen split's instead of pricing it
        again).  The chunks' seconds are a view of the plan's buffers, valid until its next call."""
        if not self._timed:
            self._time()
        v = self._chunks(bounds)
        per, state, peak = self._stages(v)
        held = state + peak
        beyond = np.maximum(held - self.cap, 0.0)
        cols = (beyond.max(axis=1), beyond.sum(axis=1), per.max(axis=1), v[0].max(axis=1),
                (per * per).sum(axis=1))
        return cols, per, held, v[0]

    def hopeless(self) -> bool:
        """True when no split can fit, by a bound: a stage of L layers holds at least L of the
        lightest layer's state (plus the ends' on the stages of the first and last chunk) and, for
        each count vector x over its slots (and their mean), the activations of at least
        sum_j x_j least_j + min_j x_j (L - sum_j least_j) lightest layers (each slot holds at least
        its least layers); the
        most layers each stage can so hold must add up to the model's (twice under two
        directions)."""
        if self._least_need is None:
            self._least_need = self._lower_bounds()
        need, floor = self._least_need
        ok = need <= self.cap
        if not ok[:, 0].all():
            return True
        most = ok.sum(axis=1) - 1                  # need grows with L: the feasible L are 0..most
        return bool((most < floor).any() or most.sum() < self.n * self.copies)

    def _lower_bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`hopeless`'s bound, whatever the cap: (stages, n + 1) the least bytes a stage of L
        layers holds, and (stages,) the layers its chunks hold at least (the plan's two rooms
        read them both)."""
        w, a = float(self._held[:, 0].min()), float(self._held[:, 1].min())
        real = self.groups < self.chunks                               # (stages, width)
        at = np.minimum(self.groups, self.chunks - 1)
        ends = np.where(real, self.edge[1, at], 0.0).sum(axis=1)
        least = np.where(real, self.least[at], 0)                      # (stages, width)
        floor = least.sum(axis=1)
        # Each vector, and their mean (any convex combination of them bounds the maximum too).
        vectors = np.concatenate([self.vectors, self.mean_vectors[:, None, :]], axis=1)
        vec = np.where(real[:, None, :], vectors, np.inf).min(axis=2)               # (stages, K + 1)
        fixed = (vectors * least[:, None, :]).sum(axis=2)                           # (stages, K + 1)
        L = np.arange(self.n + 1)[None, None, :]
        act = a * (fixed[:, :, None] + vec[:, :, None] * np.maximum(L - floor[:, None, None], 0))
        return ends[:, None] + L[0] * w + act.max(axis=1), floor

    def built(self) -> np.ndarray | None:
        """uniform_split's fitting split under the current cap, as bounds; None when the layers
        differ in bytes or it finds none."""
        if not self._timed:
            self._time()
        return uniform_fitting_split(self._held, np.diff(self.prefix[:, 0]), self.edge, self.groups,
                                     self.vectors, self.least, self.cap)

    @property
    def one_chunk_per_stage(self) -> bool:
        """Stage s holds chunk s alone (1F1B, GPipe, ZB-H1/H2, 2BW): :meth:`line` is exact."""
        return self.groups.shape[1] == 1 and bool((self.groups[:, 0] == np.arange(self.stages)).all())

    def line(self) -> np.ndarray | None:
        """One chunk per stage: the split of least largest chunk seconds whose every chunk fits, or
        None (line_split.fitting_line, exact)."""
        if not self._timed:
            self._time()
        return fitting_line(self.prefix, self.edge, self.vectors[:, :, 0].max(axis=1), self.least, self.cap)

    def _givers(self, per: np.ndarray, held: np.ndarray, chunk: np.ndarray, fitting: bool) -> np.ndarray:
        """The chunks a move may take a layer from: those of the stages over memory while some
        are (``fitting``), else those of the slowest stages and the largest chunk (``per``,
        ``held``: one split's stage seconds and bytes; ``chunk``: its chunks' seconds)."""
        if fitting:
            stages = np.flatnonzero(held > self.cap)
            extra: list[int] = []
        else:
            stages = np.flatnonzero(per >= per.max() * (1 - _TOL))
            extra = [int(np.argmax(chunk))]
        chunks = self.groups[stages].ravel()
        return np.concatenate([chunks[chunks < self.chunks], extra]).astype(np.int64)

    def search(self, bounds: np.ndarray) -> tuple[np.ndarray | None, float]:
        """The bounds after the moves (module docstring), or None when no stage-fitting split was
        reached; and the largest excess over memory where the moves ended."""
        k = self.chunks
        run = min(MAX_RUN if k <= 32 else MAX_RUN // 2, k - 1)
        moves, giver = boundary_moves(k, run), move_givers(k, run)
        cols, per, held, chunk = self._measured(bounds[None, :])
        current = tuple(float(x[0]) for x in cols)
        state = (per[0], held[0], chunk[0].copy())            # the current split's, for _givers
        for _ in range(4 * self.n + 16):
            fitting = current[0] > self.cap * _TOL
            picked = self._relieve_worst(bounds, moves, giver, state[1], current) \
                if fitting and self._uniform else None
            if picked is None:
                # Only a layer leaving a chunk of a stage that is over (then: of the slowest stage,
                # or the largest chunk) can lower what the moves are compared by first.
                takes = self._taking(giver, self._givers(*state, fitting))
                picked = self._pick(bounds + moves[takes], current)
            if picked is None or not _better(picked[1], current, self.cap):
                break
            bounds, current, state = picked
        return (bounds if current[0] <= self.cap * _TOL else None), current[0]

    def _taking(self, giver: np.ndarray, chunks: np.ndarray) -> np.ndarray:
        """Which moves (their ``giver``) take a layer from one of ``chunks`` (np.isin's answer, by a
        table of the plan's chunks)."""
        among = np.zeros(self.chunks, dtype=bool)
        among[chunks] = True
        return among[giver]

    def _pick(self, cand: np.ndarray, current: tuple[float, ...]) -> tuple | None:
        """The move the module docstring takes among the splits ``cand``: its bounds, columns and
        (stage seconds, stage bytes, chunk seconds); None when no candidate is left."""
        cand = cand[np.all(np.diff(cand, axis=1) >= self.least, axis=1)]
        if not len(cand):
            return None
        cols, per, held, chunk = self._measured(cand)
        keep = np.arange(len(cand))
        if current[0] > self.cap * _TOL:     # first fit: the move that most reduces the excess
            for col in cols[:2]:
                x = col[keep]
                keep = keep[x <= x.min() + self.cap * _TOL]
        else:                                # then stay within memory
            keep = keep[cols[0] <= self.cap * _TOL]
        for col in cols[2:]:
            if not len(keep):
                return None
            x = col[keep]
            keep = keep[x <= x.min() * (1 + _TOL)]
        if not len(keep):
            return None
        j = int(keep[0])
        return cand[j], tuple(float(col[j]) for col in cols), (per[j], held[j], chunk[j].copy())

    def _relieve_worst(self, bounds: np.ndarray, moves: np.ndarray, giver: np.ndarray, held: np.ndarray,
                       current: tuple[float, ...]) -> tuple | None:
        """:meth:`_pick` among the moves taking a layer from the fullest stage's chunks, when that
        provably picks the same move, else None: with equal layers a move changes the counts of its
        run's two end chunks only, so the other moves leave that stage as full (to rounding) and
        none of them is kept beside a move that lowers the largest excess by over the tolerance."""
        excess = held - self.cap
        worst = int(np.argmax(excess))
        margin = 2 * self.cap * _TOL
        if len(excess) > 1 and np.partition(excess, -2)[-2] > excess[worst] - margin:
            return None                      # two stages about as full: one move relieves one
        mine = self.groups[worst][self.groups[worst] < self.chunks]
        picked = self._pick(bounds + moves[self._taking(giver, mine)], current)
        if picked is None or picked[1][0] >= current[0] - margin:
            return None
        return picked


def _better(a: tuple[float, ...], b: tuple[float, ...], cap: float) -> bool:
    """``a`` before ``b``: less largest excess, then less summed excess (each by more than the
    tolerance of the GPU's bytes), then, lexicographically with the relative tolerance, the
    seconds."""
    for x, y in zip(a[:2], b[:2], strict=True):
        if x < y - cap * _TOL:
            return True
        if x > y + cap * _TOL:
            return False
    for x, y in zip(a[2:], b[2:], strict=True):
        if x < y * (1 - _TOL):
            return True
        if x > y * (1 + _TOL):
            return False
    return False
