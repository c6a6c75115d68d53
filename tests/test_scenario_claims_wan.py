"""The WAN claims of the scale-across scenarios' descriptions (issue 12.7): the sentences added to
two-datacenters and every claim of campus-4-buildings, one test per claim, each quoting its
sentence.  Same conventions as tests/test_scenario_claims.py: "about X" within a stated tolerance,
directions strict."""
from __future__ import annotations

import pytest
from test_scenario_claims import SCEN, about, sim

from explorer.config.wan import WAN_PRESETS
from explorer.scenario import from_dict, load_raw
from explorer.simulate import simulate
from explorer.workloads.transformer.layer import model_params

TD = "two-datacenters"
CAMPUS = "campus-4-buildings"
PP_ACROSS = {"parallelism.order": "tp-cp-ep-dp-pp"}


def wan(r) -> dict[tuple[str, str], dict]:
    return {(w["a"], w["b"]): w for w in r.wan_links}


def only_link(r) -> dict:
    (w,) = r.wan_links
    return w


# --------------------------------------------------------------------------- two-datacenters


def test_two_datacenters_dp_across_410_gb_each_way_29_percent():
    """DP across, as shipped, puts 410 GB per iteration on the link in each direction, 29% of its
    capacity, for 8.0 s."""
    r = sim(TD)
    w = only_link(r)
    assert about(w["bytes_a_to_b"], 410e9, 0.005) and about(w["bytes_b_to_a"], 410e9, 0.005)
    assert about(w["utilisation"], 0.285, 0.03) and about(r.iteration_time_s, 8.0, 0.01)


def test_two_datacenters_hierarchical_halves_the_link_load():
    """Hierarchical DP (`communication.algorithm: hierarchical`) halves that to 212 GB (17%) and
    takes 6.9 s."""
    base, hier = only_link(sim(TD)), sim(TD, {"communication.algorithm": "hierarchical"})
    w = only_link(hier)
    assert about(w["bytes_per_iteration"], 212e9, 0.01) and about(w["utilisation"], 0.17, 0.03)
    assert about(base["bytes_per_iteration"] / w["bytes_per_iteration"], 2, 0.05)
    assert about(hier.iteration_time_s, 6.9, 0.01)


def test_two_datacenters_pp_across_sends_69_gb():
    """PP across (`parallelism.order: tp-cp-ep-dp-pp`, what `parallelism.span: pp` means when no
    order is given) sends only the activations: 69 GB (7%), and 5.5 s."""
    r = sim(TD, PP_ACROSS)
    w = only_link(r)
    assert r.comm_bytes_by_tier["dp"]["scale-across"] == 0 and r.comm_bytes_by_tier["pp"]["scale-across"] > 0
    assert about(w["bytes_per_iteration"], 69e9, 0.01) and about(w["utilisation"], 0.070, 0.05)
    assert about(r.iteration_time_s, 5.48, 0.005)
    raw = load_raw(SCEN / f"{TD}.yaml")
    raw["parallelism"].pop("order")
    raw["parallelism"]["span"] = "pp"
    assert simulate(from_dict(raw)).iteration_time_s == pytest.approx(r.iteration_time_s, rel=1e-12)


def test_two_datacenters_topology_is_one_link_between_two():
    """between two datacenters mesh, ring and hub are the same single link
    (`cluster.scale_across.topology: ring` still gives 8.0 s)."""
    base = sim(TD)
    for topo in ("ring", "hub"):
        r = sim(TD, {"cluster.scale_across.topology": topo})
        assert len(r.wan_links) == 1
        assert r.iteration_time_s == pytest.approx(base.iteration_time_s, rel=1e-12)


