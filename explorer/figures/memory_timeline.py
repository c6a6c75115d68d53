"""Memory over time (explorer/result/memory_timeline.py): per-GPU memory of each pipeline stage
along the iteration, on the Gantt's time axis (ms) — activations climbing through the warm-up and
draining in the cool-down, against the GPU's capacity."""
from __future__ import annotations

import plotly.graph_objects as go

from ..result.memory_timeline import MemoryCurve

# Stages drawn at most (the first, the last and evenly spaced between): a 16-stage pipeline's
# curves would hide each other; the first stage holds the most in flight under 1F1B.
MAX_CURVES = 8
CAPACITY_IN_VIEW = 1.5     # draw the capacity when it is at most this many times the highest curve
PALETTE = ("#4C78A8", "#F58518", "#54A24B", "#E45756", "#72B7B2", "#B279A2", "#FF9DA6", "#9D755D")


def _pick(curves: tuple[MemoryCurve, ...]) -> list[MemoryCurve]:
    if len(curves) <= MAX_CURVES:
        return list(curves)
    step = (len(curves) - 1) / (MAX_CURVES - 1)
    return [curves[round(i * step)] for i in range(MAX_CURVES)]


def memory_timeline_figure(curves: tuple[MemoryCurve, ...], iteration_s: float, capacity_GB: float,
                           height: int = 300, font_size: int = 12) -> go.Figure:
    """Curves of static + live activations (GB) per stage (rising through each forward, falling
    through each freeing pass) over [0, iteration] in ms, the
    capacity dashed when it is within CAPACITY_IN_VIEW of the curves (else named on the y axis); each
    curve's hover gives the level and its activation share."""
    fig = go.Figure()
    top = 0.0
    for i, c in enumerate(_pick(curves)):
        xs = [t * 1e3 for t, _ in c.points] + [iteration_s * 1e3]
        ys = [(c.static + b) / 1e9 for _, b in c.points]
        ys.append(ys[-1])                    # held after the last pass, to the end of the axis
        top = max(top, max(ys))
        fig.add_trace(go.Scatter(
            x=xs, y=ys, mode="lines", line=dict(shape="linear", width=2, color=PALETTE[i % len(PALETTE)]),
            name=c.name, customdata=[[(y * 1e9 - c.static) / 1e9] for y in ys],
            hovertemplate="%{y:.2f} GB at %{x:.1f} ms (activations %{customdata[0]:.2f} GB)"
                          f"<extra>{c.name}</extra>"))
    # The capacity line only when it is near the curves: far above, it would flatten them into the
    # axis and hide the warm-up and cool-down this view is for (the title says where it is).
    y_title = "GB per GPU"
    if capacity_GB <= CAPACITY_IN_VIEW * top:
        fig.add_hline(y=capacity_GB, line_dash="dash", line_color="#C00",
                      annotation_text=f"capacity {capacity_GB:.1f} GB", annotation_position="top left")
        top = max(top, capacity_GB)
    else:
        y_title = f"GB per GPU (capacity {capacity_GB:.0f} GB above)"
    fig.update_layout(height=height, margin=dict(l=10, r=10, t=30, b=40), font=dict(size=font_size),
                      xaxis=dict(title="time (ms)", range=[0, iteration_s * 1e3 * 1.01]),
                      yaxis=dict(title=y_title, range=[0, top * 1.12]),
                      legend=dict(orientation="h", yanchor="bottom", y=1.0, x=0))
    return fig
