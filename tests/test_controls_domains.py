"""NVLink domains (``cluster.scale_up.domain_gpus``) and the Blackwell presets (gb200, gb300, b200).

Ranks of one NVLink domain talk over NVLink, ranks of different domains over the scale-out fabric;
a domain of several nodes is one NCCL node (MNNVL) whose collectives leave it through the NICs their
channels reach (explorer/network/domain_links.py).  Closed forms below use the fitted constants the
code cites (SCALE_UP_EFFICIENCY, the ib-ndr efficiency) and nothing else.  tests/test_controls.py
collects ``COVERED``.
"""
from __future__ import annotations

import json
import subprocess
import sys
from functools import cache
from typing import Any

import numpy as np
import pytest

from explorer.config.loading import to_dict
from explorer.config.presets import gpu_presets
from explorer.config.schema import ScenarioError
from explorer.network.collectives import cost
from explorer.network.groups import nccl_options
from explorer.network.nccl_table import collective_rows
from explorer.network.topology import SCALE_UP_EFFICIENCY, Fabric, routed_ring_bandwidth
from explorer.scenario import apply_overrides, from_dict, load_raw
from explorer.simulate import simulate

from conftest import ROOT

GiB = 2**30
NDR_EFF = 0.94                  # explorer/data/fabrics.yaml ib-ndr efficiency
NIC_Bps = 400e9 / 8             # one ConnectX-7 400 Gb/s NIC, bytes/s


def _racks(racks: int, **overrides: Any):
    """``racks`` GB200 NVL72 racks (18 trays of 4 GPUs, a NIC per GPU, NDR) with a small model."""
    raw = {"model": {"preset": "llama3-8b", "layers": 2}, "training": {"global_batch": 72 * racks},
           "hardware": {"gpu": "gb200"}, "cluster": {"nodes": 18 * racks}}
    return from_dict(apply_overrides(raw, {k.replace("__", "."): v for k, v in overrides.items()}))


def _all_reduce(sc, size: float, algorithm: str, ranks: int | None = None):
    opts = nccl_options(sc)
    shape = Fabric.for_cluster(sc.cluster).shape(np.arange(ranks or sc.gpus, dtype=np.int64))
    return cost("all-reduce", size, shape, algorithm, opts.nvls, opts)


# ------------------------------------------------------------------------------------------------
# Presets
# ------------------------------------------------------------------------------------------------
def test_gb200_preset_is_an_nvl72_rack():
    """hardware.gpu gb200 without a cluster layout: 4-GPU trays with a NIC each, 72-GPU NVLink
    domains (GB200 NVL72 datasheet), NVLink 5 at 900 GB/s per direction, the datasheet's peaks."""
    sc = _racks(2)
    c, g = sc.cluster, sc.hardware.gpu
    assert (c.gpus_per_node, c.scale_out.nics_per_node, c.scale_up.domain_gpus) == (4, 4, 72)
    assert (g.peak_tflops, g.fp8_tflops, g.memory_GB, g.hbm_GBps, c.scale_up.bandwidth_GBps) == \
        (2500, 5000, 186, 8000, 900)
    assert g.nvlink_sharp and g.power_W == 1200


def test_gb200_keeps_the_nodes_a_scenario_gives():
    """A scenario that says 8-GPU nodes keeps its GPU count: the domain is the largest whole number
    of its nodes up to 72 that tiles the cluster (64 of 16,384), documented in config/domains.py."""
    sc = from_dict(apply_overrides(load_raw(ROOT / "scenarios" / "llama3-405b-16k.yaml"),
                                   {"hardware.gpu": "gb200"}))
    assert (sc.gpus, sc.cluster.gpus_per_node, sc.cluster.scale_up.domain_gpus) == (16384, 8, 64)
    assert from_dict(apply_overrides(load_raw(ROOT / "scenarios" / "llama3-405b-16k.yaml"),
                                     {"hardware.gpu": "b200"})).cluster.scale_up.domain_gpus == 8


def test_every_blackwell_preset_loads_and_gb300_has_the_larger_memory():
    """b200, gb200, gb300 are presets; GB300 = Blackwell Ultra (288 GB HBM3e, 1,400 W)."""
    for name in ("b200", "gb200", "gb300"):
        assert name in gpu_presets()
    g = _racks(1, hardware__gpu="gb300").hardware.gpu
    assert (g.memory_GB, g.power_W, g.sms) == (288, 1400, 160)


