"""NCCL's tuning model (explorer/network/nccl_tuning.py, constants of NVIDIA/nccl src/graph/tuning.cc,
v2.23-2.25): closed forms for a few calls, protocol switch points, what ``auto`` may pick, the
small-message latency floor, and the sourced nccl-tests rows with their tolerances."""
from __future__ import annotations

import numpy as np
import pytest

from explorer.fidelity.collectives import collective_reference_rows
from explorer.fidelity.report import summary
from explorer.network.collectives import NcclOptions, cost
from explorer.network.nccl_table import collective_rows
from explorer.network.nccl_tuning import gpu_arch, latency_us, refine_bus_bw, tree_correction
from explorer.network.topology import SCALE_UP_EFFICIENCY, Fabric
from explorer.scenario import Cluster, ScaleUp, from_dict

MiB = 2**20
SIZES = [2**k for k in range(3, 35)]          # 8 B .. 16 GiB, as nccl-tests -b 8 -e 16G -f 2


def scenario(gpu: str = "h100-sxm", nodes: int = 1, **out) -> object:
    return from_dict({"model": {"preset": "llama3-8b"}, "training": {"global_batch": 8 * nodes},
                      "hardware": {"gpu": gpu}, "cluster": {"gpus_per_node": 8, "nodes": nodes,
                                                            "scale_out": out}})


def test_ring_ll_latency_closed_form_one_node():
    # NCCL 2.25: baseLat ring/LL 6.6 us + 2(n-1) NVLink LL hops of 0.6 us = 15.0 us for 8 ranks.
    assert latency_us("ring", "LL", "all-reduce", 8, 1, "nvlink", 0.0, 0.0, "hopper") == pytest.approx(15.0)
    # Simple: 8.4 + 14 x 3.4 = 56.0 us; LL128: 14 + 14 x 1.9 = 40.6 us.
    for proto, us in (("Simple", 56.0), ("LL128", 40.6)):
        got = latency_us("ring", proto, "all-reduce", 8, 1, "nvlink", 0.0, 0.0, "hopper")
        assert got == pytest.approx(us)


def test_ring_latency_across_nodes_counts_network_hops():
    # 32 ranks on 4 nodes, LL: 62 steps, 6 of them between nodes (2 (nodes-1)) at 2.7 us, the other
    # 56 at max(0.6, 1 us network post overhead): 6.6 + 56 x 1.0 + 6 x 2.7 = 78.8 us.
    assert latency_us("ring", "LL", "all-reduce", 32, 4, "nvlink", 0.0, 0.0, "hopper") == pytest.approx(78.8)
    # Tree/LL: 6.8 + 2 (7 x 0.6 + log2(4) x 5.0) = 35.2 us.
    assert latency_us("tree", "LL", "all-reduce", 32, 4, "nvlink", 0.0, 0.0, "hopper") == pytest.approx(35.2)
    # NVLS-tree: 25 us in the node + 2 log2(nodes) x 14 us; the fabric's latency shifts Simple twice.
    assert latency_us("nvls-tree", "Simple", "all-reduce", 16, 2, "nvlink", 0.0, 1.0, "hopper") == \
        pytest.approx(25 + 2 * (14 + 2))


def test_protocol_bandwidth_fractions():
    # Ring LL keeps half the link, capped by llMaxBw (Hopper one node 141 GB/s); LL128 0.92;
    # Simple all of it; tree 0.92 then LL 1/3.8; PAT 0.75 (NCCL 2.25 model refinements).
    assert refine_bus_bw("ring", "LL", 100.0, "hopper", 1, 8) == pytest.approx(50.0)
    assert refine_bus_bw("ring", "LL", 400.0, "hopper", 1, 8) == pytest.approx(141.0)
    assert refine_bus_bw("ring", "LL128", 300.0, "hopper", 1, 8) == pytest.approx(276.0)
    assert refine_bus_bw("ring", "Simple", 300.0, "hopper", 1, 8) == 300.0
    assert refine_bus_bw("tree", "LL", 38.0, "hopper", 4, 8) == pytest.approx(38 * 0.92 / 3.8)
    assert refine_bus_bw("pat", "Simple", 40.0, "hopper", 4, 1) == pytest.approx(30.0)
    # Tree correction at 1 MiB (log2(2^20/64) = 14): Simple 0.5, LL128 0.6 (treeCorrectionFactor).
    assert tree_correction("Simple", MiB) == 0.5 and tree_correction("LL128", MiB) == 0.6
    assert tree_correction("Simple", 2**40) == 1.0


def test_gpu_generations():
    names = ("V100", "A100 80GB SXM", "H100 SXM", "H800 SXM", "GH200", "B200", "GB200")
    assert [gpu_arch(n) for n in names] == ["volta", "ampere", "hopper", "hopper", "hopper", "blackwell",
                                            "blackwell"]