def test_two_datacenters_four_datacenters_mesh_uses_four_links_diagonals_idle():
    """Split the 128 nodes into four datacenters (`cluster.datacenters: 4`): the DP ring crosses four
    of the mesh's six links, 410 GB each in one direction, while the two diagonals stay idle, and
    the iteration takes 9.4 s."""
    r = sim(TD, {"cluster.datacenters": 4})
    links = wan(r)
    assert len(links) == 6
    busy = {k: w for k, w in links.items() if w["bytes_per_iteration"] > 0}
    assert sorted(set(links) - set(busy)) == [("dc0", "dc2"), ("dc1", "dc3")]
    assert len(busy) == 4 and all(about(w["bytes_per_iteration"], 410e9, 0.005) for w in busy.values())
    assert all(min(w["bytes_a_to_b"], w["bytes_b_to_a"]) == 0 for w in busy.values())   # one direction
    assert about(r.iteration_time_s, 9.35, 0.01)


def test_two_datacenters_hub_spokes_carry_both_directions_and_are_slower():
    """A hub (`cluster.scale_across.topology: hub`) routes the hops between spokes through dc0, so
    every spoke carries 410 GB in both directions and the iteration takes 11.4 s."""
    r = sim(TD, {"cluster.datacenters": 4, "cluster.scale_across.topology": "hub"})
    assert sorted(wan(r)) == [("dc0", "dc1"), ("dc0", "dc2"), ("dc0", "dc3")]
    for w in r.wan_links:
        assert about(w["bytes_a_to_b"], 410e9, 0.005) and about(w["bytes_b_to_a"], 410e9, 0.005)
    mesh = sim(TD, {"cluster.datacenters": 4})
    assert r.iteration_time_s > mesh.iteration_time_s and about(r.iteration_time_s, 11.4, 0.01)


def test_two_datacenters_metro_dwdm_figures():
    """The sidebar's WAN technology preset metro-dwdm (a campus line system) refills the link with
    `cluster.scale_across.bandwidth_Gbps: 6400` and `cluster.scale_across.latency_ms: 0.5`: exposed
    DP drops from 3.5 to 1.3 s and the iteration to 5.7 s, with the link 10% busy."""
    assert WAN_PRESETS["metro-dwdm"] == {"bandwidth_Gbps": 6400.0, "latency_ms": 0.5}
    r = sim(TD, {"cluster.scale_across.bandwidth_Gbps": 6400, "cluster.scale_across.latency_ms": 0.5})
    preset = sim(TD, {"cluster.scale_across.preset": "metro-dwdm",
                      "cluster.scale_across.bandwidth_Gbps": None, "cluster.scale_across.latency_ms": None})
    assert preset.iteration_time_s == pytest.approx(r.iteration_time_s, rel=1e-12)
    assert about(r.breakdown_s["dp"], 1.26, 0.02) and about(r.iteration_time_s, 5.7, 0.01)
    assert about(only_link(r)["utilisation"], 0.10, 0.05)


# --------------------------------------------------------------------------- campus-4-buildings


def test_campus_setup():
    """98,304 H100s in four buildings of 24,576 GPUs (3,072 nodes) each [...] four fibre pairs lit with
    the `metro-dwdm` line system [...] 25.6 Tb/s per building pair and 0.5 ms one way. TP 8 in each
    node, PP 16 inside each building and DP 768 spanning all four buildings; 24,576 sequences of
    2,048 tokens (50M tokens) per batch, 32 micro-batches per pipeline."""
    r = sim(CAMPUS)
    sc = r.scenario
    c = sc.cluster
    assert sc.gpus == 98_304 and c.datacenters == 4 and c.nodes // 4 == 3072
    assert [c.datacenter_name(d) for d in range(4)] == ["dc0", "dc1", "dc2", "dc3"]
    assert c.scale_across.topology == "ring" and c.scale_across.preset == "metro-dwdm"
    assert c.scale_across.bandwidth_Gbps == 4 * 6400 and c.scale_across.latency_ms == 0.5
    assert (sc.parallelism.tp, sc.parallelism.pp, sc.dp) == (8, 16, 768)
    assert sc.training.global_batch * sc.model.seq_len == pytest.approx(50e6, rel=0.01)
    assert r.to_json_dict()["micro_batches"] == 32
    assert model_params(sc) == pytest.approx(1e12, rel=0.02)


