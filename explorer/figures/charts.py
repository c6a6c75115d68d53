"""Small charts of a simulated iteration and the shared colours (no Streamlit here).

- :func:`breakdown` — where the slowest class's iteration goes, category by category;
- :func:`memory` — per-GPU memory by kind for each class against the GPU's capacity.
"""
from __future__ import annotations

from collections.abc import Mapping

import plotly.graph_objects as go

from ..vocabulary import CATEGORY_COLORS, KIND_COLORS, TIER_LABELS  # noqa: F401 - re-exported

# A bar at least this share of the longest holds its label inside (figures.charts.breakdown).
INSIDE_SHARE = 0.3


def breakdown(breakdown_s: Mapping[str, float], iteration_s: float, title: str = "",
              height: int = 320, font_size: int = 12) -> go.Figure:
    """Horizontal bars: seconds per category (ms), labelled with the share of the iteration."""
    cats = [k for k, v in breakdown_s.items() if v > 0]
    vals = [breakdown_s[k] * 1e3 for k in cats]
    top = max(vals, default=0.0)
    fig = go.Figure(go.Bar(
        y=cats, x=vals, orientation="h", marker_color=[CATEGORY_COLORS.get(k, "#999") for k in cats],
        # Horizontal labels, at the figure's font (uniformtext below): inside a bar at least
        # INSIDE_SHARE of the longest (room for "88.1%" at 18 px on a projector's 250-px plot),
        # beside the others.  Plotly's "auto" had shrunk a share inside a thin bar to about 11 px,
        # and forced to 18 px there it was cut ("11.4%" read "1.4%": a regression hunt).
        text=[f"{v / (iteration_s * 1e3):.1%}" for v in vals], textangle=0,
        textposition=["inside" if v >= INSIDE_SHARE * top else "outside" for v in vals],
        cliponaxis=False, hovertemplate="%{y}: %{x:.1f} ms<extra></extra>"))
    # A title of two lines (the Timeline's on a projector) takes a line's height more.
    head = 30 + (font_size + 6) * title.count("<br>") if title else 10
    fig.update_layout(height=height, margin=dict(l=10, r=10, t=head, b=40), showlegend=False,
                      title=dict(text=title, font=dict(size=font_size + 1)) if title else None,
                      xaxis=dict(title="ms of the iteration"), font=dict(size=font_size),
                      # Every category labelled: Plotly's automatic ticks drop every other one once
                      # presentation's 18-px labels come near each other.
                      yaxis=dict(autorange="reversed", tickmode="array", tickvals=cats, ticktext=cats),
                      # Every share at the figure's size (presentation promises 18 px).
                      uniformtext=dict(minsize=font_size, mode="show"))
    return fig


# Longest class label drawn under a vertical bar: longer ones ("stage 0 · hopper · H100 SXM" of a
# mixed-generations run) would stand rotated and take half the plot's height on a projector.
VERTICAL_LABEL_CHARS = 12


def memory(by_class: list[dict[str, float]], labels: list[str], capacity_GB: float,
           height: int = 380, font_size: int = 12) -> go.Figure:
    """Stacked per-GPU memory (GB) per class, with the capacity as a dashed line: a column per
    class, or, when a label is longer than :data:`VERTICAL_LABEL_CHARS`, a row per class (first
    at the top) with its label written above its bar, so that long labels read horizontally and
    leave the bars the plot's whole width (the figure grows with the rows)."""
    fig = go.Figure()
    colors = {"params": "#4C78A8", "grads": "#F58518", "optimizer": "#54A24B", "activations": "#B279A2",
              "reserved": "#9D9DA0"}          # reserved: NCCL's communicator buffers
    rows = max((len(x) for x in labels), default=0) > VERTICAL_LABEL_CHARS
    at = list(range(len(labels)))
    for kind, color in colors.items():
        gb = [m.get(kind, 0.0) for m in by_class]
        if rows:
            fig.add_trace(go.Bar(y=at, x=gb, orientation="h", width=0.45, name=kind, marker_color=color,
                                 customdata=labels,
                                 hovertemplate=f"{kind}: %{{x:.1f}} GB<extra>%{{customdata}}</extra>"))
        else:
            fig.add_trace(go.Bar(x=labels, y=gb, name=kind, marker_color=color,
                                 hovertemplate=f"{kind}: %{{y:.1f}} GB<extra>%{{x}}</extra>"))
    top = max([capacity_GB] + [sum(m.get(k, 0.0) for k in colors) for m in by_class])
    axis = dict(title="GB per GPU", range=[0, top * 1.12])
    if rows:
        fig.add_vline(x=capacity_GB, line_dash="dash", line_color="#C00",
                      annotation_text=f"capacity {capacity_GB:.1f} GB", annotation_position="top left")
        for i, label in enumerate(labels):
            fig.add_annotation(x=0, y=i - 0.25, text=label, showarrow=False, xanchor="left", yanchor="bottom",
                               xref="x", yref="y")
        height = max(height, 110 + 3 * font_size + round(2.6 * font_size) * len(labels))
        fig.update_layout(xaxis=axis, yaxis=dict(autorange="reversed", showticklabels=False, range=None),
                          legend=dict(orientation="h", yanchor="bottom", y=1.0, x=0))
    else:
        fig.add_hline(y=capacity_GB, line_dash="dash", line_color="#C00",
                      annotation_text=f"capacity {capacity_GB:.1f} GB", annotation_position="top left")
        fig.update_layout(yaxis=axis, legend=dict(orientation="h", yanchor="bottom", y=1.0, x=0))
    fig.update_layout(barmode="stack", height=height, font=dict(size=font_size),
                      margin=dict(l=10, r=10, t=30, b=40))
    return fig
