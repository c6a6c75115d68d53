"""The inputs of a run's figures that are derived from the simulated result, computed once for
the app's views (explorer/ui/cache.py, explorer/ui/views/topology.py) and the HTML report
(explorer/report) alike, so both draw the same Gantt, the same hot tier and the same memory axis.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import plotly.graph_objects as go

from .. import dimensions
from ..result.timeline import estimate_rows, folded_timeline
from ..vocabulary import LATENCY_SUFFIX, PCIE_LIMIT, tier_of_limit
from ..workloads.registry import workload_for
from .gantt import GanttInfo, gantt, lane_name

MAX_BARS = 2500                  # SVG bars drawn at most; more are aggregated (figures/gantt.py)
HOST_WAIT_COLOR = "#BAB0AC"      # the offload's grey: time the GPU waits on the host


@dataclass(frozen=True)
class GanttDraw:
    """A run's Gantt as drawn: the figure, what it drew, the per-layer rows of the whole timeline
    (downloads) and the folded steady state (block start/end s, repeats, period s), if folded."""

    fig: go.Figure
    info: GanttInfo
    full_rows: int
    fold: tuple[float, float, int, float] | None
    columns: dict[str, list]


def gantt_of(res: Any, max_bars: int = MAX_BARS) -> GanttDraw:
    """The Gantt of a simulated ``Result``: per-layer bars when they fit ``max_bars``, else one bar
    per pass and part, aggregated to screen resolution; a folded steady state drawn folded (its
    block once, marked "xK"), never unfolded here."""
    labels = tuple(c.label for c in res.classes)
    draw = folded_timeline(res.tasks, labels, max_segments=max_bars)
    full_rows = len(draw) if not draw.coarse and draw.fold is None else estimate_rows(res.tasks)
    lanes = tuple(lane_name(c.name, c.gpus) for c in res.classes)
    # A folded run, and a serving run (one prefill and a window of decode steps, issue 37), span
    # their rows; otherwise the iteration.
    spans_rows = draw.fold or getattr(res, "inference", None) is not None
    span = max(draw.columns["end_s"], default=0.0) if spans_rows else res.iteration_time_s
    fig, info = gantt(draw.columns, lanes, span, max_bars=max_bars, fold=draw.fold)
    if not spans_rows:
        _host_wait(fig, res, max(draw.columns["end_s"], default=0.0))
    return GanttDraw(fig, info, full_rows, draw.fold, draw.columns)


def _host_wait(fig: go.Figure, res: Any, last_end_s: float) -> None:
    """Shade the end of an iteration the host paces (a GNN's pipelined CPU sampler: analysis/
    steady_state.host_paced): the GPUs have finished their step and wait for the next unit's input,
    which no task draws."""
    T = res.iteration_time_s
    hook = workload_for(res.scenario.model).host_input
    host = hook(res.scenario) if hook is not None else None
    if host is None or not host.pipelined or T - last_end_s <= 1e-6 * T:
        return
    fig.add_vrect(x0=last_end_s * 1e3, x1=T * 1e3, fillcolor=HOST_WAIT_COLOR, opacity=0.35, line_width=0,
                  annotation_text=f"waits for its next {host.unit}", annotation_position="top left")


def hot_tier(link_tiers: Mapping[str, str], breakdown_s: Mapping[str, float], iteration_s: float,
             utilisation: Mapping[str, float]) -> tuple[str | None, str]:
    """The tier limiting the dimension with the most exposed time and a note saying so; with no
    exposed communication, the busiest tier ("busiest").  ``link_tiers``: dimension -> the tier
    that limits its main call (the run JSON's ``links[dim].tier``)."""
    exposed = {d: breakdown_s[d] for d in dimensions.shown_in("topology")
               if d in link_tiers and breakdown_s.get(d, 0.0) > 0}
    if exposed:
        dim = max(exposed, key=exposed.__getitem__)
        limit, share = link_tiers[dim], exposed[dim] / iteration_s
        if limit.endswith(LATENCY_SUFFIX):
            note = (f"its latency limits {dim.upper()} ({share:.0%} of the iteration exposed; fewer, larger "
                    "calls shorten it)")
        elif limit == PCIE_LIMIT:
            # The links from the GPUs to their NICs, drawn as the node's way out (tier_of_limit).
            note = (f"the GPUs' PCIe links to these NICs limit {dim.upper()} ({share:.0%} of the iteration "
                    "exposed; hardware.gpu.pcie_GBps)")
        else:
            note = f"limits {dim.upper()} ({share:.0%} of the iteration exposed)"
        return tier_of_limit(limit), note
    return (max(utilisation, key=utilisation.__getitem__) if utilisation else None), "busiest"


def memory_span(curves: Sequence[Any], fold: tuple | None, iteration_s: float) -> float:
    """The time axis of the memory-over-time chart: the iteration, or with a folded Gantt the
    folded timeline's end (plus 2 %), so both charts share one axis."""
    if fold is not None:
        return max(t for c in curves for t, _ in c.points) * 1.02
    return iteration_s