def test_one_node_h100_closed_form_at_1_mib():
    # 1 MiB on 8 H100: ring/LL wins; time = 15 us + 1.75 MiB / min(141, 0.5 x 346.5) GB/s, plus the
    # in-node fill: 1.2 LL steps of min(32 KiB, 1 MiB / 16 channels) at 141/16 GB/s per channel.
    c = collective_rows(scenario(), "all-reduce", 8, [MiB])[0]
    assert (c["algorithm"], c["protocol"]) == ("ring", "LL")
    fill = 1.2 * 32 * 1024 / (141e9 / 16)
    assert c["time_s"] == pytest.approx(15e-6 + 1.75 * MiB / 141e9 + fill, rel=1e-9)


@pytest.mark.parametrize("gpu,nodes", [("a100-80gb", 1), ("h100-sxm", 1), ("a100-80gb", 4), ("h100-sxm", 4),
                                       ("b200", 2)])
def test_protocol_switch_points_are_monotone_in_size(gpu, nodes):
    """Along a doubling sweep each of NCCL's algorithms moves LL -> LL128 -> Simple and never back, the
    sweep starting on LL and ending on Simple; the latency floor is flat at the smallest sizes and the
    bandwidth rises to a plateau.  (NVLS-tree runs Simple only: where it wins a middle range -- 4 x 8 H100
    at 4-8 MiB once the tree drives half of a node's 400 Gb/s NICs, nccl_links.tree_nic_factor -- the ring's
    LL128 may follow it, so the order is per algorithm.)"""
    rows = collective_rows(scenario(gpu, nodes), "all-reduce", 8 * nodes, SIZES)
    order = {"LL": 0, "LL128": 1, "Simple": 2}
    for alg in {r["algorithm"] for r in rows}:
        ranks = [order[r["protocol"]] for r in rows if r["algorithm"] == alg]
        assert ranks == sorted(ranks), alg
    assert order[rows[0]["protocol"]] == 0 and order[rows[-1]["protocol"]] == 2
    assert rows[1]["time_s"] == pytest.approx(rows[0]["time_s"], rel=0.01)        # 8 B vs 16 B
    busbw = [r["busbw_GBps"] for r in rows]
    assert busbw[-1] == pytest.approx(busbw[-2], rel=0.01)                        # plateau
    switch = next(r["size_bytes"] for r in rows if r["protocol"] != "LL")
    assert 64 * 1024 <= switch <= 8 * MiB                                         # leaves LL at KB..MB


def test_auto_never_picks_mpi_algorithms_with_nccl():
    for nodes in (1, 2, 16):
        sc = scenario("h100-sxm", nodes)
        for op in ("all-reduce", "reduce-scatter", "all-gather"):
            for r in collective_rows(sc, op, 8 * nodes, SIZES[::3]):
                assert r["algorithm"] in ("ring", "tree", "nvls", "nvls-tree", "collnet", "pat"), r
                assert r["protocol"] in ("LL", "LL128", "Simple")


def test_one_mib_across_four_nodes_is_not_faster_than_inside_one_node():
    for gpu in ("a100-80gb", "h100-sxm", "b200"):
        one = collective_rows(scenario(gpu, 4), "all-reduce", 8, [MiB])[0]
        four = collective_rows(scenario(gpu, 4), "all-reduce", 32, [MiB])[0]
        assert four["time_s"] >= one["time_s"], gpu


def test_nvls_is_not_picked_at_1_mib_but_is_at_the_plateau():
    small, large = collective_rows(scenario("h100-sxm"), "all-reduce", 8, [MiB, 8 * 2**30])
    assert small["algorithm"] == "ring" and small["protocol"] == "LL"
    assert large["algorithm"] == "nvls"


def test_pat_needs_one_gpu_per_node():
    fab = Fabric.for_cluster(Cluster(gpus_per_node=8, nodes=64, scale_up=ScaleUp(bandwidth_GBps=450)))
    one_per_node = fab.shape(np.arange(0, 512, 8))
    pat = cost("all-gather", 64 * 1024, one_per_node, "pat")
    assert pat.algorithm == "pat" and pat.protocol == "Simple" and not pat.requested
    # PAT latency (NCCL 2.25): 8 + log2(64) x 14 / 3.5 + 64 x 2.8 = 211.2 us.
    assert pat.latency_s == pytest.approx(211.2e-6)
    assert cost("all-gather", 64 * 1024, fab.shape(np.arange(16)), "pat").requested == "pat"


