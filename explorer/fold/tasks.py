"""Task identities across micro-batch counts, the proof that one more period was inserted, and
the folded task list that unfolds only when it is read.

A task is identified by what it is (class, stream, kind, chunk, direction, bucket, ...) and the
pipeline unit it belongs to (``mb``, -1 for once-per-iteration tasks).  Two runs that differ by
``shift`` units per lane differ by one inserted period when every task of the larger run is either
*early* — the same unit, the same times and the same binding dependency as in the smaller run — or
*late* — the unit ``shift`` earlier in the smaller run, its times later by exactly ``delta``, its
binding dependency shifted alike (:func:`match_shift`).  Per identity the late units form a
suffix; its first ``shift`` units are the repeated block (they follow early units by one period).
With ``n`` more periods, unit ``x`` of an identity whose late suffix starts at ``split`` is
(:meth:`Period.source`): the same task below ``split``; a copy ``j = (x-split)//shift`` of the block
up to ``split + (n+1)*shift``; the task ``n*shift`` units earlier, ``n`` periods later, beyond.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from ..engine.gc_pause import paused_collector
from ..engine.records import BucketInfo, OverlapInfo, PassInfo, StepInfo, TransferInfo
from ..engine.scheduler import Task

Key = tuple[tuple, int]          # (identity, unit): unit -1 for once-per-iteration tasks


def task_keys(tasks: Sequence[Task]) -> list[Key]:
    """The key of every task, in task order (duplicates of an identity and unit numbered)."""
    out: list[Key] = []
    seen: dict[Key, int] = {}
    append = out.append
    for t in tasks:
        i = t.info
        # A dispatch per task on the payload's type (engine/records.py), most frequent first.
        if isinstance(i, PassInfo):
            # A fused F&B: the backward's unit relative to the forward's, which both shift alike.
            pair = i.pair_mb - i.micro_batch if i.pair_mb >= 0 else None
            key: Key = ((t.cls, t.stream, t.kind, i.chunk, i.pair_chunk, pair), i.micro_batch)
        elif isinstance(i, TransferInfo):
            key = ((t.cls, t.stream, "pp", i.chunk, i.direction, i.pair), i.micro_batch)
        elif isinstance(i, OverlapInfo):
            parent = tasks[t.deps[0][0]].kind if t.deps else ""
            key = ((t.cls, t.stream, "overlap", i.chunk, parent), i.micro_batch)
        elif isinstance(i, BucketInfo):
            key = ((t.cls, t.stream, "bucket", i.chunk, i.dim, i.op, i.layer_rank), -1)
        elif isinstance(i, StepInfo):
            key = ((t.cls, t.stream, "step"), -1)
        else:
            key = ((t.cls, t.stream, t.kind), -1)
        n = seen.get(key)
        if n is None:
            seen[key] = 1
            append(key)
        else:
            seen[key] = n + 1
            append(((*key[0], n), key[1]))
    return out


def shifted(key: Key, units: int) -> Key:
    ident, mb = key
    return (ident, mb + units) if mb >= 0 else key


@dataclass(frozen=True)
class Shift:
    """How a run with one more period relates to the run before (see the module docstring)."""

    delta: float                          # seconds one period adds
    shift: int                            # units per lane one period adds
    late: list[bool]                      # per task of the larger run
    split: dict[tuple, int]               # identity -> first late unit (identities with units)


def match_shift(small: Sequence[Task], big: Sequence[Task], shift: int, tol: float,
                keys: tuple[list[Key], list[Key]] | None = None) -> Shift | None:
    """The inserted period that turns run ``small`` into run ``big`` (``shift`` more units per
    lane), or None when ``big`` is not ``small`` with one period inserted (times within ``tol``
    seconds).  ``keys``: both runs' :func:`task_keys`, when the caller has them already."""
    ks, kb = keys if keys is not None else (task_keys(small), task_keys(big))
    index = dict(zip(ks, range(len(ks)), strict=True))
    delta = max(t.end for t in big) - max(t.end for t in small)
    late: list[bool] = []
    split: dict[tuple, int] = {}
    last_early: dict[tuple, int] = {}

    def same(t: Task, u: Task, d: float) -> bool:
        # Durations within ``tol`` too: a call slowed by a link it shares (engine/sharing.py)
        # lasts end - start, computed at other absolute times in the two runs.
        return (abs(t.start - u.start - d) <= tol and abs(t.end - u.end - d) <= tol
                and abs(t.ready - u.ready - d) <= tol and abs(t.duration - u.duration) <= tol)

    where: dict[Key, int] | None = None

    def tie(t: Task, other: Key | None) -> bool:
        """True when ``other`` (a key of ``big``) ends when ``t``'s binding does: two dependencies
        released ``t`` at the same instant, and which one the engine named is a tie-break, not
        timing (both runs have the same times either way)."""
        nonlocal where
        if other is None or t.binding < 0:
            return False
        if where is None:
            where = dict(zip(kb, range(len(kb)), strict=True))
        k = where.get(other)
        return k is not None and abs(big[k].end - big[t.binding].end) <= tol

    for t, key in zip(big, kb, strict=True):
        ident, mb = key
        j = index.get(key)
        bt = kb[t.binding] if t.binding >= 0 else None
        if j is not None:
            u = small[j]
            # Early: the same times (a float compare first: most early tasks are equal exactly).
            bu = ks[u.binding] if u.binding >= 0 else None
            if ((t.start == u.start and t.end == u.end and t.ready == u.ready and t.duration == u.duration)
                    or same(t, u, 0.0)) and (bt == bu or tie(t, bu)):
                late.append(False)
                if mb >= 0 and last_early.get(ident, -1) < mb:
                    last_early[ident] = mb
                continue
        j = index.get((ident, mb - shift) if mb >= 0 else key)
        if j is None:
            return None
        u = small[j]
        if not same(t, u, delta):
            return None
        bs = ks[u.binding] if u.binding >= 0 else None
        if (bt is None) != (bs is None) or (bt is not None and bs is not None and bt != shifted(bs, shift)
                                             and not tie(t, shifted(bs, shift))):
            return None
        late.append(True)
        if mb >= 0 and split.get(ident, mb) >= mb:
            split[ident] = mb
    # The late units of an identity must be a suffix, and an identity with units must have grown.
    if any(last_early.get(ident, -1) >= first for ident, first in split.items()):
        return None
    if any(ident not in split for ident in last_early):
        return None
    return Shift(delta, shift, late, split)


