"""training.fp8_recipe: what each FP8 scaling recipe costs (explorer/config/fp8_recipes.py).

Closed forms of one Llama 3 70B layer's cast traffic per recipe (TP 4, 8,192 tokens: the FP8 GEMMs
are QKV 8192 x 2560 x 8192, output projection 8192 x 8192 x 2048, gate+up 8192 x 14336 x 8192,
down 8192 x 8192 x 7168), the direction of the control on H100 and B200, the scaling state kept in
memory, and the one-line refusal of MXFP8 on a GPU without MX tensor cores.
"""
from __future__ import annotations

from functools import cache

import pytest

from explorer.config.fp8_recipes import (
    AMAX_HISTORY_LEN,
    BLOCKWISE_GEMM_RATE,
    cast_bytes,
    fp8_state_bytes,
    resolved_recipe,
)
from explorer.estimate import estimate_many
from explorer.scenario import ScenarioError, from_dict, load_raw
from explorer.simulate import simulate
from explorer.workloads.timing import GemmTimer
from explorer.workloads.transformer.layer import layer_cost

from conftest import ROOT

COVERED = {"training.fp8_recipe": "test_current_scaling_is_slower_than_delayed_on_h100"}

TOKENS = 8192
# Sum over the layer's FP8 GEMMs of k (the forward cast's input width) and of n (the backward
# gradient's width), Llama 3 70B at TP 4 (module docstring).
SUM_K = 8192 + 2048 + 8192 + 7168
SUM_N = 2560 + 8192 + 14336 + 8192


def _raw(gpu: str, recipe: str | None, layers: int = 80, dtype: str = "fp8") -> dict:
    training = {"global_batch": 16, "micro_batch": 1, "dtype": dtype}
    if recipe is not None:
        training["fp8_recipe"] = recipe
    return {"model": {"preset": "llama3-70b", "layers": layers}, "training": training,
            "hardware": {"gpu": gpu}, "cluster": {"gpus_per_node": 8, "nodes": 1},
            "parallelism": {"tp": 4, "pp": 2, "sequence_parallel": True}}


@cache
def _layer(gpu: str, recipe: str | None, dtype: str = "fp8"):
    return layer_cost(from_dict(_raw(gpu, recipe, dtype=dtype)), False)


def test_cast_bytes_per_element_per_recipe():
    """Delayed: fused forward cast writes FP8 + transpose (2 B), backward cast-transpose reads bf16
    and writes both layouts (4 B); current adds the amax read of the bf16 tensor (2 B) to each;
    blockwise two fp32 scales per 128 elements (1/16 B); MXFP8 two E8M0 scales per 32 (1/16 B)."""
    assert cast_bytes("delayed") == (2.0, 4.0)
    assert cast_bytes("current") == (4.0, 6.0)
    assert cast_bytes("blockwise") == (2 + 8 / 128, 4 + 8 / 128)
    assert cast_bytes("mxfp8") == (2 + 2 / 32, 4 + 2 / 32)


def test_delayed_layer_cast_traffic_is_the_closed_form():
    """FP8 minus BF16 forward/backward streams of one layer = the casts: forward 2 B x m x sum(k)
    plus the output projection's separate cast (2 B x m x 2048); backward 4 B x m x sum(n)."""
    fp8, bf16 = _layer("h100-sxm", "delayed"), _layer("h100-sxm", None, "bf16")
    fwd = fp8.fwd.stream_bytes - bf16.fwd.stream_bytes
    bwd = fp8.bwd_input.stream_bytes - bf16.bwd_input.stream_bytes
    assert fwd == pytest.approx(2 * TOKENS * SUM_K + 2 * TOKENS * 2048, rel=1e-12)
    assert bwd == pytest.approx(4 * TOKENS * SUM_N, rel=1e-12)


@pytest.mark.parametrize("recipe, extra_f, extra_b", [
    ("current", 2.0, 2.0), ("blockwise", 1 / 16, 1 / 16)])
def test_recipe_adds_its_cast_bytes_to_one_layer(recipe, extra_f, extra_b):
    """Each recipe's extra bytes per element over delayed, times the layer's m x sum(k) (forward)
    and m x sum(n) (backward), H100."""
    base, other = _layer("h100-sxm", "delayed"), _layer("h100-sxm", recipe)
    assert other.fwd.stream_bytes - base.fwd.stream_bytes == pytest.approx(extra_f * TOKENS * SUM_K)
    bwd = other.bwd_input.stream_bytes - base.bwd_input.stream_bytes
    assert bwd == pytest.approx(extra_b * TOKENS * SUM_N)


def test_mxfp8_on_b200_writes_the_column_wise_copy_and_scales_delayed_does_not():
    """On B200 both run at the FP8 rate; per-tensor FP8 GEMMs take any layout there, so delayed
    writes no transpose (TE quantizer.cpp, nvte_is_non_tn_fp8_gemm_supported), while MXFP8 writes
    its column-wise copy (1 B) and 2/32 B of E8M0 scales per element more."""
    base, mx = _layer("b200", "delayed"), _layer("b200", "mxfp8")
    assert mx.fwd.gemm_s == base.fwd.gemm_s
    assert mx.fwd.stream_bytes - base.fwd.stream_bytes == pytest.approx((1 + 1 / 16) * TOKENS * SUM_K)
    bwd = mx.bwd_input.stream_bytes - base.bwd_input.stream_bytes
    assert bwd == pytest.approx((1 + 1 / 16) * TOKENS * SUM_N)
    assert cast_bytes("delayed", True) == (1.0, 3.0) and cast_bytes("current", True) == (3.0, 5.0)
    assert cast_bytes("mxfp8", True) == cast_bytes("mxfp8")
    assert _layer("b200", None) == mx          # the Blackwell default is MXFP8


