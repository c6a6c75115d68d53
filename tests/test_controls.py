"""Every documented control moves the result the way physics demands.

One test (or one parametrised row) per field of the scenario reference's table and per sidebar control:
change the field on a scenario where its effect is visible and assert the direction, strictly.
Where physics says a field must *not* matter (a display name, the WAN of a one-building cluster,
capacity for the timing), the test asserts exact equality instead.  Schedule closed forms are
tested in test_schedules.py; here only their directions.

Scenarios are shipped presets with ``--set``-style dotted overrides, or the small builders below;
results are cached per (scenario, overrides), so shared baselines are simulated once.
"""
from __future__ import annotations

import importlib
import itertools
import re
from collections.abc import Callable
from functools import cache
from typing import Any

import pytest

from explorer.config.schema import field_paths
from explorer.scenario import Scenario, ScenarioError, apply_overrides, from_dict, load, load_raw
from explorer.simulate import Result, simulate

from conftest import ROOT, SCENARIO_FILES

SHIPPED = {p.stem: p for p in SCENARIO_FILES}


def _moe_small() -> dict:
    """A 4-layer MoE (64 experts, top-8, EP 16) on 2 H800 nodes: all-to-all dominates."""
    return {"model": {"layers": 4, "hidden": 2048, "heads": 16, "vocab": 8, "seq_len": 1024,
                      "moe": {"experts": 64, "top_k": 8, "expert_ffn_hidden": 1024, "shared_experts": 1,
                              "dense_layers": 0, "max_nodes": 0, "imbalance": 1.0}},
            "training": {"global_batch": 16, "micro_batch": 1},
            "hardware": {"gpu": "h800"},
            "cluster": {"gpus_per_node": 8, "nodes": 2, "scale_up": {"bandwidth_GBps": 200},
                        "scale_out": {"nic_Gbps": 400}},
            "parallelism": {"ep": 16, "zero": 1}}


def _tp8_node() -> dict:
    """teaching-8gpu's model as TP 8 inside one H100 node: big in-node TP all-reduces (NVLS applies)."""
    return apply_overrides(load_raw(SHIPPED["teaching-8gpu"]),
                           {"parallelism.tp": 8, "parallelism.pp": 1, "parallelism.dp": 1,
                            "communication.algorithm": "auto"})


BUILDERS: dict[str, Callable[[], dict]] = {"moe-small": _moe_small, "tp8-node": _tp8_node}


def _freeze(v: Any) -> Any:
    return tuple(v) if isinstance(v, list) else v


@cache
def _run(name: str, frozen: tuple) -> Result:
    raw = load_raw(SHIPPED[name]) if name in SHIPPED else BUILDERS[name]()
    overrides = {k: list(v) if isinstance(v, tuple) else v for k, v in frozen}
    return simulate(from_dict(apply_overrides(raw, overrides)))


def sim(name: str, overrides: dict[str, Any] | None = None, **base: Any) -> Result:
    """Simulate scenario ``name`` (shipped stem or a BUILDERS key) with dotted-key overrides."""
    ov = {**{k.replace("__", "."): v for k, v in base.items()}, **(overrides or {})}
    return _run(name, tuple(sorted((k, _freeze(v)) for k, v in ov.items())))


def _exposed(dim: str) -> Callable[[Result], float]:
    return lambda r: r.breakdown_s[dim]


def _bytes(dim: str) -> Callable[[Result], float]:
    return lambda r: r.comm_bytes_per_gpu.get(dim, 0.0)


# Metrics a row can name.
METRICS: dict[str, Callable[[Result], float]] = {
    "time": lambda r: r.iteration_time_s,
    "memory": lambda r: r.memory.total,
    "bubble": lambda r: r.bubble_fraction,
    "mfu": lambda r: r.mfu,
    "mfu_fp8_peak": lambda r: r.mfu_fp8_peak,
    "optimizer": lambda r: r.breakdown_s["optimizer"],
    "compute": lambda r: r.breakdown_s["compute"],
    **{f"{d}_exposed": _exposed(d) for d in ("tp", "cp", "ep", "pp", "dp")},
    **{f"{d}_bytes": _bytes(d) for d in ("tp", "cp", "ep", "pp", "dp")},
}


def assert_strictly(direction: str, values: list, results: list[float], label: str) -> None:
    for (va, ra), (vb, rb) in itertools.pairwise(zip(values, results, strict=True)):
        if direction == "up":
            assert rb > ra, f"{label}: {va} -> {vb} should increase it, got {ra!r} -> {rb!r}"
        else:
            assert rb < ra, f"{label}: {va} -> {vb} should decrease it, got {ra!r} -> {rb!r}"


