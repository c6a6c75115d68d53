"""Per-kernel costs of a serving pass (explorer/serving/overhead.py): the gap every GEMM and attention
kernel waits for the one before it, and the small kernels of vLLM's decoder layer at max(their floor,
their bytes / HBM).  The constants are component measurements on an H100, checked here against the
benchmark they come from; the end-to-end rows they move are in tests/test_serving_published.py.

Sources (overhead.py's docstring has them in full):
- vllm-project/vllm pull request #49363 (2026), "H100 benchmarks", benchmarks/kernels/
  bench_fp8_gemm.py timed with triton's do_bench_cudagraph: N 12,288 x K 5,376 at batch 1,
  fp8-tensor-w-tensor-a-noquant 5.162899 TFLOP/s, fp8-tensor-w-token-a (the activation's FP8
  quantisation kernel captured in front of the GEMM) 4.733311 TFLOP/s.
- Spector, Juravsky et al., "Look Ma, No Bubbles!" (Hazy Research, May 2025): about 1.3 us per kernel
  launch on an H100 even with CUDA graphs.
"""
from __future__ import annotations

import pytest

from explorer.config import shipped_scenarios
from explorer.physics.hardware import streaming_bytes_per_s
from explorer.physics.work import Gemm
from explorer.scenario import load
from explorer.serving import overhead as oh
from explorer.serving.step import Group, PassModel
from explorer.simulate import simulate

LLAMA = shipped_scenarios()["serve-llama3-70b-tp8"]
DEEPSEEK = shipped_scenarios()["serve-deepseek-v3-disaggregated"]
FLOPS = 2 * 12288 * 5376                        # one token through the 12,288 x 5,376 GEMM
GEMV_US = FLOPS / 5.162899e12 * 1e6             # 25.59 us measured, no quantisation kernel
WITH_QUANT_US = FLOPS / 4.733311e12 * 1e6       # 27.91 us measured with it


def model(**ov) -> PassModel:
    sc = load(LLAMA, {"parallelism.tp": 1, **ov})
    return PassModel(sc, sc)


def test_the_small_kernel_floor_is_what_the_quantisation_kernel_adds_on_an_h100():
    assert (round(GEMV_US, 2), round(WITH_QUANT_US, 2)) == (25.59, 27.91)
    assert oh.SMALL_KERNEL_S == pytest.approx((WITH_QUANT_US - GEMV_US) * 1e-6, abs=0.005e-6)
    assert oh.KERNEL_GAP_S == 1.3e-6 < oh.SMALL_KERNEL_S


def test_a_gemv_is_its_weights_at_the_streaming_rate_plus_one_gap():
    """66.1 MB of FP8 weights (and a few KB of activations) at 0.8 x 3.35 TB/s is 24.66 us; with the
    1.3 us gap 25.96 us, 1.4 % above vLLM's measured 25.59 us (3.6 % below it without the gap)."""
    pm = model()
    t = pm.gemm(Gemm(1, 12288, 5376))
    assert t * 1e6 == pytest.approx(25.96, abs=0.005)
    assert t * 1e6 / GEMV_US - 1 == pytest.approx(0.014, abs=0.001)
    # The achieved bandwidth falls with the size: 0.76 of the peak at 66 MB, 0.56 at 8.4 MB.
    peak = pm.gpu.hbm_GBps * 1e9
    assert 12288 * 5376 / t / peak == pytest.approx(0.76, abs=0.005)
    small = 8192 * 8192 / 8
    assert small / pm.gemm(Gemm(1, 8192, 1024)) / peak == pytest.approx(0.56, abs=0.005)


def test_a_small_kernel_costs_its_floor_until_its_bytes_take_longer():
    hbm = streaming_bytes_per_s(load(LLAMA).hardware.gpu)
    one = oh.norm_bytes(1, 8192)                     # one token's fused add + RMSNorm: 64 KiB
    assert one == 65_536 and oh.small_kernel_s(one, hbm) == oh.SMALL_KERNEL_S
    prompt = oh.norm_bytes(5000, 8192)               # a 5,000-token prompt's: 328 MB, 123.6 us
    assert oh.small_kernel_s(prompt, hbm) * 1e6 == pytest.approx(1.3 + 327.68e6 / 2.68e12 * 1e6, abs=0.01)


