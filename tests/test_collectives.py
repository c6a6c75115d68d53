"""Collective costs: link-limited bandwidth per boundary (Thakur et al. 2005 volumes), NCCL's protocol
and latency model on top (nccl_tuning.py, NCCL 2.25 tuning.cc), busbw conventions (nccl-tests
doc/PERFORMANCE.md), tier limits, MPI algorithms, and the nccl-tests calibration rows."""
from __future__ import annotations

import numpy as np
import pytest

from explorer.cli import collective_rows
from explorer.collective_algorithms.nccl_links import NVLS_EFFICIENCY
from explorer.fidelity.calibration import read_csv
from explorer.network.collectives import NcclOptions, bus_factor, cost
from explorer.network.nccl_tuning import BASE_LAT_US, HW_LAT_US, PROTOCOLS
from explorer.network.topology import SCALE_OUT_EFFICIENCY, SCALE_UP_EFFICIENCY, Fabric
from explorer.scenario import Cluster, ScaleAcross, ScaleOut, ScaleUp, from_dict

GB = 1e9
MPI = NcclOptions(library="mpi")
SIMPLE = NcclOptions(protocol="Simple")


def node(bw=300.0, lat_us=0.6, gpus=8, nodes=1, **out):
    c = Cluster(gpus_per_node=gpus, nodes=nodes, scale_up=ScaleUp(bandwidth_GBps=bw, latency_us=lat_us),
                scale_out=ScaleOut(**out) if out else ScaleOut())
    return Fabric.for_cluster(c)


@pytest.mark.parametrize("n", [2, 4, 8])
@pytest.mark.parametrize("size", [1e3, 1e6, 1e9])
def test_mpi_ring_all_reduce_matches_alpha_beta_closed_form(n, size):
    # T = 2(n-1) alpha + 2(n-1)/n * S / B   (Thakur et al. 2005, Sec. 4.3, ring) for MPI's ring, plus the
    # in-node pipeline fill of its segments: 1.2 x (n-1)/7 steps of min(512 KiB, S/16) at B/16 each.
    sh = node(lat_us=2.0).shape(np.arange(n))
    alpha, B = 2e-6, 300 * GB * SCALE_UP_EFFICIENCY
    fill = 1.2 * (n - 1) / 7 * min(512 * 1024, size / 16) / (B / 16)
    expected = 2 * (n - 1) * alpha + 2 * (n - 1) / n * size / B + fill
    c = cost("all-reduce", size, sh, "ring", options=MPI)
    assert c.time_s == pytest.approx(expected, rel=1e-12) and c.protocol == "none"


@pytest.mark.parametrize("op", ["reduce-scatter", "all-gather"])
def test_nccl_simple_ring_reduce_scatter_and_all_gather_closed_form(op):
    # NCCL 2.25: latency 8.4 us base + (n-1) NVLink Simple hops of 3.4 us; bandwidth (n-1)/n S / B; and
    # the in-node pipeline fill: 1.2 Simple steps of 512 KiB at one of 16 channels' share of the bus
    # bandwidth B for an 8-GPU ring's all-reduce (the calibration's depth), of which one pass (all-gather
    # or reduce-scatter alone) fills half (nccl_tuning.node_fill_s, fill_hops).
    n, size = 8, 2**30
    sh = node().shape(np.arange(n))
    B = 300 * GB * SCALE_UP_EFFICIENCY
    fill = 1.2 / 2 * 512 * 1024 / (B / 16)
    expected = (8.4 + 7 * 3.4) * 1e-6 + (n - 1) / n * size / B + fill
    c = cost(op, size, sh, "ring", options=SIMPLE)
    assert c.time_s == pytest.approx(expected, rel=1e-12) and c.protocol == "Simple"


@pytest.mark.parametrize("ranks", [np.arange(8), np.arange(0, 256, 8), np.arange(64)])
def test_all_reduce_is_about_twice_reduce_scatter_for_large_messages(ranks):
    sh = node(nodes=32).shape(ranks)
    ar = cost("all-reduce", 8 * 2**30, sh)
    rs = cost("reduce-scatter", 8 * 2**30, sh)
    assert ar.time_s / rs.time_s == pytest.approx(2.0, rel=0.05)


