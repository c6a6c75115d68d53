"""A measured iteration and the simulated one as lanes on one time axis (the app's trace overlay).

Rows: "measured · compute", "measured · dp", ... above "simulated · compute", ...; each a lane of
busy intervals (explorer/traces/lanes.py), drawn as horizontal bars in ms from the iteration's
start, coloured as the Gantt colours its kinds (compute in the forward colour).  A dashed line
marks the end of each iteration (:func:`ends_text` says which is which).  Intervals closer than a
pixel of an 800-px plot are merged, so a CPU trace of thousands of small ops draws as the few
blocks the eye sees.
"""
from __future__ import annotations

import plotly.graph_objects as go

from ..analysis.intervals import Interval, merged
from ..vocabulary import COMM_DIMS, KIND_COLORS

Spans = dict[str, list[Interval]]
LANES = ("compute",) + COMM_DIMS      # as explorer/traces/lanes.py makes them

PIXELS = 800


def _rows(spans: Spans, side: str) -> list[tuple[str, str, list[tuple[float, float]]]]:
    return [(f"{side} · {k}", k, v) for k in LANES if (v := spans.get(k))]


def lanes_figure(measured: Spans, measured_s: float, simulated: Spans, simulated_s: float,
                 font_size: int = 12) -> go.Figure:
    """The two sides' lanes (seconds) on one axis in ms; ``*_s`` are the iterations' ends."""
    span = max(measured_s, simulated_s, 1e-12)
    gap = span / PIXELS
    rows = _rows(measured, "measured") + _rows(simulated, "simulated")
    fig = go.Figure()
    shown: set[str] = set()
    for label, kind, spans in rows:
        bars = merged(spans, gap)
        color = KIND_COLORS["forward"] if kind == "compute" else KIND_COLORS.get(kind, "#999")
        fig.add_trace(go.Bar(
            y=[label] * len(bars), x=[(e - s) * 1e3 for s, e in bars], base=[s * 1e3 for s, _ in bars],
            orientation="h", marker=dict(color=color, line=dict(width=0)), name=kind,
            legendgroup=kind, showlegend=kind not in shown,
            hovertemplate=f"{label}<br>%{{base:.3f}} ms + %{{x:.3f}} ms<extra></extra>"))
        shown.add(kind)
    order = [r[0] for r in rows]
    # The ends as plain dashed lines: labels inside the plot sat under the bars or off its edge;
    # the caption beside the chart names them (lane_caption).
    for end in (measured_s, simulated_s):
        fig.add_vline(x=end * 1e3, line_dash="dash", line_color="#444", line_width=1)
    fig.update_layout(
        barmode="overlay", bargap=0.3, height=max(260, 100 + max(30, int(2.4 * font_size)) * len(rows)),
        margin=dict(l=10, r=10, t=40, b=40), font=dict(size=font_size),
        legend=dict(orientation="h", yanchor="bottom", y=1.08, x=0),
        xaxis=dict(title="time from the iteration's start (ms)", range=[0, span * 1e3 * 1.02]),
        yaxis=dict(categoryorder="array", categoryarray=order[::-1], automargin=True))
    return fig


def ends_text(measured_s: float, simulated_s: float) -> str:
    """What the chart's dashed lines mark."""
    return (f"Dashed lines: the ends of the measured iteration ({measured_s * 1e3:,.2f} ms) and of the "
            f"simulated one ({simulated_s * 1e3:,.2f} ms).")