# ------------------------------------------------------------------------------------------------
# Monotone controls: along the listed values (in order) the metric moves strictly one way.
# Each row: (scenario, fixed overrides, key, values, metric, direction, physics).
# ------------------------------------------------------------------------------------------------
MONOTONE = [
    # --- the three network tiers: bandwidth ---
    ("teaching-8gpu", {}, "cluster.scale_up.bandwidth_GBps", [50, 450, 900], "time", "down",
     "DP all-reduce and PP sends run on NVLink in one node: more NVLink bandwidth, less exposed time"),
    ("megatron-gpt3-175b", {}, "cluster.scale_out.nic_Gbps", [100, 200, 400], "time", "down",
     "the DP all-reduce of 16 nodes runs on the NICs: faster NICs shorten it"),
    ("megatron-gpt3-175b", {}, "cluster.scale_out.nics_per_node", [2, 4, 8], "time", "down",
     "a node's fabric bandwidth is nics_per_node x nic_Gbps: more NICs, faster DP"),
    ("two-datacenters", {}, "cluster.scale_across.bandwidth_Gbps", [400, 1600, 6400], "time", "down",
     "DP spans the two buildings: the WAN carries the gradient reduction"),
    ("teaching-8gpu", {"cluster.scale_up.bandwidth_GBps": None}, "hardware.gpu.scale_up_GBps",
     [100, 450, 900], "time", "down",
     "with no explicit scale-up bandwidth, the GPU's own NVLink figure sets it"),
    # --- latency: more per-message latency, strictly slower where messages are many or small ---
    ("teaching-8gpu", {"communication.bucket_MB": 1}, "cluster.scale_up.latency_us", [0, 2, 200],
     "time", "up", "1 MB buckets: every ring step pays the NVLink latency"),
    ("megatron-gpt3-175b", {"communication.bucket_MB": 1}, "cluster.scale_out.latency_us", [0, 5, 500],
     "time", "up", "1 MB buckets across 16 nodes: the fabric latency of each step adds up"),
    ("two-datacenters", {}, "cluster.scale_across.latency_ms", [0, 2, 50], "time", "up",
     "every DP bucket crossing the WAN pays its one-way latency"),
    # --- fabric shape ---
    ("megatron-gpt3-175b", {"cluster.scale_out.kind": "fat-tree"}, "cluster.scale_out.oversubscription",
     [1, 2, 8], "time", "up",
     ("fat-tree leaf blocks of 4 nodes: DP groups of 16 nodes cross the spine, whose uplinks shrink "
      "by the oversubscription")),
    ("megatron-gpt3-175b", {"cluster.scale_out.kind": "fat-tree", "cluster.scale_out.oversubscription": 8},
     "cluster.scale_out.switch_radix", [16, 64, 256], "time", "down",
     "a larger radix puts more nodes under one leaf, so less DP traffic crosses the 8:1 spine (at 4:1 a "
     "DP ring's share of the uplinks equals its share of the NICs)"),
    # --- MoE ---
    ("moe-small", {}, "model.moe.imbalance", [1.0, 1.5, 3.0], "ep_exposed", "up",
     "the busiest expert rank sets the pace of the all-to-all: EP time scales with max/mean load"),
    ("moe-small", {}, "model.moe.imbalance", [1.0, 1.5, 3.0], "compute", "up",
     "the busiest expert rank also computes imbalance x the mean expert work"),
    ("moe-small", {}, "model.moe.top_k", [1, 2, 8], "ep_bytes", "up",
     "dispatch/combine move tokens x top_k x hidden (GShard)"),
    ("moe-small", {}, "model.moe.top_k", [1, 2, 8], "time", "up",
     "more experts per token: more expert FLOPs and all-to-all bytes"),
    ("moe-small", {}, "model.moe.experts", [32, 64, 128], "memory", "up",
     "more experts at fixed top-k: more expert weights per EP rank"),
    ("moe-small", {}, "model.moe.expert_ffn_hidden", [512, 1024, 2048], "compute", "up",
     "a wider expert FFN is more GEMM work per routed token"),
    ("moe-small", {}, "model.moe.shared_experts", [0, 1, 2], "compute", "up",
     "every token also runs through each shared expert"),
    ("moe-small", {}, "model.moe.dense_layers", [0, 1, 2], "ep_bytes", "down",
     "dense leading layers have no all-to-all"),
    ("deepseek-v3", {"parallelism.schedule": "1f1b"}, "model.moe.max_nodes", [2, 4, 8], "time", "up",
     "a token reaching fewer nodes crosses InfiniBand fewer times (DeepSeek-V3 node-limited routing)"),
    # --- batch and precision ---
    ("teaching-8gpu", {}, "training.global_batch", [16, 32, 64], "bubble", "down",
     "more micro-batches per pipeline: bubble (p-1)/(m+p-1) shrinks"),
    ("teaching-8gpu", {}, "training.global_batch", [16, 32, 64], "time", "up",
     "more sequences per iteration take longer"),
    ("teaching-8gpu", {}, "training.micro_batch", [1, 2, 4], "bubble", "up",
     "larger micro-batches at a fixed global batch leave fewer micro-batches to fill the pipeline"),
    ("teaching-8gpu", {}, "training.micro_batch", [1, 2], "memory", "up",
     "activations grow with the micro-batch size"),
    ("teaching-8gpu", {}, "hardware.compute_efficiency", [0.3, 0.5, 0.9], "time", "down",
     "GEMMs run at peak x efficiency"),
    ("teaching-8gpu", {}, "hardware.gpu.hbm_GBps", [1000, 3350, 10000], "time", "down",
     "element-wise kernels and the optimizer stream through HBM"),
    ("teaching-8gpu", {}, "hardware.gpu.hbm_GBps", [1000, 3350, 10000], "optimizer", "down",
     "the optimizer step is memory bound"),
    # (the fp8 peak raised with it: an fp8 peak below the bf16 one is refused, config/rules.py)
    ("teaching-8gpu", {"hardware.gpu.measured_matmul_tflops": None, "hardware.gpu.fp8_tflops": 4000},
     "hardware.gpu.peak_tflops", [500, 989, 2000], "time", "down",
     "without a measured GEMM figure, GEMMs run at a fixed fraction of the peak"),
    ("teaching-8gpu", {"hardware.gpu.fp8_tflops": 4000}, "hardware.gpu.peak_tflops", [989, 2000], "mfu",
     "down",
     "with the measured GEMM throughput fixed, a higher nominal peak only enlarges MFU's denominator"),
    ("teaching-8gpu", {}, "hardware.gpu.measured_matmul_tflops", [300, 500, 800], "time", "down",
     "the default GEMM efficiency follows the measured single-GEMM throughput"),
    ("pipedream-vgg16", {"training.dtype": "fp32"}, "hardware.gpu.fp32_tflops", [7, 14, 28], "compute",
     "down", "fp32 GEMMs and convolutions run at the fp32 peak (a V100's CUDA cores: no TF32)"),
    ("teaching-8gpu", {"training.dtype": "fp8", "hardware.gpu.measured_fp8_matmul_tflops": None},
     "hardware.gpu.fp8_tflops", [1000, 1979, 4000], "time", "down",
     "without a measured fp8 GEMM figure, fp8 GEMMs run at a fixed fraction of the fp8 peak"),
    ("teaching-8gpu", {"training.dtype": "fp8"}, "hardware.gpu.fp8_tflops", [1979, 4000], "mfu_fp8_peak",
     "down",
     "with the measured fp8 GEMM throughput fixed, a higher fp8 peak only enlarges its MFU's denominator"),
    # --- model dimensions ---
    ("teaching-8gpu", {}, "model.layers", [16, 24, 32], "time", "up", "more layers, more work per stage"),
    ("teaching-8gpu", {}, "model.hidden", [1024, 2048], "time", "up", "GEMM FLOPs grow as hidden^2"),
    ("teaching-8gpu", {}, "model.kv_heads", [2, 4, 16], "time", "up",
     "GQA: fewer K/V heads, smaller K/V projections"),
    ("teaching-8gpu", {}, "model.ffn_hidden", [4096, 8192, 16384], "time", "up", "wider FFN, more GEMM work"),
    ("teaching-8gpu", {}, "model.vocab", [8000, 50304, 200000], "time", "up",
     "the logits GEMM and embedding scale with the vocabulary"),
    ("teaching-8gpu", {}, "model.seq_len", [1024, 2048, 4096], "time", "up",
     "more tokens per sequence (and quadratic attention)"),
    ("teaching-8gpu", {"training.flash_attention": False}, "model.heads", [8, 16, 32], "memory", "up",
     "without flash attention each head stores its s x s score matrix (Korthikanti 5as/h term)"),
    # --- parallelism ---
    ("teaching-8gpu", {"parallelism.schedule": "gpipe"}, "parallelism.token_slices", [1, 2, 4],
     "bubble", "down", "TeraPipe: k slices per sequence pipeline like k x m micro-batches, (p-1)/(mk+p-1)"),
    ("fsdp-llama3-8b", {}, "parallelism.zero", [0, 1, 2, 3], "memory", "down",
     "ZeRO shards optimizer state (1), gradients (2), weights (3) across DP"),
    ("fsdp-llama3-8b", {}, "communication.prefetch_layers", [1, 2, 4], "memory", "up",
     "each prefetched layer's gathered weights stay resident"),
    ("long-context-cp", {"training.global_batch": 64, "parallelism.dp": None}, "parallelism.cp", [1, 2, 8],
     "memory", "down", "context parallelism splits each sequence's activations across cp GPUs"),
    ("moe-small", {}, "parallelism.ep", [8, 16], "memory", "down",
     "more expert-parallel ranks, fewer experts per GPU"),
]


