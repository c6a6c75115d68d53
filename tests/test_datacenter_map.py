"""The datacenter map (issue 12.6): one box per datacenter sized by GPUs, one line per WAN link of
the topology with the run's bytes and utilisation, the most utilised link highlighted; a hub draws
only its spokes; one datacenter draws nothing.  And the Gantt outlines the bars that cross the WAN."""
from __future__ import annotations

from functools import cache

import pytest

from explorer.figures import datacenter_map, gantt
from explorer.figures.datacenters import crossing_dims
from explorer.figures.gantt import WAN_LEGEND, WAN_OUTLINE_WIDTH, lane_name
from explorer.figures.topology import utilisation_color
from explorer.result.timeline import build_timeline
from explorer.scenario import load
from explorer.simulate import simulate
from explorer.vocabulary import KIND_COLORS

from conftest import ROOT

FOUR_DC = {"cluster.datacenters": 4}


@cache
def run(name: str, overrides: tuple = ()):
    sc = load(ROOT / "scenarios" / f"{name}.yaml", dict(overrides))
    return sc, simulate(sc).to_json_dict()


def figure(name: str, **overrides):
    sc, j = run(name, tuple(sorted(overrides.items())))
    return sc, j, datacenter_map(sc, j["wan_links"], j["comm_bytes_by_tier"])


def role(fig, r: str) -> list:
    return [t for t in fig.data if t.meta and t.meta.get("role") == r]


def test_two_datacenters_one_box_each_and_one_link_with_the_runs_numbers():
    sc, j, fig = figure("two-datacenters")
    boxes = role(fig, "datacenter")
    assert [b.meta["name"] for b in boxes] == ["dc0", "dc1"]
    assert [b.meta["gpus"] for b in boxes] == [512, 512]
    (link,) = role(fig, "wan-link")
    (w,) = j["wan_links"]
    assert (link.meta["a"], link.meta["b"]) == ("dc0", "dc1")
    assert link.meta["bytes"] == pytest.approx(410.2e9, rel=1e-3) == w["bytes_per_iteration"]
    assert link.meta["utilisation"] == pytest.approx(0.286, abs=0.001)
    assert link.meta["text"] == "410.2 GB / iter · 29% busy"
    assert link.line.color == utilisation_color(w["utilisation"])
    assert link.meta["limiting"] and len(role(fig, "halo")) == 1
    labels = [a.text for a in fig.layout.annotations]
    assert "<b>limiting</b> · 410.2 GB / iter · 29% busy" in labels
    _, _, pp = figure("campus-4-buildings", **{"parallelism.span": "pp"})
    assert sorted((t.meta["a"], t.meta["b"]) for t in role(pp, "wan-link") if t.meta["limiting"]) == [
        ("dc0", "dc1"), ("dc1", "dc2"), ("dc2", "dc3")]             # the idle dc0-dc3 is not
    box_labels = [a.text for a in fig.layout.annotations if "GPUs" in a.text]
    assert box_labels == ["<b>dc0</b><br>512 GPUs<br>H100 SXM<br>across: DP",
                          "<b>dc1</b><br>512 GPUs<br>H100 SXM<br>across: DP"]
    assert "dc1 → dc0: 410.2 GB" in link.hovertext[0] and "1,600 Gb/s" in link.hovertext[0]


def test_pp_across_says_pp_crosses_and_carries_fewer_bytes():
    _, j, fig = figure("two-datacenters", **{"parallelism.order": "tp-cp-ep-dp-pp"})
    assert crossing_dims(j["comm_bytes_by_tier"]) == ("pp",)
    (link,) = role(fig, "wan-link")
    assert link.meta["bytes"] == pytest.approx(68.7e9, rel=2e-3)
    assert "across the WAN: PP" in fig.layout.title.text


def test_box_area_follows_gpus():
    _, _, fig = figure("campus-4-buildings")
    boxes = role(fig, "datacenter")
    assert len(boxes) == 4 and {b.meta["gpus"] for b in boxes} == {24576}
    areas = {round((max(b.x) - min(b.x)) * (max(b.y) - min(b.y)), 9) for b in boxes}
    assert len(areas) == 1