def test_bus_factors_follow_nccl_tests():
    assert bus_factor("all-reduce", 8) == pytest.approx(1.75)
    assert bus_factor("reduce-scatter", 8) == pytest.approx(0.875)
    assert bus_factor("all-gather", 4) == pytest.approx(0.75)
    assert bus_factor("all-to-all", 16) == pytest.approx(15 / 16)
    assert bus_factor("broadcast", 8) == 1.0
    assert bus_factor("send-recv", 2) == 1.0


def test_large_ring_busbw_equals_effective_link_bandwidth():
    # busbw is defined so that it approaches the bottleneck link speed, independent of n.
    for n in (2, 4, 8):
        c = cost("all-reduce", 64 * 2**30, node().shape(np.arange(n)), "ring")
        assert c.busbw_GBps == pytest.approx(300 * SCALE_UP_EFFICIENCY, rel=1e-3)


def test_halving_doubling_pays_log2_n_latencies():
    # Rabenseifner: 2 log2(n) steps; with S -> 0 only latency remains.
    sh = node(lat_us=3.0).shape(np.arange(8))
    assert cost("all-reduce", 1.0, sh, "halving-doubling").latency_s == pytest.approx(2 * 3 * 3e-6)
    assert cost("all-reduce", 1.0, sh, "ring", options=MPI).latency_s == pytest.approx(2 * 7 * 3e-6)


def test_non_power_of_two_halving_doubling_adds_two_exchanges():
    sh6, sh4 = node().shape(np.arange(6)), node().shape(np.arange(4))
    extra = (cost("all-reduce", 1e9, sh6, "halving-doubling").time_s
             - cost("all-reduce", 1e9, sh4, "halving-doubling").time_s)
    assert extra > 2 * 1e9 / (300 * GB * SCALE_UP_EFFICIENCY) * 0.9


def test_tree_beats_ring_for_small_messages_across_many_nodes():
    fab = node(nodes=128)
    sh = fab.shape(np.arange(0, 1024, 8))           # one GPU per node, 128 nodes
    ring, tree = cost("all-reduce", 1e6, sh, "ring"), cost("all-reduce", 1e6, sh, "tree")
    assert tree.time_s < ring.time_s / 5
    # NCCL 2.25: baseLat(tree, p) + 2 x log2(128) network tree hops (one GPU per node: no NVLink hop).
    p = PROTOCOLS.index(tree.protocol)
    expected_us = BASE_LAT_US["tree"][p] + 2 * 7 * HW_LAT_US["net"]["tree"][p]
    assert tree.latency_s == pytest.approx(expected_us * 1e-6)


def test_auto_is_never_slower_than_any_nccl_algorithm_and_protocol():
    fab = node(nodes=64)
    for members in (np.arange(8), np.arange(0, 512, 8), np.arange(512), np.arange(0, 512, 64)):
        sh = fab.shape(members)
        for size in (1e3, 1e6, 1e9):
            auto = cost("all-reduce", size, sh).time_s
            for alg in ("ring", "tree"):
                for proto in ("LL", "LL128", "Simple"):
                    forced = cost("all-reduce", size, sh, alg, options=NcclOptions(protocol=proto))
                    assert auto <= forced.time_s + 1e-15


@pytest.mark.parametrize("library", ["mpi", "gloo"])
def test_an_mpi_or_gloo_auto_is_never_slower_than_any_of_its_algorithms_on_slow_pcie(library):
    """``auto`` with MPI or Gloo takes the fastest of the library's alpha-beta algorithms as they run, the
    GPU's PCIe links included (collectives.cost).  Chosen before the PCIe cap, gloo on 2 x 4 A100s
    with 800 Gb/s NICs took its ring over halving-doubling and ran 12.0 ms instead of 8.0 — slower than
    at 200 Gb/s (fuzzed)."""
    from explorer.collective_algorithms import registry
    fab = node(nodes=4, nic_Gbps=800.0, nics_per_node=8)
    for pcie in (5e9, 12e9, 25e9, float("inf")):
        o = NcclOptions(library=library, pcie_Bps=pcie)
        for members in (np.arange(0, 32, 8), np.arange(0, 32, 4), np.arange(32)):
            sh = fab.shape(members)
            for size in (1e5, 1e7, 1e9):
                auto = cost("all-reduce", size, sh, options=o)
                for alg in registry.library_candidates("all-reduce", library):
                    named = cost("all-reduce", size, sh, alg.name, options=o)
                    assert auto.time_s <= named.time_s * (1 + 1e-12)


