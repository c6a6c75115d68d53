"""Direction tests for the NCCL-model fields: each change moves a simulated result the way physics
(and NCCL's tuning model, explorer/network/nccl_tuning.py) demands, strictly.  tests/test_controls.py
collects ``COVERED``."""
from __future__ import annotations

from functools import cache
from typing import Any

import pytest

from explorer.network.nccl_table import collective_rows
from explorer.scenario import apply_overrides, from_dict
from explorer.simulate import simulate

GiB = 2**30


def _small_dp() -> dict[str, Any]:
    """A 2-layer Llama-3-8B slice, TP 8 in each H100 node and DP 4 across 4 nodes, ZeRO 0 and no
    overlap: the gradient all-reduce crosses the fabric and is exposed."""
    return {"model": {"preset": "llama3-8b", "layers": 2},
            "training": {"global_batch": 8, "micro_batch": 1},
            "hardware": {"gpu": "h100-sxm"},
            "cluster": {"gpus_per_node": 8, "nodes": 4},
            "parallelism": {"tp": 8, "dp": 4, "zero": 0},
            "communication": {"dp_overlap": False}}


@cache
def _iteration(frozen: tuple) -> float:
    return simulate(from_dict(apply_overrides(_small_dp(), dict(frozen)))).iteration_time_s


def iteration(**overrides: Any) -> float:
    return _iteration(tuple(sorted((k.replace("__", "."), v) for k, v in overrides.items())))


def all_reduce_s(size: int, ranks: int, nodes: int = 4, gpu: str = "h100-sxm", **overrides: Any) -> float:
    raw = {"model": {"preset": "llama3-8b"}, "training": {"global_batch": 8 * nodes},
           "hardware": {"gpu": gpu}, "cluster": {"gpus_per_node": 8, "nodes": nodes}}
    sc = from_dict(apply_overrides(raw, {k.replace("__", "."): v for k, v in overrides.items()}))
    return collective_rows(sc, "all-reduce", ranks, [size])[0]["time_s"]


def test_fabric_preset_orders_the_iteration():
    """fabrics.yaml: NDR 400 Gb/s (eff 0.94) > HDR 200 Gb/s (0.96 of half the rate) > 25 GbE TCP:
    the exposed DP all-reduce across 4 nodes, and the iteration, get longer in that order."""
    fabrics = ("ib-xdr", "ib-ndr", "ib-hdr", "eth-100", "eth-25")
    times = [iteration(cluster__scale_out__fabric=f) for f in fabrics]
    assert times == sorted(times) and len(set(times)) == len(times)


def test_roce_generations_order_the_iteration():
    """fabrics.yaml: tuned 400 GbE RoCE (8 x 400 Gb/s x 0.88) sits between NDR (x 0.94) and HDR (200 Gb/s
    x 0.96); the 100 GbE generation (x 0.54) is slower than both 400 GbE presets."""
    t = {f: iteration(cluster__scale_out__fabric=f) for f in ("ib-ndr", "roce-400", "ib-hdr", "roce-100")}
    assert t["ib-ndr"] < t["roce-400"] < t["ib-hdr"] < t["roce-100"]


def test_scale_out_efficiency_shortens_fabric_bound_iterations():
    """A higher achievable fraction of line rate shortens the fabric-bound DP all-reduce."""
    times = [iteration(cluster__scale_out__efficiency=e) for e in (0.3, 0.6, 0.9)]
    assert times[0] > times[1] > times[2]


def test_sharp_enables_in_network_reduction():
    """InfiniBand SHARP lets NCCL reduce in the switches (CollNet, and NVLS across nodes): an 8 GiB
    all-reduce over 4 H100 nodes sends S per node instead of the NVLS-tree's 2 S, so it is faster;
    the iteration with its exposed DP all-reduce too."""
    assert all_reduce_s(8 * GiB, 32, cluster__scale_out__sharp=True) < all_reduce_s(8 * GiB, 32)
    assert iteration(cluster__scale_out__sharp=True) < iteration()


