"""The report's charts: the figures the app's Timeline, Memory, Traffic and Topology tabs draw,
built by the same functions of explorer/figures from the same inputs (explorer/ui/views/*)."""
from __future__ import annotations

from dataclasses import dataclass

import plotly.graph_objects as go

from .. import figures
from ..figures.memory_timeline import memory_timeline_figure
from ..figures.sync_window import sync_window_figure
from ..variants.lowcomm import SyncWindow
from .inputs import ReportInputs


@dataclass(frozen=True)
class Chart:
    """One chart: its id in the page, its heading, whether it takes the page's full width, and the
    figure."""

    key: str
    title: str
    wide: bool
    fig: go.Figure


def charts(r: ReportInputs) -> list[Chart]:
    """Every chart of the run ``r``, in the app's tab order; those a run has nothing to draw in
    (no pipeline passes, no traffic, one datacenter) are left out, as the app leaves them out."""
    j, sc = r.run_json, r.scenario
    T = j["iteration_time_s"]
    cap = j["memory_capacity_GB"]
    out = [Chart("gantt", "Timeline", True, r.gantt)]
    if j.get("sync"):
        # Replicas that train apart: one synchronisation window, folded (the Timeline tab's chart).
        out.append(Chart("sync_window", "Synchronisation window", True,
                         sync_window_figure(SyncWindow.from_json(j["sync"]), height=240)))
    out += [Chart("breakdown", f"Where the time goes · {r.breakdown_name}", False,
                  figures.breakdown(j["breakdown_s"], T, height=300)),
            Chart("memory", "Memory per GPU at the peak, by kind", False,
                  figures.memory([dict(m) for m in r.memory_GB], list(r.class_names), cap))]
    if r.memory_curves:
        span = figures.memory_span(r.memory_curves, r.fold, T)    # the Gantt's axis
        out.append(Chart("memory_timeline", "Memory over the iteration", False,
                         memory_timeline_figure(r.memory_curves, span,
                                                cap, height=380)))
    by_tier = j.get("comm_bytes_by_tier") or {}
    if by_tier:
        out.append(Chart("traffic", "Bytes each GPU sends per iteration", False,
                         figures.traffic_by_tier(by_tier)))
    dc = figures.datacenter_map(sc, j.get("wan_links", ()), by_tier,
                                height=290 if sc.cluster.datacenters == 2 else 420)
    if dc is not None:
        out.append(Chart("datacenters", "Datacenters and WAN links", True, dc))
    hot, note = figures.hot_tier({d: c["tier"] for d, c in j["links"].items()}, j["breakdown_s"], T,
                                 r.utilisation)
    out.append(Chart("topology", "Topology and tier utilisation", True,
                     figures.topology(sc, dict(r.utilisation), hot=hot, hot_note=note, height=460)))
    return out