def test_campus_only_dp_crosses_half_a_percent_of_its_bytes():
    """Only DP crosses the buildings. Each DP ring of 768 GPUs has four hops between buildings, so a
    GPU sends about 0.5% (4/768) of its 48 GB of DP traffic across"""
    r = sim(CAMPUS)
    across = {d: t["scale-across"] for d, t in r.comm_bytes_by_tier.items() if t["scale-across"] > 0}
    assert set(across) == {"dp"}
    dp = r.comm_bytes_by_tier["dp"]
    assert about(dp["scale-out"], 48e9, 0.01)
    assert about(across["dp"] / dp["scale-out"], 4 / 768, 0.01)


def test_campus_ring_links_6_tb_18_percent_wan_bottleneck():
    """each of the four ring links carrying about 6.0 TB per iteration in one direction, 18% busy on
    average. The bottleneck sentence names the WAN: exposed DP takes 4.3 s (38%) of the 11.4 s
    iteration, an MFU of about 28%."""
    r = sim(CAMPUS)
    assert len(r.wan_links) == 4
    for w in r.wan_links:
        assert about(w["bytes_per_iteration"], 6.0e12, 0.01) and about(w["utilisation"], 0.18, 0.03)
        assert min(w["bytes_a_to_b"], w["bytes_b_to_a"]) == 0
    assert r.bottleneck.startswith("DP takes") and "WAN" in r.bottleneck
    assert about(r.breakdown_s["dp"], 4.3, 0.02)
    assert about(r.breakdown_s["dp"] / r.iteration_time_s, 0.38, 0.03)
    assert about(r.iteration_time_s, 11.4, 0.01) and about(r.mfu, 0.28, 0.03)


def test_campus_one_building_or_four_times_the_fibre():
    """the same GPUs in one building (`cluster.datacenters: 1`) take 10.11 s; four times the fibre
    (`cluster.scale_across.bandwidth_Gbps: 102400`) gives 10.19 s, when the node NICs, not the WAN,
    limit the gradient reduce-scatter again."""
    one = sim(CAMPUS, {"cluster.datacenters": 1})
    fat = sim(CAMPUS, {"cluster.scale_across.bandwidth_Gbps": 102400})
    assert about(one.iteration_time_s, 10.11, 0.002) and about(fat.iteration_time_s, 10.19, 0.002)
    assert one.iteration_time_s < fat.iteration_time_s < sim(CAMPUS).iteration_time_s
    assert fat.links["dp"]["tier"] == "scale-out" and sim(CAMPUS).links["dp"]["tier"] == "scale-across"


def test_campus_small_buckets_cost_latency():
    """with Megatron's usual `communication.bucket_MB: 40` the WAN-limited reduce-scatter is split
    into 25 times more calls and the iteration grows to 16.0 s."""
    big, small = sim(CAMPUS), sim(CAMPUS, {"communication.bucket_MB": 40})

    def buckets(r):
        return sum(t.info.buckets for t in r.tasks if t.kind == "dp" and t.cls == r.breakdown_class)
    assert about(buckets(small) / buckets(big), 25, 0.1)
    assert about(small.iteration_time_s, 16.0, 0.01)


def test_campus_mesh_diagonals_idle_hub_slower():
    """a full mesh (`cluster.scale_across.topology: mesh`) adds the two diagonals, which the DP ring
    never uses (0 bytes on the map), so it is no faster (11.4 s). A hub (dc0 in the middle)
    carries the same 6.0 TB on each of its three spokes, in both directions, and takes 11.46 s (the ring
    11.39 s)."""
    base = sim(CAMPUS)
    mesh = sim(CAMPUS, {"cluster.scale_across.topology": "mesh"})
    idle = sorted(k for k, w in wan(mesh).items() if w["bytes_per_iteration"] == 0)
    assert idle == [("dc0", "dc2"), ("dc1", "dc3")]
    assert mesh.iteration_time_s == pytest.approx(base.iteration_time_s, rel=1e-9)
    hub = sim(CAMPUS, {"cluster.scale_across.topology": "hub"})
    assert sorted(wan(hub)) == [("dc0", "dc1"), ("dc0", "dc2"),
                                ("dc0", "dc3")]
    for w in hub.wan_links:
        assert about(w["bytes_a_to_b"], 6.0e12, 0.01) and about(w["bytes_b_to_a"], 6.0e12, 0.01)
    assert hub.iteration_time_s > base.iteration_time_s and about(hub.iteration_time_s, 11.46, 0.002)
    assert about(base.iteration_time_s, 11.39, 0.002)


