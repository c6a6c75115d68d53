"""explorer/physics/attention.py on Blackwell against the measurements it is built from: NVIDIA's cuDNN
frontend benchmark on one B200 (github.com/NVIDIA/cudnn-frontend, commit 0b1577c, 2025-10-10,
benchmark/sdpa_benchmark_training/artifacts: cuDNN 9.13.1 and flash-attn 2.7.4.post1, bf16, batch 1,
128 query / 8 key-value heads, head dim 128, causal), cross-checked against the same benchmark on
GB200 (commit d48a60e, 2025-12-18, cuDNN 9.17.0, kernel time from torch.profiler) and the
FlashAttention-4 paper's text (arXiv 2603.05451); and the direction the B200 data moves attention
time against the Hopper fractions of peak Blackwell was priced at before."""
from __future__ import annotations

import pytest

from explorer.fidelity.kernels import preset_gpu
from explorer.physics import attention as A
from explorer.physics.attention_blackwell import B200_BF16_PEAK, BLACKWELL_SEQ_POINTS

B200 = preset_gpu("b200")
GB200 = preset_gpu("gb200")
H100 = preset_gpu("h100-sxm")


def b200_tflops(kernel: str, backward: bool, seq: float | None, head_dim: float = 128) -> float:
    return A.kernel_fraction(kernel, B200, backward, head_dim, seq) * B200.peak_tflops


def test_the_peak_is_the_presets():
    """The fractions are of B200's dense bf16 peak as gpus.yaml gives it (2,250 TFLOP/s), the peak the
    FlashAttention-4 paper's "1613 TFLOPs/s (71% utilization)" is a fraction of (1,613 / 2,250 = 0.717)."""
    assert B200_BF16_PEAK == B200.peak_tflops == 2250
    assert 1613 / B200_BF16_PEAK == pytest.approx(0.71, abs=0.01)
    assert A.generation(B200) == A.generation(GB200) == A.generation(preset_gpu("gb300")) == "blackwell"


# sdpa_fp8_benchmark_results_NVIDIA_B200.csv (bf16 rows, cuDNN 9.13.1 through the cuDNN frontend) and
# sdpa_bf16_benchmark_results_NVIDIA_B200.csv (backend flash_attention), fwd_tflops_per_sec and
# bwd_tflops_per_sec as printed there.
@pytest.mark.parametrize("kernel,backward,seq,tflops", [
    ("cudnn", False, 2048, 907.547), ("cudnn", False, 4096, 1141.140), ("cudnn", False, 8192, 1384.231),
    ("cudnn", False, 16384, 1475.253), ("cudnn", False, 32768, 1514.764), ("cudnn", False, 131072, 1421.873),
    ("cudnn", True, 2048, 545.088), ("cudnn", True, 4096, 832.907), ("cudnn", True, 8192, 994.850),
    ("cudnn", True, 16384, 1151.690), ("cudnn", True, 65536, 1235.860), ("cudnn", True, 131072, 1127.667),
    ("flash2", False, 2048, 254.381), ("flash2", False, 16384, 425.128), ("flash2", False, 131072, 443.738),
    ("flash2", True, 4096, 273.484), ("flash2", True, 16384, 336.635), ("flash2", True, 32768, 345.634),
])
def test_b200_rates_are_the_cudnn_frontend_benchmark(kernel, backward, seq, tflops):
    assert b200_tflops(kernel, backward, seq) == pytest.approx(tflops, abs=0.5)


def test_interpolation_and_the_held_ends():
    """log2 interpolation between measured points; below 2k the 2k rate, beyond 131k the 131k rate;
    None (long sequences) the 16k point, as on the other generations."""
    assert BLACKWELL_SEQ_POINTS[0] == 2048 and BLACKWELL_SEQ_POINTS[-1] == 131072
    assert b200_tflops("cudnn", True, 8192 * 2 ** 0.5) == pytest.approx((995 + 1152) / 2)
    assert b200_tflops("cudnn", False, 512) == b200_tflops("cudnn", False, 1024) == pytest.approx(908)
    assert b200_tflops("cudnn", True, 262144) == pytest.approx(1128)
    assert b200_tflops("flash2", False, None) == pytest.approx(425)
    assert b200_tflops("cudnn", True, None) == pytest.approx(1152)


