"""MoE grouped GEMMs (explorer/physics/kernels.py ``gemm_seconds`` with ``group`` > 1) against the
published grouped-GEMM kernels run by themselves, and DeepSeek-V3's routed experts as the training
model prices them (explorer/workloads/timing.py GemmTimer on scenarios/deepseek-v3.yaml).

Sources (every figure is TFLOP/s = 2 x groups x m x n x k / kernel time):
- [DG-a6d97a1] deepseek-ai/DeepGEMM README.md at commit a6d97a1c1b48 (2025-02-25, initial release),
  table "Grouped GEMMs for MoE models (contiguous layout)": H800 SXM5, NVCC 12.8, FP8 e4m3 with
  1x128 / 128x128 scales, bf16 output; tests/test_core.py times equal groups of ``M per group`` rows.
- [DG-55ab91f] the same table after commit 55ab91f7af (2025-03-25, "Update performance"), unchanged
  at 327ec92f69 (2025-04-09, the last README with the tables).
- [DG-PR95] deepseek-ai/DeepGEMM pull request #95 (2025-05-06, "Weight gradient kernels for dense and
  MoE models"), H800: ``wgrad_gemm_fp8_fp8_fp32_nt`` table "Weight gradient GEMMs for dense models",
  and ``k_grouped_wgrad_gemm_fp8_fp8_fp32_nt`` (the experts' weight gradients, k = tokens per expert)
  as its "PR #95 TFLOPS" column is quoted in deepseek-ai/DeepGEMM issue #107.  Both compute
  D = C + A B^T into an fp32 D: kernels.ACCUMULATE_FP32_BYTES (accumulate_fp32=True).
- [TE-2045] NVIDIA/TransformerEngine pull request #2045 ("Add Cutlass GroupGEMM Support for
  fine-grained MoE Model", TE 2.8), H100, bf16, ``general_grouped_gemm`` with TE 2.7 and CUDA 12.9:
  the CUTLASS single-kernel grouped GEMM column (Qwen3-30B-A3B-like experts, 768 x 2048).

These kernels are what ``group`` > 1 models: one grouped kernel whose experts' tiles share the
waves.  The DeepGEMM masked layout (decoding, README "masked layout" table) and Transformer
Engine's default multi-stream cuBLAS GroupedLinear (one cuBLAS GEMM per expert on a few streams)
are other kernels and are not checked here.
"""
from __future__ import annotations

import pytest

from explorer.cli import load_scenario
from explorer.fidelity.kernels import preset_gpu
from explorer.physics.hardware import measured_over_peak
from explorer.physics.kernels import gemm_seconds
from explorer.workloads.timing import GemmTimer

H800 = preset_gpu("h800")
H100 = preset_gpu("h100-sxm")
# Stated tolerance: an isolated grouped kernel within 10 % of the published figure (largest error
# today: +9.5 %, DeepGEMM's dense wgrad 512x32768x8192; the grouped rows stay within -8.2 / +8.3 %).
TOLERANCE = 0.10

# (groups, m per group, n, k, measured TFLOP/s, source)
CONTIGUOUS = [
    (4, 8192, 4096, 7168, 1297, "DG-a6d97a1"), (4, 8192, 7168, 2048, 1099, "DG-a6d97a1"),
    (8, 4096, 4096, 7168, 1288, "DG-a6d97a1"), (8, 4096, 7168, 2048, 1093, "DG-a6d97a1"),
    (4, 8192, 4096, 7168, 1346, "DG-55ab91f"), (4, 8192, 7168, 2048, 1214, "DG-55ab91f"),
    (8, 4096, 4096, 7168, 1346, "DG-55ab91f"), (8, 4096, 7168, 2048, 1214, "DG-55ab91f"),
]
# Weight gradients, fp32 accumulation: (groups, m, n, k, measured TFLOP/s); k is the token count.
WGRAD = [
    (4, 7168, 4096, 4096, 939), (4, 2048, 7168, 4096, 900), (4, 7168, 4096, 8192, 1044),
    (4, 2048, 7168, 8192, 1033), (8, 7168, 4096, 4096, 942),
    (1, 7168, 2112, 4096, 920), (1, 1536, 24576, 4096, 986), (1, 512, 32768, 4096, 878),
    (1, 16384, 7168, 4096, 994), (1, 7168, 4096, 4096, 942), (1, 2048, 7168, 4096, 920),
    (1, 7168, 2112, 8192, 1052), (1, 1536, 24576, 8192, 1092), (1, 512, 32768, 8192, 1014),
]
# [TE-2045] CUTLASS grouped GEMM, H100 bf16: (groups, m per group, n, k, measured TFLOP/s).
CUTLASS_BF16 = [(8, 4096, 768, 2048, 650.574), (16, 2048, 768, 2048, 636.927)]


