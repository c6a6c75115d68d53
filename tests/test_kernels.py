"""explorer/physics/kernels.py against its closed forms and against the published GEMM rows it was fitted to
(calibration) or checked on (validation): explorer/data/reference/gemm_benchmarks.csv."""
from __future__ import annotations

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from explorer.fidelity.kernels import gemm_reference_rows, preset_gpu
from explorer.physics import kernels as K
from explorer.physics.hardware import HBM_EFFICIENCY, measured_over_peak

H100 = preset_gpu("h100-sxm")
A100 = preset_gpu("a100-80gb")
GPUS = ("a100-80gb", "h100-sxm", "h800", "h200", "b200")
# Stated tolerance of every sourced row (largest error at the fit: 16 %, the H200 fp8 MAMF row).
ROW_TOLERANCE = 0.20


def _eff(gpu, m, n, k, dtype="bf16", group=1):
    return K.gemm_efficiency(m, n, k, dtype, gpu, measured_over_peak(gpu, dtype), group)


@pytest.mark.parametrize("name", GPUS)
@pytest.mark.parametrize("dtype", ["bf16", "fp8"])
def test_large_gemm_reaches_large_efficiency_times_peak(name, dtype):
    gpu = preset_gpu(name)
    large = measured_over_peak(gpu, dtype)
    # 32768 x 33792 x 32768: 256 x 132 tiles of 128 x 256, a whole number of waves on 132 SMs and
    # close to it on 108/148; k large enough that the output write is under 1 %.
    assert _eff(gpu, 32768, 33792, 32768, dtype) == pytest.approx(large, rel=0.02)


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(GPUS), st.sampled_from(["bf16", "fp8", "fp32"]),
       st.integers(4, 15), st.integers(4, 15), st.integers(4, 15), st.sampled_from(["m", "n", "k"]))
def test_efficiency_is_monotone_in_each_dimension_over_powers_of_two(name, dtype, a, b, c, axis):
    gpu = preset_gpu(name)
    m, n, k = 2 ** a, 2 ** b, 2 ** c
    bigger = {"m": (2 * m, n, k), "n": (m, 2 * n, k), "k": (m, n, 2 * k)}[axis]
    assert _eff(gpu, *bigger, dtype) >= _eff(gpu, m, n, k, dtype) * (1 - 1e-12)


def test_wave_quantization_closed_form_on_a100():
    # 2048 x 2048 on 128 x 256 tiles: 16 x 8 = 128 tiles on 108 SMs -> 1 full wave + 20/108 of a
    # second; the idle part of the tail wave is exposed at WAVE_TAIL_EXPOSED.
    k, sms = 4096, 108
    rate = 312e12 * 0.87 / sms
    full = 128 / sms
    waves = full + K.WAVE_TAIL_EXPOSED * (2 - full)
    expected = waves * 2 * 128 * 256 * k / rate
    assert K._math_seconds(2048, 2048, k, 1, sms, rate) == pytest.approx(expected, rel=1e-12)
    # strict quantization (tail fully exposed) is the User's Guide's ceil(tiles / SMs) waves
    strict = pytest.MonkeyPatch()
    strict.setattr(K, "WAVE_TAIL_EXPOSED", 1.0)
    try:
        assert K._math_seconds(2048, 2048, k, 1, sms, rate) == pytest.approx(2 * 2 * 128 * 256 * k / rate)
    finally:
        strict.undo()


def test_memory_bound_small_m_gemm_is_operand_bytes_over_hbm():
    # 16 tokens x (8192 x 8192) bf16 weights: 128 MiB of weights, 2 MFLOP per weight element / 16.
    m, n, k = 16, 8192, 8192
    hbm = H100.hbm_GBps * 1e9 * HBM_EFFICIENCY
    operands = (m * k + k * n) * 2
    out = m * n * 2
    t = K.gemm_seconds(m, n, k, "bf16", H100, 0.8)
    assert t == pytest.approx((operands + out) / hbm + K.EPILOGUE_EXPOSED * out / hbm + K.LAUNCH_SECONDS)
    assert t == pytest.approx(operands / hbm, rel=0.01)    # the weights dominate: 134 MB at 2.68 TB/s