@pytest.mark.parametrize("name,fixed,key,values,metric,direction,why", MONOTONE,
                         ids=[f"{r[2]}-{r[4]}-{r[0]}" for r in MONOTONE])
def test_control_moves_metric_strictly_in_the_physical_direction(
        name, fixed, key, values, metric, direction, why):
    """Physics per row (``why``): increasing ``key`` along ``values`` moves ``metric`` strictly
    ``direction`` on a scenario chosen so that the field's tier/term is the one that limits."""
    results = [METRICS[metric](sim(name, {**fixed, key: v})) for v in values]
    assert_strictly(direction, values, results, f"{name}: {key} ({why})")


# ------------------------------------------------------------------------------------------------
# More bandwidth / less latency is never slower, on every shipped scenario.
# ------------------------------------------------------------------------------------------------
NEVER_SLOWER = [("cluster.scale_up.bandwidth_GBps", 2.0), ("cluster.scale_out.nic_Gbps", 2.0),
                ("cluster.scale_out.nics_per_node", 2), ("cluster.scale_across.bandwidth_Gbps", 4.0),
                ("cluster.scale_up.latency_us", 0.0), ("cluster.scale_out.latency_us", 0.0),
                ("cluster.scale_across.latency_ms", 0.0)]


@pytest.mark.parametrize("key,factor", NEVER_SLOWER, ids=[k for k, _ in NEVER_SLOWER])
@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_better_links_never_slow_any_shipped_scenario(name, key, factor):
    """A faster link (bandwidth x factor, or latency set to 0) can only shorten every
    collective, so no iteration may get slower (a tier a scenario does not use changes nothing)."""
    base = sim(name)
    _, tier, fld = key.split(".")
    current = getattr(getattr(base.scenario.cluster, tier), fld)
    better = current * factor if "latency" not in key else 0.0
    assert sim(name, {key: better}).iteration_time_s <= base.iteration_time_s * (1 + 1e-12)


def test_wan_fields_do_not_matter_inside_one_datacenter():
    """With one datacenter nothing crosses a WAN: its bandwidth and latency change nothing."""
    base = sim("teaching-8gpu")
    for ov in ({"cluster.scale_across.bandwidth_Gbps": 1.0}, {"cluster.scale_across.latency_ms": 1000.0}):
        assert sim("teaching-8gpu", ov).iteration_time_s == base.iteration_time_s


# ------------------------------------------------------------------------------------------------
# Communication options
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["teaching-8gpu", "megatron-gpt3-175b", "two-datacenters"])
def test_dp_overlap_off_exposes_the_gradient_reduction(name):
    """PyTorch DDP overlap: with overlap the gradient buckets reduce under the backward pass;
    without it the whole reduction starts after the last backward, so DP exposure and the
    iteration grow."""
    on = sim(name, {"communication.dp_overlap": True})
    off = sim(name, {"communication.dp_overlap": False})
    assert off.breakdown_s["dp"] > on.breakdown_s["dp"]
    assert off.iteration_time_s > on.iteration_time_s


@pytest.mark.parametrize("name", ["megatron-gpt3-175b", "two-datacenters", "llama3-405b-16k"])
def test_tp_overlap_hides_tensor_parallel_collectives(name):
    """Collective matmul: each TP collective hides behind its neighbouring GEMM except one chunk,
    so exposed TP time and the iteration shrink; the bytes moved do not change (for the same layers:
    the layer split weighs exposed TP time, so it may move layers when the overlap hides it)."""
    off = sim(name, {"communication.tp_overlap": False})
    on = sim(name, {"communication.tp_overlap": True})
    assert on.breakdown_s["tp"] < off.breakdown_s["tp"]
    assert on.iteration_time_s < off.iteration_time_s
    same = sim(name, {"communication.tp_overlap": True, "parallelism.stage_layers": list(off.stage_layers)})
    assert same.comm_bytes_per_gpu["tp"] == off.comm_bytes_per_gpu["tp"]


@pytest.mark.parametrize("name", ["teaching-8gpu", "two-datacenters", "megatron-gpt3-175b"])
def test_tiny_gradient_buckets_pay_latency(name):
    """Alpha-beta: n buckets pay n x latency for the same bytes; 0.1 MB buckets multiply the
    latency term by hundreds, so DP exposure and the iteration grow; the bytes stay equal."""
    tiny = sim(name, {"communication.bucket_MB": 0.1})
    normal = sim(name, {"communication.bucket_MB": 25})
    assert tiny.breakdown_s["dp"] > normal.breakdown_s["dp"]
    assert tiny.iteration_time_s > normal.iteration_time_s
    assert tiny.comm_bytes_per_gpu["dp"] == pytest.approx(normal.comm_bytes_per_gpu["dp"])


def test_one_huge_bucket_cannot_overlap_the_backward():
    """A bucket larger than the gradients is released only after the last layer's backward, so
    the whole reduction is exposed: slower than 25 MB buckets that start during the backward."""
    huge = sim("teaching-8gpu", {"communication.bucket_MB": 1000})
    normal = sim("teaching-8gpu", {"communication.bucket_MB": 25})
    assert huge.breakdown_s["dp"] > normal.breakdown_s["dp"]
    assert huge.iteration_time_s > normal.iteration_time_s


def test_p3_priorities_shorten_the_two_datacenter_iteration():
    """P3/ByteScheduler: the first layers' buckets overtake queued ones, so the next forward starts
    while later buckets still cross the WAN: a shorter steady-state period, less exposed DP."""
    fifo = sim("two-datacenters", {"communication.dp_priority": False})
    p3 = sim("two-datacenters", {"communication.dp_priority": True})
    assert p3.iteration_time_s < fifo.iteration_time_s
    assert p3.breakdown_s["dp"] < fifo.breakdown_s["dp"]


def test_zero3_prefetch_hides_the_parameter_gathers():
    """FSDP prefetch: with 0 layers ahead every layer waits for its own all-gather; with 1 the
    gather runs under the previous layer's compute, so DP exposure and the iteration shrink."""
    none = sim("fsdp-llama3-8b", {"communication.prefetch_layers": 0})
    one = sim("fsdp-llama3-8b", {"communication.prefetch_layers": 1})
    assert one.breakdown_s["dp"] < none.breakdown_s["dp"]
    assert one.iteration_time_s < none.iteration_time_s


def test_zero3_moves_more_dp_bytes_than_zero1():
    """ZeRO-3 gathers weights before forward and backward and reduce-scatters gradients (3 psi per
    pass) where ZeRO-1 reduce-scatters and gathers once (2 psi): more DP bytes per GPU."""
    z1 = sim("fsdp-llama3-8b", {"parallelism.zero": 1})
    z3 = sim("fsdp-llama3-8b", {"parallelism.zero": 3})
    assert z3.comm_bytes_per_gpu["dp"] >= 1.5 * z1.comm_bytes_per_gpu["dp"]


