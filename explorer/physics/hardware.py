"""Accelerator compute model: kernel times from explorer/physics/kernels.py plus memory-bound traffic.

A piece of work is :class:`explorer.physics.work.Work`, which every workload fills: its matrix
kernels already timed by shape and dtype (``gemm_s``; kernels.py: roofline with an efficiency
curve), and element-wise kernels (norms, activations, softmax, dropout, casts, optimizer) that are
memory bound and run at ``hbm * HBM_EFFICIENCY``.  Because element-wise traffic grows with s*b*h
while GEMM FLOPs grow with s*b*h^2, small models reach a smaller fraction of peak — the trend of
Megatron-LM SC21 Table 1 — without a per-size constant.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..config import GPU, Scenario
from ..config.presets import datasheet_name
from .power import clock_fraction, sustained_fraction
from .work import Work

# Achievable fraction of HBM bandwidth for streaming kernels; STREAM-like copies on A100/H100 reach
# about 90% of the data-sheet figure (NVIDIA "CUDA C++ Best Practices", effective bandwidth), fused
# element-wise kernels somewhat less.
HBM_EFFICIENCY = 0.8
# Measured where the generation differs: B200's device-to-device copy reaches "over 6,000 GB/s" in
# CUDA's bandwidthTest (which counts the read and the write of every byte) against 8,000 GB/s on the
# data sheet (TogetherAI B200 benchmark, newmind.ai journal 18, "Unlocking Next-Generation AI
# Performance: Inside NVIDIA's Blackwell B200 Architecture": 8x B200 HGX, CUDA 12.8): 0.75.  The
# two-die B200 spreads each kernel's traffic over both dies' HBM stacks; its element-wise kernels do
# not reach Hopper's fraction.  Keyed by the data sheet's name (B200 and the GB200 superchip's GPU).
HBM_EFFICIENCY_MEASURED = {"B200": 6000 / 8000}


def hbm_efficiency(gpu: GPU) -> float:
    """Achieved fraction of ``gpu``'s HBM bandwidth for streaming kernels: the measured figure of its
    generation (HBM_EFFICIENCY_MEASURED, matched on the data-sheet name) or HBM_EFFICIENCY."""
    for key, frac in HBM_EFFICIENCY_MEASURED.items():
        if key in datasheet_name(gpu).upper():
            return frac
    return HBM_EFFICIENCY

def streaming_bytes_per_s(gpu: GPU) -> float:
    """Bytes per second a streaming (element-wise) kernel moves through ``gpu``'s HBM: its data-sheet
    bandwidth times :func:`hbm_efficiency` (every HBM-bound pass: optimizer, compression coders,
    model averaging, DiLoCo's outer update, serving's weight reads)."""
    return gpu.hbm_GBps * 1e9 * hbm_efficiency(gpu)


# Ratio used when a custom GPU gives no measured GEMM figure: the mean of measured/peak over the
# presets with a measurement (A100 0.87, H100 0.80, B200 0.78 in hardware.csv).
DEFAULT_MEASURED_OVER_PEAK = 0.82

BYTES_PER_ELEMENT = {"bf16": 2, "fp16": 2, "fp8": 1, "fp32": 4}


def weight_bytes(dtype: str) -> int:
    """Bytes of a weight as a GPU training in ``dtype`` holds it: the bf16 working copy of mixed
    precision (fp16, bf16, and FP8 runs, whose FP8 copies are counted apart), or the fp32 weight
    itself when training in fp32 (taskgraph/techniques/optimizer.param_bytes)."""
    return BYTES_PER_ELEMENT["fp32"] if dtype == "fp32" else BYTES_PER_ELEMENT["bf16"]


def measured_over_peak(gpu: GPU, dtype: str = "bf16") -> float:
    """Largest measured GEMM throughput / the dtype's dense peak (<= 1)."""
    if dtype == "fp8" and gpu.fp8_tflops and gpu.fp8_tflops != gpu.peak_tflops:
        if gpu.measured_fp8_matmul_tflops:
            return min(gpu.measured_fp8_matmul_tflops / gpu.fp8_tflops, 1.0)
    measured = (gpu.measured_matmul_tflops / gpu.peak_tflops if gpu.measured_matmul_tflops
                else DEFAULT_MEASURED_OVER_PEAK)
    return min(measured, 1.0)


def default_gemm_efficiency(gpu: GPU, dtype: str = "bf16") -> float:
    """Fraction of the dtype's peak reached by large training GEMMs when the scenario does not
    override it: the measured (burst) ceiling of an isolated GEMM at the SM clock a GPU sustains over
    a training step (power.sustained_fraction: the vendor's sustained tensor-core clock over the
    maximum clock, or B200's measured throttle).  No end-to-end factor: the 0.92 once fitted to
    training rows (GEMM_FRACTION_OF_MEASURED) was this clock, 0.924-0.926 on Hopper and Ampere."""
    return measured_over_peak(gpu, dtype) * sustained_fraction(gpu)


def gemm_large_efficiency(sc: Scenario, dtype: str) -> float:
    """``hardware.compute_efficiency`` when given (the same fraction for every dtype's peak),
    else the fitted default for ``dtype``; times the SM clock a power cap leaves (power.py: the
    measured rates hold at the board power, a lower ``hardware.power_cap_W`` lowers the clock)."""
    base = sc.hardware.compute_efficiency or default_gemm_efficiency(sc.hardware.gpu, dtype)
    return base * clock_fraction(sc.hardware.gpu, sc.hardware.power_cap_W)


@dataclass(frozen=True)
class ComputeModel:
    """Per-GPU compute speeds in SI units, fixed for one scenario."""

    hbm_bytes_per_s: float       # HBM bandwidth x hbm_efficiency(gpu)
    peak_flops_per_s: float      # bf16 dense peak, the MFU denominator (PaLM App. B)
    fp8_peak_flops_per_s: float  # fp8 dense peak (the second MFU of FP8 runs)

    @classmethod
    def for_scenario(cls, sc: Scenario) -> ComputeModel:
        gpu = sc.hardware.gpu
        return cls(hbm_bytes_per_s=streaming_bytes_per_s(gpu),
                   peak_flops_per_s=gpu.peak_tflops * 1e12,
                   fp8_peak_flops_per_s=(gpu.fp8_tflops or gpu.peak_tflops) * 1e12)

    def time(self, w: Work) -> float:
        """Seconds of ``w``: its matrix kernels (already timed) plus memory-bound traffic."""
        return w.gemm_s + w.stream_bytes / self.hbm_bytes_per_s
