"""Chart exports (explorer/ui/export.py): presentation colours are the Okabe-Ito palette for every
colour the app uses, images at 1920x1080, and the popover in the app."""
from __future__ import annotations

import plotly.graph_objects as go
import pytest

from explorer.ui.export import OKABE_ITO, SLIDE, images_available, presentation_colours
from explorer.vocabulary import CATEGORY_COLORS, KIND_COLORS, TIER_COLORS

from app_support import run_app

OKABE_ITO_SET = {"#000000", "#E69F00", "#56B4E9", "#009E73", "#F0E442", "#0072B2", "#D55E00", "#CC79A7",
                 "#999999", "#DDDDDD", "#332288", "#882255", "#44AA99",   # and Paul Tol's muted
                 "#999933", "#88CCEE", "#DDCC77"}       # indigo, wine, teal, olive, cyan, sand (Tol 2021)


def test_every_app_colour_has_a_colour_blind_safe_counterpart():
    used = set(KIND_COLORS.values()) | set(CATEGORY_COLORS.values()) | set(TIER_COLORS.values())
    assert used <= set(OKABE_ITO) and set(OKABE_ITO.values()) <= OKABE_ITO_SET


def test_presentation_colours_swap_markers_and_leave_the_original():
    fig = go.Figure([go.Bar(x=[1], y=[1], marker=dict(color=KIND_COLORS["forward"])),
                     go.Bar(x=[1], y=[1], marker=dict(color=[KIND_COLORS["dp"], "#123456"]))])
    out = presentation_colours(fig)
    assert out.data[0].marker.color == "#0072B2" and list(out.data[1].marker.color) == ["#D55E00", "#123456"]
    assert fig.data[0].marker.color == KIND_COLORS["forward"]


@pytest.mark.slow
@pytest.mark.skipif(not images_available(), reason="Kaleido and a Chromium are needed for PNG/SVG")
def test_images_render_at_presentation_resolution():
    fig = go.Figure(go.Bar(x=[1, 2], y=[3, 4]))
    svg = fig.to_image(format="svg", **SLIDE).decode()
    assert 'width="1920"' in svg and 'height="1080"' in svg


def _exports(at) -> set[str]:
    """Keys of the export buttons on the page (AppTest shows popovers as blocks of buttons)."""
    return {b.key for p in at.get("popover") for b in p.children.values() if getattr(b, "key", "")}


@pytest.mark.parametrize("present", ["0", "1"])
def test_every_chart_has_its_exports_in_and_out_of_presentation_mode(present):
    """A popover under each chart; in presentation mode one menu in the title row holds them all
    (issue 32: they used to vanish there)."""
    at = run_app(scenario="teaching-8gpu", present=present)
    keys = _exports(at)
    for chart in ("gantt", "breakdown"):
        assert f"{chart}_html" in keys
        assert {f"{chart}_png", f"{chart}_svg"} <= keys or not images_available()
    assert len(at.get("popover")) == (2 if present == "1" else 3)      # + Copy link