def test_forced_collective_algorithms_are_never_faster_than_auto():
    """'auto' evaluates every applicable algorithm per call and keeps the fastest, so forcing any
    one of them can only slow the iteration (strictly, for ring on the 405B layout where auto
    picks a log-depth algorithm for the 128-way DP group)."""
    for name in ("llama3-405b-16k", "tp8-node"):
        auto = sim(name, {"communication.algorithm": "auto"}).iteration_time_s
        for alg in ("ring", "tree", "nvls", "nvls-tree", "pat"):
            assert sim(name, {"communication.algorithm": alg}).iteration_time_s >= auto * (1 - 1e-12), (
                name, alg)
        # With an MPI library auto chooses among MPI's algorithms, again the fastest per call.
        mpi = sim(name, {"communication.library": "mpi"}).iteration_time_s
        for alg in ("ring", "halving-doubling", "hierarchical"):
            forced = sim(name, {"communication.library": "mpi", "communication.algorithm": alg})
            assert forced.iteration_time_s >= mpi * (1 - 1e-12), (name, "mpi", alg)
    assert sim("llama3-405b-16k", {"communication.algorithm": "ring"}).iteration_time_s > \
        sim("llama3-405b-16k", {"communication.algorithm": "auto"}).iteration_time_s


def test_nvls_beats_ring_for_in_node_all_reduce_on_sharp_switches():
    """NVLink SHARP reduces in the switch: an 8-GPU all-reduce sends each byte once instead of
    2(n-1)/n times, so the TP all-reduces of TP 8 in one H100 node are faster than with ring."""
    assert sim("tp8-node", {"communication.algorithm": "nvls"}).breakdown_s["tp"] < \
        sim("tp8-node", {"communication.algorithm": "ring"}).breakdown_s["tp"]


def test_nvlink_sharp_flag_enables_in_switch_reduction():
    """hardware.gpu.nvlink_sharp: without SHARP the switch cannot reduce, NVLS is unavailable and
    the TP all-reduce falls back to a slower host algorithm."""
    assert sim("tp8-node", {"hardware.gpu.nvlink_sharp": True}).iteration_time_s < \
        sim("tp8-node", {"hardware.gpu.nvlink_sharp": False}).iteration_time_s


def test_scale_up_kind_nvswitch_is_needed_for_in_switch_reduction():
    """cluster.scale_up.kind: only an NVSwitch can reduce in the switch (NVLS); on an NVLink ring or
    PCIe the same TP 8 all-reduces run without it and take longer."""
    nvswitch = sim("tp8-node", {"cluster.scale_up.kind": "nvswitch"}).iteration_time_s
    assert sim("tp8-node", {"cluster.scale_up.kind": "nvlink-ring"}).iteration_time_s > nvswitch
    assert sim("tp8-node", {"cluster.scale_up.kind": "pcie"}).iteration_time_s > nvswitch


def test_scale_up_kind_moves_a100_without_nvls():
    """On A100 (no NVLink SHARP) the kinds differ by wiring alone (topology.py): megatron-gpt3-175b's
    TP 8 all-reduces forced to halving-doubling (an MPI algorithm, by name), whose distance-2 and
    -4 steps cross several ring hops on an NVLink ring and leave the GPU pair's PCIe switch from
    both GPUs at once."""
    hd = {"communication.algorithm": "halving-doubling"}   # NCCL's ring only talks to neighbours
    nvswitch = sim("megatron-gpt3-175b", {**hd, "cluster.scale_up.kind": "nvswitch"})
    for kind in ("nvlink-ring", "pcie"):
        r = sim("megatron-gpt3-175b", {**hd, "cluster.scale_up.kind": kind})
        assert r.breakdown_s["tp"] > nvswitch.breakdown_s["tp"], kind
        assert r.iteration_time_s > nvswitch.iteration_time_s, kind


def _in_node_cost(kind: str, op: str, algorithm: str = "auto") -> float:
    import numpy as np

    from explorer.network.collectives import cost
    from explorer.network.topology import Fabric
    from explorer.scenario import Cluster, ScaleUp
    fab = Fabric.for_cluster(Cluster(gpus_per_node=8, nodes=1,
                                     scale_up=ScaleUp(kind=kind, bandwidth_GBps=450)))
    return cost(op, 64e6, fab.shape(np.arange(8)), algorithm, nvls_capable=False).time_s


def test_scale_up_wiring_prices_each_traffic_pattern():
    """Same 450 GB/s per GPU, 8 GPUs in one node: an all-to-all (an EP group in a node) is slower on
    an NVLink ring (mean hop distance 16/7, Dally & Towles ch. 3) than on a crossbar; everything
    that leaves a PCIe pair from both GPUs (all-to-all, halving-doubling) is slower on PCIe; a ring
    all-reduce talks to neighbours only and is the same on a crossbar without NVLS and a ring."""
    a2a = {k: _in_node_cost(k, "all-to-all") for k in ("nvswitch", "nvlink-ring", "pcie")}
    assert a2a["nvlink-ring"] > a2a["nvswitch"] and a2a["pcie"] > a2a["nvswitch"]
    hd = {k: _in_node_cost(k, "all-reduce", "halving-doubling") for k in ("nvswitch", "nvlink-ring", "pcie")}
    assert hd["nvlink-ring"] > hd["nvswitch"] and hd["pcie"] > hd["nvswitch"]
    assert _in_node_cost("pcie", "reduce-scatter", "halving-doubling") > \
        _in_node_cost("nvswitch", "reduce-scatter", "halving-doubling")
    assert (_in_node_cost("nvlink-ring", "all-reduce", "ring")
            == _in_node_cost("nvswitch", "all-reduce", "ring"))


# ------------------------------------------------------------------------------------------------
# Training options
# ------------------------------------------------------------------------------------------------
def test_recompute_trades_time_for_memory():
    """Korthikanti et al. 2022: selective recompute redoes the attention core, full recompute the
    whole layer's forward: time none < selective < full, activation memory the other way (with
    flash attention off, so the s x s scores that selective drops exist)."""
    r = {k: sim("teaching-8gpu", {"training.recompute": k, "training.flash_attention": False})
         for k in ("none", "selective", "full")}
    assert r["none"].iteration_time_s < r["selective"].iteration_time_s < r["full"].iteration_time_s
    assert r["none"].memory.total > r["selective"].memory.total > r["full"].memory.total
    assert r["none"].breakdown_s["recompute"] == 0 < r["selective"].breakdown_s["recompute"]


def test_flash_attention_saves_memory_and_time():
    """FlashAttention (Dao et al. 2022) never writes the s x s score tensor to HBM: less activation
    memory and fewer memory-bound kernels."""
    on = sim("teaching-8gpu", {"training.flash_attention": True})
    off = sim("teaching-8gpu", {"training.flash_attention": False})
    assert on.memory.total < off.memory.total
    assert on.iteration_time_s < off.iteration_time_s


