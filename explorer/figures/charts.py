"""Plotly figures of a simulated iteration (no Streamlit here: the app only places them).

- :func:`gantt` — lanes = GPU class x stream, bars coloured by operation kind, numeric time axis
  in ms, bubbles left empty.  SVG bars cost one DOM element each, so beyond ``max_bars`` adjacent
  bars of the same lane and kind are merged and the figure says how many were drawn.
- :func:`breakdown` — where the slowest class's iteration goes, category by category.
- :func:`memory` — per-GPU memory by kind for each class against the GPU's capacity.
- :func:`topology` — the cluster collapsed to datacenters, leaf blocks and nodes, links coloured by
  the average utilisation of their tier.
"""
from __future__ import annotations

from dataclasses import dataclass

import plotly.graph_objects as go

KIND_COLORS = {
    "forward": "#4C78A8", "backward": "#F58518", "weight-grad": "#EECA3B", "recompute": "#B279A2",
    "tp": "#54A24B", "cp": "#72B7B2", "ep": "#FF9DA6", "pp": "#9D755D", "dp": "#E45756",
    "optimizer": "#79706E", "embedding/logits": "#4C78A8", "F&B": "#8F6BB3",
}
CATEGORY_COLORS = {"compute": "#4C78A8", "recompute": "#B279A2", "tp": "#54A24B", "cp": "#72B7B2",
                   "ep": "#FF9DA6", "pp": "#9D755D", "dp": "#E45756", "bubble": "#D3D3D3",
                   "optimizer": "#79706E"}
LANES = ("compute", "tp", "cp", "ep", "pp", "dp")
COMPUTE_KINDS = frozenset({"forward", "backward", "F&B", "weight-grad", "recompute", "optimizer",
                           "embedding/logits"})
KIND_ORDER = ("forward", "backward", "F&B", "weight-grad", "recompute", "tp", "cp", "ep", "pp", "dp", "optimizer")
TIER_LABELS = {"scale-up": "NVLink / NVSwitch (scale-up)", "scale-out": "node NICs → leaf (scale-out)",
               "spine": "leaf → spine uplinks", "scale-across": "WAN between datacenters (scale-across)"}


@dataclass(frozen=True)
class GanttInfo:
    """What the Gantt chart drew: bars shown, operations in the timeline, whether merged."""

    bars: int
    operations: int
    merged: bool
    lanes: int


def _rasterize(rows: list[tuple], iteration_s: float, bins: int) -> list[tuple]:
    """Aggregate bars the way pixels would: split the iteration into ``bins`` columns; in each row
    and column keep the kind that occupies it most (if at least a third of it is busy) and fuse
    runs of equal columns into one bar.  ``rows``: (row_key, kind, start_s, end_s).  Returns
    (row_key, kind, start_s, end_s, operations) with operations = bars that started in the run."""
    width = iteration_s / bins
    occ: dict[tuple, dict[str, float]] = {}
    starts: dict[tuple, int] = {}
    for key, kind, s, e in rows:
        b0, b1 = int(s / width), min(int(e / width), bins - 1)
        starts[(key, b0)] = starts.get((key, b0), 0) + 1
        for b in range(b0, b1 + 1):
            overlap = min(e, (b + 1) * width) - max(s, b * width)
            if overlap > 0:
                cell = occ.setdefault((key, b), {})
                cell[kind] = cell.get(kind, 0.0) + overlap
    out: list[list] = []
    for (key, b) in sorted(occ, key=lambda kb: (str(kb[0]), kb[1])):
        cell = occ[(key, b)]
        if sum(cell.values()) < width / 3:
            continue
        kind = max(cell, key=lambda k: (cell[k], k))
        ops = starts.get((key, b), 0)
        if out and out[-1][0] == key and out[-1][1] == kind and abs(out[-1][3] - b * width) < width * 1e-6:
            out[-1][3] = (b + 1) * width
            out[-1][4] += ops
        else:
            out.append([key, kind, b * width, (b + 1) * width, ops])
    return [tuple(x) for x in out]


# Columns of the aggregated Gantt: about the chart's width in pixels at 1440 px (70% of the page).
RASTER_COLUMNS = 800
# In aggregated bands the compute row splits in two: compute kinds above, blocking collectives
# below, so that both stay visible where they share a pixel column.
SPLIT_OFFSETS = {"compute": (-0.11, 0.28), "comm": (0.15, 0.2)}
BAND_OFFSETS = {"compute": (0.0, 0.5), "tp": (0.0, 0.5), "cp": (0.0, 0.5), "ep": (0.0, 0.5),
                "dp": (-0.37, 0.16), "pp": (0.37, 0.16)}


