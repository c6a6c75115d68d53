"""The array run: the scenario's own micro-batch count evaluated as one array row, no fold.

When folding cannot pay — too few micro-batches for three reduced runs and a confirming one to be
smaller than the iteration, as on every interleaved row of Korthikanti et al. 2022's Table 5
(175B: pp 8, vpp 3, 64 micro-batches; 530B: pp 35, vpp 3, 280; the period is pp micro-batches,
SC21 Sec. 2.2.2, so 64 holds 8 periods and a fold needs more than 10) — the graph the array runs
hold is evaluated for the full count directly: arrayfold/rows.py gives every task's ready, start
and end time and binding dependency as the engine computes them (the same max and + in the same
order; tests/test_arrayfold.py), so the measures are the engine's without extrapolation and
without a proof.  Breakdowns walk the binding chains (arrayfold/walk.py), memory replays each
stage's order (fold._peaks), bytes and tier load count the row's transfers (arrayfold/traffic.py).

It also takes what the array runs hold but the fold cannot: GPipe (it grows in two places),
Chimera (two directions, whose reduced runs would have to grow both pipelines in step), ZeRO 1-2
pipelines whose period is not proven, llama3-405b-16k's own layout at pp 64 (64 micro-batches on
64 x 2 chunks).

The task list is made only when read (arrays/lazy.py): the builder's graph of the scenario with
the row's times copied in, task for task (what the engine would have scheduled), in the builder's
order (ZeRO's start gathers come first in its graph: arrayfold/unfold.py).
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
from ..budget import MAX_WORK
from ..cost import array_work
from ..plan import NotFolded
from .fold import _builder, _timed_measures, ineligible, task_counts
from .rows import Rows, evaluate_rows
from .tail import tail
from .traffic import byte_measures
from .unfold import builder_order, copy_times

NOT_HELD = NotFolded("its data-parallel tasks are not buckets the array runs hold (ZeRO 1-2 gathers, P3, "
                     "compression, overlapped FSDP or buckets that slow a pass)")


@dataclass(frozen=True)
class ArrayRun:
    """The scenario's iteration evaluated as one array row: its measures and the row's times."""

    builder: IterationBuilder          # built for the scenario (its count)
    net: Network
    measures: Measures
    tasks: int                         # tasks of the iteration's graph
    rows: Rows                         # the one row (task space, arrayfold/rows.py)
    scenario: Scenario


def attempt_array_run(sc: Scenario, ideal: frozenset[str] | None = None) -> ArrayRun | NotFolded:
    """``sc``'s iteration as one array row, or why the array runs cannot hold its graph.
    ``ideal``: the ideal-pipeline aspects (the scenario's own when None)."""
    why = ineligible(sc, folding=False)
    if why is not None:
        return NotFolded(why)
    work = array_work(sc, [sc.micro_batches])
    if work > MAX_WORK:
        return NotFolded(f"the full count as one array row would take {work:,.0f} work units, beyond the "
                         f"budget's {MAX_WORK:,} (fold/budget.py)")
    if ideal is None:
        ideal = IDEAL_ASPECTS if sc.parallelism.ideal_pipeline else frozenset()
    if grad_reduce_overlaps(sc) and sm_factor(sc, bool(ideal)) > 0:
        # tail.py's first refusal, known without building (a builder costs some 20 ms on DeepSeek-V3).
        return NotFolded("its overlapped gradient buckets slow the passes they overlap "
                         "(communication.comm_sms)")
    b = _builder(sc, ideal)
    if tail(b) is None:
        return NOT_HELD
    units = sc.micro_batches * sc.parallelism.token_slices
    R = evaluate_rows(b, [units])
    row = _timed_measures(b, R)[0]
    T = row[0]
    p = R.p
    it = iter(row)
    next(it)
    bds = tuple({k: next(it) for k in CATEGORIES} for _ in range(p))
    busy = tuple(next(it) for _ in range(p))
    end = tuple(next(it) for _ in range(p))
    memory = tuple(MemoryBreakdown(*(next(it) for _ in range(5))) for _ in range(p))
    comm, traffic, load, links = byte_measures(b, units, sends(R), R.tail)
    ms = Measures(T, bds, busy, end, memory, comm, traffic, load, links, 0.0)
    return ArrayRun(b, b.net, ms, int(task_counts(b, R)[0]), R, sc)


def sends(R: Rows) -> np.ndarray:
    """(2, p, pairs) transfers each class sends on each pair forward and backward in row 0,
    counted (fold._sends puts the count of a folded iteration on a line through two rows)."""
    prog, n, p = R.prog, R.n, R.p
    every = R.units[0] == prog.units              # every unit real: the same counts for the program
    if every and "_array_sends" in prog.__dict__:
        return prog.__dict__["_array_sends"]
    out = []
    for pairs in (prog.send_f, prog.send_b):
        sel = R.exists[n:2 * n, 0] & (pairs >= 0)
        out.append(np.bincount(prog.stage[sel] * p + pairs[sel], minlength=p * p).reshape(p, p).astype(float))
    got = np.stack(out)
    if every:
        prog.__dict__["_array_sends"] = got
    return got


def run_tasks(run: ArrayRun) -> list[Task] | None:
    """The task list of ``run``: the builder's graph of the scenario, its times and bindings the
    row's (None when the graph is not the row's task for task; the caller then simulates)."""
    R = run.rows
    with paused_collector():
        tasks = run.builder.for_scenario(run.scenario).build().tasks
        where = builder_order(R.exists[:, 0], run.builder)
        if copy_times(tasks, where, R.ready[:, 0], R.start[:, 0], R.end[:, 0], R.binding[:, 0]) is None:
            return None
    return tasks