def test_gb200_llama3_405b_runs_faster_than_b200():
    """The CLI runs the 405B scenario on gb200 (exit 0, JSON); its higher bf16 peak (2,500 vs 2,250
    TFLOP/s) and measured-GEMM ceiling make compute shorter than on b200."""
    def run(gpu: str) -> dict:
        out = subprocess.run([sys.executable, "-m", "explorer", "run", "scenarios/llama3-405b-16k.yaml",
                              "--set", f"hardware.gpu={gpu}", "--json"], cwd=ROOT, capture_output=True,
                             text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)
    gb, b = run("gb200"), run("b200")
    assert gb["breakdown_s"]["compute"] < b["breakdown_s"]["compute"]
    assert gb["iteration_time_s"] < b["iteration_time_s"]


# ------------------------------------------------------------------------------------------------
# Collectives across racks: closed forms
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("racks", [2, 20])
def test_ring_all_reduce_across_racks_closed_form(racks):
    """NCCL's ring over ``racks`` NVL72 racks (Simple, 8 GiB, so latency and pipeline fill are under
    1 %): each rack is one NCCL node of 72 GPUs; the ring's channels (16, two per 400 Gb/s NIC) leave
    it through 8 NICs, so the rack's egress of the per-GPU volume 2(n-1)/n S runs at 8 x 50 GB/s x
    0.94, while its NVLink step moves (g-1)/g of that volume at 900 x 0.77 GB/s; the two steps are
    pipelined chunk by chunk (NCCL), so the slower one sets the time: the inter-rack step."""
    sc = _racks(racks)
    n, g, S = 72 * racks, 72, 8 * GiB
    vol = 2 * (n - 1) / n * S
    t_nvlink = vol * (g - 1) / g / (900e9 * SCALE_UP_EFFICIENCY)
    t_racks = vol / (8 * NIC_Bps * NDR_EFF)
    sc = from_dict(apply_overrides(to_dict(sc), {"communication.protocol": "Simple"}))
    c = _all_reduce(sc, S, "ring")
    assert c.boundary == "scale-out" and t_racks > t_nvlink
    assert c.time_s - c.latency_s == pytest.approx(t_racks, rel=0.01)


@pytest.mark.parametrize("racks,out_per_rack", [(2, 1.0), (20, 2.0)])
def test_tree_all_reduce_across_racks_closed_form(racks, out_per_rack):
    """NCCL's double binary tree between racks: a rack sends S out on two racks, 2 S beyond
    (nccl_links.tree), through the 8 NICs its channels reach; inside the rack the 2 S of the chain
    run over NVLink.  Link time = max(2 S / NVLink, out x S / (8 NICs)); on 20 racks the NICs bind."""
    sc = _racks(racks)
    S = 8 * GiB
    c = _all_reduce(sc, S, "tree")
    t_link = max(2 * S / (900e9 * SCALE_UP_EFFICIENCY), out_per_rack * S / (8 * NIC_Bps * NDR_EFF))
    assert c.egress[1] == pytest.approx(out_per_rack * S)
    # NCCL's tree refinements (TREE_FRACTION, per-channel caps, tree correction) only slow it down.
    assert c.time_s - c.latency_s >= t_link * 0.99
    assert c.boundary == ("scale-up" if racks == 2 else "scale-out")


def test_twenty_rack_all_reduce_pays_the_inter_rack_step():
    """Regression (issue 34, item 5): an all-reduce over 20 NVL72 racks (1,440 GPUs) was priced as
    NVLink-bound (NVLS-tree, 949 GB/s busbw at 8 GiB when the rack was written as one 72-GPU node,
    +172 % against measurement per the issue).  Now it is bound by the racks' NICs: NCCL's best
    algorithm cannot beat the ring's inter-rack rate, 8 NICs x 47 GB/s = 376 GB/s of busbw."""
    sc = _racks(20)
    row = collective_rows(sc, "all-reduce", 1440, [8 * GiB])[0]
    assert row["tier"] == "scale-out"
    assert row["busbw_GBps"] < 8 * NIC_Bps * NDR_EFF / 1e9 * 1.001
    assert row["busbw_GBps"] > 250
    # The same racks written as 20 nodes of 72 GPUs and 72 NICs (the only way before domain_gpus) are
    # priced alike: one NCCL node each, whose collective reaches 8 of its NICs.
    as_nodes = _racks(20, cluster__gpus_per_node=72, cluster__nodes=20, cluster__scale_out__nics_per_node=72)
    assert as_nodes.cluster.scale_up.domain_gpus == 72
    assert collective_rows(as_nodes, "all-reduce", 1440, [8 * GiB])[0]["busbw_GBps"] == \
        pytest.approx(row["busbw_GBps"], rel=1e-9)
    # Inside one rack the same call stays on NVLink (NVLS), several times faster.
    one = collective_rows(sc, "all-reduce", 72, [8 * GiB])[0]
    assert one["tier"] == "scale-up" and one["busbw_GBps"] > 2 * row["busbw_GBps"]