def gantt(columns: dict[str, list], class_labels: tuple[str, ...], iteration_s: float,
          max_bars: int = 4000, height: int | None = None, font_size: int = 12,
          bands: bool | None = None) -> tuple[go.Figure, GanttInfo]:
    """Gantt chart of the timeline table (see timeline.COLUMNS).

    With few GPU classes every (class, stream) pair is its own labelled lane.  With many
    (``bands``, default when there are more than 6 classes) each class is one band: the compute
    stream in the middle — blocking TP/CP/EP collectives drawn on it in their own colour, since
    compute waits for them — the ``dp`` stream as a thin lane above and ``pp`` below.
    """
    n = len(columns["start_s"])
    idx = range(n)
    merged = n > max_bars
    classes = sorted(set(columns["gpu_class"]))
    bands = len(classes) > 6 if bands is None else bands
    lanes_present = sorted({(columns["gpu_class"][i], columns["lane"][i]) for i in idx},
                           key=lambda x: (x[0], LANES.index(x[1]) if x[1] in LANES else 99))
    short = {k: class_labels[k].split(" (")[0] for k in classes}
    label = {k: f"{short[k[0]]} · {k[1]}" for k in lanes_present}

    def where(c: int, lane: str):
        """(y, thickness) of a bar: a category label, or a numeric band position."""
        if not bands:
            return label[(c, lane)], None
        off, width = BAND_OFFSETS.get(lane, (0.0, 0.5))
        return c + off, width

    fig = go.Figure()
    if merged:
        # Aggregate at about a pixel of the chart: in each row and pixel column keep the kind that
        # fills most of it and fuse runs of equal columns.  In bands the compute row is split in
        # two sub-rows (compute kinds / blocking collectives) so neither hides the other.
        def row_of(c: int, lane: str, kind: str) -> tuple:
            if bands and lane in ("compute", "tp", "cp", "ep"):
                return (c, "compute" if kind in COMPUTE_KINDS else "comm")
            return (c, lane)
        rows = [(row_of(columns["gpu_class"][i], columns["lane"][i], columns["kind"][i]), columns["kind"][i],
                 columns["start_s"][i], columns["end_s"][i]) for i in idx]
        columns_n = RASTER_COLUMNS
        raster = _rasterize(rows, iteration_s, columns_n)
        while len(raster) > max_bars and columns_n > 100:
            columns_n //= 2          # coarser columns until the bar budget holds
            raster = _rasterize(rows, iteration_s, columns_n)
        by_kind: dict[str, list] = {}
        for (c, row), kind, s, e, ops in raster:
            if bands and row in SPLIT_OFFSETS:
                off, width = SPLIT_OFFSETS[row]
                pos = (c + off, width)
            else:
                pos = where(c, row)
            by_kind.setdefault(kind, []).append((pos, s, e, ops, short[c], row))
        for kind in sorted(by_kind, key=lambda k: KIND_ORDER.index(k) if k in KIND_ORDER else 99):
            bars = by_kind[kind]
            fig.add_trace(go.Bar(
                y=[b[0][0] for b in bars], width=[b[0][1] for b in bars] if bands else None,
                base=[b[1] * 1e3 for b in bars], x=[(b[2] - b[1]) * 1e3 for b in bars],
                orientation="h", name=kind, marker_color=KIND_COLORS.get(kind, "#999"), marker_line_width=0,
                customdata=[[b[3], (b[2] - b[1]) * 1e3, b[4], b[5]] for b in bars],
                hovertemplate=(f"<b>{kind}</b> (mostly) · %{{customdata[2]}} · %{{customdata[3]}}<br>"
                               "%{customdata[0]} operations start here (aggregated view)<br>"
                               "span %{customdata[1]:.3f} ms from %{base:.3f} ms<extra></extra>")))
        bars_drawn = len(raster)
    else:
        by_kind: dict[str, list[int]] = {}
        for i in idx:
            by_kind.setdefault(columns["kind"][i], []).append(i)
        c = columns
        for kind in sorted(by_kind, key=lambda k: KIND_ORDER.index(k) if k in KIND_ORDER else 99):
            ii = by_kind[kind]
            pos = [where(c["gpu_class"][i], c["lane"][i]) for i in ii]
            custom = [[kind, "" if c["micro_batch"][i] is None else c["micro_batch"][i],
                       _fmt_bytes(c["bytes"][i]), c["group"][i] or "", c["algorithm"][i] or "", c["tier"][i] or "",
                       f"{c['busbw_GBps'][i]:.1f} GB/s" if c["busbw_GBps"][i] else "",
                       c["duration_s"][i] * 1e3, c["detail"][i] or "",
                       "" if c["chunk"][i] is None else c["chunk"][i],
                       f"{short[c['gpu_class'][i]]} · {c['lane'][i]}"] for i in ii]
            fig.add_trace(go.Bar(
                y=[p[0] for p in pos], width=[p[1] for p in pos] if bands else None,
                base=[c["start_s"][i] * 1e3 for i in ii], x=[c["duration_s"][i] * 1e3 for i in ii],
                orientation="h", name=kind, marker_color=KIND_COLORS.get(kind, "#999"), marker_line_width=0,
                customdata=custom,
                hovertemplate=("<b>%{customdata[0]}</b> %{customdata[8]} · %{customdata[10]}<br>"
                               "micro-batch %{customdata[1]} · chunk %{customdata[9]}<br>"
                               "start %{base:.3f} ms · duration %{customdata[7]:.3f} ms<br>"
                               "bytes %{customdata[2]} · group %{customdata[3]} · %{customdata[4]}<br>"
                               "tier %{customdata[5]} · achieved %{customdata[6]}<extra></extra>")))
        bars_drawn = n
    if bands:
        yaxis = dict(tickmode="array", tickvals=classes, ticktext=[short[k] for k in classes],
                     range=[max(classes) + 0.6, min(classes) - 0.6], automargin=True, showgrid=False,
                     zeroline=False, tickfont=dict(size=font_size))
        rows_count = len(classes)
        h = height or max(380, min(600, 80 + 28 * rows_count))
    else:
        order = [label[k] for k in lanes_present]
        yaxis = dict(categoryorder="array", categoryarray=order[::-1], automargin=True, tickfont=dict(size=font_size),
                     tickmode="array", tickvals=order, ticktext=order)
        rows_count = len(order)
        h = height or max(380, min(600, 70 + 24 * rows_count))
    fig.update_layout(
        barmode="overlay", height=h, margin=dict(l=10, r=10, t=30, b=40), bargap=0.25,
        legend=dict(orientation="h", yanchor="bottom", y=1.0, x=0, font=dict(size=font_size)),
        xaxis=dict(title="time (ms)", range=[0, iteration_s * 1e3 * 1.01], showgrid=True, zeroline=False),
        yaxis=yaxis, font=dict(size=font_size), hoverlabel=dict(font_size=font_size), uirevision="gantt")
    return fig, GanttInfo(bars_drawn, n, merged, rows_count)


