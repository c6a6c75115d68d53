"""Direction test for ``hardware.power_cap_W`` (explorer/physics/power.py), collected by
tests/test_controls.py through ``COVERED``."""
from __future__ import annotations

from functools import cache

import pytest

from explorer.physics.power import capped_rate_ratio
from explorer.scenario import apply_overrides, from_dict
from explorer.simulate import simulate

COVERED = {"hardware.power_cap_W": "test_power_cap_slows_compute_but_less_than_the_clock"}


def _raw() -> dict:
    """Two Llama-like layers on one H100 (700 W board): compute plus memory-bound kernels, no network."""
    return {"model": {"layers": 2, "hidden": 4096, "heads": 32, "vocab": 1024, "seq_len": 4096,
                      "ffn_kind": "swiglu", "ffn_hidden": 14336, "dropout": False},
            "training": {"global_batch": 2, "micro_batch": 1},
            "hardware": {"gpu": "h100-sxm"},
            "cluster": {"gpus_per_node": 1, "nodes": 1}}


@cache
def _time(cap: float | None) -> float:
    over = {} if cap is None else {"hardware.power_cap_W": cap}
    return simulate(from_dict(apply_overrides(_raw(), over))).iteration_time_s


def test_power_cap_slows_compute_but_less_than_the_clock():
    """A lower limit lowers the SM clock: strictly slower as the cap falls; a cap at the board power
    is the default; and since element-wise (HBM-bound) kernels keep their rate, the step slows by
    less than the GEMM clock does (500 W: clock 0.806 -> GEMMs 1.24x slower)."""
    t = [_time(c) for c in (None, 700, 600, 500, 400)]
    assert t[0] == t[1]
    assert t[1] < t[2] < t[3] < t[4]
    slow = t[3] / t[1]
    assert 1.10 < slow < 1 / capped_rate_ratio(500, 700)


@pytest.mark.parametrize("cap", [700, 500])
def test_gemm_rate_carries_the_clock_exactly(cap):
    """The GEMM large-GEMM efficiency under a cap is the board-power one times the clock fraction."""
    from explorer.physics.hardware import gemm_large_efficiency
    base = from_dict(_raw())
    capped = from_dict(apply_overrides(_raw(), {"hardware.power_cap_W": cap}))
    for dtype in ("bf16", "fp8"):
        assert gemm_large_efficiency(capped, dtype) == pytest.approx(
            gemm_large_efficiency(base, dtype) * capped_rate_ratio(cap, 700), rel=1e-12)