def test_collnet_only_with_sharp():
    fab = Fabric.for_cluster(Cluster(gpus_per_node=8, nodes=4, scale_up=ScaleUp(bandwidth_GBps=450)))
    sh = fab.shape(np.arange(32))
    assert cost("all-reduce", 1e9, sh, "collnet").requested == "collnet"
    on = cost("all-reduce", 1e9, sh, "collnet", options=NcclOptions(sharp=True))
    assert on.algorithm == "collnet" and on.protocol == "Simple"


def test_mpi_library_picks_among_its_own_algorithms():
    fab = Fabric.for_cluster(Cluster(gpus_per_node=8, nodes=16, scale_up=ScaleUp(bandwidth_GBps=450)))
    sh = fab.shape(np.arange(0, 128, 8))
    for size in (1e3, 1e6, 1e9):
        c = cost("all-reduce", size, sh, options=NcclOptions(library="gloo"))
        assert c.algorithm in ("ring", "halving-doubling", "hierarchical") and c.protocol == "none"
    # Small messages over 16 nodes: log2(16) = 4 exchanges per pass beat the ring's 15 steps.
    assert cost("all-reduce", 1e3, sh, options=NcclOptions(library="mpi")).algorithm == "halving-doubling"


def test_scale_up_latency_moves_the_nvlink_hops():
    def t(lat):
        fab = Fabric.for_cluster(Cluster(gpus_per_node=8, nodes=1,
                                         scale_up=ScaleUp(bandwidth_GBps=450, latency_us=lat)))
        return cost("all-reduce", 1e3, fab.shape(np.arange(8))).time_s
    # 14 NVLink hops of ring/LL: +1 us per hop -> +14 us.
    assert t(1.6) - t(0.6) == pytest.approx(14e-6, rel=1e-6)
    assert SCALE_UP_EFFICIENCY == 0.77


ROWS = collective_reference_rows()


# The 1-64 MiB rows (one node and multi-node) and the latency floor are checked row by row, with their known
# gaps, in tests/test_collectives_multinode.py; here the plateau groups.
PLATEAU_ROWS = [r for r in ROWS if r.group in ("nccl-tests one node", "nccl-tests multi-node")]


# Plateau rows outside the per-row bound for a stated reason (tests/test_collectives_multinode.py KNOWN_GAPS
# gives it); strict xfails, so closing one fails until it leaves the list.
# (none since the EFA plateau rows closed, and since NVLS-tree beyond two nodes runs at its fitted share of
# the NICs' rate, nccl_links.NVLS_TREE_DEEP_EFFICIENCY: the 46-node B200 row +36 % -> +14 %.)
# A full GB200 NVL72 rack at 512 MiB (coreweave/nccl-tests #43, +38 %): the rack reaches its NVLS plateau
# later than the model (tests/test_collectives_multinode.py KNOWN_GAPS says why).
PLATEAU_GAPS: tuple[str, ...] = ("gb200 18x4 all_reduce 512 MiB",)


@pytest.mark.parametrize("row", [pytest.param(r, id=r.label, marks=[pytest.mark.xfail(strict=True)]
                                              if r.label in PLATEAU_GAPS else []) for r in PLATEAU_ROWS])
def test_sourced_rows_within_tolerance(row):
    """Each sourced row (source column cites it) within issue 10's per-row bound of 35 %; one-node
    calibration rows within 10 %.  TOLERANCE: the RoCE calibration rows disagree among themselves
    by +-23 % (fabrics.yaml, roce-400), hence 25 % for multi-node calibration rows."""
    assert row.source
    tol = 0.35 if row.role == "validation" else 0.10 if "one node" in row.group else 0.25
    assert row.predicted == pytest.approx(row.measured, rel=tol), row.source


GROUPS = ("nccl-tests one node", "nccl-tests multi-node", "nccl-tests latency floor",
          "nccl-tests one node 1-64 MiB", "nccl-tests multi-node 1-64 MiB")
