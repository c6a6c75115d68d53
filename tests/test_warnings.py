"""Warnings follow from the simulated outcome: each quotes its number, none contradicts it; a
requested collective algorithm that cannot run falls back to ring and says so once."""
from __future__ import annotations

import numpy as np
import pytest

from explorer.network.collectives import cost
from explorer.network.topology import Fabric
from explorer.scenario import load
from explorer.simulate import WAN_EXPOSED_WARNING_SHARE, simulate

from conftest import SCENARIO_FILES

TWO_DC = next(f for f in SCENARIO_FILES if f.stem == "two-datacenters")
TEACHING = next(f for f in SCENARIO_FILES if f.stem == "teaching-8gpu")


def test_pp_across_the_wan_is_faster_and_no_warning_says_to_move_it_back():
    # The description suggests putting PP across the buildings (parallelism.order: tp-cp-dp-pp);
    # the numbers say it is faster, so no warning may tell the user to keep PP in one datacenter.
    base = simulate(load(TWO_DC))
    pp_wan = simulate(load(TWO_DC, {"parallelism.order": "tp-cp-dp-pp"}))
    assert pp_wan.iteration_time_s < base.iteration_time_s
    assert pp_wan.links["pp"]["tier"] == "scale-across"
    for w in pp_wan.warnings:
        assert "place it inside one datacenter" not in w and "keep" not in w
    # What it does say is the measured exposed share of PP, limited by the WAN, where that share is
    # large: with the balanced split the stages after the WAN wait for the output layer's stage and
    # hide most of it (no warning); with a 21-layer stage before the WAN on half the WAN (800 Gb/s:
    # 256 flows cross at the cut, 49 ms a transfer) they do not.
    share = pp_wan.breakdown_s["pp"] / pp_wan.iteration_time_s
    assert share < WAN_EXPOSED_WARNING_SHARE and "wan" not in pp_wan.warning_kinds
    heavy = simulate(load(TWO_DC, {"parallelism.order": "tp-cp-dp-pp",
                                   "cluster.scale_across.bandwidth_Gbps": 800,
                                   "parallelism.stage_layers": [20, 21, 20, 19]}))
    (msg,) = [w for w, k in zip(heavy.warnings, heavy.warning_kinds, strict=True) if k == "wan"]
    share = heavy.breakdown_s["pp"] / heavy.iteration_time_s
    assert share >= WAN_EXPOSED_WARNING_SHARE
    assert msg.startswith("pp:") and f"{share:.1%}" in msg and "WAN" in msg


def test_dp_over_the_wan_warns_with_its_exposed_share():
    r = simulate(load(TWO_DC))
    share = r.breakdown_s["dp"] / r.iteration_time_s
    assert r.warning_kinds == ("wan",)
    assert f"{share:.1%}" in r.warnings[0] and r.warnings[0].startswith("dp:")


def test_no_wan_warning_once_the_wan_no_longer_limits_or_the_share_is_small():
    # A 100x faster WAN: its bandwidth no longer limits the reduction, but each 40 MB bucket still
    # pays the WAN's 2 ms hop (2.44 ms of latency in a call of about 3.5): latency-bound across the
    # WAN, which the warning says (it had named the node NICs and said nothing; bigger buckets help).
    r = simulate(load(TWO_DC, {"cluster.scale_across.bandwidth_Gbps": 160000}))
    assert r.links["dp"]["tier"] == "scale-across latency" and r.warning_kinds == ("wan",)
    assert "is latency-bound across the WAN between datacenters" in r.warnings[0]
    # A shorter WAN hop as well: the exposed DP (7% of the iteration: NCCL's per-call latency on
    # 40 MB buckets, nccl_tuning.py) is the fabric's, not the WAN's, so nothing is said.
    r = simulate(load(TWO_DC, {"cluster.scale_across.bandwidth_Gbps": 16000,
                               "cluster.scale_across.latency_ms": 0.01}))
    assert r.breakdown_s["dp"] / r.iteration_time_s > WAN_EXPOSED_WARNING_SHARE
    assert r.links["dp"]["tier"] == "scale-out"
    assert r.warnings == ()


def test_memory_warning_is_typed_and_exposed_as_a_flag():
    ok = simulate(load(TEACHING))
    assert not ok.memory_over_capacity and ok.to_json_dict()["memory_over_capacity"] is False
    tight = simulate(load(TEACHING, {"hardware.gpu": {"name": "small", "peak_tflops": 989, "memory_GB": 4,
                                                       "hbm_GBps": 3350}}))
    assert tight.memory_over_capacity
    d = tight.to_json_dict()
    assert d["warning_kinds"] == ["memory"] and len(d["warnings"]) == 1 and d["memory_over_capacity"] is True


