"""communication.compression (explorer/network/compression.py): bytes per element of each kind,
the collectives it needs, encode/decode HBM work and error-feedback memory, and their effect on the
outer synchronisation of DiLoCo and the gossip exchange."""
from __future__ import annotations

import pytest

from explorer.config.compression import Compression
from explorer.physics.hardware import hbm_efficiency
from explorer.scenario import ScenarioError, load
from explorer.simulate import simulate
from explorer.workloads.registry import compression_plan as plan
from explorer.workloads.registry import powersgd_factor

from conftest import ROOT

SD = ROOT / "scenarios" / "streaming-diloco-1gbps.yaml"
DILOCO = {"training.sync.kind": "diloco", "training.sync.outer_dtype": "fp32"}


def _model():
    return load(SD).model


@pytest.mark.parametrize("kind, wire, ops", [
    ("none", 4.0, ("all-reduce",)), ("fp16", 2.0, ("all-reduce",)),
    ("fp8", 1.0, ("all-to-all", "all-gather")), ("int4", 0.5 + 2 / 128, ("all-to-all", "all-gather")),
    ("1bit", 1 / 8, ("all-to-all", "all-gather")),
])
def test_quantisers_wire_bytes_and_collectives(kind, wire, ops):
    p = plan(Compression(kind), _model(), 1, 8)
    assert p.wire == pytest.approx(wire) and tuple(op for op, _ in p.ops) == ops
    assert p.ef_bytes == (0.0 if kind in ("none", "fp16") else 4.0)


def test_topk_is_all_gathered_and_grows_with_the_group():
    """Each rank's entries differ (value + index, 8 bytes each): the all-gather buffer is n x kept."""
    for n in (2, 8, 64):
        p = plan(Compression("topk", ratio=0.01), _model(), 1, n)
        assert p.wire == pytest.approx(0.08) and p.ops == (("all-gather", pytest.approx(n * 0.08)),)


def test_powersgd_sends_rank_r_factors():
    """Vogels et al. 2019: a rank-r approximation of an m x n matrix sends r(m + n) numbers; for
    Llama 3 8B (h 4096, 8 KV heads, FFN 14336, SwiGLU) at rank 4 that is under 0.2% of the gradient."""
    m = _model()
    h, f, kv = 4096, 14336, 1024
    shapes = [(h, h + 2 * kv), (h, h), (h, f), (h, f), (f, h)]
    expect = sum(4 * (a + b) for a, b in shapes) / sum(a * b for a, b in shapes)
    assert powersgd_factor(m, 1, 4) == pytest.approx(expect) and expect < 0.002
    assert powersgd_factor(m, 8, 4) > powersgd_factor(m, 1, 4)        # TP slices are skinnier
    p = plan(Compression("powersgd", rank=4), m, 1, 8)
    assert p.wire == pytest.approx(4 * expect) and [op for op, _ in p.ops] == ["all-reduce", "all-reduce"]


def test_coding_time_is_hbm_passes():
    p = plan(Compression("1bit"), _model(), 1, 8)
    assert p.seconds(1e9, 2e12) == pytest.approx(1e9 * ((12 + 1 / 8) + (2 / 8 + 4)) / 2e12)
    assert plan(Compression("none"), _model(), 1, 8).seconds(1e9, 2e12) == 0.0


def test_outer_sync_bytes_follow_the_wire_ratio():
    """DiLoCo's WAN bytes per sync: fp16 half of fp32; 1-bit 1/32 on the all-to-all + all-gather."""
    fp32 = simulate(load(SD, DILOCO)).sync_window
    half = simulate(load(SD, {**DILOCO, "communication.compression.kind": "fp16"})).sync_window
    one = simulate(load(SD, {**DILOCO, "communication.compression.kind": "1bit"})).sync_window
    assert half.wan_bytes_per_sync == pytest.approx(fp32.wan_bytes_per_sync / 2, rel=1e-9)
    # Two datacenters: a ring all-reduce sends 2(D-1)/D = 1 slice; all-to-all + all-gather also 1.
    assert one.wan_bytes_per_sync == pytest.approx(fp32.wan_bytes_per_sync / 32, rel=1e-9)
    assert one.sync_s < half.sync_s < fp32.sync_s