def test_inter_node_ring_is_limited_by_the_nic_share():
    # One member per node: each group gets one NIC's worth (8 NICs shared by the node's 8 groups).
    fab = node(nodes=16, nic_Gbps=400, nics_per_node=8)
    c = cost("all-reduce", 16 * 2**30, fab.shape(np.arange(0, 128, 8)), "ring")
    assert c.boundary == "scale-out"
    assert c.busbw_GBps == pytest.approx(50 * SCALE_OUT_EFFICIENCY, rel=0.01)


def test_oversubscribed_spine_slows_a_group_spread_over_leaf_blocks_proportionally():
    # Fat-tree, radix 64, 8 NICs/node -> 4 nodes per leaf; a DP group with one member per leaf
    # block sends all of its traffic through the leaf uplinks.
    def busbw(o):
        fab = node(nodes=64, kind="fat-tree", oversubscription=o)
        return cost("all-reduce", 16 * 2**30, fab.shape(np.arange(0, 512, 32)), "ring").busbw_GBps
    assert busbw(4.0) == pytest.approx(busbw(1.0) / 4, rel=0.01)
    # A group inside one leaf block never crosses the spine.
    fab1, fab4 = node(nodes=64, kind="fat-tree"), node(nodes=64, kind="fat-tree", oversubscription=4.0)
    inside = np.arange(0, 32, 8)
    assert cost("all-reduce", 1e9, fab4.shape(inside)).time_s == pytest.approx(
        cost("all-reduce", 1e9, fab1.shape(inside)).time_s)


def test_rail_optimized_leaf_blocks_are_larger_than_fat_tree_blocks():
    c = dict(gpus_per_node=8, nodes=64)
    up = ScaleUp(bandwidth_GBps=450)
    rail = Fabric.for_cluster(Cluster(**c, scale_up=up, scale_out=ScaleOut(kind="rail-optimized")))
    tree = Fabric.for_cluster(Cluster(**c, scale_up=up, scale_out=ScaleOut(kind="fat-tree")))
    assert rail.leaf_nodes == 32 and tree.leaf_nodes == 4


def test_wan_limits_a_group_spanning_two_datacenters():
    c = Cluster(gpus_per_node=8, nodes=16, datacenters=2, scale_up=ScaleUp(bandwidth_GBps=450),
                scale_across=ScaleAcross(bandwidth_Gbps=100, latency_ms=1))
    fab = Fabric.for_cluster(c)
    across = cost("all-reduce", 1e9, fab.shape(np.array([0, 64])), "ring", options=MPI)
    assert across.boundary == "scale-across"
    # Two members, one per datacenter: all 64 such groups share the 100 Gb/s WAN at once, so each
    # gets 12.5 GB/s * 0.9 / 64; a 2-rank ring all-reduce moves S per member, in 2 steps.
    link = 1e9 / (12.5e9 * 0.9 / 64)
    assert across.time_s == pytest.approx(2 * 1e-3 + link, rel=1e-6)
    # NCCL's ring pays its own latency on top of the two WAN crossings.
    nccl = cost("all-reduce", 1e9, fab.shape(np.array([0, 64])), "ring")
    assert nccl.boundary == "scale-across" and 2e-3 + link < nccl.time_s < 2e-3 + link + 1e-3


