"""Activation offloading on the memory timeline (explorer/result/memory_timeline.py): an offloaded
layer's activations are stored by its forward, leave HBM when its device-to-host copy (a row of
the Gantt's ``offload`` lane) completes, come back when its host-to-device copy starts, and are
freed by the backward with the rest.

Closed forms: each copy row moves one offloaded layer's kept activations
(activations.offloaded_layer_bytes; the row's seconds times the host link's bytes per second), so
the curve jumps down by exactly that at a device-to-host row's end and up by it at a host-to-device
row's start; the curve's maximum lies between the report's kept peak and the report's peak (which
adds one offloaded layer in flight, Transformer Engine's double buffer)."""
from __future__ import annotations

import pytest

from explorer.result.memory_timeline import memory_timeline
from explorer.result.timeline import build_timeline
from explorer.scenario import apply_overrides, from_dict
from explorer.simulate import Result, simulate
from explorer.workloads.transformer.activations import offloaded_layer_bytes

MB, OFFLOADED = 8, 2


def _raw(gpu_over: dict, offload: int) -> dict:
    """An 8-layer Llama-like model (4K tokens, micro-batch 1) on one GPU, ``offload`` of its layers'
    activations offloaded (the setup of tests/test_offload_timeline.py)."""
    raw = {"model": {"layers": 8, "hidden": 4096, "heads": 32, "kv_heads": 8, "vocab": 32000,
                     "seq_len": 4096, "ffn_kind": "swiglu", "ffn_hidden": 14336, "dropout": False},
           "training": {"global_batch": MB, "micro_batch": 1, "offload_activations_layers": offload},
           "hardware": {"gpu": "h100-sxm"}, "cluster": {"gpus_per_node": 1, "nodes": 1},
           "parallelism": {"tp": 1, "pp": 1}}
    return apply_overrides(raw, gpu_over)


def _jump(points: tuple, at: float) -> float:
    """The curve's jump at time ``at`` (after minus before; 0 when it is continuous there)."""
    same = [b for t, b in points if t == at]
    return same[-1] - same[0] if len(same) > 1 else 0.0


def _copies(res: Result) -> list[dict]:
    tl = build_timeline(res.tasks, tuple(c.name for c in res.classes))
    return [r for r in tl.rows() if r["lane"] == "offload"]


@pytest.mark.parametrize("gpu", [{"hardware.gpu.pcie_GBps": 25.0}, {"hardware.gpu": "gb200"}],
                         ids=["pcie4", "gb200-c2c"])
def test_offloaded_activations_leave_hbm_when_copied_out_and_return_when_copied_back(gpu):
    off = simulate(from_dict(_raw(gpu, OFFLOADED)))
    sc = off.scenario
    layer = offloaded_layer_bytes(sc, False, sc.training.micro_batch * sc.model.seq_len)
    assert 0.5e9 < layer < 0.65e9
    curve = memory_timeline(off)[0]
    rows = _copies(off)
    assert len(rows) == 2 * OFFLOADED * MB
    for r in rows:
        if r["detail"].startswith("device→host"):
            assert _jump(curve.points, r["end_s"]) == pytest.approx(-layer, rel=1e-9)
        else:
            assert _jump(curve.points, r["start_s"]) == pytest.approx(layer, rel=1e-9)
    # Between the kept peak (the report's, less one offloaded layer in flight) and the report's.
    mem = off.memory_by_class[0]
    kept = mem.activations - curve.transient
    assert kept * (1 - 1e-9) <= curve.peak_activations <= mem.activations
    assert curve.points[-1][1] == pytest.approx(0.0, abs=1e-6 * curve.peak_activations)
    times = [t for t, _ in curve.points]
    assert times == sorted(times) and curve.points[0] == (0.0, 0.0)


def test_without_offloading_the_curve_keeps_every_layer_until_its_backward():
    """The same run without offloading: no jump anywhere (passes rise and fall linearly), and its
    peak holds the 2 offloaded layers more than the offloading run's kept peak."""
    gpu = {"hardware.gpu.pcie_GBps": 25.0}
    base = simulate(from_dict(_raw(gpu, 0)))
    off = simulate(from_dict(_raw(gpu, OFFLOADED)))
    plain = memory_timeline(base)[0]
    assert all(t1 > t0 for (t0, _), (t1, _) in zip(plain.points, plain.points[1:], strict=False))
    sc = off.scenario
    layer = offloaded_layer_bytes(sc, False, sc.training.micro_batch * sc.model.seq_len)
    curve = memory_timeline(off)[0]
    assert plain.peak_activations == pytest.approx(curve.peak_activations + OFFLOADED * layer, rel=1e-9)


def test_memory_view_says_where_offloaded_activations_go():
    from app_support import run_app
    at = run_app(scenario="teaching-8gpu", view="memory", **{"training.offload_activations_layers": 1})
    assert not at.exception and not at.error
    assert any("leave the GPU when their copy to the host ends" in c.value for c in at.caption)
    plain = run_app(scenario="teaching-8gpu", view="memory")
    assert not any("leave the GPU" in c.value for c in plain.caption)