def test_blockwise_gemms_run_at_the_deepgemm_rate_on_hopper():
    """Blockwise GEMM time over per-tensor = 1402.6 / 1358 (cuBLAS per-tensor vs DeepGEMM best
    rows) for the large shapes, where the efficiency is the large-GEMM one."""
    sc_d, sc_b = from_dict(_raw("h100-sxm", "delayed")), from_dict(_raw("h100-sxm", "blockwise"))
    td, tb = GemmTimer(sc_d), GemmTimer(sc_b)
    assert tb.eff["fp8"] / td.eff["fp8"] == pytest.approx(1358 / 1402.6)
    assert BLOCKWISE_GEMM_RATE < 1
    assert _layer("h100-sxm", "blockwise").fwd.gemm_s > _layer("h100-sxm", "delayed").fwd.gemm_s


def test_default_recipe_follows_the_gpu_generation():
    """Megatron-LM's default (delayed) on Hopper; MXFP8 on Blackwell; the default on H100 is delayed."""
    assert resolved_recipe(None, "h100-sxm", "H100 SXM") == "delayed"
    assert resolved_recipe(None, "gb200", "GB200") == "mxfp8"
    assert _layer("h100-sxm", None) == _layer("h100-sxm", "delayed")


def test_recipe_has_no_effect_without_fp8():
    """A bf16 run casts nothing: the recipe leaves its layer unchanged."""
    assert _layer("h100-sxm", "current", "bf16") == _layer("h100-sxm", None, "bf16")


def _iteration(gpu: str, recipe: str | None) -> float:
    return simulate(from_dict(_raw(gpu, recipe, layers=8))).iteration_time_s


def test_current_scaling_is_slower_than_delayed_on_h100():
    """The amax pass adds HBM traffic: current > delayed; MXFP8 > delayed on B200 (its scales);
    the default on H100 is delayed."""
    delayed, current = _iteration("h100-sxm", "delayed"), _iteration("h100-sxm", "current")
    assert current > delayed
    assert _iteration("h100-sxm", None) == delayed
    assert _iteration("b200", "mxfp8") > _iteration("b200", "delayed")


def test_scaling_state_memory_closed_form():
    """Cached FP8 weight + transpose (2 B/param); delayed adds (1024 + 2) fp32 per FP8 tensor, 5
    tensors per GEMM (TE set_meta_tensor: 3 forward, 2 backward); MXFP8 2/32 B of weight scales
    per parameter; blockwise 4/128^2."""
    p, g = 1e8, 4
    assert fp8_state_bytes("delayed", p, g) == 2 * p + g * 5 * (AMAX_HISTORY_LEN + 2) * 4
    assert fp8_state_bytes("current", p, g) == 2 * p + g * 5 * 2 * 4
    assert fp8_state_bytes("mxfp8", p, g) == pytest.approx((2 + 1 / 16) * p)
    assert fp8_state_bytes("blockwise", p, g) == pytest.approx((2 + 4 / 128**2) * p)
    # Blackwell, per-tensor: no transpose copy of the weight.
    assert fp8_state_bytes("delayed", p, g, mx_gpu=True) == p + g * 5 * (AMAX_HISTORY_LEN + 2) * 4


def test_mxfp8_on_hopper_is_refused_in_one_line():
    with pytest.raises(ScenarioError) as info:
        from_dict(_raw("h100-sxm", "mxfp8"))
    msg = str(info.value)
    assert info.value.field == "training.fp8_recipe" and "\n" not in msg
    assert "delayed, current, blockwise" in msg
    from_dict(_raw("b200", "mxfp8"))            # valid on Blackwell


def test_estimator_prices_each_recipe_as_the_simulation_does():
    """Rows that differ only by the recipe get their own layer costs (pricing/keys.compute_key
    reads training.fp8_recipe) and equal simulate() to float rounding."""
    scs = [from_dict(_raw(g, r, layers=8)) for g, r in
           (("h100-sxm", "delayed"), ("h100-sxm", "current"), ("h100-sxm", "blockwise"),
            ("b200", "delayed"), ("b200", "mxfp8"))]
    est = estimate_many(scs)
    times = [simulate(sc).iteration_time_s for sc in scs]
    assert list(est.iteration_time_s) == pytest.approx(times, rel=1e-9)
    assert len(set(times)) == len(times)


def test_mxfp8_is_refused_when_any_datacenter_has_hopper_gpus():
    """mixed-generations (H100 and B200 datacenters): the Hopper datacenter cannot run MXFP8, even
    with the scenario's GPU set to a B200."""
    raw = load_raw(ROOT / "scenarios" / "mixed-generations.yaml")
    raw["training"].update(dtype="fp8", fp8_recipe="mxfp8")
    raw["hardware"]["gpu"] = "b200"
    with pytest.raises(ScenarioError) as info:
        from_dict(raw)
    assert info.value.field == "training.fp8_recipe" and "h100-sxm" in str(info.value)
