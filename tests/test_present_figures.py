"""Presentation mode's figures (explorer/figures/fonts.py, gantt_present.py): every text at least
18 px, set explicitly, on a copy; the Gantt's lane labels thinned to those that fit at 18 px."""
from __future__ import annotations

import json

import plotly.graph_objects as go

from explorer.figures.fonts import PRESENT_FONT_PX, at_least, text_sizes
from explorer.figures.gantt import LABEL_PX
from explorer.figures.gantt_present import PROJECTOR_HEIGHT, for_projector, plot_height
from explorer.scenario import apply_overrides
from explorer.share import preset_raw
from explorer.ui.cache import view_data


def _figure() -> go.Figure:
    fig = go.Figure([go.Bar(x=[1], y=[1], name="a"),
                     go.Scatter(x=[1], y=[1], xaxis="x2", marker=dict(color=[1], showscale=True)),
                     go.Heatmap(z=[[1, 2]], colorbar=dict(tickfont=dict(size=9)))])
    fig.update_layout(font=dict(size=12), legend=dict(font=dict(size=11)), title="T",
                      xaxis=dict(tickfont=dict(size=10), title="x"), hoverlabel=dict(font_size=12),
                      annotations=[dict(text="n", font=dict(size=13)), dict(text="m")])
    return fig


def test_every_text_is_raised_explicitly_on_a_copy():
    fig = _figure()
    before = text_sizes(fig)
    assert before["xaxis.tickfont"] == 10 and before["xaxis2.tickfont"] == 12    # unset: the theme's 12
    out = at_least(fig)
    sizes = text_sizes(out, inherited=0)        # an unset size would count 0: all must be explicit
    assert set(sizes) >= {"font", "legend", "title", "xaxis.tickfont", "xaxis.title", "xaxis2.tickfont",
                          "yaxis.tickfont", "annotations[0]", "annotations[1]",
                          "data[1].marker.colorbar.tickfont", "data[2].colorbar.tickfont"}
    assert min(sizes.values()) == PRESENT_FONT_PX
    assert out.layout.hoverlabel.font.size == 12                   # hover stays as it was
    assert fig.layout.xaxis.tickfont.size == 10 and text_sizes(fig) == before   # the original untouched
    big = go.Figure(layout=dict(font=dict(size=24)))
    assert text_sizes(at_least(big))["font"] == 24                 # larger text is left larger


def _gantt(scenario: str, **overrides) -> go.Figure:
    raw = apply_overrides(preset_raw(scenario), overrides)
    return view_data(json.dumps(raw, sort_keys=True, default=str)).gantt


def test_the_projector_gantt_labels_only_the_lanes_that_fit():
    """Two datacenters: 4 stages x 4 streams = 16 lanes, 27 px each at 18 px, do not fit the
    ~220 px left of 370: only the compute lanes are labelled, by their stage."""
    fig = _gantt("two-datacenters")
    assert len(fig.layout.yaxis.tickvals) == 16
    out = for_projector(fig)
    fits = plot_height(out, PROJECTOR_HEIGHT, PRESENT_FONT_PX, 860) // (LABEL_PX * PRESENT_FONT_PX)
    assert 4 <= fits < 16
    assert list(out.layout.yaxis.ticktext) == [f"stage {s} · DC 0 ×256" for s in range(4)]
    assert all(v.endswith("· compute") for v in out.layout.yaxis.tickvals)
    assert out.layout.height == PROJECTOR_HEIGHT and min(text_sizes(out).values()) >= PRESENT_FONT_PX
    # The ideal pipeline's four compute lanes fit: all kept as they were.
    small = _gantt("teaching-8gpu", **{"parallelism.ideal_pipeline": True})
    assert len(small.layout.yaxis.tickvals) == 4
    assert list(for_projector(small).layout.yaxis.tickvals) == list(small.layout.yaxis.tickvals)


def test_the_projector_gantt_thins_sixteen_stage_bands():
    """DeepSeek-V3: 16 stage bands; at 18 px every other one is labelled, the last always."""
    fig = _gantt("deepseek-v3")
    out = for_projector(fig)
    vals = list(out.layout.yaxis.tickvals)
    fits = plot_height(out, PROJECTOR_HEIGHT, PRESENT_FONT_PX, 860) // (LABEL_PX * PRESENT_FONT_PX)
    assert 1 < len(vals) <= fits < len(fig.layout.yaxis.tickvals) and vals[0] == 0 and vals[-1] == 15


def test_a_breakdown_bars_share_is_never_shrunk_below_the_figures_font():
    """A hunt: on a projector the shares inside thin bars of "Where the time goes" (seven categories)
    were about 11 px, Plotly shrinking them to the bar's height, against the 18 px promised."""
    from explorer.figures.charts import breakdown

    parts = {"compute": 3.0, "recompute": 0.1, "tp": 0.9, "pp": 0.03, "dp": 0.06, "bubble": 0.9,
             "optimizer": 0.01}
    fig = breakdown(parts, sum(parts.values()), height=300, font_size=PRESENT_FONT_PX)
    assert fig.layout.uniformtext.minsize == PRESENT_FONT_PX and fig.layout.uniformtext.mode == "show"
    assert breakdown(parts, sum(parts.values())).layout.uniformtext.minsize == 12
    # ... and kept whole: inside only a bar with room for it (a regression hunt found 18-px "11.4%"
    # forced into megatron-gpt3-175b's thin tp bar read "1.4%"), beside the others.
    where = dict(zip(fig.data[0].y, fig.data[0].textposition, strict=True))
    assert where["compute"] == "inside" and where["tp"] == "inside" and where["bubble"] == "inside"
    assert {where[k] for k in ("recompute", "pp", "dp", "optimizer")} == {"outside"}