def test_campus_hierarchical_carries_less_and_is_barely_faster():
    """Hierarchical DP (`communication.algorithm: hierarchical`) reduces inside each building first:
    each link carries 4.5 TB instead of 6.0 TB, but the iteration only drops to 11.3 s."""
    base, hier = sim(CAMPUS), sim(CAMPUS, {"communication.algorithm": "hierarchical"})
    assert all(about(w["bytes_per_iteration"], 4.5e12, 0.01) for w in hier.wan_links)
    assert hier.iteration_time_s < base.iteration_time_s and about(hier.iteration_time_s, 11.3, 0.01)


def test_campus_pp_across_loads_three_links_and_grows_the_bubble():
    """PP across the buildings instead (`parallelism.span: pp`: four stages per building, DP inside):
    2.6 TB of activations on each of the three links the pipeline crosses (the ring's fourth link,
    dc0 to dc3, stays idle). At each cut the 6,144 GPUs of a stage send at once, each flow a 6,144th
    of the link: 28 ms per 13 MB transfer with the 0.5 ms [...] The bubble grows from 1.0 to 2.6 s,
    but the gradient reduce-scatter no longer crosses a building, so the iteration drops to 10.98 s
    (DP across: 11.39 s)."""
    base, pp = sim(CAMPUS), sim(CAMPUS, {"parallelism.span": "pp"})
    assert pp.comm_bytes_by_tier["dp"]["scale-across"] == 0
    assert pp.comm_bytes_by_tier["pp"]["scale-across"] > 0
    links = wan(pp)
    assert links[("dc0", "dc3")]["bytes_per_iteration"] == 0
    busy = [w for k, w in links.items() if k != ("dc0", "dc3")]
    assert len(busy) == 3 and all(about(w["bytes_per_iteration"], 2.6e12, 0.01) for w in busy)
    assert about(base.breakdown_s["bubble"], 1.03, 0.03) and about(pp.breakdown_s["bubble"], 2.6, 0.02)
    assert about(pp.iteration_time_s, 10.98, 0.002) and about(base.iteration_time_s, 11.39, 0.002)
    cut = {round(t.duration, 5) for t in pp.tasks if t.kind == "pp" and t.duration > 5e-3}
    # 0.5 ms + 13.1 MB at 25.6 Tb/s x the WAN's efficiency / 6,144 flows (24,576 would be 4x slower)
    assert len(cut) == 1 and about(cut.pop(), 0.0285, 0.005)


def test_campus_latency_aware_schedule_hides_it_for_more_memory():
    """The latency-aware schedule (`parallelism.schedule: 1f1b-latency`) hides the round trips behind
    extra warm-up forwards: 10.28 s, for 5.3 GB more activations on the first stage (78.9 -> 84.2 GB
    of the GPU's 85.9 GB)."""
    pp = sim(CAMPUS, {"parallelism.span": "pp"})
    lat = sim(CAMPUS, {"parallelism.span": "pp", "parallelism.schedule": "1f1b-latency"})
    assert lat.iteration_time_s < pp.iteration_time_s and about(lat.iteration_time_s, 10.28, 0.002)
    j0, j1 = pp.to_json_dict()["memory_GB"]["total"], lat.to_json_dict()["memory_GB"]["total"]
    assert about(j0, 78.9, 0.002) and about(j1, 84.2, 0.002) and about(j1 - j0, 5.3, 0.02)
    assert "memory" not in lat.warning_kinds and "memory" not in pp.warning_kinds
