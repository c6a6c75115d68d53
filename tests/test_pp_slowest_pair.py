"""A pipeline hop is priced on the pair of its replicas that crosses the outermost boundary
(network/groups.Network._slowest_pair): every data-parallel replica makes the hop at once and the
step waits for the slowest.  Where a stage's GPUs do not tile the nodes, replicas' pairs sit
differently: teaching-8gpu on 3 nodes of 8 GPUs with tp 4, pp 3, dp 2 and pp inside dp
(order tp-cp-ep-pp-dp) puts replica 0's stages on GPUs 0-3, 4-7 (node 0) and 8-11 (node 1), replica
1's on 12-15 (node 1), 16-19 and 20-23 (node 2): replica 0 hands stage 0 to 1 on NVLink, replica 1
across nodes.  A re-check hunt found that hop priced on replica 0's NVLink pair."""
from __future__ import annotations

import pytest

from explorer.network.groups import Network
from explorer.scenario import load
from explorer.simulate import simulate

from conftest import ROOT

TEACH = ROOT / "scenarios" / "teaching-8gpu.yaml"
LAYOUT = {"cluster.nodes": 3, "parallelism.tp": 4, "parallelism.pp": 3, "parallelism.dp": 2,
          "parallelism.order": "tp-cp-ep-pp-dp", "cluster.scale_out.nic_Gbps": 25}


def test_every_hop_of_a_pipeline_whose_replicas_sit_differently_crosses_nodes():
    net = Network(load(TEACH, LAYOUT))
    # hop 0: replica 1's 12 -> 16 (nodes 1 -> 2); hop 1: replica 0's 4 -> 8 (nodes 0 -> 1)
    assert [list(net.members("pp", s)) for s in (0, 1)] == [[12, 16], [4, 8]]
    assert all(net.shape("pp", s).outer == 1 for s in (0, 1))       # both leave a node


def test_the_hop_priced_on_nvlink_now_pays_the_nic():
    """The same transfer on both hops: 2.1 MB at 25 Gb/s; exposed pp 3.8 -> 5.3 ms, the iteration
    248.4 -> 250.7 ms."""
    r = simulate(load(TEACH, LAYOUT))
    hops = {round(t.duration, 9) for t in r.tasks if t.kind == "pp"}
    assert len(hops) == 1                                           # one price: both hops alike
    assert r.breakdown_s["pp"] == pytest.approx(5.3e-3, abs=5e-5)
    assert r.iteration_time_s == pytest.approx(0.2507, abs=5e-5)


def test_where_every_pair_sits_alike_the_first_replicas_pair_is_kept():
    sc = load(TEACH, {**LAYOUT, "parallelism.order": "tp-cp-ep-dp-pp"})
    net = Network(sc)
    pl = net.placement
    for s in range(3):
        assert list(net.members("pp", s)) == [pl.gpu(pp=s), pl.gpu(pp=(s + 1) % 3)]


def test_replicas_crossing_different_wan_links_are_priced_on_the_slowest_route():
    """cross-region-pp on 8 datacenters (a ring, 32 GPUs each) with tp 8, pp 8, dp 4 and pp inside
    dp: replica r's pipeline spans datacenters 2r and 2r+1, so hop 3 of every replica crosses the
    WAN, each on its own link.  Links 4-5 and 5-6 are overridden to 50 Gb/s: replica 2's hop 3 takes
    4 -> 5, whose 8 flows (stage 3's tp ranks) get 50e9 / 8 x 0.9 / 8 = 0.703 GB/s each.  It was
    priced on replica 0's 6.4 Tb/s link 0 -> 1 (a re-check hunt: 27x the slow link's capacity in
    flight)."""
    from explorer.network.topology import SCALE_ACROSS_EFFICIENCY
    sc = load(ROOT / "scenarios" / "cross-region-pp.yaml", {
        "cluster.datacenters": 8, "cluster.nodes": 32, "parallelism.tp": 8, "parallelism.pp": 8,
        "parallelism.dp": 4, "parallelism.schedule": "zb-v", "parallelism.order": "tp-cp-ep-pp-dp",
        "cluster.scale_across.topology": "ring", "training.global_batch": 128,
        "cluster.scale_across.links": [{"a": "4", "b": "5", "bandwidth_Gbps": 50},
                                       {"a": "5", "b": "6", "bandwidth_Gbps": 50}]})
    net = Network(sc)
    assert [int(g) // 32 for g in net.members("pp", 3)] == [4, 5]
    assert net.shape("pp", 3).shares[-1] == pytest.approx(50e9 / 8 * SCALE_ACROSS_EFFICIENCY / 8, rel=1e-12)
    from explorer.estimate import estimate_many
    r = simulate(sc)
    assert estimate_many([sc]).iteration_time_s[0] == pytest.approx(r.iteration_time_s, rel=1e-9)
    assert all(w["utilisation"] <= 1 + 1e-9 for w in r.wan_links)