def test_point_to_point_between_racks_uses_every_gpus_nic():
    """An all-to-all across two racks is not capped by the collective channels: each GPU sends the
    (n-g)/n of its buffer that leaves the rack through its own NIC (each GPU its NIC)."""
    sc = _racks(2)
    opts = nccl_options(sc)
    shape = Fabric.for_cluster(sc.cluster).shape(np.arange(144, dtype=np.int64))
    S = 1 * GiB
    c = cost("all-to-all", S, shape, "auto", opts.nvls, opts)
    per_gpu_out = S * 72 / 144
    assert c.boundary == "scale-out"
    assert c.time_s - c.latency_s == pytest.approx(per_gpu_out / (NIC_Bps * NDR_EFF), rel=0.02)


def test_routed_graph_puts_a_domains_trays_on_one_nvlink_switch():
    """build_graph: the trays of one domain share its NVSwitch, so a ring over two 4-GPU trays of one
    8-GPU domain routes at NVLink's 900 GB/s, and a ring over two domains at one NIC's 50 GB/s."""
    from explorer.config.sections import Cluster, ScaleUp
    c = Cluster(gpus_per_node=4, nodes=4, scale_up=ScaleUp(bandwidth_GBps=900.0, domain_gpus=8))
    assert routed_ring_bandwidth(c, [list(range(8))]) == 900e9
    assert routed_ring_bandwidth(c, [list(range(16))]) == NIC_Bps


# ------------------------------------------------------------------------------------------------
# The control: a bigger NVLink domain is faster
# ------------------------------------------------------------------------------------------------
@cache
def _tp16_time(domain: int) -> tuple[float, float]:
    """TP 16 x DP 8 of a 2-layer Llama-3-8B slice on 128 GB200 GPUs (4-GPU trays), no DP overlap:
    (iteration, exposed tp) for a given NVLink domain."""
    raw = {"model": {"preset": "llama3-8b", "layers": 2}, "training": {"global_batch": 16},
           "hardware": {"gpu": "gb200"},
           "cluster": {"nodes": 32, "scale_up": {"domain_gpus": domain}},
           "parallelism": {"tp": 16, "dp": 8, "zero": 0}, "communication": {"dp_overlap": False}}
    r = simulate(from_dict(raw))
    return r.iteration_time_s, r.breakdown_s["tp"]


def test_a_bigger_nvlink_domain_keeps_tp_on_nvlink():
    """domain_gpus 4 (trays only: TP 16 crosses four trays over the NICs) -> 16 (TP inside one domain,
    NVLink) -> 64 and 128 (DP's groups too get more members per domain): the iteration gets strictly
    shorter, and TP's exposed time collapses once TP fits in a domain."""
    domains = [4, 16, 64, 128]
    times = [_tp16_time(d)[0] for d in domains]
    assert all(b < a for a, b in zip(times, times[1:], strict=False)), times
    assert _tp16_time(16)[1] < _tp16_time(4)[1] / 4
    assert _tp16_time(64)[1] == _tp16_time(16)[1]       # TP was already inside one domain


COVERED = {"cluster.scale_up.domain_gpus": "test_a_bigger_nvlink_domain_keeps_tp_on_nvlink",
           "hardware.gpu.power_W": "test_board_power_does_not_change_the_timing"}


def test_board_power_does_not_change_the_timing():
    """hardware.gpu.power_W is recorded for energy; the timing must be exactly the same at any power."""
    # Setting a GPU field turns the preset into a mapping; it keeps the name GB200, so the rack too.
    base = simulate(_racks(1))
    other = simulate(_racks(1, hardware__gpu__power_W=700))
    assert other.scenario.hardware.gpu.power_W == 700
    assert other.scenario.cluster.scale_up.domain_gpus == 72
    assert other.iteration_time_s == base.iteration_time_s and other.breakdown_s == base.breakdown_s