# Groups that do not meet issue 10's target yet: (mean, max) |error| per role they must not get worse than
# (today's figures, rounded up), and a strict xfail on the target itself so meeting it is noticed.  The
# multi-node 1-64 MiB validation rows are within the mean (14 %) but not the max: B200 at 1-2 MiB on GCP's
# 400 GbE RoCE runs 35-50 % slower than H200 on the same fabric, which the model does not explain
# (tests/test_collectives_multinode.py KNOWN_GAPS).
# One node, 1-64 MiB met it (calibration 8 % / 19 %, validation 8 % / 22 %) when the table priced
# nccl-tests' -g 8 launches (nccl_table.host_floor_s: the 1 MiB rows' 41 us floor) and one-pass operations
# filled half of an all-reduce's pipeline (nccl_tuning.fill_hops).
# The multi-node plateau group took the 2-node EFA plateau-approach rows of issue 34 (validation, 128 MiB-
# 16 GiB): its validation mean rose from 7 % to 18 %, and came back to 10.5 % (max 29.7 %) -- meeting the
# target -- when NVLS-tree moved its own bytes, EFA took aws-ofi-nccl's 1 MiB Simple steps and the efa
# efficiency was refitted (0.60 -> 0.66, fabrics.yaml).  That refit (minimax over the EFA calibration
# rows) moved the multi-node 1-64 MiB calibration rows from 6.7 % / 21.0 % to 10.8 % / 17.6 %
# (mean up, max down).
# The multi-node plateau group took 18 B200 rows (together-nccl-tests use3a-ss, 2-46 nodes, NCCL_ALGO ring,
# tree, NVLS-tree at 16 GiB) for issue 34: its validation mean stays within target (14 %), its max does not --
# NVLS-tree beyond two nodes runs 0.73-0.80 of the NICs' rate for the tree's 2 S per node (+26 % .. +36 %),
# and the ring's per-NIC rate falls from 43 GB/s on 2 nodes to 36 on 46 (+9 % .. +23 %).  The group met the
# target again (calibration 11.1 % / 24.0 %, validation 11.4 % / 29.7 %) when NVLS-tree's network part
# beyond two nodes ran at its share of the NICs' rate fitted on two of those rows, one per cluster
# (nccl_links.NVLS_TREE_DEEP_EFFICIENCY, 0.837): the other four use3a-ss rows +5 % .. +14 %.
# The multi-node plateau group took the four rows of a full GB200 NVL72 rack (coreweave/nccl-tests #43,
# 512 MiB-4 GiB; the first multi-node NVLink domain measured): fitted on its 4 GiB row
# (nccl_links.NVLS_MULTI_NODE_RATIO), its 1 and 2 GiB rows are +21 % and +10 %, its 512 MiB row +38 %
# (they had been +36 %, +23 % and +55 %), which breaks the group's max: validation 11.4 % / 29.7 % ->
# 12.2 % / 38.5 % (calibration 11.1 % / 24.0 % -> 10.4 % / 24.0 %).
NOT_YET: dict[str, dict[str, tuple[float, float]]] = {
    "nccl-tests multi-node": {"calibration": (0.11, 0.25), "validation": (0.13, 0.39)},
    "nccl-tests multi-node 1-64 MiB": {"calibration": (0.11, 0.18), "validation": (0.14, 0.53)},
}


@pytest.mark.parametrize("group", GROUPS)
def test_fidelity_summary_per_role(group, request):
    """Issue 10 target, collectives: mean |error| <= 15 %, max <= 35 % -- per group and role."""
    rows = [r for r in ROWS if r.group == group]
    for role in ("calibration", "validation"):
        mean, worst, n = summary(rows, role)
        assert n >= 2, (group, role)
        if group in NOT_YET:
            cap_mean, cap_max = NOT_YET[group][role]
            assert mean <= cap_mean and worst <= cap_max, (group, role, mean, worst)
    if group in NOT_YET:
        request.applymarker(pytest.mark.xfail(strict=True, reason=f"{group}: issue 10 target not met yet"))
    for role in ("calibration", "validation"):
        mean, worst, _ = summary(rows, role)
        assert mean <= 0.15 and worst <= 0.35, (group, role, mean, worst)
    n_cal, n_val = (summary(rows, role)[2] for role in ("calibration", "validation"))
    assert 2 * n_val >= n_cal                 # at least a third of the sourced rows are validation


def test_multinode_rows_cover_two_to_four_nodes_and_three_fabric_families():
    multi = [r for r in ROWS if r.group == "nccl-tests multi-node"]
    assert len(multi) >= 12
    assert {f for f in ("ib-hdr", "ib-ndr", "efa", "roce") if any(f in r.label for r in multi)} == {
        "ib-hdr", "ib-ndr", "efa", "roce"}
    assert {r.label.split()[1][0] for r in multi} >= {"2", "3", "4"}


def test_channels_double_where_the_search_reads_28_gb_s_not_just_above_25():
    """ncclTopoCompute searches a NIC at its speed ladder's step (..., 30, 28, 24, ...) and duplicates
    the channels only when that speed is >= 25 GB/s: 200 Gb/s (25 GB/s) to 223 Gb/s are searched at 24
    and keep one channel per NIC; 224 Gb/s (28) and 400 Gb/s double.  Compared with the line rate, 202
    Gb/s doubled them, and the pipeline fill of an 11.6 MB all-gather with them (0.196 -> 0.237 ms)."""
    from explorer.network.nccl_tuning import net_channels
    assert [net_channels(8, g / 8) for g in (100, 200, 202, 220, 223.9, 224, 400)] == [8, 8, 8, 8, 8, 16, 16]
