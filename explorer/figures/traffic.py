"""Communication volume: bytes each GPU sends per dimension and network tier, and the ZeRO
trade-off between memory and traffic (no Streamlit here)."""
from __future__ import annotations

from typing import Mapping, Sequence

import plotly.graph_objects as go

from .charts import TIER_LABELS

TIER_COLORS = {"scale-up": "#4C78A8", "scale-out": "#F58518", "spine": "#B279A2", "scale-across": "#E45756"}
DIMENSIONS = ("tp", "cp", "ep", "pp", "dp")


def traffic_by_tier(by_tier: Mapping[str, Mapping[str, float]], height: int = 320,
                    font_size: int = 12) -> go.Figure:
    """Horizontal stacked bars: GB each GPU sends per iteration, one bar per dimension, one colour
    per tier the bytes cross (a byte that leaves the node crosses the NVLink hop too)."""
    dims = [d for d in DIMENSIONS if sum(by_tier.get(d, {}).values()) > 0]
    fig = go.Figure()
    for tier, color in TIER_COLORS.items():
        values = [by_tier.get(d, {}).get(tier, 0.0) / 1e9 for d in dims]
        if not any(values):
            continue
        fig.add_trace(go.Bar(y=dims, x=values, orientation="h", name=TIER_LABELS.get(tier, tier),
                             marker_color=color, hovertemplate="%{y}: %{x:.2f} GB<extra>" + tier + "</extra>"))
    fig.update_layout(barmode="stack", height=height, margin=dict(l=10, r=10, t=30, b=40),
                      xaxis=dict(title="GB sent per GPU per iteration"), yaxis=dict(autorange="reversed"),
                      legend=dict(orientation="h", yanchor="bottom", y=1.0, x=0), font=dict(size=font_size))
    return fig


def zero_tradeoff(points: Sequence[dict], capacity_GB: float, current: int, height: int = 340,
                  font_size: int = 12) -> go.Figure:
    """Memory per GPU against data-parallel bytes per GPU for ZeRO stages 0-3 of one scenario.

    ``points``: dicts with ``zero``, ``memory_GB``, ``dp_GB`` and ``iteration_s``; ``current``
    is the stage the scenario uses (drawn larger).  ZeRO trades memory for traffic (Rajbhandari et
    al. SC20, Fig. 1): stages 1-2 shard state at the same volume as an all-reduce, stage 3 adds a
    parameter gather per layer, 1.5x the bytes."""
    fig = go.Figure(go.Scatter(
        x=[p["dp_GB"] for p in points], y=[p["memory_GB"] for p in points], mode="markers+text+lines",
        text=[f"ZeRO {p['zero']} · {p['iteration_s']:.3g} s" for p in points], textposition="top center",
        line=dict(color="#BBB", dash="dot"),
        marker=dict(size=[22 if p["zero"] == current else 12 for p in points],
                    color=["#E45756" if p["zero"] == current else "#4C78A8" for p in points]),
        hovertemplate="%{text}<br>memory %{y:.1f} GB per GPU<br>DP traffic %{x:.2f} GB per GPU<extra></extra>"))
    fig.add_hline(y=capacity_GB, line_dash="dash", line_color="#C00",
                  annotation_text=f"capacity {capacity_GB:g} GB", annotation_position="top left")
    top = max([capacity_GB] + [p["memory_GB"] for p in points])
    fig.update_layout(height=height, margin=dict(l=10, r=10, t=30, b=40), showlegend=False,
                      xaxis=dict(title="data-parallel GB sent per GPU per iteration", rangemode="tozero"),
                      yaxis=dict(title="memory per GPU (GB)", range=[0, top * 1.18]), font=dict(size=font_size))
    return fig
