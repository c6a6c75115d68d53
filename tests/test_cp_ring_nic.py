"""A context-parallel ring across nodes hands each step's K/V to the next node through one GPU's NIC
(hunt s19, defect 1), and a point-to-point byte is counted on the tier it crosses (defect 7).

Ring attention's step is a send to the next CP rank and a receive from the one before
(Transformer Engine's AttnFuncWithCPAndKVP2P).  With k ring members per node, k-1 of them pass their
K/V on over NVLink and one sends it to the next node: one flow per ring leaves the node, through the
NIC of the GPU that sends it (NCCL's ncclTopoGetLocalNet: a GPU's point-to-point channels use its
local NICs).  It was priced at the k members' NICs (the group's share of its node, as a collective's
channels use them): CP 16 on 8-GPU nodes at 50 Gb/s handed 33.5 MB over in 0.75 ms, 7.7x faster than
its NIC and than ``collective --op send-recv`` (5.75 ms).  The closed forms below: a step is
S / (one NIC x the fabric's efficiency) + NCCL's point-to-point latency (nccl_tuning.P2P_NET_US +
the fabric's hop latency); the exposed ring per layer and micro-batch is
(cp-1) x [max(0, step - a) x (1 + recompute) + max(0, step_b - 2a)] with a the attention of one ring
step (techniques/ring_attention.ring_cost).
"""
from __future__ import annotations

import pytest

from explorer.config.presets import fabric_presets
from explorer.estimate.many import estimate
from explorer.network.collectives import NcclOptions, cost
from explorer.network.nccl_table import collective_rows
from explorer.network.nccl_tuning import P2P_NET_US
from explorer.network.topology import GroupShape
from explorer.physics.hardware import ComputeModel
from explorer.scenario import load
from explorer.simulate import simulate
from explorer.workloads.registry import workload_for

from conftest import ROOT

LC = ROOT / "scenarios" / "long-context-cp.yaml"
NDR = fabric_presets()["ib-ndr"]
LATENCY_S = P2P_NET_US * 1e-6 + NDR["latency_us"] * 1e-6        # 32.3 + 2.7 us
CP16 = {"cluster.scale_out.nic_Gbps": 50, "parallelism.cp": 16, "parallelism.dp": 4}


def _one_nic_step(size: float, nic_Gbps: float) -> float:
    """Seconds of one hand-off of ``size`` bytes through one NIC: bytes over its achievable rate
    (the line rate x ib-ndr's fitted efficiency, 0.94) plus the point-to-point latency."""
    return size / (nic_Gbps * 1e9 / 8 * NDR["efficiency"]) + LATENCY_S


def _attention_step_s(sc) -> float:
    """The attention of one ring step: 1/cp of the layer's core (ring_attention module docstring)."""
    lc = workload_for(sc.model).spec(sc).kinds[0]
    return ComputeModel.for_scenario(sc).time(lc.attn_core_fwd) / sc.parallelism.cp


