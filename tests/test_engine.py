"""The list scheduler: stream serialisation, dependencies, fractional readiness, determinism."""
from __future__ import annotations

import pytest

from explorer.engine.scheduler import CycleError, Task, TaskGraph, run


def test_tasks_on_one_stream_never_overlap_and_run_in_ready_order():
    g = TaskGraph()
    g.add(Task(0, "compute", "forward", 2.0))
    g.add(Task(0, "compute", "forward", 1.0))
    g.add(Task(0, "dp", "dp", 5.0))
    assert run(g) == 5.0
    ta, tb, tc = g.tasks
    assert (ta.start, ta.end, tb.start, tb.end) == (0.0, 2.0, 2.0, 3.0)
    assert tc.start == 0.0                                    # another stream runs concurrently


def test_dependencies_and_fractional_readiness():
    g = TaskGraph()
    bwd = g.add(Task(0, "compute", "backward", 4.0))
    bucket = g.add(Task(0, "dp", "dp", 1.0, deps=[(bwd, 0.25)]))   # ready after a quarter
    after = g.add(Task(1, "compute", "forward", 1.0, deps=[(bucket, 1.0)]))
    assert run(g) == 4.0
    assert g.tasks[bucket].start == pytest.approx(1.0)
    assert g.tasks[after].start == pytest.approx(2.0)
    assert g.tasks[after].binding == bucket


def test_priority_then_insertion_order_breaks_ties():
    g = TaskGraph()
    low = g.add(Task(0, "dp", "dp", 1.0, priority=2))
    high = g.add(Task(0, "dp", "dp", 1.0, priority=1))
    run(g)
    assert g.tasks[high].start == 0.0 and g.tasks[low].start == 1.0


def test_same_graph_same_schedule():
    def build():
        g = TaskGraph()
        prev = -1
        for i in range(50):
            t = g.add(Task(i % 3, "compute" if i % 2 else "pp", "forward", 0.1 * (i % 7 + 1),
                           deps=[(prev, 0.5)] if prev >= 0 else []))
            prev = t
        return g
    g1, g2 = build(), build()
    run(g1), run(g2)
    assert [(t.start, t.end) for t in g1.tasks] == [(t.start, t.end) for t in g2.tasks]


def test_cycle_is_reported():
    g = TaskGraph()
    a = g.add(Task(0, "compute", "forward", 1.0, deps=[(1, 1.0)]))
    g.add(Task(0, "compute", "forward", 1.0, deps=[(a, 1.0)]))
    with pytest.raises(CycleError):
        run(g)
