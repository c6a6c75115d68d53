"""The Gantt chart (gantt.py) redrawn for a projector: 18-px text, and no more lane labels than fit.

At 18 px a label needs about LABEL_PX x 18 = 27 px of height.  Presentation mode gives the Gantt
370 px on a 1280x720 screen, less the axis margins and a legend that now wraps onto more rows, so
the 16 lanes of four pipeline stages (compute, tp, pp, dp each) or the 16 bands of DeepSeek-V3's
stages would print on top of each other.  :func:`for_projector` keeps every label while they fit;
beyond, a lane chart labels only each GPU class's compute lane, by the class's name (the streams
under it are told apart by their colours and the legend), and a band chart every k-th band.
"""
from __future__ import annotations

import math

import plotly.graph_objects as go

from .fonts import PRESENT_FONT_PX, at_least
from .gantt import LABEL_PX

PROJECTOR_HEIGHT = 370        # the Gantt's height in presentation mode (1280x720, see ui/style.py)
PROJECTOR_WIDTH = 860         # its width there: 7/10 of the page, beside the bottleneck sentence
MARGINS = {"l": 6, "r": 6, "t": 26, "b": 34}
AXIS_PX = 2.6                 # the time axis below the plot: its tick labels and title, in font sizes


def legend_rows(fig: go.Figure, font_px: float, width_px: float) -> int:
    """Rows a horizontal legend of ``fig`` wraps onto: each entry is its swatch (40 px) plus its
    name at about 0.55 font sizes per character."""
    names = list(dict.fromkeys(t.name for t in fig.data if t.name and t.showlegend is not False))
    rows, used = 1, 0.0
    for name in names:
        w = 40 + 0.55 * font_px * len(name)
        if used and used + w > width_px:
            rows, used = rows + 1, 0.0
        used += w
    return rows if names else 0


def plot_height(fig: go.Figure, height: float, font_px: float, width_px: float) -> float:
    """Pixels of the plot area: the figure less the legend above it and the time axis below."""
    legend = legend_rows(fig, font_px, width_px) * font_px * 1.45
    return max(height - max(MARGINS["t"], legend + 6) - AXIS_PX * font_px - 10, 1.0)


def _thin(values: list, texts: list, keep: int) -> tuple[list, list]:
    """Every k-th of ``values`` (with its text) so that at most ``keep`` remain, the last kept."""
    if len(values) <= keep:
        return values, texts
    k = math.ceil(len(values) / max(keep, 1))
    idx = list(range(0, len(values), k))
    if idx[-1] != len(values) - 1:
        idx[-1] = len(values) - 1
    return [values[i] for i in idx], [texts[i] for i in idx]


def _compute_lanes(order: list[str]) -> tuple[list[str], list[str]]:
    """The compute lanes of a lane chart's axis and their labels without the stream (``stage 0 ×2``)."""
    vals = [v for v in order if v.endswith("· compute")]
    return vals, [v.rsplit(" · ", 1)[0] for v in vals]


def for_projector(fig: go.Figure, height: int = PROJECTOR_HEIGHT, font_px: float = PRESENT_FONT_PX,
                  width_px: float = PROJECTOR_WIDTH, hover_px: float = 15) -> go.Figure:
    """A copy of the Gantt ``fig`` at ``height`` pixels with every text at least ``font_px``
    (fonts.at_least) and its lane labels thinned to those that fit (see the module docstring)."""
    out = go.Figure(fig)
    out.update_layout(height=height, margin=MARGINS, hoverlabel=dict(font_size=hover_px))
    out = at_least(out, font_px)
    fits = max(1, int(plot_height(out, height, font_px, width_px) // (LABEL_PX * font_px)))
    y = out.layout.yaxis
    vals, texts = list(y.tickvals or ()), list(y.ticktext or y.tickvals or ())
    if len(vals) > fits:
        if y.categoryarray is not None:          # lanes: a category per (class, stream)
            vals, texts = _compute_lanes(vals)
        vals, texts = _thin(vals, texts, fits)
        out.update_yaxes(tickvals=vals, ticktext=texts)
    return out