# ------------------------------------------------------------------------------------------------
# Bad values
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("overrides,says", [
    ({"cluster.scale_up.domain_gpus": 18}, "not a whole number of 4-GPU nodes"),
    ({"cluster.scale_up.domain_gpus": 40}, "does not tile the 144 GPUs"),
    ({"cluster.scale_up.domain_gpus": 72, "cluster.scale_up.kind": "nvlink-ring"}, "only an NVLink switch"),
    ({"cluster.scale_up.domain_gpus": 0}, "cluster.scale_up.domain_gpus: 0 is below the minimum 1"),
    ({"hardware.gpu.power_W": 0}, "hardware.gpu.power_W: 0.0 is below the minimum 1"),
])
def test_bad_domain_values_are_one_line_errors(overrides, says):
    with pytest.raises(ScenarioError) as e:
        _racks(2, **{k.replace(".", "__"): v for k, v in overrides.items()})
    assert says in str(e.value) and "\n" not in str(e.value)


def test_a_domain_bigger_than_the_cluster_holds_all_of_it():
    """8 GPUs of an NVL72 (two trays) are one NVLink domain: an all-reduce over them stays on NVLink."""
    sc = from_dict({"model": {"preset": "llama3-8b", "layers": 2}, "training": {"global_batch": 8},
                    "hardware": {"gpu": "gb200"}, "cluster": {"nodes": 2, "scale_up": {"domain_gpus": 72}}})
    assert _all_reduce(sc, GiB, "auto").boundary == "scale-up"


def test_collective_cli_takes_the_domain_and_refuses_a_bad_one():
    """python -m explorer collective accepts --set cluster.scale_up.domain_gpus; a bad value exits 2
    with a one-line message naming the field; nvls is bounded by the domain, not the node."""
    base = [sys.executable, "-m", "explorer", "collective", "scenarios/teaching-8gpu.yaml",
            "--op", "all-reduce", "--sizes", "1073741824", "--ranks", "72"]
    for kv in ("hardware.gpu=gb200", "cluster.gpus_per_node=4", "cluster.nodes=36", "parallelism.dp=36",
               "training.global_batch=36"):
        base += ["--set", kv]
    domain = ["--set", "cluster.scale_up.domain_gpus=72"]
    ok = subprocess.run(base + ["--algorithm", "nvls", *domain], cwd=ROOT, capture_output=True, text=True,
                        timeout=120)
    assert ok.returncode == 0, ok.stderr
    assert "nvls/Simple (scale-up)" in ok.stdout
    bad = subprocess.run(base + ["--set", "cluster.scale_up.domain_gpus=30"],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "cluster.scale_up.domain_gpus" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1


def test_the_apps_nvlink_domain_follows_the_gpu_and_the_node_count():
    """Choosing a GB200 in the sidebar makes its rack the NVLink domain (the loader's derived
    default, explorer/config/domains.py), and changing the node count re-derives it, so the domain
    widget never keeps a shape the cluster no longer has."""
    from app_support import run_app
    at = run_app(scenario="teaching-8gpu")
    assert at.number_input(key="cluster.scale_up.domain_gpus").value == 8
    at.selectbox(key="hardware.gpu").set_value("gb200").run()
    assert not at.exception
    domain = at.number_input(key="cluster.scale_up.domain_gpus").value
    assert domain == 8          # one 8-GPU node: the rack holds all of the cluster's GPUs
    at.number_input(key="training.global_batch").set_value(72).run()
    at.number_input(key="cluster.nodes").set_value(9).run()
    assert not at.exception
    assert at.number_input(key="cluster.scale_up.domain_gpus").value == 72   # 9 x 8 = one NVL72 rack
    assert not [e for e in at.error if "domain" in str(e.value)]


def test_a_gpu_switch_links_the_gpu_not_what_it_derives():
    """Choosing a GB200 re-derives the rack, the FP8 recipe and the board power the widgets show;
    the link and the "Modified from" note name the GPU only (ui/state._without_derived), and the
    link reproduces the same iteration."""
    from app_support import qp, run_app, seconds
    at = run_app(scenario="llama3-405b-16k")
    at.selectbox(key="hardware.gpu").set_value("gb200").run()
    assert not at.exception and not at.error
    assert qp(at, "hardware.gpu") == "gb200"
    for derived in ("hardware.power_cap_W", "training.fp8_recipe", "cluster.scale_up.domain_gpus"):
        assert derived not in at.query_params, derived
    again = run_app(scenario="llama3-405b-16k", **{"hardware.gpu": "gb200"})
    assert seconds(again) == seconds(at)
    assert at.number_input(key="hardware.power_cap_W").value == 1200
