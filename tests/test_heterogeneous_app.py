"""The app on datacenters of different GPUs (streamlit.testing): the sidebar keeps the list, the
batch-split control moves the iteration, and the datacenter map names both GPU types."""
from __future__ import annotations

import pytest

from explorer.scenario import load
from explorer.simulate import simulate

from app_support import run_app, seconds
from conftest import ROOT


def _t(**ov) -> float:
    return simulate(load(ROOT / "scenarios" / "mixed-generations.yaml", ov)).iteration_time_s


@pytest.mark.slow
def test_mixed_generations_opens_and_the_speed_split_is_faster():
    at = run_app(scenario="mixed-generations")
    assert seconds(at) == pytest.approx(_t(), rel=0.001)
    shown = [t.value for t in at.text_input if t.label == "Datacenters"]
    assert shown == ["2: hopper, blackwell"]
    at.selectbox(key="parallelism.batch_split").set_value("speed").run()
    assert not at.exception, [e.value for e in at.exception]
    assert seconds(at) == pytest.approx(_t(**{"parallelism.batch_split": "speed"}), rel=0.001)
    assert seconds(at) < _t()


def test_changing_the_scenario_gpu_beside_a_list_of_gpus_does_not_crash():
    """hardware.gpu moved to A100 while the list names H100 and B200: both datacenters keep their
    own GPU (the iteration is unchanged), nothing raises."""
    at = run_app(scenario="mixed-generations")
    before = seconds(at)
    at.selectbox(key="hardware.gpu").set_value("a100-80gb").run()
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error and seconds(at) == pytest.approx(before, rel=1e-9)


def test_maps_draw_each_datacenter_at_its_size_and_gpu():
    """The datacenter map sizes boxes by each datacenter's GPUs and names its GPU (a fill per type);
    the topology figure frames each datacenter with its own node count and GPU."""
    from hetero_support import scenario

    from explorer import figures
    sc = scenario([{"name": "a", "nodes": 2, "gpu": "h100-sxm"}, {"name": "b", "nodes": 1, "gpu": "b200"}])
    r = simulate(sc)
    j = r.to_json_dict()
    fig = figures.datacenter_map(sc, j["wan_links"], j["comm_bytes_by_tier"])
    boxes = [t.meta for t in fig.data if isinstance(t.meta, dict) and t.meta.get("role") == "datacenter"]
    assert [(b["name"], b["gpus"], b["gpu"]) for b in boxes] == [("a", 16, "H100 SXM"), ("b", 8, "B200")]
    fills = {t.meta["gpu"]: t.fillcolor for t in fig.data if isinstance(t.meta, dict) and "gpu" in t.meta}
    assert fills["H100 SXM"] != fills["B200"]
    texts = [a.text for a in figures.topology(sc, r.utilisation).layout.annotations]
    assert "datacenter 0 · 2 nodes · H100 SXM" in texts and "datacenter 1 · 1 node · B200" in texts


def test_a_link_with_unequal_datacenters_opens():
    """A share link that resizes the datacenters (96 H100 nodes, 32 B200 nodes): the page shows the
    simulated iteration, the sidebar the list."""
    dcs = ("[{name: hopper, nodes: 96, gpu: h100-sxm}, {name: blackwell, nodes: 32, gpu: b200}]")
    at = run_app(scenario="mixed-generations", **{"cluster.datacenters": dcs, "view": "topology"})
    assert not at.error, [e.value for e in at.error]
    want = _t(**{"cluster.datacenters": [{"name": "hopper", "nodes": 96, "gpu": "h100-sxm"},
                                         {"name": "blackwell", "nodes": 32, "gpu": "b200"}]})
    assert seconds(at) == pytest.approx(want, rel=0.001)
    assert [t.value for t in at.text_input if t.label == "Datacenters"] == ["2: hopper, blackwell"]