def _fmt_bytes(n) -> str:
    if not n:
        return "–"
    for unit, k in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if n >= k:
            return f"{n / k:.2f} {unit}"
    return f"{n:.0f} B"


def breakdown(breakdown_s: dict[str, float], iteration_s: float, title: str = "",
              height: int = 320, font_size: int = 12) -> go.Figure:
    """Horizontal bars: seconds per category (ms), labelled with the share of the iteration."""
    cats = [k for k, v in breakdown_s.items() if v > 0]
    vals = [breakdown_s[k] * 1e3 for k in cats]
    fig = go.Figure(go.Bar(
        y=cats, x=vals, orientation="h", marker_color=[CATEGORY_COLORS.get(k, "#999") for k in cats],
        text=[f"{v / (iteration_s * 1e3):.1%}" for v in vals], textposition="auto",
        hovertemplate="%{y}: %{x:.1f} ms<extra></extra>"))
    fig.update_layout(height=height, margin=dict(l=10, r=10, t=30 if title else 10, b=40), showlegend=False,
                      title=dict(text=title, font=dict(size=font_size + 1)) if title else None,
                      xaxis=dict(title="ms of the iteration"), yaxis=dict(autorange="reversed"),
                      font=dict(size=font_size))
    return fig


def memory(by_class: list[dict[str, float]], labels: list[str], capacity_GB: float,
           height: int = 380, font_size: int = 12) -> go.Figure:
    """Stacked per-GPU memory (GB) per class, with the capacity as a dashed line."""
    fig = go.Figure()
    colors = {"params": "#4C78A8", "grads": "#F58518", "optimizer": "#54A24B", "activations": "#B279A2"}
    for kind, color in colors.items():
        fig.add_trace(go.Bar(x=labels, y=[m[kind] for m in by_class], name=kind, marker_color=color,
                             hovertemplate=f"{kind}: %{{y:.1f}} GB<extra>%{{x}}</extra>"))
    fig.add_hline(y=capacity_GB, line_dash="dash", line_color="#C00",
                  annotation_text=f"capacity {capacity_GB:g} GB", annotation_position="top left")
    top = max([capacity_GB] + [sum(m[k] for k in colors) for m in by_class])
    fig.update_layout(barmode="stack", height=height, margin=dict(l=10, r=10, t=30, b=40),
                      yaxis=dict(title="GB per GPU", range=[0, top * 1.12]), font=dict(size=font_size),
                      legend=dict(orientation="h", yanchor="bottom", y=1.0, x=0))
    return fig
