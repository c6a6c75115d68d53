"""The full iteration as one array run, not folded: the route for pipelines the array fold holds
(arrayfold/fold.py ``ineligible``, arrayfold/tail.py) but cannot fold — too few micro-batches for
three reduced runs past one fill (llama3-405b-16k at pp 64 runs 64 micro-batches on 64 x 2
chunks), or no period proven.

The compiled program (pricing/program.py) of the scenario's own count, evaluated as one column of
arrayfold/rows.py, gives every task's ready, start and end time and binding dependency as the
engine computes them (tests/test_arrayfold.py checks them task for task); the measures are read
from that column exactly as the fold reads each of its reduced runs (``_timed_measures``), with
nothing extrapolated, and bytes and tier load from the transfers the column sends.  A numpy step
per program level instead of an engine event per task: the same result at a fraction of the cost.
The task list is made only when read: the builder's graph with the column's times copied in.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...analysis.breakdown import MemoryBreakdown
from ...analysis.measures import Measures
from ...config import Scenario
from ...engine.gc_pause import paused_collector
from ...engine.scheduler import Task
from ...network.groups import Network
from ...taskgraph.builder import IDEAL_ASPECTS, IterationBuilder
from ...taskgraph.techniques.dp_contention import sm_factor
from ...taskgraph.techniques.fsdp import grad_reduce_overlaps
from ...vocabulary import CATEGORIES
from ..budget import MAX_WORK, estimate
from ..plan import NotFolded
from .fold import _builder, _timed_measures, ineligible
from .rows import Rows, evaluate_rows
from .tail import tail
from .traffic import byte_measures
from .unfold import builder_order

# Below this many tasks the engine's full run costs about what one array run's set-up does (a first
# call on this repository's 2-core machine, bench-like BASE pipeline of tests/test_arrayfold.py on
# 8 stages: 128 tasks 7 ms on the engine against 13 ms as arrays, 248 tasks 3.5 ms either way, 488
# tasks 4.5 against 4.0 ms): decided from the counts, before simulating.
MIN_TASKS = 256


@dataclass(frozen=True)
class ArrayRun:
    """A full iteration evaluated as one array run: its measures and what the task list needs."""

    builder: IterationBuilder        # built for the scenario itself
    net: Network
    measures: Measures
    tasks: int                       # tasks of the iteration's graph
    rows: Rows                       # the one column (ready, start, end, binding of every task)


def simulate_whole(sc: Scenario, ideal: frozenset[str] | None = None) -> ArrayRun | None:
    """:func:`attempt_whole`'s run, or None."""
    got = attempt_whole(sc, ideal)
    return got if isinstance(got, ArrayRun) else None


def attempt_whole(sc: Scenario, ideal: frozenset[str] | None = None) -> ArrayRun | NotFolded:
    """The iteration of ``sc`` as one array run, or why not: a graph the array runs do not hold,
    or beyond the work budget the full simulation would be refused at (fold/budget.py: the program
    holds every pass of the iteration, as the engine would)."""
    why = ineligible(sc, folding=False)
    if why is not None:
        return NotFolded(why)
    e = estimate(sc)
    if e.work > MAX_WORK:
        return NotFolded("beyond the work budget of a full simulation (fold/budget.py)")
    if e.tasks < MIN_TASKS:
        return NotFolded(f"{e.tasks} tasks: the engine runs so few as fast as the arrays are set up")
    if ideal is None:
        ideal = IDEAL_ASPECTS if sc.parallelism.ideal_pipeline else frozenset()
    if grad_reduce_overlaps(sc) and sm_factor(sc, bool(ideal)) > 0:
        # tail.py's first refusal, known without building (a builder costs some 20 ms on DeepSeek-V3).
        return NotFolded("its overlapped gradient buckets slow the passes they overlap "
                         "(communication.comm_sms)")
    b = _builder(sc, ideal)
    tl = tail(b)
    if tl is None:
        return NotFolded("its data-parallel tasks are not buckets the array runs hold (P3, compression, "
                         "overlapped FSDP or buckets that slow a pass)")
    units = sc.micro_batches * sc.parallelism.token_slices
    R = evaluate_rows(b, [units])
    T = float(R.end[R.exists[:, 0], 0].max())
    it = iter(_timed_measures(b, R, np.array([T]))[0])
    p = R.p
    T = next(it)
    bds = tuple({k: next(it) for k in CATEGORIES} for _ in range(p))
    busy = tuple(next(it) for _ in range(p))
    end = tuple(next(it) for _ in range(p))
    memory = tuple(MemoryBreakdown(*(next(it) for _ in range(5))) for _ in range(p))
    comm, traffic, load, links = byte_measures(b, units, sends(R), tl)
    ms = Measures(T, bds, busy, end, memory, comm, traffic, load, links, 0.0)
    return ArrayRun(b, b.net, ms, int(R.exists[:, 0].sum()), R)


def sends(R: Rows) -> np.ndarray:
    """(2, p, pairs) transfers each class sends on each pair forward and backward in the column."""
    prog, n, p = R.prog, R.n, R.p
    out = []
    for pairs in (prog.send_f, prog.send_b):
        sel = R.exists[n:2 * n, 0] & (pairs >= 0)
        out.append(np.bincount(prog.stage[sel] * p + pairs[sel], minlength=p * p).reshape(p, p).astype(float))
    return np.stack(out)


def whole_tasks(run: ArrayRun) -> list[Task] | None:
    """The iteration's task list: the builder's graph with the column's times and bindings (None
    when the graph is not the column's, task for task; the caller then simulates in full)."""
    R = run.rows
    with paused_collector():
        tasks = run.builder.build().tasks
        where = builder_order(R.exists[:, 0], run.builder)
        if len(tasks) != len(where):
            return None
        pos = np.full(len(R.exists), -1, np.int64)
        pos[where] = np.arange(len(where))
        bound = R.binding[where, 0]
        bind = np.where(bound >= 0, pos[np.maximum(bound, 0)], -1)
        for t, r, s, e, k in zip(tasks, R.ready[where, 0].tolist(), R.start[where, 0].tolist(),
                                 R.end[where, 0].tolist(), bind.tolist(), strict=True):
            t.ready, t.start, t.end, t.binding = r, s, e, k
    return tasks