def test_cp16_ring_step_takes_one_nic_as_collective_prints_it():
    """CP 16 on 8-GPU nodes at 50 Gb/s: a 33.5 MB hand-off takes 5.746 ms, its NIC's 5.875 GB/s plus
    35 us, in ``run`` and in ``collective --op send-recv`` alike (was 0.749 ms in ``run``)."""
    sc = load(LC, CP16)
    r = simulate(sc)
    kv = r.links["cp"]["bytes"]
    assert kv == 2 * 8 * 128 * (131072 // 16) * 2                   # 2 x kv_heads x d x s/cp x 2 B
    (row,) = collective_rows(sc, "send-recv", 16, [int(kv)])
    assert r.links["cp"]["time_s"] == pytest.approx(_one_nic_step(kv, 50), rel=1e-12)
    assert r.links["cp"]["time_s"] == row["time_s"]
    assert r.links["cp"]["time_s"] == pytest.approx(5.746392680851064e-3, rel=1e-12)
    assert r.links["cp"]["busbw_GBps"] == pytest.approx(5.839, rel=1e-3)   # under the NIC's 6.25 line rate


def test_cp16_exposed_ring_is_the_closed_form_and_the_estimator_agrees():
    """The ring is no longer "hidden": per layer and micro-batch 15 x [2 x (5.746 - 1.242) +
    (11.458 - 2 x 1.242)] ms (forward, recomputed forward, backward), x 32 layers x 2 micro-batches =
    17.26 s of cp; the iteration 24.95 s (was 7.69 s, no cp).  The estimator prices the same ring."""
    sc = load(LC, CP16)
    r = simulate(sc)
    kv = r.links["cp"]["bytes"]
    step, step_b = (row["time_s"] for row in collective_rows(sc, "send-recv", 16, [int(kv), int(2 * kv)]))
    a = _attention_step_s(sc)
    assert a == pytest.approx(1.2418e-3, rel=1e-4)
    per_layer = 15 * (2 * max(0.0, step - a) + max(0.0, step_b - 2 * a))
    assert r.breakdown_s["cp"] == pytest.approx(32 * 2 * per_layer, rel=1e-12)
    assert r.breakdown_s["cp"] == pytest.approx(17.264, rel=1e-4)
    assert r.iteration_time_s == pytest.approx(24.955, rel=1e-4)
    est = estimate(sc)
    assert float(est.iteration_time_s[0]) == pytest.approx(r.iteration_time_s, rel=1e-12)
    assert float(est.breakdown_s["cp"][0]) == pytest.approx(r.breakdown_s["cp"], rel=1e-12)


def test_cp16_on_eight_nics_costs_what_it_costs_on_one():
    """A ring's one flow per node uses one NIC whether the node has 8 or 1: the same step, the same
    exposed ring (the dp all-reduce, which uses every NIC, is what a single NIC slows)."""
    eight = simulate(load(LC, CP16))
    one = simulate(load(LC, {**CP16, "cluster.scale_out.nics_per_node": 1}))
    assert eight.links["cp"]["time_s"] == one.links["cp"]["time_s"]
    assert eight.breakdown_s["dp"] < one.breakdown_s["dp"]


def test_tp2_cp8_ring_at_400G_is_one_nic_not_four():
    """tp 2 x cp 8 on 8-GPU nodes: 4 ring members a node, 33.5 MB a step through one 400 Gb/s NIC in
    0.749 ms (47 GB/s), not 0.213 ms (157 GB/s, four NICs); at 128K tokens still hidden."""
    r = simulate(load(LC, {"parallelism.tp": 2, "parallelism.dp": 4}))
    kv = r.links["cp"]["bytes"]
    assert kv == 2 * 8 * 128 * (131072 // 8) * 2 / 2                # the K/V heads split over tp 2
    assert r.links["cp"]["time_s"] == pytest.approx(_one_nic_step(kv, 400), rel=1e-12)
    assert r.links["cp"]["time_s"] == pytest.approx(0.748924085e-3, rel=1e-9)
    assert r.breakdown_s["cp"] == 0.0


def test_one_flow_share_is_one_gpus_nics_at_most():
    """The share of a ring's crossing flow: the group's fair share of its node (capacity x k / G)
    capped at one GPU's NICs (capacity / min(NICs, G)); unchanged with one member per node or one NIC
    per node, where the fair share is the smaller."""
    from explorer.network.p2p_link import one_flow_share  # here: the other tests run without it
    cap = 8 * 47e9                                              # a node's egress, 8 NICs of 47 GB/s
    opts = NcclOptions(nics_per_node=8, gpus_per_node=8)
    for k in (1, 2, 4, 8):
        sh = GroupShape(16, (1, k), (300e9, cap * k / 8), (1e-6, 4e-6))
        assert one_flow_share(sh, opts) == pytest.approx(47e9, rel=1e-12)
    single = GroupShape(16, (1, 2), (300e9, 47e9 * 2 / 8), (1e-6, 4e-6))    # one NIC for 8 GPUs
    assert one_flow_share(single, NcclOptions(nics_per_node=1, gpus_per_node=8)) == 47e9 * 2 / 8
    bonded = GroupShape(16, (1, 8), (300e9, 16 * 23.5e9), (1e-6, 4e-6))     # 2 NICs per GPU
    assert one_flow_share(bonded, NcclOptions(nics_per_node=16, gpus_per_node=8)) == pytest.approx(47e9)


def test_a_ring_steps_crossing_flow_is_timed_on_one_nic_and_one_pcie_link():
    """collectives.cost of a send-recv on 16 GPUs, 8 a node: S over one NIC (not 8); with a 10 GB/s
    PCIe link to the NICs, S over that one link (not spread over 8 links)."""
    sh = GroupShape(16, (1, 8), (300e9, 8 * 47e9), (1e-6, 4e-6))
    opts = NcclOptions(nics_per_node=8, gpus_per_node=8)
    lat = P2P_NET_US * 1e-6 + 4e-6
    assert cost("send-recv", 1e9, sh, options=opts).time_s == pytest.approx(1e9 / 47e9 + lat, rel=1e-12)
    slow_pcie = NcclOptions(nics_per_node=8, gpus_per_node=8, pcie_Bps=10e9)
    cc = cost("send-recv", 1e9, sh, options=slow_pcie)
    assert cc.time_s == pytest.approx(1e9 / 10e9 + lat, rel=1e-12) and cc.pcie


def test_cross_node_point_to_point_bytes_count_on_the_tiers_they_cross():
    """comm_bytes_by_tier: a CP ring with one member per node sends nothing on NVLink (was all of it
    counted there too); with 8 a node, 7/8 of it on NVLink and 1/8 out of the node; a pipeline pair
    across nodes none on NVLink (megatron-gpt3-175b: 1.21 GB was counted on scale-up)."""
    across = simulate(load(LC, {"parallelism.order": "tp-dp-cp-pp"}))
    sent = across.comm_bytes_per_gpu["cp"]
    assert across.comm_bytes_by_tier["cp"]["scale-up"] == 0.0
    assert across.comm_bytes_by_tier["cp"]["scale-out"] == sent
    ring16 = simulate(load(LC, CP16))
    sent16 = ring16.comm_bytes_per_gpu["cp"]
    assert ring16.comm_bytes_by_tier["cp"]["scale-up"] == pytest.approx(7 / 8 * sent16, rel=1e-12)
    assert ring16.comm_bytes_by_tier["cp"]["scale-out"] == pytest.approx(1 / 8 * sent16, rel=1e-12)
    inside = simulate(load(LC))                                     # the ring on NVLink: all of it there
    assert inside.comm_bytes_by_tier["cp"]["scale-up"] == inside.comm_bytes_per_gpu["cp"]
    assert inside.comm_bytes_by_tier["cp"]["scale-out"] == 0.0
    gpt = simulate(load(ROOT / "scenarios" / "megatron-gpt3-175b.yaml"))
    assert gpt.comm_bytes_by_tier["pp"]["scale-up"] == 0.0
    assert gpt.comm_bytes_by_tier["pp"]["scale-out"] == pytest.approx(1207959552.0, rel=1e-12)


def test_gossip_flow_out_of_a_node_uses_one_nic_of_eight():
    """The same physics in a gossip ring's phase (variants/lowcomm/gossip_graph.py): the two GPUs of
    a node whose neighbours lie on other nodes each send their model through their own NIC, so eight
    NICs a node exchange as slowly as one: 2 x 6.54 GB over one 100 GbE NIC (x 0.9) = 1.163 s (was
    0.29 s, each flow given four NICs)."""
    ps = ROOT / "scenarios" / "parameter-server.yaml"
    nic = 100e9 / 8 * 0.9
    for nics in (1, 8):
        x = simulate(load(ps, {"parallelism.dp_kind": "gossip-ring",
                               "cluster.scale_out.nics_per_node": nics})).exchange
        assert x.exchange_s == pytest.approx(x.sent / nic, rel=1e-3)
        assert x.exchange_s == pytest.approx(1.1632, rel=1e-4)