def test_gb200_takes_the_b200_fraction_which_its_own_cudnn_run_confirms():
    """GB200 (2,500 peak): cuDNN 9.17.0 kernel time at 16k / 32k, 1,668 / 1,681 forward and 1,304 /
    1,348 backward (commit d48a60e, sdpa_bf16_benchmark_results_NVIDIA_GB200.csv, backend
    cudnn_fe): the B200 fraction times 2,500 is within 3 %."""
    for seq, fwd, bwd in ((16384, 1668, 1304), (32768, 1681, 1348)):
        assert A.kernel_fraction("cudnn", GB200, False, 128, seq) * 2500 == pytest.approx(fwd, rel=0.03)
        assert A.kernel_fraction("cudnn", GB200, True, 128, seq) * 2500 == pytest.approx(bwd, rel=0.03)


def test_flash2_on_blackwell_runs_at_a_fixed_rate_not_a_fraction_of_the_peak():
    """FlashAttention-2's mma.sync: GB200 measured 430 / 352 TFLOP/s at 16k (d48a60e, PyTorch's
    FlashAttention-2), B200 425 / 337: the same rate on a 1.11x peak, so GB200's priced rate is
    ~11 % above its measurement (documented in attention_blackwell.py)."""
    assert b200_tflops("flash2", False, 16384) == pytest.approx(430, rel=0.02)
    assert b200_tflops("flash2", True, 16384) == pytest.approx(352, rel=0.05)
    gb200 = A.kernel_fraction("flash2", GB200, False, 128, 16384) * 2500
    assert gb200 / 430 == pytest.approx(2500 / 2250 * 425 / 430, rel=1e-9)


def test_fa4_papers_cudnn_ratio_is_not_at_long_sequences():
    """FlashAttention-4 is "up to 1.3x" faster than cuDNN 9.13 and reaches "up to 1613 TFLOPs/s": 1.3x
    the cuDNN 9.13 forward encoded here exceeds 1,613 from 8k on, so the two claims agree with it only
    if that largest gain is at shorter sequences (as it must be)."""
    for seq in (8192, 16384, 32768, 65536, 131072):
        assert 1.3 * b200_tflops("cudnn", False, seq) > 1613


def old_hopper_pricing(kernel: str, backward: bool, seq: float) -> float:
    """What Blackwell was priced at before the B200 curves: the H100 fraction of peak."""
    return A.kernel_fraction(kernel, H100, backward, 128, seq) * B200.peak_tflops


@pytest.mark.parametrize("seq,old_fwd,old_bwd,new_fwd,new_bwd", [
    (2048, 484, 465, 908, 545), (4096, 518, 499, 1141, 833), (8192, 529, 518, 1384, 995),
    (16384, 539, 516, 1475, 1152),
])
def test_cudnn_backward_is_slower_than_the_hopper_fraction_said(seq, old_fwd, old_bwd, new_fwd, new_bwd):
    """FA3 paper Fig. 5/6 cuDNN on H100 (old_*: TFLOP/s of 989) against B200's measured cuDNN 9.13:
    the backward is slower at every length (its shared-memory traffic did not double with the tensor
    cores: FlashAttention-4 paper, abstract), by 0.52x at 2k to 0.98x at 16k; the forward is slower at 2k
    and 4k and faster from 8k on."""
    assert old_hopper_pricing("cudnn", True, seq) == pytest.approx(old_bwd / 989 * 2250)
    assert old_hopper_pricing("cudnn", False, seq) == pytest.approx(old_fwd / 989 * 2250)
    assert b200_tflops("cudnn", True, seq) < old_hopper_pricing("cudnn", True, seq)
    assert b200_tflops("cudnn", True, seq) / old_hopper_pricing("cudnn", True, seq) == pytest.approx(
        new_bwd / (old_bwd / 989 * 2250), abs=1e-3)
    faster_fwd = b200_tflops("cudnn", False, seq) > old_hopper_pricing("cudnn", False, seq)
    assert faster_fwd == (seq >= 8192)
    assert b200_tflops("cudnn", False, seq) == pytest.approx(new_fwd, abs=0.5)


