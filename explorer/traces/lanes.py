"""One iteration as lanes of busy intervals — compute and each communication dimension — for a
measured rank and for the simulated slowest class alike, so both can be drawn on one time axis
(the app's trace overlay) and compared (explorer/traces/run_fit.py).

Measured: one rank's ``ProfilerStep`` window (explorer/traces/load.py), every thread's or stream's
compute merged into one ``compute`` lane and every collective into its dimension's lane
(explorer/traces/measure.py places it).  Simulated: the class's own rows of the timeline
(explorer/result/timeline.py) plus the transfers of other classes its compute waits for (a
stage's receives, which a trace shows as the ``recv`` the rank blocks in).  Intervals are seconds
from the iteration's start, merged where they overlap.
"""
from __future__ import annotations

from typing import Any

from ..analysis.intervals import merged
from ..result.timeline import build_timeline
from ..vocabulary import COMM_DIMS
from .load import RankTrace
from .measure import Layout, dimension_of_call

Spans = dict[str, list[tuple[float, float]]]
LANES = ("compute",) + COMM_DIMS
MAX_SEGMENTS = 200_000          # timeline rows at most (coarse beyond: the same unions)


def measured_lanes(trace: RankTrace, step: int, layout: Layout) -> Spans:
    """The lanes of ``trace``'s ``ProfilerStep#step``, clipped to it, in seconds from its start."""
    a, b = trace.steps[step]
    out: Spans = {k: [] for k in LANES}
    us = 1e-6
    for lane in trace.lanes.values():
        for s, e in lane.work:
            if e > a and s < b:
                out["compute"].append(((max(s, a) - a) * us, (min(e, b) - a) * us))
        for s, e, op, group in lane.comm:
            if e > a and s < b:
                dim = dimension_of_call(op, group, trace, layout)
                out[dim].append(((max(s, a) - a) * us, (min(e, b) - a) * us))
    return {k: merged(v) for k, v in out.items()}


def simulated_lanes(res: Any) -> Spans:
    """The lanes of a simulated ``Result``'s slowest class (module docstring)."""
    bc = res.breakdown_class
    tl = build_timeline(res.tasks, tuple(c.label for c in res.classes), max_segments=MAX_SEGMENTS)
    col = tl.columns
    out: Spans = {k: [] for k in LANES}
    for i, cls in enumerate(col["gpu_class"]):
        if cls != bc:
            continue
        lane = col["lane"][i]
        key = "compute" if lane == "compute" else lane
        if key in out:
            out[key].append((col["start_s"][i], col["end_s"][i]))
    tasks = res.tasks
    for t in tasks:
        if t.cls == bc and t.stream == "compute":
            for j, _ in t.deps:
                d = tasks[j]
                if d.cls != bc and d.stream in COMM_DIMS and d.end > d.start:
                    out[d.stream].append((d.start, d.end))
    return {k: merged(v) for k, v in out.items()}
