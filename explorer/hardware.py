"""Accelerator compute model: a roofline over GEMM FLOPs and memory-bound HBM traffic.

A piece of work is ``(gemm_flops, gemm_bytes, stream_bytes)``: matrix multiplies run at
``peak * gemm_efficiency`` unless their operand traffic makes them memory bound (the roofline,
Williams, Waterman & Patterson, CACM 2009); element-wise kernels (norms, activations, softmax,
dropout, optimizer) are memory bound and run at ``hbm * HBM_EFFICIENCY``.  Because element-wise
traffic grows with s*b*h while GEMM FLOPs grow with s*b*h^2, small models reach a smaller
fraction of peak — the trend of Megatron-LM SC21 Table 1 — without a per-size constant.
"""
from __future__ import annotations

from dataclasses import dataclass

from .scenario import GPU, Scenario

# Fraction of the vendor-measured single-GEMM throughput (hardware.csv, measured_bf16_matmul_tflops)
# that the GEMMs of a training step reach on average (shape mix, wave quantisation, kernel launch
# gaps).  Fitted once, globally, by bench/calibrate.py to Megatron-LM SC21 Table 1
# (Narayanan et al. 2021, arXiv 2104.04473): 0.83 minimises the mean absolute error over its 10
# rows (2.6%, max 4.1%; scanned 0.82..0.86 in steps of 0.01).
GEMM_FRACTION_OF_MEASURED = 0.83

# Achievable fraction of HBM bandwidth for streaming kernels; STREAM-like copies on A100/H100 reach
# about 90% of the data-sheet figure (NVIDIA "CUDA C++ Best Practices", effective bandwidth), fused
# element-wise kernels somewhat less.
HBM_EFFICIENCY = 0.8

# Ratio used when a custom GPU gives no measured GEMM figure: the mean of measured/peak over the
# presets with a measurement (A100 0.87, H100 0.80, B200 0.78 in hardware.csv).
DEFAULT_MEASURED_OVER_PEAK = 0.82

BYTES_PER_ELEMENT = {"bf16": 2, "fp16": 2, "fp8": 1, "fp32": 4}


def default_gemm_efficiency(gpu: GPU) -> float:
    """Fraction of peak reached by training GEMMs when the scenario does not override it."""
    measured = (gpu.measured_matmul_tflops / gpu.peak_tflops if gpu.measured_matmul_tflops
                else DEFAULT_MEASURED_OVER_PEAK)
    return min(measured, 1.0) * GEMM_FRACTION_OF_MEASURED


@dataclass(frozen=True)
class ComputeModel:
    """Per-GPU compute speeds in SI units (FLOP/s, bytes/s), fixed for one scenario."""

    gemm_flops_per_s: float      # peak of the training dtype x GEMM efficiency
    hbm_bytes_per_s: float       # HBM bandwidth x HBM_EFFICIENCY
    peak_flops_per_s: float      # bf16 dense peak, the MFU denominator (PaLM App. B)

    @classmethod
    def for_scenario(cls, sc: Scenario) -> ComputeModel:
        gpu = sc.hardware.gpu
        eff = sc.hardware.compute_efficiency or default_gemm_efficiency(gpu)
        peak = gpu.fp8_tflops if sc.training.dtype == "fp8" else gpu.peak_tflops
        if sc.training.dtype == "fp32":
            peak = gpu.peak_tflops / 2  # TF32 tensor cores run at half the bf16 rate (A100/H100 data sheets)
        return cls(gemm_flops_per_s=peak * 1e12 * eff, hbm_bytes_per_s=gpu.hbm_GBps * 1e9 * HBM_EFFICIENCY,
                   peak_flops_per_s=gpu.peak_tflops * 1e12)

    def time(self, gemm_flops: float, gemm_bytes: float = 0.0, stream_bytes: float = 0.0) -> float:
        """Seconds for GEMMs (roofline: compute or operand traffic, whichever is slower) plus
        memory-bound element-wise traffic."""
        return max(gemm_flops / self.gemm_flops_per_s, gemm_bytes / self.hbm_bytes_per_s) \
            + stream_bytes / self.hbm_bytes_per_s