@pytest.mark.parametrize("name", ["h100-sxm", "h800", "h200", "b200"])
def test_fp8_is_faster_than_bf16_by_less_than_two(name):
    gpu = preset_gpu(name)
    shape = (8192, 8192, 8192)
    t16 = K.gemm_seconds(*shape, "bf16", gpu, measured_over_peak(gpu, "bf16"))
    t8 = K.gemm_seconds(*shape, "fp8", gpu, measured_over_peak(gpu, "fp8"))
    assert 1.0 < t16 / t8 < 2.0


def test_tp_sliced_and_expert_gemms_run_below_large_efficiency():
    large = measured_over_peak(H100, "bf16")
    # Llama-3-70B-like up-projection sliced by TP 8 (n = 28672*2/8), 8k tokens: near the ceiling
    assert _eff(H100, 8192, 7168, 8192) > 0.9 * large
    # a 2048-wide expert with 256 tokens: far below it, and grouping 8 such experts helps
    alone = _eff(H100, 256, 2048, 7168)
    assert alone < 0.6 * large
    assert _eff(H100, 256, 2048, 7168, group=8) > alone


@pytest.mark.parametrize("row", gemm_reference_rows(), ids=lambda r: f"{r.role}:{r.label}")
def test_sourced_gemm_row_within_tolerance(row):
    assert abs(row.error) <= ROW_TOLERANCE, \
        f"{row.label}: {row.predicted:.0f} vs {row.measured} TFLOP/s ({row.source})"


def test_reference_rows_keep_a_third_for_validation():
    rows = gemm_reference_rows()
    assert sum(r.role == "validation" for r in rows) * 3 >= len(rows)


def test_a_few_thousand_uncached_calls_are_fast():
    K.gemm_seconds.cache_clear()
    start = time.perf_counter()
    for i in range(3000):
        K.gemm_seconds(1024 + i, 4096, 8192, "bf16", H100, 0.66)
    assert time.perf_counter() - start < 0.5


def test_streaming_kernels_run_at_the_measured_hbm_fraction_of_their_generation():
    """Element-wise kernels stream at data-sheet HBM x the measured fraction: B200's bandwidthTest
    device-to-device copy, over 6,000 of 8,000 GB/s (TogetherAI B200 benchmark), 0.75; others at
    HBM_EFFICIENCY (0.8)."""
    from explorer.physics.hardware import hbm_efficiency
    b200 = preset_gpu("b200")
    assert hbm_efficiency(b200) == pytest.approx(0.75)
    assert hbm_efficiency(H100) == HBM_EFFICIENCY == 0.8
    # A 1 GB element-wise pass on B200: 1e9 / (8,000 GB/s x 0.75) = 167 us.
    from explorer.physics.hardware import ComputeModel
    from explorer.physics.work import Work
    from explorer.scenario import from_dict
    sc = from_dict({"model": {"preset": "llama3-8b"}, "training": {"global_batch": 8},
                    "hardware": {"gpu": "b200"}, "cluster": {"gpus_per_node": 8, "nodes": 1}})
    assert ComputeModel.for_scenario(sc).time(Work(0.0, 0.0, 1e9)) == pytest.approx(1e9 / 6.0e12)


def test_backward_element_wise_traffic_is_counted_kernel_by_kernel():
    """Backward HBM passes of a GPT layer with unfused attention and dropout (tp 1): two norms 2 x 3
    (read x and dy, write dx), two residual adds 2 x 3, two dropouts 2 x 2.5 over h; GeLU 3 over f
    (read x and dy, write dx); softmax 3 + dropout 2.5 over the a x s x s scores.  The old rule,
    twice the forward (15 h + 2 f + 4.5 a s), charged 30 h + 4 f + 9 a s."""
    from explorer.scenario import from_dict
    from explorer.workloads.transformer.layer import layer_cost
    h, a, s, f = 2048, 16, 2048, 8192
    sc = from_dict({"model": {"layers": 2, "hidden": h, "heads": a, "vocab": 512, "seq_len": s,
                              "ffn_hidden": f, "ffn_kind": "gelu", "dropout": True},
                    "training": {"global_batch": 1, "flash_attention": False},
                    "hardware": {"gpu": "a100-80gb"}, "cluster": {"gpus_per_node": 1, "nodes": 1}})
    lc = layer_cost(sc, False)
    tokens, e = s, 2
    want = e * tokens * (17 * h + 3 * f + 5.5 * a * s)
    assert lc.bwd_input.stream_bytes == pytest.approx(want, rel=1e-9)
    assert lc.fwd.stream_bytes == pytest.approx(
        e * tokens * (15 * h + 2 * f + 4.5 * a * s), rel=1e-9)
