"""Figures of an A/B comparison (no Streamlit here: the app only places them).

- :func:`waterfall` — A's iteration time, each category's change, B's time (go.Waterfall);
- :func:`shared_time_axis` — two Gantt charts redrawn on one time axis (copies; the cached
  figures are untouched), :func:`gantt_height` their heights;
- :func:`memory_side_by_side` — per-GPU memory by kind, A next to B, against capacity.
"""
from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go

from ..analysis.compare import Comparison, waterfall_steps
from ..analysis.verdict import MemoryVerdict

A_COLOR, B_COLOR = "#4C78A8", "#F58518"
MORE_COLOR, LESS_COLOR = "#E45756", "#54A24B"     # B spends more time (red) or less (green)
MUTED_COLOR = "#AAAAAA"          # less time, but B does not fit: no win to colour
MEMORY_KINDS = ("params", "grads", "optimizer", "activations", "reserved")


def time_unit(cmp: Comparison) -> tuple[float, str]:
    """ms below 10 s (as the Gantt's axis), s beyond."""
    longest = max(cmp.a["iteration_time_s"], cmp.b["iteration_time_s"])
    return (1e3, "ms") if longest < 10 else (1.0, "s")


def waterfall(cmp: Comparison, height: int = 320, font_size: int = 12) -> go.Figure:
    """Horizontal waterfall, read top to bottom: A's time, then one bar per category whose time
    changes (red: B spends more, green: less, labelled with the change), then B's time as the
    total.  The relative bars sum to B - A.  The time axis starts below the lowest running total
    so that the changes, not the common part, fill the chart.  When B does not fit in memory its
    savings are grey, not green, and the title says why (explorer/analysis/verdict.py)."""
    scale, unit = time_unit(cmp)
    steps = waterfall_steps(cmp)
    digits = 1 if unit == "ms" else 3
    values = [s.value_s * scale for s in steps]
    b_fits = MemoryVerdict.of_run(cmp.b).fits
    text = [f"{v:{'+' if s.measure == 'relative' else ''},.{digits}f}"
            for s, v in zip(steps, values, strict=True)]
    fig = go.Figure(go.Waterfall(
        orientation="h", y=[s.label for s in steps], x=values, measure=[s.measure for s in steps], text=text,
        textposition="outside", cliponaxis=False, connector=dict(line=dict(color="#999", width=1)),
        increasing=dict(marker=dict(color=MORE_COLOR)),
        decreasing=dict(marker=dict(color=LESS_COLOR if b_fits else MUTED_COLOR)),
        totals=dict(marker=dict(color="#79706E")),
        hovertemplate=f"%{{y}}: %{{x:,.{digits + 2}f}} {unit}<extra></extra>"))
    running = _running(values, steps)
    lo, hi = min(running), max(running)
    pad = max(hi - lo, 0.02 * hi)
    fig.update_layout(
        height=height, margin=dict(l=10, r=24, t=34, b=30), showlegend=False, font=dict(size=font_size),
        title=dict(text=f"B − A = {cmp.difference_s * scale:+,.{digits}f} {unit}, by category"
                        # (the categories are an iteration's: a sync between inner steps is not one)
                        + (" of an inner step" if cmp.metrics[0].key == "time_per_step_s" else "")
                        + ("" if b_fits else " (B does not fit)"),
                   font=dict(size=font_size + 1)),
        xaxis=dict(title=unit, range=[max(0.0, lo - 1.2 * pad), hi + 0.45 * pad]),
        yaxis=dict(autorange="reversed", automargin=True, tickfont=dict(size=font_size)))
    return fig


def _running(values: Sequence[float], steps) -> list[float]:
    out, run = [], 0.0
    for v, s in zip(values, steps, strict=True):
        run = run + v if s.measure == "relative" else v
        out.append(run)
    return out


def gantt_height(lanes: int, cap: int, per_lane: int = 22) -> int:
    """A Gantt's height in the comparison: ``per_lane`` px per lane (so both sides' lanes look
    alike; presentation mode's 18 px labels need about 30), at least 190 px, at most ``cap``."""
    return int(min(cap, max(190, 70 + per_lane * lanes)))