@dataclass
class FoldedTasks(Sequence[Task]):
    """The task list of the full iteration, held as a reduced run and its period; it unfolds
    (``materialize``) only when read element by element.

    ``tasks``: the largest reduced run; ``fold``: how one period relates it to the run before;
    ``periods``: periods beyond it; ``rebuild``: builds the full task graph (the builder's order,
    dependencies and payloads), whose times are then copied from the reduced run, shifted."""

    tasks: list[Task]
    fold: Shift
    periods: int
    rebuild: Callable[[], list[Task]]                 # the full graph, unscheduled
    keys: list[Key] | None = field(default=None, repr=False)     # task_keys(tasks), when known
    _full: list[Task] | None = field(default=None, repr=False)
    _block: list[int] | None = field(default=None, repr=False)

    @property
    def block(self) -> list[int]:
        """Indices (in ``tasks``) of the repeated block: the first ``shift`` late units per identity
        (computed once, then kept)."""
        if self._block is None:
            if self.keys is None:
                self.keys = task_keys(self.tasks)
            split, shift = self.fold.split, self.fold.shift
            pairs = enumerate(zip(self.keys, self.fold.late, strict=True))
            self._block = [i for i, ((ident, mb), late) in pairs if late and 0 <= mb < split[ident] + shift]
            self.keys = None             # not kept with the result: materialize() makes them again
        return self._block

    def block_span(self) -> tuple[float, float]:
        """Start and end (in the reduced run's time) of the repeated block."""
        block = [self.tasks[i] for i in self.block]
        return min(t.start for t in block), max(t.end for t in block)

    def estimate(self, rows: Callable[[Sequence[Task]], int]) -> int:
        """``rows`` (a count over a task list) of the full list, without unfolding it: the reduced
        run's count plus the block's for every further period."""
        return rows(self.tasks) + self.periods * rows([self.tasks[i] for i in self.block])

    def __len__(self) -> int:
        return len(self.tasks) + self.periods * len(self.block)

    def __getitem__(self, i):
        return self.materialize()[i]

    def __iter__(self) -> Iterator[Task]:
        return iter(self.materialize())

    def source(self, key: Key) -> tuple[Key, int]:
        """The key in the reduced run whose task, ``j`` periods later, is task ``key`` of the full
        run: (key, j)."""
        ident, mb = key
        n, s = self.periods, self.fold.shift
        if mb < 0:
            return key, -1                           # j decided by the task being late or early
        first = self.fold.split.get(ident)
        if first is None or mb < first:
            return key, 0
        if mb < first + (n + 1) * s:
            r = mb - first
            return (ident, first + r % s), r // s
        return (ident, mb - n * s), n

    def materialize(self) -> list[Task]:
        """The full task list: the builder's graph with every task's times taken from its source
        in the reduced run, ``j`` periods later (computed once, then kept)."""
        if self._full is not None:
            return self._full
        with paused_collector():                     # 100k+ live tasks: see explorer/engine/gc_pause.py
            self._full = self._unfold()
        return self._full

    def _unfold(self) -> list[Task]:
        """materialize() without its cache: the full graph rebuilt, every task's times copied."""
        full = self.rebuild()
        keys = task_keys(full)
        where = dict(zip(keys, range(len(keys)), strict=True))
        small_keys = self.keys if self.keys is not None else task_keys(self.tasks)
        small = dict(zip(small_keys, range(len(small_keys)), strict=True))
        d, s, n = self.fold.delta, self.fold.shift, self.periods
        for t, key in zip(full, keys, strict=True):
            src, j = self.source(key)
            i = small[src]
            u = self.tasks[i]
            if j < 0:
                j = n if self.fold.late[i] else 0
            t.ready, t.start, t.end = u.ready + j * d, u.start + j * d, u.end + j * d
            t.binding = where[shifted(small_keys[u.binding], j * s)] if u.binding >= 0 else -1
        return full
