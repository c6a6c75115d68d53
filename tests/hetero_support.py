"""Small heterogeneous clusters for tests/test_heterogeneous*.py: the teaching model (24 layers,
hidden 2048) on datacenters of one 8-GPU node each, and a ``half-h100`` preset (an H100 at half
the FLOP rate and half the HBM bandwidth, so every kernel takes exactly twice as long)."""
from __future__ import annotations

import copy
from typing import Any

import pytest

from explorer.config.loading import load_raw
from explorer.config.presets import gpu_presets
from explorer.scenario import Scenario, from_dict
from explorer.variants import hetero

from conftest import ROOT

HALF_KEYS = ("peak_tflops", "fp8_tflops", "hbm_GBps", "measured_matmul_tflops", "measured_fp8_matmul_tflops")


@pytest.fixture(name="half_h100")
def half_h100_fixture(monkeypatch):
    """Register preset ``half-h100`` for the test (and forget it after)."""
    g = copy.deepcopy(gpu_presets()["h100-sxm"])
    for k in HALF_KEYS:
        g[k] = g[k] / 2
    g["name"] = "half H100"
    monkeypatch.setitem(gpu_presets(), "half-h100", g)
    hetero.preset_gpu.cache_clear()
    yield "half-h100"
    hetero.preset_gpu.cache_clear()


def raw(dcs: list[dict[str, Any]], **par: Any) -> dict[str, Any]:
    """The teaching model on datacenters ``dcs`` (``{name, nodes, gpu}``), DP only by default, no
    overlap of the gradient reduction (so its closed form is compute, then sync), 2 micro-batches per
    replica, a 400 Gb/s 1 ms WAN."""
    r = load_raw(ROOT / "scenarios" / "teaching-8gpu.yaml")
    nodes = sum(d["nodes"] for d in dcs)
    r["cluster"] = {"gpus_per_node": 8, "datacenters": copy.deepcopy(dcs),
                    "scale_up": {"kind": "nvswitch", "bandwidth_GBps": 450},
                    "scale_across": {"bandwidth_Gbps": 400, "latency_ms": 1}}
    r["parallelism"] = {"tp": 1, "pp": 1, "zero": 0, "span": "dp", **par}
    replica = r["parallelism"]["tp"] * r["parallelism"]["pp"]
    r["training"]["global_batch"] = 2 * nodes * 8 // replica
    r["communication"]["dp_overlap"] = False
    return r


def scenario(dcs: list[dict[str, Any]], **par: Any) -> Scenario:
    return from_dict(raw(dcs, **par))
