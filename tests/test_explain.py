"""Explain this bar (explorer/teaching/explain.py): the derivation of a Gantt bar from its hover
data, with this scenario's numbers — a compute bar's achieved rate and efficiency, a collective's
bus bytes, data time and latency, and the tier that limits it."""
from __future__ import annotations

import re

import pytest

from explorer.network.collectives import bus_factor
from explorer.teaching.explain import explain_bar
from explorer.ui.cache import view_data

from conftest import ROOT


def _bars(name: str):
    import json

    from explorer.config.loading import load_raw
    data = view_data(json.dumps(load_raw(ROOT / "scenarios" / f"{name}.yaml"), sort_keys=True, default=str))
    return data, [(tr.name, list(cd)) for tr in data.gantt.data for cd in (tr.customdata or [])]


def test_compute_bar_rate_and_efficiency():
    data, bars = _bars("teaching-8gpu")
    kind, custom = next((k, c) for k, c in bars if k == "forward" and c[8])
    flops, dur_ms = custom[8], custom[5]
    text = explain_bar(custom, 989.0, "H100 SXM", "bf16")
    rate = flops / (dur_ms / 1e3) / 1e12
    assert f"{rate:,.0f} TFLOP/s" in text and f"{rate / 989:.0%}" in text and "Shorter with" in text


def test_collective_bar_bus_bytes_and_latency():
    data, bars = _bars("megatron-gpt3-175b")
    kind, custom = next((k, c) for k, c in bars if k in ("dp", "tp") and c[9] and c[11])
    nbytes, group, busbw = custom[9], custom[10], custom[11]
    text = explain_bar(custom, 312.0, "A100", "bf16")
    ops = ("all-reduce", "reduce-scatter", "all-gather", "all-to-all")
    op = next((o for o in ops if o in custom[3]), "send-recv")
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
    custom = next(c for k, c in bars if k == "tp" and c[9] and c[11] and c[3] == "all-reduce")
    text = explain_bar(custom, 312.0, "A100", "bf16")
    assert custom[9] == 2048 * 12288 * 2
    call_ms = float(re.search(r"it achieved: ([0-9.]+) ms for these bytes", text).group(1))
    calls = int(re.search(r"repeats this call about \*\*([0-9,]+) times", text).group(1))
    assert calls == 24 and calls * call_ms == pytest.approx(custom[5], rel=2e-3)


def test_aggregated_bars_say_so():
    assert "aggregated" in explain_bar(["dp", 1, 2, 3, 4], 1.0, "x", "bf16")
