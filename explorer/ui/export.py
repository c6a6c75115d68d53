"""Every chart of the app, drawn and exported the same way (issue 14.5).

:func:`chart` draws a Plotly figure with the app's modebar — its camera saves a PNG at presentation
resolution (1920 x 1080) — and an *Export* menu with PNG and SVG at that resolution (rendered by
Kaleido in a headless Chromium, on click only) and an interactive HTML file (Plotly inlined: it
opens offline).  An exported file carries the scenario's name as its title (:func:`for_file`), the
chart's own title under it, so a slide says what it shows; the camera saves the chart as drawn
(Plotly's toImage takes no title), under a file name that names the scenario.

Outside presentation mode the menu is a popover under each chart.  In presentation mode every
chart's exports gather in one *Export* popover beside *Copy link* in the title row
(:func:`render_menu`), so they cost the projector's screen no row; the colours switch to the
Okabe-Ito palette (Okabe & Ito, "Color Universal Design", 2008), distinguishable with the common
colour-vision deficiencies and on a projector, and no chart text is under 18 px
(explorer/figures/fonts.py).
"""
from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import plotly.graph_objects as go
import streamlit as st

from ..figures.fonts import PRESENT_FONT_PX, at_least
from ..vocabulary import PRESENT_COLORS

SLIDE = {"width": 1920, "height": 1080}
# Okabe-Ito for the app's Tableau colours (kinds, categories, tiers and dimensions: the vocabulary's).
OKABE_ITO = PRESENT_COLORS


def _swap(color: Any) -> Any:
    if isinstance(color, str):
        return OKABE_ITO.get(color.upper(), OKABE_ITO.get(color, color))
    if isinstance(color, (list, tuple)):
        return [_swap(c) for c in color]
    return color


def presentation_colours(fig: go.Figure) -> go.Figure:
    """A copy of ``fig`` with the app's colours replaced by their Okabe-Ito counterparts."""
    out = go.Figure(fig)
    for tr in out.data:
        marker = getattr(tr, "marker", None)
        if marker is not None and marker.color is not None:
            marker.color = _swap(marker.color)
        line = getattr(tr, "line", None)
        if line is not None and getattr(line, "color", None) is not None:
            line.color = _swap(line.color)
    return out


@lru_cache(maxsize=1)
def images_available() -> bool:
    """Whether PNG/SVG can be rendered here: Kaleido installed and a Chromium/Chrome on the PATH."""
    try:
        import kaleido  # noqa: F401
    except ImportError:
        return False
    return any(shutil.which(b) for b in ("chromium", "chromium-browser", "google-chrome", "chrome"))


def for_file(fig: go.Figure, title: str) -> go.Figure:
    """A copy of ``fig`` for a file: ``title`` (the scenario's name) as its title, the chart's own
    title (if any) as the subtitle, with room for them above the plot (Plotly pushes the top
    margin for a title and for a legend above the plot alike); its text at least presentation's
    18 px (a 1920x1080 slide is shown at least as large as a 1280x720 screen); every axis's labels
    inside the image (automargin: the app's Streamlit template, Plotly's default here, leaves the y
    labels of a horizontal bar chart cut at the left edge of a file)."""
    out = at_least(fig, PRESENT_FONT_PX)
    out.update_xaxes(automargin=True)
    out.update_yaxes(automargin=True)
    if not title:
        return out
    own = out.layout.title.text
    size = max(out.layout.font.size or 12, 12)
    out.update_layout(title=dict(text=title, x=0.01, xanchor="left", y=0.985, yanchor="top", yref="container",
                                 automargin=True, font=dict(size=round(size * 1.5)),
                                 subtitle=dict(text=own or None, font=dict(size=size))))
    return out


def _image(fig: go.Figure, fmt: str) -> bytes:
    return fig.to_image(format=fmt, **SLIDE)


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:60]


@dataclass(frozen=True)
class Export:
    """One chart's files: its key, what the menu calls it, its file name and the figure as drawn."""
    key: str
    label: str
    name: str
    fig: go.Figure


def begin_run(title: str) -> None:
    """Start of a script run: the scenario's name titles the exports; no chart is drawn yet."""
    st.session_state["_export_title"] = title
    st.session_state["_exports"] = []


def _buttons(e: Export) -> None:
    """The PNG, SVG and HTML download buttons of one chart (each file made on click only)."""
    title = st.session_state.get("_export_title", "")
    if images_available():
        st.download_button("PNG (1920x1080)", data=lambda: _image(for_file(e.fig, title), "png"),
                           mime="image/png", file_name=f"{e.name}.png", key=f"{e.key}_png")
        st.download_button("SVG", data=lambda: _image(for_file(e.fig, title), "svg"), mime="image/svg+xml",
                           file_name=f"{e.name}.svg", key=f"{e.key}_svg")
    else:
        st.caption("PNG/SVG here need Kaleido and a Chromium; the camera in the chart's toolbar "
                   "saves a 1920x1080 PNG.")
    st.download_button("Interactive HTML", mime="text/html", file_name=f"{e.name}.html", key=f"{e.key}_html",
                       data=lambda: for_file(e.fig, title).to_html(include_plotlyjs=True, full_html=True))


def render_menu(box: Any) -> None:
    """Presentation mode: the exports of every chart drawn in this run, in one popover in ``box``
    (a placeholder in the title row, filled after the views)."""
    exports: list[Export] = st.session_state.get("_exports") or []
    if not exports:
        return
    with box.popover("Export", icon=":material/download:", use_container_width=True):
        for e in exports:
            st.markdown(f"**{e.label}**")
            _buttons(e)


def chart(fig: go.Figure, key: str, present: bool, name: str | None = None,
          config: dict | None = None, **kwargs: Any) -> Any:
    """Draw ``fig`` (st.plotly_chart) with the app's modebar and export options — a popover under
    it, or in presentation mode an entry of the title row's menu (:func:`render_menu`) — and return
    what st.plotly_chart returns (the selection event with ``on_select``).  File names are
    ``commexplorer-<scenario>-<name>``."""
    label = (name or key.strip("_")).replace("_", " ")
    scenario = _slug(st.session_state.get("_export_title", ""))
    name = "-".join(p for p in ("commexplorer", scenario, name or key.strip("_")) if p)
    shown = at_least(presentation_colours(fig), PRESENT_FONT_PX) if present else fig
    cfg = {"displaylogo": False, **(config or {}),
           "toImageButtonOptions": {"format": "png", "filename": name, **SLIDE}}
    event = st.plotly_chart(shown, key=key, config=cfg, **kwargs)
    e = Export(key, label, name, shown)
    if present:
        st.session_state.setdefault("_exports", []).append(e)
    else:
        with st.popover("Export", icon=":material/download:"):
            _buttons(e)
    return event