def test_precision_sets_the_gemm_rate():
    """H100 tensor cores: fp8 has twice the bf16 dense peak, fp16 the same as bf16, fp32 (TF32)
    half: time fp8 < bf16 = fp16 < fp32.  A100 has no fp8 tensor cores: fp8 is not faster."""
    # Compute of every pass of every stage (the breakdown's busiest stage may differ between
    # dtypes, as Megatron reduces bf16 gradients in fp32 but fp16 ones in fp16: frameworks.py).
    t = {d: sum(x.duration for x in sim("teaching-8gpu", {"training.dtype": d}).tasks
                if x.stream == "compute" and x.kind != "optimizer")
         for d in ("fp8", "bf16", "fp16", "fp32")}
    assert t["fp8"] < t["bf16"] == t["fp16"] < t["fp32"]
    # FP8 runs only the linear layers in FP8 (attention core, norms, logits stay bf16) and pays
    # the casts: less than the 2x of the peaks.
    assert t["bf16"] / t["fp8"] < 2
    a100 = {d: sim("teaching-8gpu", {"training.dtype": d, "hardware.gpu": "a100-80gb"})
            for d in ("fp8", "bf16")}
    assert a100["fp8"].breakdown_s["compute"] == pytest.approx(a100["bf16"].breakdown_s["compute"])
    # ... nor does it keep FP8's activations or weight copies (config/generations.runs_fp8: a hunt
    # found 2.9 GB of activations against bf16's 3.4): the recipe runs in bf16 throughout.
    assert a100["fp8"].memory.total == pytest.approx(a100["bf16"].memory.total, rel=1e-12)


def test_sgd_keeps_less_optimizer_state_than_adam():
    """Adam keeps fp32 master weights, momentum and variance (12 B/param), SGD less: less memory and
    a shorter memory-bound optimizer step."""
    adam = sim("teaching-8gpu", {"training.optimizer": "adam"})
    sgd = sim("teaching-8gpu", {"training.optimizer": "sgd"})
    assert sgd.memory.total < adam.memory.total
    assert sgd.breakdown_s["optimizer"] < adam.breakdown_s["optimizer"]


def test_swiglu_has_three_ffn_matrices():
    """SwiGLU's FFN has 3 matrices of h x ffn_hidden against GELU's 2: more FLOPs and weights."""
    gelu = sim("teaching-8gpu", {"model.ffn_kind": "gelu"})
    swiglu = sim("teaching-8gpu", {"model.ffn_kind": "swiglu"})
    assert swiglu.iteration_time_s > gelu.iteration_time_s
    assert swiglu.memory.total > gelu.memory.total


def test_tied_embeddings_hold_one_vocabulary_matrix():
    """Tied input/output embeddings share one V x h matrix: on a single stage (pp 1) that is V*h
    fewer parameters, so less weight/gradient/optimizer memory and fewer gradient bytes to reduce."""
    ov = {"parallelism.pp": 1, "parallelism.dp": 8}
    untied = sim("teaching-8gpu", {**ov, "model.tied_embeddings": False})
    tied = sim("teaching-8gpu", {**ov, "model.tied_embeddings": True})
    assert tied.memory.total < untied.memory.total
    assert tied.comm_bytes_per_gpu["dp"] < untied.comm_bytes_per_gpu["dp"]


def test_memory_capacity_changes_only_the_warning():
    """hardware.gpu.memory_GB is capacity: it never changes time or bytes, only whether the
    memory warning appears (memory above capacity)."""
    big = sim("teaching-8gpu", {"hardware.gpu.memory_GB": 80})
    small = sim("teaching-8gpu", {"hardware.gpu.memory_GB": 5})
    assert small.iteration_time_s == big.iteration_time_s and small.memory.total == big.memory.total
    assert small.memory.total > 5e9
    assert any(w.startswith("memory") for w in small.warnings)
    assert not any(w.startswith("memory") for w in big.warnings)


@pytest.mark.parametrize("gpu", ["h100-sxm", "a100-80gb", "b200", "gb200"])
def test_display_fields_do_not_change_physics(gpu):
    """name, description and hardware.gpu.name are labels: the result must be identical, on every
    generation (an invariant hunt found a renamed B200 1.514 -> 1.403 s on fsdp-llama3-8b: its HBM
    efficiency and NCCL generation were read from the display name, not the preset it came from)."""
    base = sim("fsdp-llama3-8b", {"hardware.gpu": gpu})
    for ov in ({"name": "renamed"}, {"description": "other words"}, {"hardware.gpu.name": "my GPU"}):
        r = sim("fsdp-llama3-8b", {"hardware.gpu": gpu, **ov})
        assert r.iteration_time_s == base.iteration_time_s and r.breakdown_s == base.breakdown_s


def test_a_preset_with_one_field_set_keeps_its_architecture():
    """hardware.gpu.based_on: one field of a preset set (its own board power here) leaves every other
    figure of it, and its architecture, alone — a GB200 keeps its 450 GB/s NVLink-C2C host link for
    offloaded activations (0.0544 s, not the PCIe fallback's 0.159 s); the same mapping written
    with ``based_on`` in a file runs the same; a GPU based on no preset is refused by name."""
    ov = {"hardware.gpu": "gb200", "training.offload_activations_layers": 2}
    base = sim("teaching-8gpu", ov)
    same = sim("teaching-8gpu", {**ov, "hardware.gpu.power_W": 1200})
    assert same.iteration_time_s == base.iteration_time_s and same.breakdown_s == base.breakdown_s
    assert same.breakdown_s["offload"] == base.breakdown_s["offload"] < 0.01
    path = ROOT / "scenarios" / "teaching-8gpu.yaml"
    off = {"training.offload_activations_layers": 2}
    written = simulate(load(path, {**off, "hardware.gpu": {"based_on": "gb200", "power_W": 1200}}))
    assert written.iteration_time_s == base.iteration_time_s
    # Without based_on the same fields are a custom GPU: PCIe to the host, offload far dearer.
    fields = vars(load(path, {"hardware.gpu": "gb200"}).hardware.gpu)
    custom = {k: v for k, v in fields.items() if v is not None and k not in ("preset", "based_on")}
    plain = simulate(load(path, {**off, "hardware.gpu": custom}))
    assert plain.breakdown_s["offload"] > 10 * base.breakdown_s["offload"]
    with pytest.raises(ScenarioError, match="hardware.gpu.based_on"):
        load(path, {"hardware.gpu": {"based_on": "h999"}})
    # A renamed H100 keeps Hopper's tensor cores: MXFP8 refused whatever the name says (it ran).
    with pytest.raises(ScenarioError, match="training.fp8_recipe"):
        load(path, {"hardware.gpu": {"based_on": "h100-sxm", "name": "B200"}, "training.dtype": "fp8",
                    "training.fp8_recipe": "mxfp8"})


@pytest.mark.parametrize("slow,fast", [("a100-80gb", "h100-sxm"), ("h100-sxm", "b200"), ("a100-80gb", "b200"),
                                       ("h100-sxm", "h200")])
def test_newer_gpu_presets_are_faster_on_the_same_scenario(slow, fast):
    """GPU presets: B200 > H200 = H100 compute > A100 (peak and measured GEMM throughput), H200's
    faster HBM shortens the memory-bound kernels."""
    assert sim("teaching-8gpu", {"hardware.gpu": fast}).iteration_time_s < \
        sim("teaching-8gpu", {"hardware.gpu": slow}).iteration_time_s


def test_h800_preset_has_a_narrower_nvlink_than_h100():
    """H800 is an H100 with 200 GB/s NVLink instead of 450: where the scale-up bandwidth comes from
    the GPU preset, in-node collectives are slower."""
    ov = {"cluster.scale_up.bandwidth_GBps": None}
    assert sim("tp8-node", {**ov, "hardware.gpu": "h800"}).breakdown_s["tp"] > \
        sim("tp8-node", {**ov, "hardware.gpu": "h100-sxm"}).breakdown_s["tp"]


