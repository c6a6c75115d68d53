"""Time of one kernel on one GPU: GEMMs by shape and dtype, attention cores.

PROVISIONAL: a roofline with one efficiency (the model before issue 10); the shape-aware model
replaces the bodies, keeping these signatures.
"""
from __future__ import annotations

from .scenario import GPU

BYTES = {"bf16": 2, "fp16": 2, "fp8": 1, "fp32": 4}
HBM_EFFICIENCY = 0.8


def dtype_peak_tflops(gpu: GPU, dtype: str) -> float:
    """Dense tensor-core peak for GEMMs in ``dtype`` (fp32 runs as TF32 at half the bf16 rate)."""
    if dtype == "fp8":
        return gpu.fp8_tflops or gpu.peak_tflops
    if dtype == "fp32":
        return gpu.peak_tflops / 2
    return gpu.peak_tflops


def gemm_seconds(m: float, n: float, k: float, dtype: str, gpu: GPU, large_efficiency: float) -> float:
    """Seconds of one (m x k) @ (k x n) GEMM in ``dtype``; ``large_efficiency`` is the fraction of
    the dtype's peak that large training GEMMs reach (hardware.py's fitted default or the user's)."""
    flops = 2.0 * m * n * k
    compute = flops / (dtype_peak_tflops(gpu, dtype) * 1e12 * large_efficiency)
    traffic = (m * k + k * n + m * n) * BYTES[dtype] / (gpu.hbm_GBps * 1e9 * HBM_EFFICIENCY)
    return max(compute, traffic)


def attention_seconds(flops: float, gpu: GPU, large_efficiency: float, backward: bool = False,
                      flash: bool = True) -> float:
    """Seconds of an attention core (QK^T, softmax, PV) doing ``flops`` of matrix work in bf16."""
    return flops / (gpu.peak_tflops * 1e12 * large_efficiency)