@pytest.mark.parametrize("op", ["reduce-scatter", "all-gather"])
def test_tree_reduce_scatter_and_all_gather_fall_back_to_ring(op):
    fab = Fabric.for_cluster(load(TWO_DC).cluster)
    sh = fab.shape(np.arange(0, 64, 8))                   # 8 GPUs on 8 nodes
    forced = cost(op, 1e8, sh, "tree")
    ring = cost(op, 1e8, sh, "ring")
    assert forced.algorithm == "ring" and forced.requested == "tree"
    assert forced.time_s == ring.time_s
    assert cost(op, 1e8, sh, "ring").requested == ""


def test_tree_inside_one_node_falls_back_to_ring_not_halving_doubling():
    fab = Fabric.for_cluster(load(TEACHING).cluster)
    sh = fab.shape(np.arange(8))
    forced = cost("all-reduce", 1e8, sh, "tree")
    assert forced.algorithm == "ring" and forced.time_s == cost("all-reduce", 1e8, sh, "ring").time_s
    # Between nodes tree runs as asked.
    fab2 = Fabric.for_cluster(load(TWO_DC).cluster)
    assert cost("all-reduce", 1e8, fab2.shape(np.arange(0, 64, 8)), "tree").algorithm == "tree"


def test_tree_fallback_is_reported_once_naming_the_calls():
    r = simulate(load(TWO_DC, {"communication.algorithm": "tree"}))
    assert r.warning_kinds.count("algorithm") == 1
    (msg,) = [w for w, k in zip(r.warnings, r.warning_kinds, strict=True) if k == "algorithm"]
    assert "reduce-scatter (dp, tp)" in msg and "all-gather (dp, tp)" in msg and "ring used" in msg
    # The results report the algorithm that ran.
    assert r.links["dp"]["algorithm"] == "ring" and r.links["tp"]["algorithm"] == "ring"
    inside = simulate(load(TEACHING, {"communication.algorithm": "tree"}))
    (msg,) = inside.warnings
    assert "all-reduce (dp)" in msg and "inside one node" in msg
    ring = simulate(load(TEACHING, {"communication.algorithm": "ring"}))
    assert inside.iteration_time_s == ring.iteration_time_s


def test_auto_never_warns_about_algorithms():
    for f in SCENARIO_FILES:
        assert "algorithm" not in simulate(load(f, {"communication.algorithm": "auto"})).warning_kinds


def test_warnings_and_classes_are_typed_records():
    """Consumers read a warning's kind and a class's name/stage/multiplicity, never parse text."""
    # ZeRO-0 keeps full gradients and Adam state: about 119 GB, over the 80 GiB of an H100.
    r = simulate(next(load(p, {"parallelism.zero": 0})
                      for p in SCENARIO_FILES if p.stem == "llama3-405b-16k"))
    assert [n.kind for n in r.notices] == list(r.warning_kinds) and "memory" in r.warning_kinds
    assert all(n.message == m for n, m in zip(r.notices, r.warnings, strict=True))
    c = r.classes[1]
    assert (c.name, c.stage, c.gpus) == ("stage 1", 1, 1024) and c.label == f"{c.name} (×{c.gpus} GPUs)"


def test_pcie_warning_names_the_link_when_nics_outrun_it():
    """One H100 per node with four 400 Gb/s NICs: the PCIe link (52.8 GB/s) carries less than the
    NICs' ~188 GB/s, and the run says so with both figures; eight GPUs with a NIC each do not."""
    from explorer.scenario import apply_overrides, from_dict
    from explorer.simulate import simulate
    raw = {"model": {"preset": "llama3-8b", "layers": 2}, "training": {"global_batch": 2},
           "hardware": {"gpu": "h100-sxm"},
           "cluster": {"gpus_per_node": 1, "nodes": 2, "scale_out": {"fabric": "ib-ndr", "nics_per_node": 4}}}
    r = simulate(from_dict(raw))
    (msg,) = [w for w, k in zip(r.warnings, r.warning_kinds, strict=True) if k == "pcie"]
    assert "52.8 GB/s" in msg and "188 GB/s" in msg
    wide = simulate(from_dict(apply_overrides(raw, {"hardware.gpu.pcie_GBps": 400})))
    assert "pcie" not in wide.warning_kinds
    eight = simulate(from_dict(apply_overrides(raw, {"cluster.gpus_per_node": 8, "training.global_batch": 16,
                                                     "cluster.scale_out.nics_per_node": 8})))
    assert "pcie" not in eight.warning_kinds