def test_a_bigger_model_preset_is_slower_and_larger():
    """model.preset: Llama 3 70B has ~9x the parameters of 8B: more time and memory on the same
    cluster and batch."""
    small = sim("fsdp-llama3-8b", {"model.preset": "llama3-8b"})
    big = sim("fsdp-llama3-8b", {"model.preset": "llama3-70b"})
    assert big.iteration_time_s > small.iteration_time_s and big.memory.total > small.memory.total


# ------------------------------------------------------------------------------------------------
# Parallelism and placement
# ------------------------------------------------------------------------------------------------
def test_sequence_parallel_shards_the_layer_norm_and_dropout_activations():
    """Megatron sequence parallelism splits the activations outside the TP GEMMs across tp ranks
    (Korthikanti et al. 2022, Table 2): less activation memory at tp 8."""
    for name in ("two-datacenters", "llama3-405b-16k"):
        assert sim(name, {"parallelism.sequence_parallel": True}).memory.total < \
            sim(name, {"parallelism.sequence_parallel": False}).memory.total


def test_more_tensor_parallelism_shards_weights_and_adds_tp_traffic():
    """TP splits every weight matrix across tp GPUs (less memory per GPU) at the price of
    all-reduces of the activations (TP bytes appear)."""
    tp1 = sim("teaching-8gpu", {"parallelism.tp": 1, "parallelism.dp": None})
    tp2 = sim("teaching-8gpu", {"parallelism.tp": 2, "parallelism.dp": None})
    assert tp2.memory.params < tp1.memory.params
    assert tp1.comm_bytes_per_gpu.get("tp", 0) == 0 < tp2.comm_bytes_per_gpu["tp"]