def fwd_bwd(gpu, kernel: str, seq: float) -> float:
    """Seconds per unit peak of a training step's attention core: forward plus backward at 2.5x its
    FLOPs (the kernel counts of workloads/transformer/layer.attention_core)."""
    fwd, bwd = (A.kernel_fraction(kernel, gpu, backward, 128, seq) for backward in (False, True))
    return 1 / fwd + 2.5 / bwd


@pytest.mark.parametrize("kernel,seq,ratio", [
    ("cudnn", 2048, 1.739), ("cudnn", 4096, 1.271), ("cudnn", 8192, 1.096), ("cudnn", 16384, 0.967),
    ("cudnn", 131072, 0.991),
    ("flash2", 2048, 3.142), ("flash2", 8192, 2.170), ("flash2", 16384, 2.068), ("flash2", 131072, 1.997),
])
def test_b200_attention_time_against_the_old_pricing(kernel, seq, ratio):
    """B200 attention core (forward + backward) time over its old price at the H100 fractions: cuDNN
    1.74x at 2k, 1.27x at 4k (the 405B rows' CP-2 ring step), 1.10x at 8k, 0.97x at 16k; the
    FlashAttention-2 package 2.0x-3.1x (762 -> 425 TFLOP/s forward at 16k)."""
    assert fwd_bwd(B200, kernel, seq) / fwd_bwd(H100, kernel, seq) == pytest.approx(ratio, abs=0.001)


def test_attention_seconds_uses_the_b200_rate():
    """The time of 1 PFLOP of backward at 4k on B200: 1e15 / (2,250e12 x 833/2,250 x the in-training
    factor); before, 499/989 of the peak (1.36x faster than measured)."""
    eff = 0.6
    in_training = eff / (B200.measured_matmul_tflops / B200.peak_tflops)
    t = A.attention_seconds(1e15, B200, eff, True, "cudnn", 128, 4096)
    assert t == pytest.approx(1e15 / (832.907e12 * in_training), rel=1e-3)
    assert t * 2250e12 * 499 / 989 * in_training / 1e15 == pytest.approx(2250 * 499 / 989 / 832.907, rel=1e-3)


def test_hopper_is_unchanged():
    assert A.kernel_fraction("cudnn", H100, True, 128, 4096) * 989 == pytest.approx(499)
    assert A.kernel_fraction("flash2", H100, False, 128, 16384) * 989 == pytest.approx(335)


def test_other_kernels_and_head_dims_on_blackwell():
    """flash3 does not run on sm_100: FlashAttention-2's curve.  triton (mma.sync like FA2): FA2's B200
    rate over its A100 slowdown.  flex (Triton-generated, Blackwell MMA): its ratio to FA2's Hopper
    fraction, as before.  Head dim 64: the Hopper head-dim factor of the same kernel (FA3 paper
    Fig. 5: cuDNN non-causal 413 / 595)."""
    assert b200_tflops("flash3", True, 8192) == b200_tflops("flash2", True, 8192) == pytest.approx(318)
    assert A.resolve_kernel("flash3", "megatron", B200) == "flash2"
    assert b200_tflops("triton", False, 16384) == pytest.approx(425 / 1.4, abs=0.5)
    assert b200_tflops("flex", False, 16384) == pytest.approx(0.90 * 335 / 989 * 2250)
    assert b200_tflops("flex", True, 8192) == pytest.approx(0.85 * 318 / 989 * 2250)
    assert b200_tflops("cudnn", False, 16384, 64) == pytest.approx(1475 * 413 / 595, abs=0.5)