def test_pairwise_all_to_all_egress_across_nodes():
    # 16 ranks on 2 nodes: each node sends 8 * S * 8/16 bytes through its 8 x 50 GB/s NICs.
    fab = node(nodes=2, nic_Gbps=400)
    c = cost("all-to-all", 1e9, fab.shape(np.arange(16)))
    # Latency: the farthest peer once (ib-ndr: 2.7 us) with the proxies' hand-off of a send across
    # nodes (nccl_tuning.P2P_NET_US, 32.3 us), plus one scale-up latency (0.6 us) per further peer
    # (concurrent sends).
    expected = 2.7e-6 + 32.3e-6 + 14 * 0.6e-6 + 8 * 1e9 * 8 / 16 / (8 * 50e9 * SCALE_OUT_EFFICIENCY)
    assert c.time_s == pytest.approx(expected, rel=1e-9)


def test_send_recv_across_nodes_pays_the_proxies_hand_off_and_inside_a_node_does_not():
    # A pair across two nodes: the network hop (ib-ndr 2.7 us) + the proxies' hand-off of a send
    # (nccl_tuning.P2P_NET_US, 32.3 us, fitted to together-nccl-tests' B200 sendrecv at 1 KiB) + S over
    # the GPU's NIC share; a pair inside a node: the NVLink hop and S over NVLink only.
    fab = node(nodes=2, nic_Gbps=400)
    S = 64 * 2**20
    across = cost("send-recv", S, fab.shape(np.array([7, 8])))
    inside = cost("send-recv", S, fab.shape(np.array([0, 1])))
    assert across.time_s == pytest.approx(2.7e-6 + 32.3e-6 + S / (50e9 * SCALE_OUT_EFFICIENCY), rel=1e-9)
    assert inside.time_s == pytest.approx(0.6e-6 + S / (300 * GB * SCALE_UP_EFFICIENCY), rel=1e-9)


def test_all_to_all_in_one_node_fills_one_pass_of_the_pipeline():
    # 8 ranks on one NVSwitch node: the farthest peer's latency (0.6 us) plus one per further peer, the
    # (n-1)/n S each GPU sends at the scale-up bandwidth B, and one pass of the in-node pipeline fill:
    # half an all-reduce's 1.2 Simple steps of 512 KiB at one of 16 channels' share of B
    # (nccl_tuning.node_fill_s, fill_hops).  Across nodes the network sets the time and there is no fill.
    n, size = 8, 2**30
    B = 300 * GB * SCALE_UP_EFFICIENCY
    c = cost("all-to-all", size, node().shape(np.arange(n)))
    expected = 0.6e-6 + (n - 2) * 0.6e-6 + (n - 1) / n * size / B + 0.6 * 512 * 1024 / (B / 16)
    assert c.time_s == pytest.approx(expected, rel=1e-12)


def test_nvls_only_inside_one_nvswitch_domain():
    fab = node(bw=900, nodes=2)
    b200 = NcclOptions(nvls=True, arch="blackwell")
    inside = cost("all-reduce", 8 * 2**30, fab.shape(np.arange(8)), "nvls", options=b200)
    assert inside.algorithm == "nvls" and inside.protocol == "Simple"
    # + 25 us latency and the in-node fill (1.2 steps of 512 KiB per channel): 0.4 % of 8 GiB
    assert inside.algbw_GBps == pytest.approx(900 * NVLS_EFFICIENCY["blackwell"], rel=6e-3)
    across = cost("all-reduce", 8 * 2**30, fab.shape(np.arange(16)), "nvls", options=b200)
    assert across.algorithm != "nvls" and across.requested == "nvls"
    # With InfiniBand SHARP (CollNet) NVLS runs across nodes too (NCCL 2.25: NVLS needs collnet there).
    sharp = cost("all-reduce", 8 * 2**30, fab.shape(np.arange(16)), "nvls",
                 options=NcclOptions(nvls=True, arch="blackwell", sharp=True))
    assert sharp.algorithm == "nvls"


def test_single_rank_costs_nothing():
    assert cost("all-reduce", 1e9, node().shape(np.arange(1))).time_s == 0.0