def test_error_feedback_adds_a_residual_per_parameter_of_the_slice():
    """The outer gradient's residual covers the GPU's slice; the inner data-parallel gradients,
    compressed too, keep one per parameter the GPU holds."""
    base = simulate(load(SD, DILOCO))
    one = simulate(load(SD, {**DILOCO, "communication.compression.kind": "1bit"}))
    params = base.memory.params / 2                                     # bf16 weights
    assert one.memory.optimizer - base.memory.optimizer == pytest.approx(
        4 * base.sync_window.slice_params + 4 * params)


def test_outer_dtype_and_compression_are_one_choice():
    with pytest.raises(ScenarioError) as e:
        load(SD, {"communication.compression.kind": "1bit"})          # the scenario's outer_dtype is int4
    assert e.value.field == "training.sync.outer_dtype"


CLOUD = ROOT / "scenarios" / "cloud-25g-dp.yaml"
NVLINK = {"cluster.nodes": 1, "parallelism.dp": 8, "cluster.scale_up.kind": "nvswitch",
          "cluster.scale_up.bandwidth_GBps": 300, "training.global_batch": 256}


def _cloud(kind: str, **over):
    return simulate(load(CLOUD, {"communication.compression.kind": kind, **over}))


def test_encode_and_decode_run_on_the_compute_stream():
    """One encode before and one decode after each compressed bucket task, on the compute stream,
    lasting the plan's HBM passes over the bucket's elements."""
    res = _cloud("1bit")
    coders = [t for t in res.tasks if t.kind == "compress"]
    buckets = [t for t in res.tasks if t.kind == "dp"]
    assert coders and len(coders) == 2 * len(buckets) and all(t.stream == "compute" for t in coders)
    sc = res.scenario
    p = plan(sc.communication.compression, sc.model, 1, 64)
    elements = sum(t.info.bucket_bytes * t.info.buckets for t in buckets) / 4    # fp32 gradients
    hbm = sc.hardware.gpu.hbm_GBps * 1e9 * hbm_efficiency(sc.hardware.gpu)     # achieved rate
    coding = elements * (p.encode_bytes + p.decode_bytes) / hbm
    assert sum(t.duration for t in coders) == pytest.approx(coding)


def test_compression_pays_on_25_gbe_and_not_on_nvlink():
    """25 GbE: every compressor beats none (1.13 s); one NVSwitch node: every compressor is slower,
    the all-reduce being hidden already and the encode/decode added to the compute."""
    none = _cloud("none").iteration_time_s
    for kind in ("fp16", "1bit", "powersgd"):
        assert _cloud(kind).iteration_time_s < 0.7 * none
    local = _cloud("none", **NVLINK).iteration_time_s
    for kind in ("fp16", "1bit", "powersgd"):
        assert _cloud(kind, **NVLINK).iteration_time_s > local


def test_dp_bytes_follow_the_wire_and_the_residual_is_held():
    none, one = _cloud("none"), _cloud("1bit")
    # 1-bit: all-to-all + all-gather of 1/8 byte per element against an fp32 ring all-reduce.
    assert one.comm_bytes_per_gpu["dp"] == pytest.approx(none.comm_bytes_per_gpu["dp"] * (2 / 8) / (2 * 4),
                                                         rel=1e-9)
    assert one.memory.optimizer - none.memory.optimizer == pytest.approx(4 * none.memory.params / 2)


@pytest.mark.parametrize("kind, overlaps", [("powersgd", True), ("fp16", True), ("int4", True),
                                            ("1bit", False)])
def test_hooked_compressors_send_buckets_during_the_backward(kind, overlaps):
    """With dp_overlap, DDP communication hooks (fp16, PowerSGD) and ZeRO++'s quantised reduction
    send each bucket as it becomes ready, during the backward; 1-bit Adam compresses in the
    optimizer step, so its first reduction starts only after the last backward pass ends."""
    from explorer.engine.scheduler import run
    from explorer.taskgraph.make import iteration_builder

    sc = load(ROOT / "scenarios" / "resnet50-cloud-dp.yaml", {"communication.compression.kind": kind})
    g = iteration_builder(sc).build()
    run(g)
    backward_end = max(t.end for t in g.tasks if t.stream == "compute" and t.kind == "backward")
    first_dp = min(t.start for t in g.tasks if t.stream == "dp")
    assert (first_dp < backward_end) is overlaps
    # The encode and decode are still charged to the compute stream, whichever the order.
    assert sum(t.duration for t in g.tasks if t.kind == "compress") > 0
