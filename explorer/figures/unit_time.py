"""The textbook diagram of a schedule (explorer/teaching/unit_time.py) as a figure: one row per
rank, one cell per op at unit cost, labelled with its micro-batch; ``upto`` reveals the ops started
before that unit and outlines the ones running at it (step-through).  No Streamlit here."""
from __future__ import annotations

import plotly.graph_objects as go

from ..teaching.unit_time import Cell, makespan
from ..vocabulary import KIND_COLORS

KIND_OF = {"F": "forward", "B": "backward", "Bi": "backward", "W": "weight-grad", "F&B": "F&B"}
NAMES = {"F": "forward", "B": "backward (B+W)", "Bi": "backward (input grads)", "W": "weight grads",
         "F&B": "fused F&B"}


def phase(cells: list[Cell], rank: int, t: int) -> str:
    """What rank ``rank`` is doing at unit ``t``: warm-up (forwards before its first backward),
    steady state, cool-down (backwards after its last forward), idle or done."""
    mine = [c for c in cells if c.rank == rank]
    first_b = min((c.start for c in mine if c.kind != "F"), default=None)
    last_f = max((c.start for c in mine if c.kind in ("F", "F&B")), default=None)
    now = next((c for c in mine if c.start <= t < c.start + c.units), None)
    if t >= max(c.start + c.units for c in mine):
        return "done"
    if now is None:
        return "idle (bubble)"
    if first_b is None or t < first_b:
        return "warm-up"
    return "cool-down" if last_f is not None and t > last_f else "steady state"


def _text(c: Cell, two_way: bool) -> str:
    """A cell's label: its micro-batch, primed when it entered at the last rank (DeepSeek-V3 Fig. 5
    tells the two directions apart by the numbers' colour); a fused F&B shows both of its passes."""
    def mb(n: int, lane: int) -> str:
        return f"{n}\u2032" if two_way and lane == 1 else str(n)
    label = mb(c.mb + 1, c.lane)
    return f"{label}|{mb(c.b_mb + 1, c.b_lane)}" if c.kind == "F&B" else label


def unit_figure(cells: list[Cell], p: int, title: str, upto: int | None = None, height: int = 260,
                font_size: int = 12, min_label_px: int | None = None) -> go.Figure:
    """The grid; with ``upto``, only ops started before it, those running at it outlined.  A cell's
    label shrinks to fit its cell; with ``min_label_px`` (presentation mode: a projector's 18 px)
    a label that would be smaller is left out instead (its hover still names it): a V schedule at
    p = 8 draws 2pm cells, whose numbers had shrunk below that."""
    T = makespan(cells)
    two_way = any(c.lane == 1 for c in cells)
    shown = [c for c in cells if upto is None or c.start < upto]
    fig = go.Figure()
    for kind in ("F", "B", "Bi", "W", "F&B"):
        mine = [c for c in shown if c.kind == kind]
        if not mine:
            continue
        running = [upto is not None and c.start <= upto - 1 < c.start + c.units for c in mine]
        fig.add_trace(go.Bar(
            y=[f"rank {c.rank}" for c in mine], x=[c.units for c in mine], base=[c.start for c in mine],
            orientation="h", name=NAMES[kind], text=[_text(c, two_way) for c in mine], textposition="inside",
            insidetextanchor="middle", textfont=dict(size=font_size),
            marker=dict(color=KIND_COLORS[KIND_OF[kind]],
                        # An input-gradient-only backward is the full backward's colour, striped: the
                        # two shared one legend colour on DualPipe's diagrams (which run both).
                        pattern=dict(shape="/" if kind == "Bi" else "", fgcolor="white", solidity=0.3),
                        line=dict(color=["black" if r else "white" for r in running],
                                  width=[3 if r else 1 for r in running])),
            hovertemplate="%{y}: " + NAMES[kind] + " of micro-batch %{text}, from unit %{base}, %{x} long"
                          "<extra></extra>"))
    if upto is not None:
        fig.add_vline(x=upto, line_color="black", line_dash="dot")
    if min_label_px is not None:
        fig.update_layout(uniformtext=dict(minsize=min_label_px, mode="hide"))
    fig.update_layout(barmode="overlay", height=height, font=dict(size=font_size), bargap=0.15,
                      margin=dict(l=6, r=6, t=36, b=70),
                      legend=dict(orientation="h", y=-0.28, x=0, yanchor="top"),
                      title=dict(text=title, font=dict(size=font_size + 1)))
    fig.update_yaxes(categoryorder="array", categoryarray=[f"rank {r}" for r in reversed(range(p))])
    fig.update_xaxes(range=[0, T], dtick=max(1, round(T / 16)), title_text="time units (F = B = W = 1)")
    return fig
