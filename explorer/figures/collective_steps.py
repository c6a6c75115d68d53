"""One step of a collective's step-through (explorer/teaching/collective_steps.py) as a picture:
ranks on a circle coloured by node (the NVSwitch in the middle for NVLS), every link used so far
drawn with the bytes it has carried (hover), and the current step's transfers as arrows labelled
with what they carry."""
from __future__ import annotations

import math

import plotly.graph_objects as go

from ..teaching.collective_steps import SWITCH, Walkthrough

NODE_COLOURS = ("#4C78A8", "#F58518", "#54A24B", "#B279A2", "#E45756", "#72B7B2", "#FF9DA6", "#9D755D")
ACROSS, INSIDE = "#E45756", "#4C78A8"     # arrows leaving the node / staying in it


def _xy(rank: int, n: int) -> tuple[float, float]:
    if rank == SWITCH:
        return 0.0, 0.0
    a = math.pi / 2 - 2 * math.pi * rank / n
    return math.cos(a), math.sin(a)


def _name(rank: int) -> str:
    return "switch" if rank == SWITCH else f"rank {rank}"


def _sent(carried: dict[tuple[int, int], float], rank: int) -> float:
    return sum(v for (a, _), v in carried.items() if a == rank)


def _mb(x: float) -> str:
    return f"{x / 1e6:,.2f} MB" if x >= 1e5 else f"{x / 1e3:,.1f} kB"


def step_figure(w: Walkthrough, step: int, height: int = 420, font_size: int = 12) -> go.Figure:
    """The ranks, the links used up to and including ``step`` (0-based) and its transfers."""
    fig = go.Figure()
    carried = w.link_bytes(step + 1)
    for (a, b), nbytes in carried.items():
        (x0, y0), (x1, y1) = _xy(a, w.n), _xy(b, w.n)
        text = f"{_name(a)} → {_name(b)}: {_mb(nbytes)} so far"
        fig.add_trace(go.Scatter(x=[x0, x1], y=[y0, y1], mode="lines", line=dict(color="#C8C8C8", width=1.5),
                                 hovertext=text, hoverinfo="text", showlegend=False))
    for t in w.steps[step].transfers:
        (x0, y0), (x1, y1) = _xy(t.src, w.n), _xy(t.dst, w.n)
        # Stop short of the target marker; bend a little so that both directions of a pair show.
        tip_x = x0 + 0.86 * (x1 - x0) + 0.04 * (y1 - y0)
        tip_y = y0 + 0.86 * (y1 - y0) - 0.04 * (x1 - x0)
        fig.add_annotation(x=tip_x, y=tip_y, ax=x0, ay=y0, xref="x", yref="y", axref="x", ayref="y",
                           showarrow=True,
                           arrowhead=3, arrowsize=1.2, arrowwidth=2.2,
                           arrowcolor=ACROSS if w.crosses_nodes(t) else INSIDE)
    ranks = list(range(w.n))
    xs, ys = zip(*(_xy(r, w.n) for r in ranks), strict=True)
    fig.add_trace(go.Scatter(
        x=xs, y=ys, mode="markers+text", text=[str(r) for r in ranks], textposition="middle center",
        textfont=dict(color="white", size=font_size), showlegend=False, hoverinfo="text",
        hovertext=[f"rank {r} · node {r // w.per_node} · sent {_mb(_sent(carried, r))}" for r in ranks],
        marker=dict(size=34, color=[NODE_COLOURS[(r // w.per_node) % len(NODE_COLOURS)] for r in ranks])))
    if w.algorithm == "nvls":
        fig.add_trace(go.Scatter(x=[0], y=[0], mode="markers+text", text=["NVSwitch"],
                                 textposition="bottom center", hoverinfo="skip", showlegend=False,
                                 marker=dict(size=40, symbol="square", color="#79706E")))
    fig.update_layout(height=height, margin=dict(l=10, r=10, t=10, b=10), font=dict(size=font_size),
                      xaxis=dict(visible=False, range=[-1.35, 1.35]),
                      yaxis=dict(visible=False, range=[-1.25, 1.25], scaleanchor="x"),
                      plot_bgcolor="white")
    return fig
