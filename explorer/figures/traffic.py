"""Communication volume: bytes each GPU sends per dimension and network tier, and the ZeRO
trade-off between memory and traffic (no Streamlit here)."""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import plotly.graph_objects as go

from .. import dimensions
from ..numbers import seconds_text
from ..vocabulary import TIER_COLORS, tier_label


def traffic_by_tier(by_tier: Mapping[str, Mapping[str, float]], height: int = 320,
                    font_size: int = 12, scale_up_kind: str | None = None) -> go.Figure:
    """Horizontal grouped bars: GB each GPU sends per iteration, one group per dimension, one bar
    per tier boundary the bytes cross.  Tiers nest — a byte that leaves the datacenter also left
    its node and its GPU — so the bars are side by side, never stacked."""
    dims = [d for d in dimensions.shown_in("traffic") if sum(by_tier.get(d, {}).values()) > 0]
    fig = go.Figure()
    for tier, color in TIER_COLORS.items():
        values = [by_tier.get(d, {}).get(tier, 0.0) / 1e9 for d in dims]
        if not any(values):
            continue
        fig.add_trace(go.Bar(y=dims, x=values, orientation="h", name=tier_label(tier, scale_up_kind),
                             marker_color=color,
                             hovertemplate="%{y}: %{x:.2f} GB<extra>" + tier + "</extra>"))
    fig.update_layout(barmode="group", height=height, margin=dict(l=10, r=10, t=30, b=40),
                      xaxis=dict(title="GB sent per GPU per iteration"), yaxis=dict(autorange="reversed"),
                      legend=dict(orientation="h", yanchor="bottom", y=1.0, x=0), font=dict(size=font_size))
    return fig


def zero_tradeoff(points: Sequence[dict], capacity_GB: float, current: int, height: int = 340,
                  font_size: int = 12) -> go.Figure:
    """ZeRO stages 0-3 of one scenario side by side: memory per GPU (against capacity) and the
    data-parallel bytes each GPU sends per iteration, with the iteration time on each bar.

    ``points``: dicts with ``zero``, ``memory_GB``, ``dp_GB`` and ``iteration_s``; ``current`` is
    the stage the scenario uses (drawn darker).  ZeRO trades memory for traffic (Rajbhandari et al.
    SC20, Fig. 1): stages 1-2 shard state at the volume of an all-reduce, stage 3 re-gathers every
    layer's weights for forward and backward, 1.5x the bytes per micro-batch."""
    from plotly.subplots import make_subplots

    # The time on its own lines, value over unit: four "3.63 ms" side by side ran into one another
    # on a 1280-px projector.
    labels = [f"ZeRO {p['zero']}<br>" + seconds_text(p["iteration_s"]).replace(" ", "<br>") for p in points]
    shade = ["#2F5D8A" if p["zero"] == current else "#9DB9D5" for p in points]
    # The capacity is said in the panel's title, not beside its line: a label there covered the
    # bars of a scenario whose stages all exceed it (a full-graph GNN: 52.8 GB against 25.8).
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.14,
                        subplot_titles=(f"memory per GPU (GB)<br>dashed: the GPU's {capacity_GB:.1f}",
                                        "data-parallel GB<br>sent per GPU"))
    fig.add_trace(go.Bar(x=labels, y=[p["memory_GB"] for p in points], marker_color=shade,
                         text=[f"{p['memory_GB']:.1f}" for p in points], textposition="outside",
                         hovertemplate="%{x}: %{y:.1f} GB per GPU<extra></extra>"), row=1, col=1)
    fig.add_trace(go.Bar(x=labels, y=[p["dp_GB"] for p in points], marker_color=shade,
                         text=[_gb(p["dp_GB"]) for p in points],
                         textposition="outside",
                         hovertemplate="%{x}: %{y:.2f} GB sent per GPU<extra></extra>"), row=1, col=2)
    fig.add_hline(y=capacity_GB, line_dash="dash", line_color="#C00", row=1, col=1)
    top = max([capacity_GB] + [p["memory_GB"] for p in points])
    fig.update_yaxes(range=[0, top * 1.2], row=1, col=1)
    fig.update_yaxes(range=[0, max([p["dp_GB"] for p in points] + [1e-9]) * 1.25], row=1, col=2)
    fig.update_layout(height=height, margin=dict(l=10, r=10, t=40 + font_size + 6, b=40), showlegend=False,
                      font=dict(size=font_size), uniformtext=dict(minsize=font_size - 1, mode="show"))
    fig.update_xaxes(tickangle=0)
    fig.update_annotations(font_size=font_size)
    return fig


def _gb(x: float) -> str:
    """A bar's GB: one decimal from 1 GB, three significant digits below (a GNN's 0.0016-0.0021
    GB of gradients all read "0.0")."""
    return f"{x:.1f}" if x >= 1 else f"{x:.3g}"