def titled(fig: go.Figure, title: str, height: int | None = None, columns: int | None = None) -> go.Figure:
    """A copy of a Gantt chart with a title above its legend (and ``height`` pixels tall).
    ``columns``: lay the legend out in that many columns of equal width (presentation mode: a
    horizontal legend too wide for one row otherwise falls back to one entry per row), the figure
    growing by the legend's rows so that the plot and its axis keep ``height``."""
    f = go.Figure(fig)
    size = f.layout.font.size or 12
    legend = dict(orientation="h", y=1.0, yanchor="bottom", x=0.0, xanchor="left")
    top = 40 + 3 * size
    if columns:
        entries = sum(1 for t in f.data if t.showlegend is not False and t.name)
        rows = -(-entries // columns)
        legend.update(entrywidth=1 / columns, entrywidthmode="fraction")
        top = 40 + size + rows * round(1.6 * size)
        height = height + top if height else None
    # The legend runs in rows above the plot, under the title: on the right it took the plot's
    # width, and in presentation mode's large text its column covered the lanes.
    f.update_layout(title=dict(text=title, x=0.0, xanchor="left", y=0.995, yanchor="top",
                               font=dict(size=size + 1)),
                    margin=dict(t=top), legend=legend)
    if height:
        f.update_layout(height=height)
    return f


def shared_time_axis(a: go.Figure, b: go.Figure, heights: tuple[int | None, int | None] = (None, None),
                     titles: tuple[str, str] = ("A", "B"), columns: int | None = None
                     ) -> tuple[go.Figure, go.Figure]:
    """Copies of two Gantt charts on the same time range (the longer one's), each titled and
    ``heights`` tall (None: as drawn); B's legend is hidden when it lists no kind A's does not."""
    end = max(_x_end(a), _x_end(b))
    out = [titled(fig, title, height, columns)
           for fig, title, height in zip((a, b), titles, heights, strict=True)]
    for f in out:
        f.update_xaxes(range=[0, end])
    names_a = {t.name for t in out[0].data}
    if {t.name for t in out[1].data} <= names_a:
        b_fig = out[1]
        h = b_fig.layout.height
        if columns and h:   # the figure grew by the legend's rows: without them B keeps its plot height
            b_fig.update_layout(height=h - (b_fig.layout.margin.t or 30) + 30)
        b_fig.update_layout(showlegend=False, margin=dict(t=30))
    return out[0], out[1]


def _x_end(fig: go.Figure) -> float:
    """Where a Gantt's time axis ends (figures.gantt always sets the range; 1 when absent)."""
    rng = fig.layout.xaxis.range
    return float(rng[1]) if rng is not None else 1.0


def memory_side_by_side(cmp: Comparison, height: int = 300, font_size: int = 12) -> go.Figure:
    """Per-GPU memory of the fullest stage, stacked by kind, A's column next to B's, with each
    side's capacity as a dashed line (one line when they agree)."""
    fig = go.Figure()
    colors = {"params": "#4C78A8", "grads": "#F58518", "optimizer": "#54A24B", "activations": "#B279A2",
              "reserved": "#9D9DA0"}
    sides = ("A", "B")
    mem = {d.key: d for d in cmp.memory_GB}
    for kind in MEMORY_KINDS:
        d = mem[kind]
        fig.add_trace(go.Bar(x=list(sides), y=[d.a, d.b], name=kind, marker_color=colors[kind],
                             hovertemplate=f"{kind}: %{{y:.2f}} GB<extra>%{{x}}</extra>"))
    caps = (cmp.a["memory_capacity_GB"], cmp.b["memory_capacity_GB"])
    for i, cap in enumerate(caps if caps[0] != caps[1] else caps[:1]):
        fig.add_shape(type="line", x0=-0.5 + i if caps[0] != caps[1] else -0.5,
                      x1=0.5 + i if caps[0] != caps[1] else 1.5, y0=cap, y1=cap,
                      line=dict(color="#C00", dash="dash"))
        fig.add_annotation(x=i if caps[0] != caps[1] else 0.5, y=cap, text=f"capacity {cap:.1f} GB",
                           showarrow=False, yshift=9, font=dict(color="#C00", size=font_size - 1))
    totals = (mem["total"].a, mem["total"].b)
    for i, t in enumerate(totals):
        fig.add_annotation(x=i, y=t, text=f"{t:.1f} GB", showarrow=False, yshift=10)
    top = max(*caps, *totals)
    fig.update_layout(barmode="stack", height=height, margin=dict(l=10, r=10, t=30, b=30),
                      yaxis=dict(title="GB per GPU", range=[0, top * 1.15]), font=dict(size=font_size),
                      legend=dict(orientation="h", yanchor="bottom", y=1.0, x=0), bargap=0.35)
    return fig
