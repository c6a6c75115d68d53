"""The serving curve (issue 37): TPOT against output tokens/s per GPU as the batch doubles — the
serving equivalent of the scaling view.  Each point is one batch (labelled); the knee
(explorer/serving/curve.py) is a diamond, the scenario's own batch a ring, and a TPOT target, when
set, a horizontal line with the point that serves the most requests/s under it.  No Streamlit here.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import plotly.graph_objects as go

LINE, KNEE, HERE, TARGET = "#4C78A8", "#000000", "#E45756", "#54A24B"


def _xy(p: Mapping[str, Any]) -> tuple[float, float]:
    return float(p["output_tokens_per_s_per_gpu"]), float(p["tpot_s"]) * 1e3


def serving_curve_figure(f: Mapping[str, Any], height: int = 360, font_size: int = 12) -> go.Figure:
    """The figure of run --json's ``inference`` object ``f`` (its batch_curve, knee_batch, batch and
    figures, and tpot_target_s / target_batch when a target is set)."""
    pts: Sequence[Mapping[str, Any]] = f["batch_curve"]
    fig = go.Figure()
    xs, ys = zip(*(_xy(p) for p in pts), strict=True) if pts else ((), ())
    fig.add_trace(go.Scatter(
        x=list(xs), y=list(ys), mode="lines+markers+text", name="batch doubled",
        text=[f"{p['batch']:,}" for p in pts], textposition="top left",
        customdata=[[p["batch"], p["ttft_s"] * 1e3, p["requests_per_s"]] for p in pts],
        line=dict(color=LINE),
        hovertemplate="batch %{customdata[0]:,}: TPOT %{y:.2f} ms, %{x:,.0f} tokens/s per GPU, "
                      "TTFT %{customdata[1]:.1f} ms, %{customdata[2]:,.2f} requests/s<extra></extra>"))
    knee = next((p for p in pts if p["batch"] == f["knee_batch"]), None)
    if knee is not None:
        x, y = _xy(knee)
        fig.add_trace(go.Scatter(x=[x], y=[y], mode="markers", name=f"knee (batch {knee['batch']:,})",
                                 marker=dict(symbol="diamond", size=13, color=KNEE),
                                 hovertemplate=f"knee: batch {knee['batch']:,}<extra></extra>"))
    x, y = float(f["output_tokens_per_s_per_gpu"]), float(f["tpot_s"]) * 1e3
    fig.add_trace(go.Scatter(x=[x], y=[y], mode="markers", name=f"this scenario (batch {f['batch']:,})",
                             marker=dict(symbol="circle-open", size=17, color=HERE, line=dict(width=3)),
                             hovertemplate=f"this scenario, batch {f['batch']:,}: TPOT %{{y:.2f}} ms, "
                                           "%{x:,.0f} tokens/s per GPU<extra></extra>"))
    target = f.get("tpot_target_s")
    if target is not None:
        fig.add_hline(y=target * 1e3, line=dict(color=TARGET, dash="dash"),
                      annotation_text=f"TPOT target {target * 1e3:,.4g} ms", annotation_position="top right")
    fig.update_xaxes(title_text="output tokens/s per GPU", rangemode="tozero")
    # Room above the highest point for its batch label (and the scenario's own point, the target).
    top_ms = max([*ys, y, (target or 0.0) * 1e3], default=1.0)
    fig.update_yaxes(title_text="TPOT (ms)", range=[0, 1.15 * top_ms])
    # The title on the top line, the legend on its own line under it (they overlapped at one margin).
    top = 3 * font_size + 36
    fig.update_layout(height=height, font=dict(size=font_size), margin=dict(l=6, r=6, t=top, b=30),
                      legend=dict(orientation="h", yanchor="bottom", y=1.01, x=0),
                      title=dict(text="Latency against throughput as the batch doubles",
                                 font=dict(size=font_size + 1), y=0.99, yanchor="top"))
    return fig
