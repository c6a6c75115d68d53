"""Explain this bar (explorer/teaching/explain.py): the derivation of a Gantt bar from its hover
data, with this scenario's numbers — a compute bar's achieved rate and efficiency, a collective's
bus bytes, data time and latency, and the tier that limits it."""
from __future__ import annotations

import re

import pytest

from explorer.analysis.gantt_bar import GanttBar
from explorer.network.collectives import bus_factor
from explorer.teaching.explain import bar_peak, explain_bar
from explorer.ui.cache import view_data

from conftest import ROOT


def _bars(name: str):
    import json

    from explorer.config.loading import load_raw
    data = view_data(json.dumps(load_raw(ROOT / "scenarios" / f"{name}.yaml"), sort_keys=True, default=str))
    return data, [(tr.name, GanttBar.from_customdata(list(cd))) for tr in data.gantt.data
                  for cd in (tr.customdata or [])]


def test_compute_bar_rate_and_efficiency():
    data, bars = _bars("teaching-8gpu")
    kind, bar = next((k, c) for k, c in bars if k == "forward" and c.flops)
    flops, dur_ms = bar.flops, bar.duration_ms
    text = explain_bar(bar, 989.0, "H100 SXM", "bf16")
    rate = flops / (dur_ms / 1e3) / 1e12
    assert f"{rate:,.0f} TFLOP/s" in text and f"{rate / 989:.0%}" in text and "Shorter with" in text


def test_an_fp32_bar_on_a_v100_is_measured_against_its_cuda_cores():
    """A V100 has no TF32: a compute bar of an fp32 run reads against its 14 TFLOPS fp32 peak
    (hardware.gpu.fp32_tflops), never above 100 % of it (the bf16 peak of 112 had been used)."""
    from explorer.scenario import load
    sc = load(ROOT / "scenarios" / "pipedream-vgg16.yaml", {"training.dtype": "fp32"})
    peak, dtype = bar_peak(sc.hardware.gpu, "fp32")
    assert (peak, dtype) == (14, "fp32")
    assert bar_peak(sc.hardware.gpu, "fp16") == (112, "bf16")
    from explorer.engine.records import PassInfo
    from explorer.simulate import simulate
    task = next(t for t in simulate(sc).tasks if isinstance(t.info, PassInfo) and t.info.flops)
    share = task.info.flops / task.duration / 1e12 / peak
    assert 0.2 < share < 1.0


def test_collective_bar_bus_bytes_and_latency():
    data, bars = _bars("megatron-gpt3-175b")
    kind, bar = next((k, c) for k, c in bars if k in ("dp", "tp") and c.bytes and c.busbw_GBps)
    nbytes, group, busbw = bar.bytes, bar.group, bar.busbw_GBps
    text = explain_bar(bar, 312.0, "A100", "bf16")
    ops = ("all-reduce", "reduce-scatter", "all-gather", "all-to-all")
    op = next((o for o in ops if o in bar.detail), "send-recv")
    factor = bus_factor(op, int(group))
    assert f"{factor:.3f}" in text and f"{nbytes * factor / 1e6:,.2f} MB" in text
    call_ms = float(re.search(r"it achieved: ([0-9.]+) ms for these bytes", text).group(1))
    assert call_ms == pytest.approx(nbytes * factor / (busbw * 1e9) * 1e3, abs=1e-3)
    assert "limited by" in text


def test_a_blocking_tp_bar_counts_its_calls():
    """A TP bar on the compute lane holds every all-reduce of its pass: GPT-3 175B on 8 stages has 12
    layers per stage and 2 TP all-reduces per layer forward (Megatron's f and g), so 24 calls of 50.33 MB
    (1 x 2048 x 12288 x 2 bytes), and the bar is 24 x one call's time, not one call plus "latency"."""
    data, bars = _bars("megatron-gpt3-175b")
    bar = next(c for k, c in bars if k == "tp" and c.bytes and c.busbw_GBps and c.detail == "all-reduce")
    text = explain_bar(bar, 312.0, "A100", "bf16")
    assert bar.bytes == 2048 * 12288 * 2 and bar.group == 8
    call_ms = float(re.search(r"it achieved: ([0-9.]+) ms for these bytes", text).group(1))
    calls = int(re.search(r"repeats this call about \*\*([0-9,]+) times", text).group(1))
    assert calls == 24 and calls * call_ms == pytest.approx(bar.duration_ms, rel=2e-3)


def test_aggregated_bars_say_so():
    """An aggregated bar's row (5 fields: operations, span, lane, row, busy share) has no record."""
    assert GanttBar.from_customdata(["dp", 1, 2, 3, 4]) is None
    assert "aggregated" in explain_bar(None, 1.0, "x", "bf16")


def test_a_bars_record_survives_the_figure_json():
    """What a click hands back (the figure's JSON customdata row) reads back as the record the Gantt
    wrote: a missing micro-batch shows as a dash and reads back as None; the hover templates name
    the fields at the row's positions."""
    import json

    from explorer.figures.gantt import COMM_HOVER

    data, _ = _bars("teaching-8gpu")
    rows = [(tr["name"], row) for tr in json.loads(data.gantt.to_json())["data"]
            for row in tr.get("customdata") or []]
    bars = [GanttBar.from_customdata(row) for _, row in rows]
    assert rows and all(b is not None and b.customdata() == row
                        for b, (_, row) in zip(bars, rows, strict=True))
    optimizer = next(b for (k, _), b in zip(rows, bars, strict=True) if k == "optimizer")
    assert optimizer.micro_batch is None and optimizer.customdata()[1] == "–"
    assert "duration %{customdata[5]:.3f} ms" in COMM_HOVER and GanttBar._fields[5] == "duration_ms"