def test_library_mpi_has_no_nvls_or_nccl_protocols():
    """With communication.library mpi, an in-node all-reduce on H100 cannot use NVLink SHARP (an
    NCCL algorithm), so a 1 GiB TP-sized call is slower than with NCCL; and the NCCL-only
    in-switch reduction no longer shortens the TP-bound iteration."""
    assert all_reduce_s(GiB, 8, nodes=1, communication__library="mpi") > all_reduce_s(GiB, 8, nodes=1)
    assert iteration(communication__library="mpi") > iteration(communication__library="nccl")


def test_forcing_a_protocol_is_never_faster_and_strictly_slower_off_its_range():
    """NCCL_PROTO semantics: forcing LL on an 8 GiB call (LL keeps half the link) or Simple on a
    4 KB call (56 us of Simple latency in one node against LL's 15 us) is strictly slower than
    NCCL's own choice."""
    assert all_reduce_s(8 * GiB, 8, nodes=1, communication__protocol="LL") > all_reduce_s(8 * GiB, 8, nodes=1)
    assert all_reduce_s(4096, 8, nodes=1, communication__protocol="Simple") > all_reduce_s(4096, 8, nodes=1)
    assert all_reduce_s(4096, 8, nodes=1, communication__protocol="LL") == all_reduce_s(4096, 8, nodes=1)


def _one_gpu_nodes(**overrides: Any) -> float:
    """busbw of an 8 GiB all-reduce between two nodes of one H100 each, four 400 Gb/s NICs per node
    (the setup of nccl-tests issue #232)."""
    raw = {"model": {"preset": "llama3-8b"}, "training": {"global_batch": 2},
           "hardware": {"gpu": "h100-sxm"},
           "cluster": {"gpus_per_node": 1, "nodes": 2,
                       "scale_out": {"fabric": "roce-400", "nic_Gbps": 400, "nics_per_node": 4}}}
    sc = from_dict(apply_overrides(raw, {k.replace("__", "."): v for k, v in overrides.items()}))
    return collective_rows(sc, "all-reduce", 2, [8 * GiB])[0]["busbw_GBps"]


def test_pcie_link_caps_what_one_gpu_sends_through_many_nics():
    """hardware.gpu.pcie_GBps: one H100 with four 400 Gb/s NICs is held to its PCIe 5.0 x16 link --
    busbw about 50 GB/s as measured (nccl-tests issue #232: "busbw is 50"), not the NICs' 200; the
    NICs' own model is the bound again once the link is wide enough, and a narrower link is slower
    in proportion (two ranks: busbw = S / t = the link's rate)."""
    measured = 50.0
    assert _one_gpu_nodes() == pytest.approx(measured, rel=0.10)
    assert _one_gpu_nodes(hardware__gpu__pcie_GBps=26.4) == pytest.approx(26.4, rel=0.01)
    assert _one_gpu_nodes(hardware__gpu__pcie_GBps=None) > 1.5 * _one_gpu_nodes()
    # Eight GPUs with one NIC each are NIC-bound: the link changes nothing there.
    assert all_reduce_s(GiB, 32, hardware__gpu__pcie_GBps=None) == all_reduce_s(GiB, 32)


COVERED = {
    "hardware.gpu.pcie_GBps": "test_pcie_link_caps_what_one_gpu_sends_through_many_nics",
    "cluster.scale_out.fabric": "test_fabric_preset_orders_the_iteration",
    "cluster.scale_out.efficiency": "test_scale_out_efficiency_shortens_fabric_bound_iterations",
    "cluster.scale_out.sharp": "test_sharp_enables_in_network_reduction",
    "communication.library": "test_library_mpi_has_no_nvls_or_nccl_protocols",
    "communication.protocol": "test_forcing_a_protocol_is_never_faster_and_strictly_slower_off_its_range",
}
