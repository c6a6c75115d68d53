"""Font sizes of the figures: the app's default and presentation mode's minimum.

Presentation mode is for a projector at 1280x720, read from the back of a room: there no chart
text is smaller than 18 px (issue 32), above the page's 16-px body text.  :func:`at_least` lifts
every text of a figure's layout — the default font, titles, legends, axis tick labels and
titles, colour bars, annotations — to that minimum on a copy.  Hover labels stay as they are
(they are read up close, and larger ones cover the bars they describe), and so does text drawn
inside bars or cells (a trace's ``textfont``), which its figure sizes to fit its mark.
"""
from __future__ import annotations

import re
from typing import Any

import plotly.graph_objects as go

DEFAULT_FONT_PX = 12          # the figures' own default (plotly's too)
PRESENT_FONT_PX = 18          # presentation mode's minimum (issue 32)

_FONT_KEYS = ("font", "tickfont")
_SKIP = ("hoverlabel", "template")
_AXIS = re.compile(r"^[xy]axis[0-9]*$")
_COLORAXIS = re.compile(r"^coloraxis[0-9]*$")


def _lift(node: dict[str, Any], key: str, px: float) -> None:
    """``node[key]`` (a font) at least ``px``, set explicitly even when it inherits: a template (the
    app's Streamlit theme sets tick labels to 12 px, axis titles to 14) overrides inheritance."""
    font = dict(node.get(key) or {})
    if not isinstance(font.get("size"), (int, float)) or font["size"] < px:
        font["size"] = px
    node[key] = font


def _colorbar(bar: dict[str, Any] | None, px: float) -> dict[str, Any]:
    """A colour bar's spec with its tick labels and title at least ``px``."""
    bar = dict(bar or {})
    _lift(bar, "tickfont", px)
    bar["title"] = dict(bar.get("title") or {})
    _lift(bar["title"], "font", px)
    return bar


def _raise(node: Any, px: float) -> None:
    """Every other explicit ``font``/``tickfont`` size under ``node`` (a layout's JSON) raised to
    ``px`` (annotations, a legend's group titles, ...); hover labels and the template left out."""
    if isinstance(node, list):
        for item in node:
            _raise(item, px)
        return
    if not isinstance(node, dict):
        return
    for key, value in node.items():
        if key in _SKIP:
            continue
        if key in _FONT_KEYS and isinstance(value, dict):
            size = value.get("size")
            if isinstance(size, (int, float)) and size < px:
                value["size"] = px
        _raise(value, px)


def _axes(fig: go.Figure, layout: dict[str, Any]) -> set[str]:
    """Every axis of ``fig``: those its layout names and those its traces use (x, x2, ...)."""
    names = {k for k in layout if _AXIS.match(k)} | {"xaxis", "yaxis"}
    for tr in fig.data:
        for attr in ("xaxis", "yaxis"):
            ref = getattr(tr, attr, None) if attr in tr else None
            if isinstance(ref, str) and ref[1:].isdigit():
                names.add(f"{attr}{ref[1:]}")
    return names


def at_least(fig: go.Figure, px: float = PRESENT_FONT_PX) -> go.Figure:
    """A copy of ``fig`` whose text (see the module docstring) is at least ``px`` pixels, every
    size set explicitly; ``fig`` itself is left untouched (the app caches its figures)."""
    out = go.Figure(fig)
    layout = out.layout.to_plotly_json()
    _lift(layout, "font", px)
    for key in ("title", "legend"):
        layout[key] = dict(layout.get(key) or {})
        _lift(layout[key], "font", px)
    layout["legend"]["title"] = dict(layout["legend"].get("title") or {})
    _lift(layout["legend"]["title"], "font", px)
    for name in _axes(out, layout):
        axis = layout[name] = dict(layout.get(name) or {})
        _lift(axis, "tickfont", px)
        axis["title"] = dict(axis.get("title") or {})
        _lift(axis["title"], "font", px)
    for name in [k for k in layout if _COLORAXIS.match(k)]:
        layout[name] = dict(layout[name] or {})
        layout[name]["colorbar"] = _colorbar(layout[name].get("colorbar"), px)
    _raise(layout, px)
    out.layout = layout
    for tr in out.data:             # colour bars that belong to traces (or to their markers)
        spec = tr.to_plotly_json()
        marker = spec.get("marker") or {}
        if "colorbar" in tr and spec.get("showscale", True):
            tr["colorbar"] = _colorbar(spec.get("colorbar"), px)
        if marker.get("showscale"):
            tr["marker.colorbar"] = _colorbar(marker.get("colorbar"), px)
    return out


def text_sizes(fig: go.Figure, inherited: float = DEFAULT_FONT_PX) -> dict[str, float]:
    """The size of every text a reader of ``fig`` sees without hovering: the default font, the
    title, the legend, every axis's tick labels and title, colour bars, annotations; a size the
    figure leaves unset counts as ``inherited`` (what the app's theme gives it).  For tests."""
    layout = fig.layout.to_plotly_json()

    def size(node: Any, *path: str) -> float:
        for key in path:
            node = node.get(key) if isinstance(node, dict) else None
        return float(node["size"]) if isinstance(node, dict) and node.get("size") else inherited

    out = {"font": size(layout, "font"), "legend": size(layout, "legend", "font")}
    if (layout.get("title") or {}).get("text"):
        out["title"] = size(layout, "title", "font")
    for name in sorted(_axes(fig, layout)):
        out[f"{name}.tickfont"] = size(layout, name, "tickfont")
        if ((layout.get(name) or {}).get("title") or {}).get("text"):
            out[f"{name}.title"] = size(layout, name, "title", "font")
    for i, a in enumerate(layout.get("annotations") or ()):
        out[f"annotations[{i}]"] = size(a, "font") if (a.get("font") or {}).get("size") else out["font"]
    for i, tr in enumerate(fig.data):
        spec = tr.to_plotly_json()
        for where, bar in (("colorbar", spec.get("colorbar")),
                           ("marker.colorbar", (spec.get("marker") or {}).get("colorbar"))):
            if bar:
                out[f"data[{i}].{where}.tickfont"] = size(bar, "tickfont")
    return out
