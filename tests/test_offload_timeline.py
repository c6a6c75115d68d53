"""Activation offloading on the timeline (issue 34, item 5): the host copies of the offloaded
layers are drawn on their own ``offload`` lane (the copy engine, beside the compute stream), and
what they stall is named ``offload`` in the breakdown, only when offloading is on.

Closed forms: an offloaded layer copies its kept activations (activations.offloaded_layer_bytes)
over the host link once each way per micro-batch, so the bars add up to
2 x offloaded layers x micro-batches x bytes / host-link bandwidth; with one pipeline stage the
exposed part is exactly what the iteration time grows by (the stall is the only change)."""
from __future__ import annotations

import pytest

from explorer.analysis.offload import with_offload
from explorer.figures.gantt import gantt
from explorer.result.timeline import build_timeline
from explorer.scenario import apply_overrides, from_dict
from explorer.simulate import Result, simulate
from explorer.vocabulary import CATEGORIES
from explorer.workloads.transformer.activations import offloaded_layer_bytes

PCIE4_GBPS = 25.0     # PCIe 4.0 x16 per direction, ~25 GB/s achievable (32 GB/s raw, PCI-SIG 4.0 spec)
GB200_C2C_GBPS = 450.0  # NVLink-C2C per direction (host_link.HOST_LINK_GBPS["gb200"])
MB = 8                  # micro-batches per iteration (global batch 8, micro-batch 1, dp 1)
OFFLOADED = 2           # layers offloaded per chunk


def _raw(pp: int, **over) -> dict:
    """An 8-layer Llama-like model (4K tokens, micro-batch 1) on ``pp`` stages of one GPU each."""
    raw = {"model": {"layers": 8, "hidden": 4096, "heads": 32, "kv_heads": 8, "vocab": 32000,
                     "seq_len": 4096, "ffn_kind": "swiglu", "ffn_hidden": 14336, "dropout": False},
           "training": {"global_batch": MB, "micro_batch": 1},
           "hardware": {"gpu": "h100-sxm"}, "cluster": {"gpus_per_node": pp, "nodes": 1},
           "parallelism": {"tp": 1, "pp": pp}}
    return apply_overrides(raw, over)


def _pair(pp: int, **over) -> tuple[Result, Result]:
    """(without offloading, with OFFLOADED layers per chunk offloaded) of one setup."""
    base = simulate(from_dict(_raw(pp, **over)))
    off = simulate(from_dict(_raw(pp, **over, **{"training.offload_activations_layers": OFFLOADED})))
    return base, off


def _offload_rows(res: Result, **kw) -> list[dict]:
    tl = build_timeline(res.tasks, tuple(c.name for c in res.classes), **kw)
    return [r for r in tl.rows() if r["lane"] == "offload"]


def _layer_copy_s(res: Result, GBps: float) -> float:
    """Seconds one offloaded layer's copy takes each way: its bytes over the host link."""
    sc = res.scenario
    return offloaded_layer_bytes(sc, False, sc.training.micro_batch * sc.model.seq_len) / (GBps * 1e9)


def test_offload_bars_on_pcie4_add_up_to_the_closed_form_and_the_stall_is_the_growth():
    """One stage over PCIe 4 (25 GB/s): a ~0.57 GB layer copy (~23 ms) outlasts a layer's forward, so
    the copies stall; the bars are 2 x 2 layers x 8 micro-batches, each bytes / 25 GB/s, and the
    breakdown's offload seconds are the iteration's growth to float rounding."""
    base, off = _pair(1, **{"hardware.gpu.pcie_GBps": PCIE4_GBPS})
    rows = _offload_rows(off)
    per = _layer_copy_s(off, PCIE4_GBPS)
    assert 0.02 < per < 0.025                                 # ~0.57 GB / 25 GB/s
    assert len(rows) == 2 * OFFLOADED * MB
    assert [r["duration_s"] for r in rows] == pytest.approx([per] * len(rows), rel=1e-12)
    assert sum(r["duration_s"] for r in rows) == pytest.approx(2 * OFFLOADED * MB * per, rel=1e-12)
    assert {r["kind"] for r in rows} == {"offload"}
    assert sum(r["detail"].startswith("device→host") for r in rows) == OFFLOADED * MB
    grown = off.iteration_time_s - base.iteration_time_s
    assert grown > 0.3 * off.iteration_time_s
    assert off.breakdown_s["offload"] == pytest.approx(grown, rel=1e-9)
    assert sum(off.breakdown_s.values()) == pytest.approx(off.iteration_time_s, rel=1e-12)
    # The compute the passes do is the plain run's: only the stall moved to "offload".
    assert off.breakdown_s["compute"] == pytest.approx(base.breakdown_s["compute"], rel=1e-9)
    assert off.bottleneck.startswith("Offload takes")


def test_copies_share_one_copy_engine_and_follow_the_forward():
    """On each GPU the copies never overlap one another (one copy engine per GPU, serialised), a
    device-to-host copy starts after the forward of its layer began, and every copy starts
    inside the iteration; two stages: both draw their own copies."""
    _, off = _pair(2, **{"hardware.gpu.pcie_GBps": PCIE4_GBPS})
    rows = _offload_rows(off)
    assert {r["gpu_class"] for r in rows} == {0, 1}
    for cls in (0, 1):
        mine = sorted((r for r in rows if r["gpu_class"] == cls), key=lambda r: r["start_s"])
        assert len(mine) == 2 * OFFLOADED * MB
        for a, b in zip(mine, mine[1:], strict=False):
            assert b["start_s"] >= a["end_s"] - 1e-12
    forwards: dict[tuple, float] = {}
    for r in build_timeline(off.tasks, ("a", "b")).rows():
        if r["kind"] == "forward":                    # the first layer's row: the pass's start
            forwards.setdefault((r["gpu_class"], r["micro_batch"]), r["start_s"])
    for r in rows:
        if r["detail"].startswith("device→host"):
            assert r["start_s"] > forwards[(r["gpu_class"], r["micro_batch"])]
        assert 0 <= r["start_s"] < off.iteration_time_s


