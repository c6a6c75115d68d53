"""What each stage does once per iteration beside its passes, as arrays: ZeRO 1-2 parameter
gathers at the start, its gradient buckets on the dp stream, its optimizer step, and ZeRO 1-2
gathers after the step (IterationBuilder._gathers_at_start and _iteration_end).

A bucket task becomes ready when the pass completing its chunk's gradients has produced its share
(``start + frac x duration`` of that pass, PyTorch DDP's overlap) or, without overlap, when the
stage's last pass ends; the dp stream runs them one at a time, the earliest ready first (equal
priorities: engine.run's queue order is priority, ready time, then task order).  The optimizer step
waits for the last pass and every bucket.  ZeRO 1-2 (Rajbhandari et al. SC20) gathers the updated
parameters back: with Megatron's overlap_param_gather (framework profile
``param_gather_overlaps_forward``) every gather is ready at the iteration's start, so the dp stream
runs them first, back to back, and each chunk's first forward waits for its chunk's last gather
(a *gate*); otherwise they follow the step, back to back.  The tasks themselves are the builder's:
its bucket maker (techniques/dp_buckets.dp_tasks) is called once per held chunk on a scratch graph,
and what it returns (seconds, readiness, payload, calls) is kept on the builder.  ZeRO-3's calls
drawn under the passes are not array tasks: they block nothing and start with their pass
(arrays/unfold.copy_times).
Graphs with more than this (compressed gradients, P3 priorities, buckets that slow the pass they
overlap, drawn FSDP calls that outlast their pass) are left to the task fold: :func:`tail`
returns None.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...config.frameworks import profile as framework_profile
from ...engine.records import BucketInfo
from ...engine.scheduler import Task, TaskGraph
from ...taskgraph.builder import IterationBuilder
from ...taskgraph.techniques.dp_buckets import reduce_op
from ...taskgraph.techniques.dp_contention import sm_factor
from ...taskgraph.techniques.fsdp import comm_zero, grad_reduce_overlaps

# Tail.role: what a per-iteration task is.
STEP, BUCKET, GATHER_FIRST, GATHER_AFTER = 0, 1, 2, 3


@dataclass(frozen=True)
class Tail:
    """The per-iteration tasks of every stage: per stage (a block from ``starts[s]``) its gathers
    at the start, its buckets, its optimizer step, then its gathers after the step — the builder's
    order within the stage (the builder makes every stage's start gathers before any pass)."""

    cls: np.ndarray              # (T,) GPU class of each task
    bucket: np.ndarray           # (T,) bool: on the dp stream (a bucket or a gather; else the step)
    role: np.ndarray             # (T,) STEP, BUCKET, GATHER_FIRST or GATHER_AFTER
    chunk: np.ndarray            # (T,) local chunk whose gradients or parameters it carries (-1: a step)
    frac: np.ndarray             # (T,) share of its pass after which a bucket is ready (1 without overlap)
    dur: np.ndarray              # (T,) seconds
    step: np.ndarray             # (p,) index of each stage's optimizer step
    starts: np.ndarray           # (p,) index of each stage's first task
    gates: np.ndarray            # (p * nch,) the last start gather of each chunk (-1: none)
    overlap: bool                # buckets leave during the pass completing their chunk's gradients
    buckets: tuple[Task, ...]    # the builder's dp tasks (buckets and gathers), in order

    def __len__(self) -> int:
        return len(self.cls)

    def gate_ends(self) -> np.ndarray:
        """(p * nch,) when each chunk's start gathers are done (0 without): the gathers of a stage
        run back to back from 0, in order (all are ready at once, engine.run's queue order)."""
        ends = np.zeros(len(self.dur))
        first = self.role == GATHER_FIRST
        for s in range(len(self.starts)):
            mine = np.flatnonzero(first & (self.cls == s))
            ends[mine] = np.cumsum(self.dur[mine])
        return np.where(self.gates >= 0, ends[np.maximum(self.gates, 0)], 0.0)


def tail(b: IterationBuilder) -> Tail | None:
    """The :class:`Tail` of builder ``b`` (kept on it), or None when its graph holds tasks the
    array runs do not (see module docstring)."""
    if "_array_tail" not in b.__dict__:
        b.__dict__["_array_tail"] = _tail(b)
    return b.__dict__["_array_tail"]


def _dp_tasks(b: IterationBuilder, s: int, c: int, op: str, overlap: bool) -> list[Task] | None:
    """The builder's dp tasks of chunk ``c`` on stage ``s`` for ``op`` (buckets ready during a
    backward when ``overlap``), or None when they are not plain buckets of one dependency."""
    g = TaskGraph()
    ready = g.add(Task(s, "compute", "backward", 1.0))
    ids = b._dp(g, s, c, op, [] if overlap else [(ready, 1.0)], ready if overlap else None)
    if len(g.tasks) != 1 + len(ids):
        return None                  # compressor kernels beside the buckets
    out = [g.tasks[i] for i in ids]
    if any(not isinstance(t.info, BucketInfo) or t.priority != 1 or len(t.deps) != 1 for t in out):
        return None                  # P3 priorities reorder the stream
    return out


def _drawn_fsdp_held(b: IterationBuilder, nch: int) -> bool:
    """Whether the ZeRO-3 calls drawn under the passes (builder._fsdp_hidden_task: on the dp
    stream from their pass's start, blocking nothing) each end within their pass, so that none
    waits for the one before and their times follow from the passes' (arrays/unfold.copy_times).
    An input-gradient pass (a split backward) carries the whole backward's hidden seconds and
    may be shorter: such a graph is left to the task fold."""
    kinds = ("F", "B", "Bi") if b.schedule.split_backward else ("F", "B")
    for s in range(b.p):
        for c in range(nch):
            if not any(h > 0 for h in b.chunk_of(s, c).fsdp_hidden):
                continue
            for kind in kinds:
                shape = b._pass_shape(s, c, kind)
                if shape[5] > shape[2]:
                    return False
    return True


def _tail(b: IterationBuilder) -> Tail | None:
    sc = b.sc
    zero = comm_zero(sc)
    overlap = grad_reduce_overlaps(sc)
    if overlap and sm_factor(sc, bool(b.ideal)) > 0:
        return None                      # the buckets would lengthen the pass they overlap
    gathers = zero in (1, 2)
    # builder._gathers_at_start: Megatron's overlap_param_gather issues them at the start.
    first = gathers and sc.communication.dp_overlap and \
        framework_profile(sc.training.framework).param_gather_overlaps_forward
    nch = b.schedule.chunks_per_rank(b.v)
    rows: list[tuple[int, int, int, float, float]] = []          # (class, role, chunk, frac, seconds)
    tasks: list[Task] = []
    step, starts = [], []
    gates = np.full(b.p * nch, -1, np.int64)

    def add(s: int, role: int, c: int, got: list[Task]) -> None:
        for t in got:
            rows.append((s, role, c, t.deps[0][1] if role == BUCKET else 1.0, t.duration))
            tasks.append(t)

    if not _drawn_fsdp_held(b, nch):
        return None
    for s in range(b.p):
        starts.append(len(rows))
        if first:
            for c in range(nch):
                got = _dp_tasks(b, s, c, "all-gather", False)
                if got is None:
                    return None
                add(s, GATHER_FIRST, c, got)
                if got:
                    gates[s * nch + c] = len(rows) - 1
        # FSDP reduces layer by layer, inside the passes; only a two-direction schedule's pair
        # exchange of the shards is a bucket task then (dp_buckets.reduce_op).
        op = reduce_op(sc)
        if op is not None:
            for c in range(nch):
                got = _dp_tasks(b, s, c, op, overlap)
                if got is None:
                    return None
                add(s, BUCKET, c, got)
        step.append(len(rows))
        rows.append((s, STEP, -1, 1.0, b.optimizer_time(s)))
        if gathers and not first:
            for c in range(nch):
                got = _dp_tasks(b, s, c, "all-gather", False)
                if got is None:
                    return None
                add(s, GATHER_AFTER, c, got)
    cls, role, chunk, frac, dur = (np.array(x) for x in zip(*rows, strict=True))
    return Tail(cls, role != STEP, role, chunk, frac.astype(float), dur.astype(float), np.array(step),
                np.array(starts), gates, overlap, tuple(tasks))
