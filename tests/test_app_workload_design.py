"""The Design-space tab on the issue-36 families: its heatmap's default fields are the family's
own (a DLRM's hot share, a GNN's cache hit rate, a convnet's pp x micro-batch; tp x pp would leave
one valid cell), every cell is the full engine's (estimator=False), the sweep over model.dlrm /
model.gnn fields moves as the model says, and the layout search answers without an error."""
from __future__ import annotations

import json

import pytest

from explorer.scenario import apply_overrides, from_dict
from explorer.share import preset_raw
from explorer.simulate import simulate
from explorer.ui.views import design_runs as runs
from explorer.ui.views.design_state import default_axes

from app_support import run_app


def _heat(at) -> dict:
    found = [e for e in at.get("plotly_chart") if e.proto.id.endswith("-_d_heatmap")]
    assert len(found) == 1
    return next(t for t in json.loads(found[0].proto.spec)["data"] if t["type"] == "heatmap")


@pytest.mark.parametrize("name,axes", [
    ("dlrm-dcnv2", ("model.dlrm.hot_share", "cluster.scale_up.bandwidth_GBps")),
    # Not the cache hit rate: every feature is local in the shipped file (config/dormant.unread).
    ("gnn-sage-papers100m", ("model.gnn.sampler_edges_per_core_s", "cluster.scale_out.nic_Gbps")),
    ("pipedream-vgg16", ("parallelism.pp", "training.micro_batch")),
    ("teaching-8gpu", ("parallelism.tp", "parallelism.pp"))])
def test_default_axes_follow_the_family(name, axes):
    assert default_axes(from_dict(preset_raw(name))) == axes


def test_the_gnns_cache_is_the_default_axis_where_features_are_fetched():
    fetched = from_dict(apply_overrides(preset_raw("gnn-sage-papers100m"), {"model.gnn.local_share": 0.0625}))
    assert default_axes(fetched)[0] == "model.gnn.cache_hit"


def test_a_share_sweeps_its_range():
    sc = from_dict(preset_raw("dlrm-dcnv2"))
    assert runs.default_values("model.dlrm.hot_share", sc) == [0.0, 0.25, 0.5, 0.75, 0.9]


def test_dlrm_heatmap_is_simulated_and_hot_share_speeds_the_lookups():
    at = run_app(scenario="dlrm-dcnv2", view="design")
    assert not at.exception and not at.error, [e.value for e in at.error]
    caption = next(c.value for c in at.caption if "combinations valid" in c.value)
    assert caption.startswith("25 of 25 combinations valid (full engine")
    heat = _heat(at)
    assert heat["x"] == ["0", "0.25", "0.5", "0.75", "0.9"]
    row = heat["z"][heat["y"].index("450")]                       # the shipped NVLink 450 GB/s
    assert row == sorted(row, reverse=True) and row[-1] < row[0]  # cached lookups: faster
    # The cell at hot share 0.5 is the scenario's "3.19 ms" (its description) and the simulation's.
    half = simulate(from_dict(apply_overrides(preset_raw("dlrm-dcnv2"), {"model.dlrm.hot_share": 0.5})))
    assert row[2] == pytest.approx(half.iteration_time_s * 1e3, rel=1e-9)     # every cell in ms
    assert f"{row[2]:.2f}" == "3.19"


def test_gnn_heatmap_over_model_gnn_fields():
    at = run_app(scenario="gnn-sage-papers100m", view="design",
                 **{"d.x": "model.gnn.cache_hit", "d.y": "model.gnn.local_share", "d.yv": "0.0625,1"})
    assert not at.exception and not at.error, [e.value for e in at.error]
    heat = _heat(at)
    partitioned = heat["z"][heat["y"].index("0.0625")]
    # Features split 16 ways: a cache that serves more of the remote reads fetches less.
    assert partitioned == sorted(partitioned, reverse=True) and partitioned[-1] < partitioned[0] / 3
    # Every feature local: nothing to fetch, the cache changes nothing.
    local = heat["z"][heat["y"].index("1")]
    assert max(local) == pytest.approx(min(local), rel=1e-12)


@pytest.mark.slow          # a search per family, 1.4-2.4 s each (README: slow tier)
@pytest.mark.parametrize("name", ["dlrm-dcnv2", "gnn-sage-papers100m", "pipedream-vgg16"])
def test_search_answers_without_error_and_keeps_the_family_layouts(name):
    at = run_app(scenario=name, view="design")
    at.button(key="_d_search").click().run(timeout=300)
    assert not at.exception and not at.error, [e.value for e in at.error]
    table = next(d.value for d in at.dataframe if "layout" in d.value.columns)
    # The scenario's own layout is in the table, marked (the family's search may find faster ones:
    # a DLRM's other sharding plans, a GNN's sharded gradient sync), and a DLRM's rows name its plan.
    assert sum(x.startswith("yours") for x in table["layout"]) == 1
    if name == "dlrm-dcnv2":       # its plan first: what tells the rows apart in a narrow cell
        assert all(x.removeprefix("yours: ").startswith("sharding ") for x in table["layout"])
    caption = next(c.value for c in at.caption if "layouts enumerated" in c.value)
    assert "ranked by simulation (the estimator does not price a" in caption
    # dp (dp/pp for a convnet): no tensor, context or expert parallelism in any row.
    assert all(" tp1 " in f" {x} " for x in table["layout"])
    if name != "pipedream-vgg16":
        assert all("pp1" in x for x in table["layout"])