def test_more_pipeline_stages_grow_the_bubble_and_shrink_the_weights():
    """More stages at the same micro-batch count: bubble (p-1)/(m+p-1) grows, each GPU holds fewer
    layers."""
    # 4 micro-batches per pipeline at every depth: dp = 8/p, global batch 4*dp.
    r = [sim("teaching-8gpu",
             {"parallelism.dp": None, "parallelism.pp": p, "training.global_batch": 4 * 8 // p})
         for p in (2, 4, 8)]
    assert [x.scenario.micro_batches for x in r] == [4, 4, 4]
    assert r[0].bubble_fraction < r[1].bubble_fraction < r[2].bubble_fraction
    assert r[0].memory.params > r[1].memory.params > r[2].memory.params


def test_more_nodes_at_fixed_batch_are_faster():
    """dp is derived: 2 nodes double dp and halve each pipeline's micro-batches."""
    one = sim("teaching-8gpu", {"parallelism.dp": None})
    two = sim("teaching-8gpu", {"parallelism.dp": None, "cluster.nodes": 2})
    assert two.scenario.dp == 2 * one.scenario.dp
    assert two.iteration_time_s < one.iteration_time_s


def test_explicit_dp_is_the_data_parallel_degree():
    """parallelism.dp given explicitly (= GPUs/(tp pp cp)) equals the derived one; the data
    parallel all-reduce size follows it."""
    explicit = sim("teaching-8gpu", {"parallelism.dp": 2})
    derived = sim("teaching-8gpu", {"parallelism.dp": None})
    assert explicit.iteration_time_s == derived.iteration_time_s
    assert explicit.links["dp"]["group"] == 2


def test_smaller_scale_up_domain_pushes_tp_onto_the_fabric():
    """cluster.gpus_per_node: TP 8 on 4-GPU nodes spans two nodes and its all-reduces cross the
    NICs (same GPU count, one HDR NIC per GPU): slower, TP exposed time grows."""
    eight = sim("megatron-gpt3-175b", {"cluster.gpus_per_node": 8, "cluster.nodes": 128})
    four = sim("megatron-gpt3-175b", {"cluster.gpus_per_node": 4, "cluster.nodes": 256,
                                      "cluster.scale_out.nics_per_node": 4})
    assert four.links["tp"]["tier"] == "scale-out" and eight.links["tp"]["tier"] == "scale-up"
    assert four.breakdown_s["tp"] > eight.breakdown_s["tp"]
    assert four.iteration_time_s > eight.iteration_time_s


def test_a_second_datacenter_puts_a_dimension_on_the_wan():
    """cluster.datacenters: splitting the 128 nodes into two buildings makes the outermost
    dimension (PP) cross the WAN: slower."""
    one = sim("megatron-gpt3-175b", {"cluster.datacenters": 1})
    two = sim("megatron-gpt3-175b", {"cluster.datacenters": 2})
    assert two.links["pp"]["tier"] == "scale-across"
    assert two.iteration_time_s > one.iteration_time_s


def test_placement_order_decides_which_dimension_crosses_the_wan():
    """parallelism.order (innermost first): the outermost dimension spans the datacenters.  With
    DP outermost the gradient reduction crosses the WAN; with PP outermost only activations do."""
    dp_out = sim("two-datacenters", {"parallelism.order": "tp-cp-ep-pp-dp"})
    pp_out = sim("two-datacenters", {"parallelism.order": "tp-cp-ep-dp-pp"})
    assert dp_out.links["dp"]["tier"] == "scale-across" and pp_out.links["pp"]["tier"] == "scale-across"
    assert pp_out.breakdown_s["dp"] < dp_out.breakdown_s["dp"]


def test_placement_with_tp_outside_the_node_is_much_slower():
    """Putting DP innermost pushes the TP group of 8 across 8 nodes: its per-layer all-reduces run
    on the NICs instead of NVLink."""
    good = sim("megatron-gpt3-175b", {"parallelism.order": "tp-cp-ep-dp-pp"})
    bad = sim("megatron-gpt3-175b", {"parallelism.order": "dp-tp-cp-pp"})
    assert bad.links["tp"]["tier"] == "scale-out"
    assert bad.breakdown_s["tp"] > 2 * good.breakdown_s["tp"]


def test_context_parallel_across_nodes_exposes_the_kv_ring():
    """Ring attention hides each K/V hand-off behind one attention block; on NVLink it is hidden,
    across nodes (cp outermost but pp) the hand-offs outlast the blocks at 16K tokens."""
    ov = {"model.seq_len": 16384}
    inside = sim("long-context-cp", {**ov, "parallelism.order": "tp-cp-ep-dp-pp"})
    across = sim("long-context-cp", {**ov, "parallelism.order": "tp-dp-cp-pp"})
    assert across.links["cp"]["tier"] == "scale-out"
    assert across.breakdown_s["cp"] > inside.breakdown_s["cp"]
    assert across.iteration_time_s > inside.iteration_time_s


def test_node_limited_routing_is_faster_across_nodes():
    """DeepSeek-V3 node-limited routing: a token crosses InfiniBand once per destination node, then
    NVLink; limited to 1 node the all-to-all's fabric share collapses."""
    free = sim("moe-small", {"model.moe.max_nodes": 0})
    limited = sim("moe-small", {"model.moe.max_nodes": 1})
    assert limited.breakdown_s["ep"] < free.breakdown_s["ep"]
    assert limited.iteration_time_s < free.iteration_time_s


def test_node_limits_that_cannot_bind_are_identical():
    """model.moe.max_nodes M > 0 is node-aware dispatch with at most M nodes per token; an EP-64
    group of deepseek-v3 spans 8 nodes, so M = 8 and M = 16 restrict nothing: identical results."""
    spans = sim("deepseek-v3", {"model.moe.max_nodes": 8})
    twice = sim("deepseek-v3", {"model.moe.max_nodes": 16})
    assert spans.iteration_time_s == twice.iteration_time_s and spans.breakdown_s == twice.breakdown_s


def test_a_binding_node_limit_is_faster_than_a_non_binding_one():
    """Fewer destination nodes per token, fewer fabric copies (DeepSeek-V3 Sec. 3.2.2): a limit that
    binds (4, or 7 of the 8 nodes spanned: some tokens' 8 experts sit on 8 nodes) beats one that
    cannot (8)."""
    free = sim("deepseek-v3", {"model.moe.max_nodes": 8})
    for m in (7, 4):
        r = sim("deepseek-v3", {"model.moe.max_nodes": m})
        assert r.breakdown_s["ep"] < free.breakdown_s["ep"] and r.iteration_time_s < free.iteration_time_s, m


def test_plain_all_to_all_is_never_faster_than_node_aware_dispatch():
    """max_nodes 0 = no limit and no node-aware dispatch (Megatron's plain alltoall dispatcher):
    every top_k copy crosses the fabric, so it is no faster than any M > 0 across nodes."""
    for name in ("deepseek-v3", "moe-small"):
        plain = sim(name, {"model.moe.max_nodes": 0}).iteration_time_s
        for m in (1, 2, 8, 16):
            assert sim(name, {"model.moe.max_nodes": m}).iteration_time_s <= plain, (name, m)


@pytest.mark.parametrize("schedule,vpp",
                         [("interleaved", 2), ("zb-h1", 1), ("zb-h2", 1), ("pipedream-async", 1)])
def test_advanced_schedules_have_a_smaller_bubble_than_1f1b(schedule, vpp):
    """Interleaving divides the bubble by vpp (SC21 Sec. 2.2.2); ZB-H1/H2 fill it with weight-gradient
    passes (Qi et al. 2024); PipeDream's asynchronous 1F1B has none in steady state."""
    base = sim("teaching-8gpu", {"parallelism.schedule": "1f1b"})
    r = sim("teaching-8gpu", {"parallelism.schedule": schedule, "parallelism.vpp": vpp})
    assert r.bubble_fraction < base.bubble_fraction
    assert r.iteration_time_s < base.iteration_time_s


def test_more_virtual_stages_shrink_the_interleaved_bubble():
    """SC21 Sec. 2.2.2: v virtual stages per GPU divide the bubble by v.  24 layers on 4 stages
    split evenly into 8 or 12 chunks, so vpp 1 -> 2 -> 3 must shrink the bubble share and the
    iteration with the default (compute-balanced) split."""
    r = [sim("teaching-8gpu",
             {"parallelism.schedule": "interleaved" if v > 1 else "1f1b", "parallelism.vpp": v})
         for v in (1, 2, 3)]
    assert r[0].bubble_fraction > r[1].bubble_fraction > r[2].bubble_fraction
    assert r[0].iteration_time_s > r[1].iteration_time_s > r[2].iteration_time_s


def test_gpipe_holds_more_activations_than_1f1b():
    """GPipe keeps all m micro-batches' activations, 1F1B at most p: more memory."""
    assert sim("teaching-8gpu", {"parallelism.schedule": "gpipe"}).memory.total > \
        sim("teaching-8gpu", {"parallelism.schedule": "1f1b"}).memory.total


def test_dualpipe_hides_more_expert_all_to_all_than_1f1b():
    """DualPipe's fused forward+backward chunks hide one micro-batch's all-to-all behind the other's
    compute (DeepSeek-V3 report, Sec. 3.2.1)."""
    one = sim("deepseek-v3", {"parallelism.schedule": "1f1b"})
    dual = sim("deepseek-v3", {"parallelism.schedule": "dualpipe"})
    assert dual.breakdown_s["ep"] < one.breakdown_s["ep"]


def test_unbalanced_stage_split_is_slower_than_the_balanced_default():
    """The slowest stage paces a pipeline: moving layers onto stage 0 (which also holds the
    embedding) makes the iteration longer than the compute-balanced default split."""
    default = sim("teaching-8gpu")
    skewed = sim("teaching-8gpu", {"parallelism.stage_layers": [9, 5, 5, 5]})
    assert skewed.stage_layers == (9, 5, 5, 5)
    assert skewed.iteration_time_s > default.iteration_time_s


def _passes(r: Result, stage: int = 0) -> dict[str, float]:
    kinds: dict[str, float] = {}
    for t in r.tasks:
        if t.cls == stage and t.stream == "compute" and t.kind != "optimizer":
            kinds.setdefault(t.kind, t.duration)
    return kinds


def _closed_form(schedule: str, r: Result, p: int, m: int, v: int) -> float:
    """The bubble fraction each schedule's paper gives for equal stages and free communication."""
    if schedule in ("gpipe", "1f1b"):
        return (p - 1) / (m + p - 1)                                    # SC21 Sec. 2.2.1
    if schedule == "interleaved":
        return (p - 1) / v / (m + (p - 1) / v)                          # SC21 Sec. 2.2.2
    if schedule == "pipedream-async":
        return 0.0                                                      # PipeDream, steady state
    k = _passes(r)
    F, B, W = k["forward"], k["backward"], k["weight-grad"]
    # Qi et al. 2024 Sec. 3.1, with a W longer than F filling only an F-long gap (zero_bubble.py).
    bubble = (p - 1) * max(0.0, F + B - (1 if schedule == "zb-h1" else 2) * min(F, W))
    return bubble / (m * (F + B + W) + bubble)


@pytest.mark.parametrize("schedule,vpp", [("gpipe", 1), ("1f1b", 1), ("interleaved", 2), ("zb-h1", 1),
                                          ("zb-h2", 1), ("pipedream-async", 1)])
def test_ideal_pipeline_bubble_equals_the_schedule_formula(schedule, vpp):
    """parallelism.ideal_pipeline: equal stages, no embedding/logits, no optimizer, free
    communication — the bubble card must then equal the schedule's own closed form exactly, while
    the real pipeline (uneven split, edges, optimizer, communication) differs from it."""
    ov = {"parallelism.schedule": schedule, "parallelism.vpp": vpp}
    r = sim("teaching-8gpu", {**ov, "parallelism.ideal_pipeline": True})
    real = sim("teaching-8gpu", {**ov, "parallelism.ideal_pipeline": False})
    p, m = r.scenario.parallelism.pp, r.scenario.micro_batches
    busy = [sum(t.duration for t in r.tasks if t.cls == s and t.stream == "compute") for s in range(p)]
    assert max(busy) == pytest.approx(min(busy), rel=1e-9)
    # Exactly no communication or optimizer time (up to the float rounding of the stage sums).
    assert all(abs(r.breakdown_s[k]) < 1e-12 for k in ("tp", "cp", "ep", "pp", "dp", "optimizer"))
    expected = _closed_form(schedule, r, p, m, vpp)
    assert r.bubble_fraction == pytest.approx(expected, rel=1e-3, abs=1e-4)
    if schedule != "pipedream-async":
        assert real.bubble_fraction != pytest.approx(expected, rel=1e-3)


# ------------------------------------------------------------------------------------------------
# Coverage: every documented field and every sidebar control has a test above.
# ------------------------------------------------------------------------------------------------
COVERED_ELSEWHERE_IN_THIS_FILE = {
    "name": "test_display_fields_do_not_change_physics",
    "description": "test_display_fields_do_not_change_physics",
    "hardware.gpu.name": "test_display_fields_do_not_change_physics",
    "hardware.gpu.based_on": "test_a_preset_with_one_field_set_keeps_its_architecture",
    "model.preset": "test_a_bigger_model_preset_is_slower_and_larger",
    "hardware.gpu": "test_newer_gpu_presets_are_faster_on_the_same_scenario",
    "model.ffn_kind": "test_swiglu_has_three_ffn_matrices",
    "model.tied_embeddings": "test_tied_embeddings_hold_one_vocabulary_matrix",
    "model.moe.max_nodes": "test_node_limited_routing_is_faster_across_nodes",
    "training.dtype": "test_precision_sets_the_gemm_rate",
    "training.recompute": "test_recompute_trades_time_for_memory",
    "training.optimizer": "test_sgd_keeps_less_optimizer_state_than_adam",
    "training.flash_attention": "test_flash_attention_saves_memory_and_time",
    "hardware.gpu.memory_GB": "test_memory_capacity_changes_only_the_warning",
    "hardware.gpu.nvlink_sharp": "test_nvlink_sharp_flag_enables_in_switch_reduction",
    "cluster.gpus_per_node": "test_smaller_scale_up_domain_pushes_tp_onto_the_fabric",
    "cluster.nodes": "test_more_nodes_at_fixed_batch_are_faster",
    "cluster.datacenters": "test_a_second_datacenter_puts_a_dimension_on_the_wan",
    "cluster.scale_up.kind": "test_scale_up_kind_nvswitch_is_needed_for_in_switch_reduction",
    "cluster.scale_out.kind": "test_rail_optimized_wiring_keeps_more_dp_traffic_under_the_leaves",
    "parallelism.tp": "test_more_tensor_parallelism_shards_weights_and_adds_tp_traffic",
    "parallelism.pp": "test_more_pipeline_stages_grow_the_bubble_and_shrink_the_weights",
    "parallelism.dp": "test_explicit_dp_is_the_data_parallel_degree",
    "parallelism.vpp": "test_advanced_schedules_have_a_smaller_bubble_than_1f1b",
    "parallelism.schedule": "test_advanced_schedules_have_a_smaller_bubble_than_1f1b",
    "parallelism.sequence_parallel": "test_sequence_parallel_shards_the_layer_norm_and_dropout_activations",
    "parallelism.order": "test_placement_order_decides_which_dimension_crosses_the_wan",
    "parallelism.stage_layers": "test_unbalanced_stage_split_is_slower_than_the_balanced_default",
    "parallelism.ideal_pipeline": "test_ideal_pipeline_bubble_equals_the_schedule_formula",
    "communication.algorithm": "test_forced_collective_algorithms_are_never_faster_than_auto",
    "communication.dp_overlap": "test_dp_overlap_off_exposes_the_gradient_reduction",
    "communication.bucket_MB": "test_tiny_gradient_buckets_pay_latency",
    "communication.dp_priority": "test_p3_priorities_shorten_the_two_datacenter_iteration",
    "communication.tp_overlap": "test_tp_overlap_hides_tensor_parallel_collectives",
    "communication.prefetch_layers": "test_zero3_prefetch_hides_the_parameter_gathers",
    # Not a quantity with a direction: it selects the workload family (cnn -> the convnet family's
    # timeline; the kinds not modelled yet are refused in one line), tested where the family is.
    "model.kind": "test_vgg::test_model_kind_cnn_selects_the_convnet_family",
}


def test_rail_optimized_wiring_keeps_more_dp_traffic_under_the_leaves():
    """cluster.scale_out.kind: a rail-optimized leaf takes one port per node (32-node blocks), a
    fat-tree leaf all 8 NICs of 4 nodes; behind an 8:1 spine the DP groups of 16 nodes cross it
    less on rails: faster, less exposed DP.  (At 4:1 a DP ring's share of the uplinks equals its
    share of the NICs, so the wiring would not matter.)"""
    ov = {"cluster.scale_out.oversubscription": 8}
    fat = sim("megatron-gpt3-175b", {**ov, "cluster.scale_out.kind": "fat-tree"})
    rail = sim("megatron-gpt3-175b", {**ov, "cluster.scale_out.kind": "rail-optimized"})
    assert rail.breakdown_s["dp"] < fat.breakdown_s["dp"]
    assert rail.iteration_time_s < fat.iteration_time_s


def _covered() -> dict[str, str]:
    keys = {row[2]: "test_control_moves_metric_strictly_in_the_physical_direction" for row in MONOTONE}
    keys.update({k: "test_better_links_never_slow_any_shipped_scenario" for k, _ in NEVER_SLOWER})
    keys.update(COVERED_ELSEWHERE_IN_THIS_FILE)
    keys["parallelism.zero"] = "test_zero3_moves_more_dp_bytes_than_zero1"
    keys["parallelism.cp"] = keys["parallelism.ep"] = (
        "test_control_moves_metric_strictly_in_the_physical_direction")
    keys["parallelism.token_slices"] = "test_control_moves_metric_strictly_in_the_physical_direction"
    # Areas with many fields of their own keep their direction tests in tests/test_controls_<area>.py,
    # each naming what it covers in a module-level COVERED mapping (field -> test name).
    for path in sorted((ROOT / "tests").glob("test_controls_*.py")):
        module = importlib.import_module(path.stem)
        for key, test in module.COVERED.items():
            assert hasattr(module, test), f"{path.name}: COVERED names a missing test {test}"
            keys[key] = f"{path.stem}::{test}"
    return keys


def _readme_keys() -> list[str]:
    text = (ROOT / "docs" / "scenario-reference.md").read_text(encoding="utf-8")
    table = text.split("Every field (dotted keys", 1)[1].split("\n\n", 2)[1]
    return re.findall(r"^\| `([^`]+)` \|", table, flags=re.MULTILINE)


def test_every_documented_field_and_sidebar_control_has_a_direction_test():
    """The field table of docs/scenario-reference.md, the scenario schema and the sidebar's preset
    selectors must each be covered by a test in this file (a new field without a test fails here)."""
    covered = _covered()
    documented = set(_readme_keys())
    assert len(documented) > 50
    settable = {k for k, f in field_paths(Scenario).items() if not f.metadata.get("derived")}
    sidebar_only = {"hardware.gpu", "model.preset"}
    missing = sorted((documented | settable | sidebar_only) - set(covered))
    assert not missing, f"fields without a direction test: {missing}"
    # Tests of this file by name; those of tests/test_controls_<area>.py were checked when collected.
    assert all(callable(globals().get(name)) for name in covered.values() if "::" not in name)