@pytest.mark.parametrize("row", read_csv("nccl_busbw.csv"), ids=lambda r: f"{r['gpu']}-{r['algorithm']}")
def test_nccl_tests_calibration_rows_within_5_percent(row):
    # Published nccl-tests single-node bus bandwidths (reference/nccl_busbw.csv, sources inside):
    # A100 ring 235, B200 ring 682.2, B200 NVLS 838 GB/s.
    size = 8 * 2**30 if row["size_bytes"] == "large" else int(row["size_bytes"])
    sc = from_dict({"model": {"preset": "llama3-8b"}, "training": {"global_batch": 8},
                    "hardware": {"gpu": row["gpu"]}, "cluster": {"gpus_per_node": 8, "nodes": 1}})
    out = collective_rows(sc, "all-reduce", 8, [size], row["algorithm"])[0]
    assert out["busbw_GBps"] == pytest.approx(float(row["busbw_GBps"]), rel=0.05)


def test_in_node_fill_costs_mid_sizes_and_vanishes_at_the_plateau():
    # nccl_tuning.node_fill_s: 1.2 steps of min(512 KiB, S/16) at the call's bus bandwidth / 16 channels.
    # One-node nccl-tests curves (Azure ND A100 v4 / ND H100 v5): 20-45 % below NCCL's own model at
    # 4-64 MiB, within 2 % from 1 GiB.  Closed form for an NVLS all-reduce on 8 H100s: 25 us of NVLS
    # latency + S / B + 1.2 x min(512 KiB, S/16) / (B/16), B = 450 GB/s x NVLS efficiency (Hopper).
    from explorer.network.nccl_tuning import node_fill_s
    sh = node(bw=450).shape(np.arange(8))
    h100 = NcclOptions(nvls=True, arch="hopper")
    B = 450 * GB * NVLS_EFFICIENCY["hopper"]
    shares = []
    for size in (16 * 2**20, 8 * 2**30):
        c = cost("all-reduce", size, sh, "nvls", options=h100)
        fill = 1.2 * min(512 * 1024, size / 16) / (B / 16)
        assert c.time_s == pytest.approx(25e-6 + size / B + fill, rel=1e-9)
        shares.append(fill / c.time_s)
    assert shares[0] > 0.25 and shares[1] < 0.002          # 30 % of a 16 MiB call, 0.1 % of 8 GiB
    # Protocol steps (LL: 32 KiB of data) and ring depth ((n-1)/7 of an 8-GPU ring's fill).
    assert node_fill_s(2**20, 275.0, "LL") == pytest.approx(1.2 * 32 * 1024 / (275e9 / 16), rel=1e-12)
    assert node_fill_s(2**20, 275.0, "Simple", hops=1 / 7) == pytest.approx(
        1.2 / 7 * 65536 / (275e9 / 16), rel=1e-12)


def test_one_rank_prints_nccl_tests_algbw_the_bytes_over_the_launch():
    """A hunt: ``collective --ranks 1`` printed algbw 0.00 beside a 5.25 us call; nccl-tests' algbw is
    bytes / time whatever moved (1 MiB in 5.25 us: about 200 GB/s); its busbw stays 0 on one rank,
    where nothing crosses a bus (a send-recv has no peer)."""
    from explorer.network.nccl_table import collective_rows
    from explorer.scenario import load

    from conftest import ROOT

    sc = load(ROOT / "scenarios" / "teaching-8gpu.yaml")
    r = collective_rows(sc, "all-reduce", 1, [2**20])[0]
    assert r["algbw_GBps"] == pytest.approx(2**20 / r["time_s"] / 1e9, rel=1e-12) and r["algbw_GBps"] > 100
    assert r["busbw_GBps"] == 0.0
    s = collective_rows(sc, "send-recv", 1, [2**20])[0]
    assert s["busbw_GBps"] == 0.0 and s["algbw_GBps"] > 100
    # On eight ranks the figures are nccl-tests' as before: algbw = bytes / time, busbw x 2(n-1)/n.
    r8 = collective_rows(sc, "all-reduce", 8, [2**30])[0]
    assert r8["algbw_GBps"] == pytest.approx(2**30 / r8["time_s"] / 1e9, rel=1e-12)
    assert r8["busbw_GBps"] == pytest.approx(r8["algbw_GBps"] * 1.75, rel=1e-12)