def test_a_coarse_timeline_draws_one_bar_per_pass_with_the_same_total():
    _, off = _pair(1, **{"hardware.gpu.pcie_GBps": PCIE4_GBPS})
    rows = _offload_rows(off, max_segments=1)
    assert len(rows) == 2 * MB                                # one forward and one backward per micro-batch
    per = _layer_copy_s(off, PCIE4_GBPS)
    assert sum(r["duration_s"] for r in rows) == pytest.approx(2 * OFFLOADED * MB * per, rel=1e-12)


def test_on_nvlink_c2c_the_copies_are_drawn_and_hidden():
    """GB200's 450 GB/s NVLink-C2C: a ~0.57 GB copy takes ~1.3 ms, under the layer's forward, so
    nothing is exposed and the iteration is the plain run's; the bars are still drawn."""
    base, off = _pair(1, **{"hardware.gpu": "gb200"})
    rows = _offload_rows(off)
    per = _layer_copy_s(off, GB200_C2C_GBPS)
    assert len(rows) == 2 * OFFLOADED * MB
    assert sum(r["duration_s"] for r in rows) == pytest.approx(2 * OFFLOADED * MB * per, rel=1e-12)
    assert off.breakdown_s["offload"] == pytest.approx(0.0, abs=1e-12)
    assert off.iteration_time_s == pytest.approx(base.iteration_time_s, rel=1e-12)
    assert not off.bottleneck.startswith("Offload")


def test_without_offloading_there_is_no_offload_key_lane_or_thread():
    base, _ = _pair(1)
    assert list(base.breakdown_s) == list(CATEGORIES)
    assert _offload_rows(base) == []
    tl = build_timeline(base.tasks, ("a",))
    assert "offload" not in {e["args"]["name"] for e in tl.to_trace()["traceEvents"]
                             if e.get("name") == "thread_name"}


def test_with_offload_keeps_the_sum_and_adds_the_key_only_when_copying():
    bd = dict.fromkeys(CATEGORIES, 1.0)
    assert with_offload(bd, 0.0, 0.0) is bd
    got = with_offload(bd, 2.0, 0.25)
    assert list(got)[:3] == ["compute", "recompute", "offload"]
    assert got["compute"] == 0.75 and got["offload"] == 0.25
    assert sum(got.values()) == sum(bd.values())
    assert with_offload(bd, 2.0, 5.0)["offload"] == 1.0       # never more than the compute it is in


def test_the_gantt_draws_an_offload_lane_with_every_copy():
    """The figure (plotly): an ``offload`` trace with one bar per copy on each class's own
    ``· offload`` lane, and the Chrome trace gets an ``offload`` thread."""
    _, off = _pair(2, **{"hardware.gpu.pcie_GBps": PCIE4_GBPS})
    tl = build_timeline(off.tasks, ("stage 0", "stage 1"))
    fig, _ = gantt(tl.columns, ("stage 0", "stage 1"), off.iteration_time_s)
    traces = [t for t in fig.data if t.name == "offload"]
    assert len(traces) == 1
    tr = traces[0]
    assert len(tr.x) == 2 * 2 * OFFLOADED * MB
    assert set(tr.y) == {"stage 0 · offload", "stage 1 · offload"}
    per = _layer_copy_s(off, PCIE4_GBPS)
    assert sum(tr.x) == pytest.approx(2 * 2 * OFFLOADED * MB * per * 1e3, rel=1e-9)   # ms axis
    threads = {e["args"]["name"] for e in tl.to_trace()["traceEvents"] if e.get("name") == "thread_name"}
    assert "offload" in threads


def test_a_clicked_offload_bar_is_explained_as_a_host_copy():
    """The bar's explanation is the host link's, not "memory-bound work" (the fallback of a bar
    without FLOPs or bytes)."""
    from explorer.analysis.gantt_bar import GanttBar
    from explorer.teaching.explain import explain_bar
    _, off = _pair(1, **{"hardware.gpu.pcie_GBps": PCIE4_GBPS})
    tl = build_timeline(off.tasks, ("stage 0",))
    fig, _ = gantt(tl.columns, ("stage 0",), off.iteration_time_s)
    tr = next(t for t in fig.data if t.name == "offload")
    bar = GanttBar.from_customdata(tr.customdata[0])
    text = explain_bar(bar, 989.0, "H100 SXM", "bf16")
    assert "host link" in text and "device→host" in text
    assert "Memory-bound" not in text
    assert bar.duration_ms == pytest.approx(_layer_copy_s(off, PCIE4_GBPS) * 1e3, rel=1e-9)


def test_in_bands_the_copies_are_a_thin_line_under_each_class():
    """Many classes (bands): each class's copies at its own band offset, below the pp band."""
    from explorer.figures.gantt import BAND_OFFSETS
    _, off = _pair(2, **{"hardware.gpu.pcie_GBps": PCIE4_GBPS})
    tl = build_timeline(off.tasks, ("stage 0", "stage 1"))
    fig, _ = gantt(tl.columns, ("stage 0", "stage 1"), off.iteration_time_s, bands=True)
    tr = next(t for t in fig.data if t.name == "offload")
    assert set(tr.y) == {0 + BAND_OFFSETS["offload"][0], 1 + BAND_OFFSETS["offload"][0]}
    assert BAND_OFFSETS["offload"][0] > BAND_OFFSETS["pp"][0]