def test_ring_draws_four_links_and_the_mesh_two_idle_diagonals():
    _, j, ring = figure("campus-4-buildings")
    links = role(ring, "wan-link")
    assert len(links) == 4 == len(j["wan_links"])
    assert all(t.meta["bytes"] == pytest.approx(6.05e12, rel=0.01) for t in links)
    assert all(t.meta["limiting"] for t in links)            # equally loaded: all four limit
    _, _, mesh = figure("campus-4-buildings", **{"cluster.scale_across.topology": "mesh"})
    links = role(mesh, "wan-link")
    assert len(links) == 6
    idle = sorted((t.meta["a"], t.meta["b"]) for t in links if t.meta["bytes"] == 0)
    assert idle == [("dc0", "dc2"), ("dc1", "dc3")]
    assert all(t.line.color == "rgb(205,205,205)" for t in links if t.meta["bytes"] == 0)


def test_hub_draws_only_spoke_links():
    _, j, fig = figure("two-datacenters", **{**FOUR_DC, "cluster.scale_across.topology": "hub"})
    links = role(fig, "wan-link")
    spokes = sorted((t.meta["a"], t.meta["b"]) for t in links)
    assert spokes == [("dc0", "dc1"), ("dc0", "dc2"), ("dc0", "dc3")]
    assert len(role(fig, "datacenter")) == 4
    assert all(t.meta["bytes"] == pytest.approx(410.2e9, rel=1e-3) for t in links)
    assert any("(hub)" in a.text for a in fig.layout.annotations)


def test_one_datacenter_draws_no_map():
    sc, j = run("teaching-8gpu")
    assert sc.cluster.datacenters == 1 and j["wan_links"] == []
    assert datacenter_map(sc, j["wan_links"], j["comm_bytes_by_tier"]) is None


def test_idle_wan_highlights_nothing():
    sc, j = run("two-datacenters")
    idle = [{**w, "bytes_per_iteration": 0.0, "utilisation": 0.0} for w in j["wan_links"]]
    fig = datacenter_map(sc, idle, j["comm_bytes_by_tier"])
    assert not role(fig, "halo") and not any(t.meta["limiting"] for t in role(fig, "wan-link"))


# --------------------------------------------------------------------------- Gantt


def gantt_of(name: str, max_bars: int = 2500):
    res = simulate(load(ROOT / "scenarios" / f"{name}.yaml"))
    tl = build_timeline(res.tasks, tuple(c.label for c in res.classes), max_segments=max_bars)
    lanes = tuple(lane_name(c.name, c.gpus) for c in res.classes)
    fig, info = gantt(tl.columns, lanes, res.iteration_time_s, max_bars=max_bars)
    return tl, fig, info


def outlined(trace) -> list[bool]:
    w = trace.marker.line.width
    return [bool(x) for x in w] if isinstance(w, tuple | list) else [bool(w)] * len(trace.x)


@pytest.mark.parametrize("name, dim", [("two-datacenters", "dp"), ("cross-region-pp", "pp")])
def test_gantt_outlines_exactly_the_bars_that_cross_the_wan(name, dim):
    tl, fig, info = gantt_of(name)
    assert not info.merged
    cols = tl.columns
    wan_rows = [i for i in range(len(cols["kind"])) if (cols["tier"][i] or "").startswith("scale-across")]
    assert wan_rows and {cols["kind"][i] for i in wan_rows} == {dim}
    trace = next(t for t in fig.data if t.name == dim)
    marks = outlined(trace)
    assert sum(marks) == len(wan_rows) and 0 < sum(marks)
    assert set(trace.marker.line.width) <= {0, WAN_OUTLINE_WIDTH}
    assert trace.marker.color == KIND_COLORS[dim]                     # the kind keeps its colour
    for t in fig.data:                                      # every other kind has no outline
        if t.name not in (dim, WAN_LEGEND) and t.x and t.x[0] is not None:
            assert not any(outlined(t)), t.name
    assert WAN_LEGEND in {t.name for t in fig.data}


def test_gantt_without_wan_has_no_wan_legend():
    _, fig, _ = gantt_of("teaching-8gpu")
    assert WAN_LEGEND not in {t.name for t in fig.data}
    assert not any(any(outlined(t)) for t in fig.data if t.x and t.x[0] is not None)


def test_aggregated_gantt_outlines_wan_columns_only():
    tl, fig, info = gantt_of("two-datacenters", max_bars=200)
    assert info.merged
    dp = next(t for t in fig.data if t.name == "dp")
    marks = outlined(dp)
    assert any(marks)
    tp = next(t for t in fig.data if t.name == "tp")
    assert not any(outlined(tp))
