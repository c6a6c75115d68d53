"""What each stage does once per iteration after its passes, as arrays: its gradient buckets on the
dp stream, then its optimizer step (IterationBuilder._iteration_end).

A bucket task becomes ready when the pass completing its chunk's gradients has produced its share
(``start + frac x duration`` of that pass, PyTorch DDP's overlap) or, without overlap, when the
stage's last pass ends; the dp stream runs them one at a time, the earliest ready first (equal
priorities: engine.run's queue order is ready time, then task order).  The optimizer step waits
for the last pass and every bucket.  The buckets themselves are the builder's: its bucket maker
(techniques/dp_buckets.dp_tasks) is called once per held chunk on a scratch graph, and what it
returns (seconds, readiness, payload, calls) is kept on the builder.  Graphs with more than this
(ZeRO 1-2 parameter gathers, compressed gradients, P3 priorities, FSDP calls drawn under passes,
buckets that slow the pass they overlap) are left to the task fold: :func:`tail` returns None.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...engine.records import BucketInfo
from ...engine.scheduler import Task, TaskGraph
from ...taskgraph.builder import IterationBuilder
from ...taskgraph.techniques.dp_contention import sm_factor
from ...taskgraph.techniques.fsdp import comm_zero, grad_reduce_overlaps


@dataclass(frozen=True)
class Tail:
    """The per-iteration tasks of every stage, in the builder's order: per stage its buckets, then
    its optimizer step."""

    cls: np.ndarray              # (T,) GPU class of each task
    bucket: np.ndarray           # (T,) bool: a gradient bucket (else the optimizer step)
    chunk: np.ndarray            # (T,) local chunk whose gradients a bucket carries (-1: a step)
    frac: np.ndarray             # (T,) share of its pass after which a bucket is ready (1 without overlap)
    dur: np.ndarray              # (T,) seconds
    step: np.ndarray             # (p,) index of each stage's optimizer step
    overlap: bool                # buckets leave during the pass completing their chunk's gradients
    buckets: tuple[Task, ...]    # the builder's bucket tasks, in order (payloads and calls)

    def __len__(self) -> int:
        return len(self.cls)


def tail(b: IterationBuilder) -> Tail | None:
    """The :class:`Tail` of builder ``b`` (kept on it), or None when its graph holds tasks the
    array runs do not (see module docstring)."""
    if "_array_tail" not in b.__dict__:
        b.__dict__["_array_tail"] = _tail(b)
    return b.__dict__["_array_tail"]


def _tail(b: IterationBuilder) -> Tail | None:
    sc = b.sc
    zero = comm_zero(sc)
    overlap = grad_reduce_overlaps(sc)
    if overlap and sm_factor(sc, bool(b.ideal)) > 0:
        return None                      # the buckets would lengthen the pass they overlap
    cls, bucket, chunk, frac, dur, step, tasks = [], [], [], [], [], [], []
    for s in range(b.p):
        for c in range(b.schedule.chunks_per_rank(b.v)):
            if any(h > 0 for h in b.chunk_of(s, c).fsdp_hidden):
                return None
            if zero in (1, 2) and b._dp(TaskGraph(), s, c, "all-gather", [], None):
                return None              # ZeRO 1-2 gathers its parameters back
            if zero == 3:
                continue                 # FSDP reduces layer by layer, inside the passes
            g = TaskGraph()
            ready = g.add(Task(s, "compute", "backward", 1.0))
            op = "all-reduce" if zero == 0 else "reduce-scatter"
            ids = b._dp(g, s, c, op, [] if overlap else [(ready, 1.0)], ready if overlap else None)
            if len(g.tasks) != 1 + len(ids):
                return None              # compressor kernels beside the buckets
            for i in ids:
                t = g.tasks[i]
                if not isinstance(t.info, BucketInfo) or t.priority != 1 or len(t.deps) != 1:
                    return None          # P3 priorities reorder the stream
                cls.append(s)
                bucket.append(True)
                chunk.append(c)
                frac.append(t.deps[0][1])
                dur.append(t.duration)
                tasks.append(t)
        step.append(len(cls))
        cls.append(s)
        bucket.append(False)
        chunk.append(-1)
        frac.append(1.0)
        dur.append(b.optimizer_time(s))
    return Tail(np.array(cls), np.array(bucket), np.array(chunk), np.array(frac), np.array(dur),
                np.array(step), overlap, tuple(tasks))
