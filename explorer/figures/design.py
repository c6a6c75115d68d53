"""Figures of the design space (no Streamlit here: the app only places them).

- :func:`heatmap` — a sweep's metric over two varied fields (explorer/design/sweep.py);
- :func:`tornado` — the iteration-time saving of each 2x upgrade (explorer/design/sensitivity.py);
- :func:`scaling_curve` — iteration time, MFU and exposed communication per dimension against the
  GPU count (explorer/design/scaling.py).

Every point carries its share-link query string in ``customdata`` so the app can open the scenario
a user clicks.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .. import dimensions
from ..design.scaling import ScalePoint
from ..design.sensitivity import Sensitivity
from ..design.space import family_labels
from ..design.sweep import Point
from ..numbers import seconds_text, time_scale

METRICS = {"iteration_time_s": ("iteration time (s)", min), "mfu": ("MFU", max),
           "tokens_per_s": ("tokens/s", max), "memory_GB_total": ("memory per GPU (GB)", min)}


def _label(v: Any) -> str:
    return str(v).lower() if isinstance(v, bool) else str(v)


def _axis_title(key: str) -> str:
    """A heatmap axis's title: the field's dotted key, less its section when long (a rotated
    "cluster.scale_up.bandwidth_GBps" overran a 1280x720 heatmap's height in presentation mode)."""
    return key if len(key) <= 24 else key.split(".", 1)[-1]


OVER_MEMORY_GREY = "#c8c8c8"      # cells whose best layout does not fit: never on the colour scale
CURRENT_OUTLINE = "#e4007c"       # the scenario's own cell (a colour Viridis never takes)


def heatmap(points: Sequence[Point], x_key: str, y_key: str, metric: str = "iteration_time_s",
            height: int = 420, font_size: int = 12, current: tuple[Any, Any] | None = None) -> go.Figure:
    """``metric`` of a sweep over ``x_key`` x ``y_key``.  Where the sweep varied other fields too, a
    cell shows the best value over those that fit in memory (the smallest time or memory, the
    largest MFU or throughput).  Memory is a verdict (explorer/analysis/verdict.py): a cell where
    nothing fits is drawn grey on a second trace, outside the colour scale, so a layout that cannot
    run is never the brightest; its hover says "does not fit".  A cell with no valid combination
    is blank and its hover names the commonest reason.  ``current`` (the scenario's own x and y
    values) outlines its cell.  ``customdata`` holds the best point's link."""
    title, best = METRICS[metric]
    factor = 1.0
    if metric == "iteration_time_s":
        # In milliseconds when every cell is below a second, as the cells' labels write them (a
        # DLRM's colour bar read 0.003-0.004 s beside cells in ms).
        factor, unit = time_scale(p.figures[metric] for p in points if p.valid)
        title = f"iteration time ({unit})"
    xs = list(dict.fromkeys(_label(p.overrides[x_key]) for p in points))
    ys = list(dict.fromkeys(_label(p.overrides[y_key]) for p in points))
    z = [[math.nan] * len(xs) for _ in ys]          # the best layout that fits
    over = [[math.nan] * len(xs) for _ in ys]       # the best layout, where none fits
    link = [[""] * len(xs) for _ in ys]
    text = [[""] * len(xs) for _ in ys]

    def better(value: float, than: float) -> bool:
        return math.isnan(than) or (value < than if best is min else value > than)

    for p in points:
        i, j = ys.index(_label(p.overrides[y_key])), xs.index(_label(p.overrides[x_key]))
        if not p.valid:
            text[i][j] = text[i][j] or f"invalid: {p.reason}"
            continue
        value = p.figures[metric] * factor
        if p.figures.get("fits", True):
            if better(value, z[i][j]):
                z[i][j], link[i][j], text[i][j] = value, p.link or "", f"{title}: {value:.4g}"
        elif math.isnan(z[i][j]) and better(value, over[i][j]):
            over[i][j], link[i][j] = value, p.link or ""
            text[i][j] = f"{title}: {value:.4g} (does not fit in memory)"
    # A cell where some layout fits shows that one (the over-memory best found before it is dropped).
    over = [[v if math.isnan(z[i][j]) else math.nan for j, v in enumerate(row)] for i, row in enumerate(over)]
    hover = "%{y} · %{x}<br>%{text}<extra></extra>"
    fig = go.Figure(go.Heatmap(
        x=xs, y=ys, z=z, customdata=link, text=text, hovertemplate=hover,
        colorscale="Viridis", reversescale=best is min, colorbar=dict(title=title), hoverongaps=True,
        name="fits"))
    if any(not math.isnan(v) for row in over for v in row):
        fig.add_trace(go.Heatmap(
            x=xs, y=ys, z=over, customdata=link, text=text, hovertemplate=hover, hoverongaps=False,
            colorscale=[[0, OVER_MEMORY_GREY], [1, OVER_MEMORY_GREY]], showscale=False,
            name="does not fit"))
    fig.update_layout(height=height, margin=dict(l=10, r=10, t=30, b=40), font=dict(size=font_size),
                      xaxis=dict(title=_axis_title(x_key), type="category"),
                      yaxis=dict(title=_axis_title(y_key), type="category"))
    if current is not None:
        # Matched by value, not by label: an axis typed as 450 holds the scenario's 450.0.
        cx = next((_label(p.overrides[x_key]) for p in points if p.overrides[x_key] == current[0]), None)
        cy = next((_label(p.overrides[y_key]) for p in points if p.overrides[y_key] == current[1]), None)
        if cx is not None and cy is not None:
            j, i = xs.index(cx), ys.index(cy)
            # A category axis places category k at position k: the cell spans k - 0.5 .. k + 0.5.
            fig.add_shape(type="rect", x0=j - 0.5, x1=j + 0.5, y0=i - 0.5, y1=i + 0.5,
                          line=dict(color=CURRENT_OUTLINE, width=4), fillcolor="rgba(0,0,0,0)",
                          name="this scenario")
    return fig


def tornado(result: Sensitivity, height: int = 360, font_size: int = 12) -> go.Figure:
    """Horizontal bars: the share of the iteration each upgrade saves (1 - new/base), largest on
    top, labelled with the speedup; a change to an unused tier is a zero-length bar."""
    rows = sorted(result.rows, key=lambda r: r.speedup)
    saved = [100.0 * (1.0 - 1.0 / r.speedup) for r in rows]
    longest = max(map(abs, saved), default=0.0)
    fig = go.Figure(go.Bar(
        y=[r.change for r in rows], x=saved, orientation="h",
        marker_color=["#4C78A8" if s >= 0 else "#E45756" for s in saved],
        # A bar too short to hold its label (a tier the scenario never crosses: zero length) shows it
        # beside the axis, where "auto" drew none.
        text=[f"{r.speedup:.3f}x" for r in rows], cliponaxis=False,
        textposition=["outside" if abs(v) < 0.05 * longest else "auto" for v in saved],
        customdata=[seconds_text(r.iteration_time_s) for r in rows],
        hovertemplate="%{y}: %{customdata} (%{x:.1f}% saved)<extra></extra>"))
    fig.update_layout(height=height, margin=dict(l=10, r=10, t=30, b=40), font=dict(size=font_size),
                      xaxis=dict(title=f"% of the {seconds_text(result.base_time_s)} iteration saved"),
                      showlegend=False)
    return fig


def scaling_curve(points: Sequence[ScalePoint], height: int = 520, font_size: int = 12) -> go.Figure:
    """Top: iteration time (left axis) and MFU (right axis) against GPUs (log scale); bottom: the
    exposed communication of each dimension that has any, seconds.  Invalid sizes are left out; a
    size over the GPU's memory is crossed out on both curves ("over memory")."""
    ok = [p for p in points if p.valid]
    gpus = [p.gpus for p in ok]
    links = [p.link or "" for p in ok]
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.08, row_heights=[0.6, 0.4],
                        specs=[[{"secondary_y": True}], [{}]])
    fig.add_trace(go.Scatter(x=gpus, y=[p.figures["iteration_time_s"] for p in ok], name="iteration time",
                             mode="lines+markers", customdata=links, line=dict(color="#4C78A8"),
                             hovertemplate="%{x:,} GPUs: %{y:.4g} s<extra></extra>"), row=1, col=1)
    fig.add_trace(go.Scatter(x=gpus, y=[100 * p.figures["mfu"] for p in ok], name="MFU", mode="lines+markers",
                             customdata=links, line=dict(color="#F58518", dash="dot"),
                             hovertemplate="%{x:,} GPUs: MFU %{y:.1f}%<extra></extra>"),
                  row=1, col=1, secondary_y=True)
    over = [p for p in ok if not p.fits]
    if over:
        # A size over the GPU's memory cannot run as laid out: crossed out on both curves, its memory
        # in the hover (a hunt found such a size drawn as the curve's best MFU, unmarked).
        hover = [f"{p.gpus:,} GPUs: does not fit, {p.figures['memory_GB_total']:.1f} of "
                 f"{p.figures.get('memory_capacity_GB', float('nan')):.1f} GB" for p in over]
        mark = dict(symbol="x-thin-open", size=16, color="#D62728", line=dict(width=3))
        fig.add_trace(go.Scatter(x=[p.gpus for p in over], y=[p.figures["iteration_time_s"] for p in over],
                                 name="over memory", mode="markers", marker=mark, text=hover,
                                 customdata=[p.link or "" for p in over],
                                 hovertemplate="%{text}<extra></extra>"), row=1, col=1)
        fig.add_trace(go.Scatter(x=[p.gpus for p in over], y=[100 * p.figures["mfu"] for p in over],
                                 name="over memory", mode="markers", marker=mark, text=hover,
                                 showlegend=False, customdata=[p.link or "" for p in over],
                                 hovertemplate="%{text}<extra></extra>"), row=1, col=1, secondary_y=True)
    for d in dimensions.shown_in("scaling"):
        ys = [p.exposed_s[d] for p in ok]
        if any(y > 0 for y in ys):
            fig.add_trace(go.Scatter(x=gpus, y=ys, name=f"exposed {d}", mode="lines+markers",
                                     customdata=links, line=dict(color=dimensions.get(d).color),
                                     hovertemplate=f"%{{x:,}} GPUs: exposed {d} %{{y:.4g}} s<extra></extra>"),
                          row=2, col=1)
    # Ticks at the simulated sizes (powers of two read badly on plotly's default log ticks).
    ticks = dict(type="log", tickvals=gpus, ticktext=[f"{g:,}" for g in gpus])
    fig.update_xaxes(title_text="GPUs", row=2, col=1, **ticks)
    fig.update_xaxes(row=1, col=1, **ticks)
    fig.update_yaxes(title_text="iteration (s)", rangemode="tozero", row=1, col=1)
    fig.update_yaxes(title_text="MFU (%)", rangemode="tozero", showgrid=False, row=1, col=1, secondary_y=True)
    fig.update_yaxes(title_text="exposed (s)", rangemode="tozero", row=2, col=1)
    fig.update_layout(height=height, margin=dict(l=10, r=10, t=30, b=40), font=dict(size=font_size),
                      legend=dict(orientation="h", yanchor="bottom", y=1.02, x=0))
    return fig


def top_table(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """A search's top layouts (their ``to_json`` objects) as table rows for display: rank, time,
    MFU, memory, the layout in one line and the link."""
    out = []
    for rank, r in enumerate(rows, 1):
        lay = r["layout"]
        sched = f"{lay['schedule']} v{lay['vpp']}" if lay["vpp"] > 1 else lay["schedule"]
        out.append({"rank": rank, "iteration_time_s": r["iteration_time_s"], "mfu": r["mfu"],
                    "memory_GB": r["memory_GB_total"],
                    "layout": f"tp {lay['tp']} · pp {lay['pp']} · dp {lay['dp']} · cp {lay['cp']} · "
                              f"ep {lay['ep']} · {sched} · ZeRO {lay['zero']} · mb {lay['micro_batch']} · "
                              f"{lay['recompute']}"
                              + (" · SP" if lay["sequence_parallel"] else "")
                              + "".join(f" · {x}" for x in family_labels((lay.get("family") or {}).items())),
                    "yours": r.get("baseline", False), "link": r["link"]})
    return out
