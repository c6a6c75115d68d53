"""This scenario's timeline revealed up to a moment (explorer/teaching/timeline_story.py): one row
per GPU class, the passes started before ``t`` coloured by kind, those running at ``t`` outlined, a
dotted line at ``t``.  No Streamlit here."""
from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go

from ..teaching.timeline_story import NAMES, Pass
from ..vocabulary import KIND_COLORS

COLOR = {**KIND_COLORS, "backward+recompute": KIND_COLORS["backward"]}


def step_figure(all_passes: Sequence[Sequence[Pass]], names: Sequence[str], t: float, span: float,
                height: int = 320, font_size: int = 12,
                fold: tuple[float, float, int, float] | None = None) -> go.Figure:
    """The passes of every class that started before ``t`` seconds, on a 0..``span`` axis in ms;
    ``fold`` (block start and end s, repeats, period) shades the reduced run's repeated block as
    the Gantt does."""
    shown: dict[str, list[tuple[str, Pass]]] = {}
    for name, mine in zip(names, all_passes, strict=True):
        for p in mine:
            if p.start < t:
                shown.setdefault(p.kind, []).append((name, p))
    fig = go.Figure()
    for kind, items in shown.items():
        running = [p.start <= t < p.end for _, p in items]
        fig.add_trace(go.Bar(
            y=[n for n, _ in items], x=[(p.end - p.start) * 1e3 for _, p in items],
            base=[p.start * 1e3 for _, p in items], orientation="h",
            name=NAMES.get(kind, kind), marker=dict(
                color=COLOR.get(kind, "#999"),
                line=dict(color=["black" if r else "rgba(0,0,0,0)" for r in running],
                          width=[3 if r else 0 for r in running])),
            customdata=[("" if p.mb is None else p.mb) for _, p in items],
            hovertemplate="%{y}: " + NAMES.get(kind, kind) + " of micro-batch %{customdata}, "
                          "from %{base:.2f} ms, %{x:.2f} ms long<extra></extra>"))
    fig.add_vline(x=t * 1e3, line_color="black", line_dash="dot")
    if fold is not None:
        x0, x1, repeats, _ = fold
        fig.add_vrect(x0=x0 * 1e3, x1=x1 * 1e3, fillcolor="rgba(90,90,90,0.08)", line_width=1,
                      line_dash="dot", annotation_text=f"×{repeats:,} periods", annotation_position="top")
    fig.update_layout(barmode="overlay", height=height, font=dict(size=font_size), bargap=0.2,
                      margin=dict(l=6, r=6, t=10, b=60), uirevision="step_through",
                      legend=dict(orientation="h", y=-0.22, x=0, yanchor="top"))
    fig.update_yaxes(categoryorder="array", categoryarray=list(reversed(names)))
    fig.update_xaxes(range=[0, span * 1e3], title_text="time (ms)")
    return fig