@pytest.mark.parametrize("act", ["fp8", "bf16"])
def test_a_dense_layer_runs_vllms_small_kernels(act):
    """Llama's decoder layer (vllm/model_executor/models/llama.py): two fused add-RMSNorms, rotary,
    the KV-cache write and SiluAndMul, whatever the activations' precision.  One token: five small
    kernels at their floor, and five GEMM and attention gaps."""
    pm = model(**{"inference.activation_dtype": act})
    _, comps, _, _ = pm.layer((Group(1, 1, 1000),), False, 0)
    assert comps["small_kernels"] == pytest.approx(5 * oh.SMALL_KERNEL_S, rel=1e-12)


def test_fp8_activations_add_no_kernels_of_their_own():
    """An FP8 linear's input quantisation is fused into the kernel that writes that input: vLLM's
    compilation passes fuse RMSNorm + quant and SiluAndMul + quant (vllm/compilation/fusion.py,
    activation_quant_fusion.py), TensorRT-LLM runs fused norm-quantise and FP8-output attention
    (overhead.py).  So one sequence's decode step (TP 2, batch 1) runs the same 80 x 5 + 6 small
    kernels with FP8 and with 16-bit activations, and the two steps (15.75 and 18.51 ms) differ only
    in their GEMMs.  (Priced earlier as a scaled_fp8_quant kernel before each linear, FP8 added four
    kernels a layer: 80 x 4 x 2.32 us = 0.74 ms a step.)"""
    ov = {"parallelism.tp": 2, "inference.batch": 1}
    steps = {a: simulate(load(LLAMA, {**ov, "inference.activation_dtype": a})).inference
             for a in ("fp8", "bf16")}
    fp8, bf16 = (steps[a]["decode_step_breakdown_s"] for a in ("fp8", "bf16"))
    assert fp8["small_kernels"] - bf16["small_kernels"] == 0
    assert fp8["small_kernels"] == pytest.approx((80 * 5 + 6) * oh.SMALL_KERNEL_S, rel=1e-9)
    assert (round(steps["fp8"]["decode_step_s"] * 1e3, 2), round(steps["bf16"]["decode_step_s"] * 1e3, 2)) \
        == (15.75, 18.51)
    assert steps["bf16"]["decode_step_s"] - steps["fp8"]["decode_step_s"] == \
        pytest.approx(bf16["gemm"] - fp8["gemm"], rel=1e-9)


def test_the_per_kernel_cost_barely_grows_with_the_batch_and_is_a_small_share_of_a_large_one():
    """One token to 256: the small kernels grow from 0.94 to 2.06 ms (their bytes pass their floor),
    12 % of the TP 8 step at batch 1, 10 % at 256; per sequence they shrink 117-fold."""
    one = simulate(load(LLAMA, {"inference.batch": 1})).inference
    full = simulate(load(LLAMA)).inference
    k1, k256 = (f["decode_step_breakdown_s"]["small_kernels"] for f in (one, full))
    assert (round(k1 * 1e3, 2), round(k256 * 1e3, 2)) == (0.94, 2.06)
    assert k1 / one["decode_step_s"] == pytest.approx(0.12, abs=0.005)
    assert k256 / full["decode_step_s"] == pytest.approx(0.10, abs=0.005)


def test_a_moe_layer_adds_routing_and_its_experts_small_kernels():
    """DeepSeek-V3's decode GPU (MLA, 256 routed experts, EP 128): its layers run MLA's latent norms,
    the top-k, the routing table, the weighted sum and the routed and shared activations (each FP8
    linear's quantisation fused into the kernel before it); 2.0 ms of the 54.9 ms step."""
    f = simulate(load(DEEPSEEK)).inference
    assert f["decode_step_breakdown_s"]["small_kernels"] == pytest.approx(2.039e-3, abs=5e-6)
    assert f["decode_step_s"] == pytest.approx(54.92e-3, abs=5e-6)