def _tflops(gpu, dtype, groups, m, n, k, accumulate=False, eff=None):
    """Isolated-kernel throughput at the GPU's measured GEMM ceiling (fidelity/kernels.py's rule)."""
    eff = measured_over_peak(gpu, dtype) if eff is None else eff
    return 2.0 * m * n * k / gemm_seconds(m, n, k, dtype, gpu, eff, groups, accumulate) / 1e12


@pytest.mark.parametrize("g, m, n, k, measured, source", CONTIGUOUS)
def test_contiguous_grouped_gemm_matches_deepgemm(g, m, n, k, measured, source):
    ours = _tflops(H800, "fp8", g, m, n, k)
    assert abs(ours / measured - 1) <= TOLERANCE, f"{source} {g}x{m}x{n}x{k}: {ours:.0f} vs {measured}"


@pytest.mark.parametrize("g, m, n, k, measured", WGRAD)
def test_weight_gradient_gemm_with_fp32_accumulation_matches_deepgemm_pr95(g, m, n, k, measured):
    ours = _tflops(H800, "fp8", g, m, n, k, accumulate=True)
    assert abs(ours / measured - 1) <= TOLERANCE, f"DG-PR95 {g}x{m}x{n}x{k}: {ours:.0f} vs {measured}"


@pytest.mark.parametrize("g, m, n, k, measured", CUTLASS_BF16)
def test_fine_grained_bf16_grouped_gemm_matches_cutlass_grouped_kernel(g, m, n, k, measured):
    ours = _tflops(H100, "bf16", g, m, n, k)
    assert abs(ours / measured - 1) <= TOLERANCE, f"TE-2045 {g}x{m}x{n}x{k}: {ours:.0f} vs {measured}"


def test_deepseek_v3_routed_experts_run_below_deepgemm_isolated_rates():
    """scenarios/deepseek-v3.yaml: 4,096 tokens x top-8 over 256/64 = 4 local experts = 8,192 rows
    per expert, hidden 7168, expert width 2048 (gate+up fused: n = 4096) — DeepGEMM's own
    contiguous shapes.  Inside the training step (sustained clock, blockwise-FP8 rate) the routed
    experts' GEMMs run at 0.85-1.0 of the slowest published isolated figures ([DG-a6d97a1] forward,
    [DG-PR95] weight gradients): the grouped GEMMs are not priced too fast."""
    sc = load_scenario("deepseek-v3")
    timer = GemmTimer(sc)
    gpu, eff = timer.gpu, timer.eff["fp8"]
    rows = 8192.0
    assert sc.training.micro_batch * sc.model.seq_len * sc.model.moe.top_k * sc.parallelism.ep \
        / sc.model.moe.experts == rows
    checks = [  # (m, n, k, accumulate, published isolated TFLOP/s)
        (rows, 4096, 7168, False, 1297), (rows, 7168, 2048, False, 1099),      # forward, up / down
        (7168, 4096, rows, True, 1044), (2048, 7168, rows, True, 1033),        # weight gradients
    ]
    for m, n, k, acc, published in checks:
        t = gemm_seconds(m, n, k, "fp8", gpu, eff, 4, acc, not acc)
        ratio = 2.0 * m * n * k / t / 1e12 / published
        assert 0.85 <= ratio <= 1.0, f"{m}x{n}x{k}: {ratio:.3f} of {published}"
