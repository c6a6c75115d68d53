"""Every chart of the app, drawn and exported the same way (issue 14.5).

:func:`chart` draws a Plotly figure with the app's modebar — its camera saves a PNG at presentation
resolution (1920 x 1080) — and, outside presentation mode, an *Export* popover with PNG and SVG at
that resolution (rendered by Kaleido in a headless Chromium, on click only) and an interactive
HTML file (Plotly inlined: it opens offline).  In presentation mode the colours switch to the
Okabe-Ito palette (Okabe & Ito, "Color Universal Design", 2008), distinguishable with the common
colour-vision deficiencies and on a projector.
"""
from __future__ import annotations

import shutil
from functools import lru_cache
from typing import Any

import plotly.graph_objects as go
import streamlit as st

from ..vocabulary import CATEGORY_COLORS, KIND_COLORS, TIER_COLORS

SLIDE = {"width": 1920, "height": 1080}
# Okabe-Ito for the app's Tableau colours (kinds, categories, tiers share these hexes).
OKABE_ITO = {"#4C78A8": "#0072B2", "#F58518": "#E69F00", "#EECA3B": "#F0E442", "#B279A2": "#CC79A7",
             "#54A24B": "#009E73", "#72B7B2": "#56B4E9", "#FF9DA6": "#CC79A7", "#9D755D": "#999999",
             "#E45756": "#D55E00", "#79706E": "#000000", "#8F6BB3": "#CC79A7", "#3A8E7E": "#009E73",
             "#D3D3D3": "#DDDDDD"}
assert set(KIND_COLORS.values()) | set(CATEGORY_COLORS.values()) | set(TIER_COLORS.values()) <= set(OKABE_ITO)


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


def _image(fig: go.Figure, fmt: str) -> bytes:
    return fig.to_image(format=fmt, **SLIDE)


def chart(fig: go.Figure, key: str, present: bool, name: str | None = None,
          config: dict | None = None, **kwargs: Any) -> Any:
    """Draw ``fig`` (st.plotly_chart) with the app's modebar and export options; returns what
    st.plotly_chart returns (the selection event with ``on_select``)."""
    name = name or key.strip("_")
    shown = presentation_colours(fig) if present else fig
    cfg = {"displaylogo": False, **(config or {}),
           "toImageButtonOptions": {"format": "png", "filename": f"commexplorer-{name}", **SLIDE}}
    event = st.plotly_chart(shown, key=key, config=cfg, **kwargs)
    if not present:
        with st.popover("Export", icon=":material/download:"):
            if images_available():
                st.download_button("PNG (1920x1080)", data=lambda: _image(shown, "png"), mime="image/png",
                                   file_name=f"commexplorer-{name}.png", key=f"{key}_png")
                st.download_button("SVG", data=lambda: _image(shown, "svg"), mime="image/svg+xml",
                                   file_name=f"commexplorer-{name}.svg", key=f"{key}_svg")
            else:
                st.caption("PNG/SVG here need Kaleido and a Chromium; the camera in the chart's toolbar "
                           "saves a 1920x1080 PNG.")
            st.download_button("Interactive HTML", mime="text/html", file_name=f"commexplorer-{name}.html",
                               data=lambda: shown.to_html(include_plotlyjs=True, full_html=True),
                               key=f"{key}_html")
    return event
