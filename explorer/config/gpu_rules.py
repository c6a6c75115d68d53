"""Rules on a GPU's own figures (config/rules.py runs them in its order): what its tensor cores'
peaks and measured rates can be."""
from __future__ import annotations

from .generations import PRE_AMPERE, architecture
from .schema import ScenarioError
from .sections import Scenario


def rule_fp8_peak_at_least_bf16(sc: Scenario) -> None:
    """An FP8 tensor core is at least as fast as the bf16 one (twice on Hopper and Blackwell, NVIDIA
    data sheets); a GPU without FP8 has fp8_tflops equal to peak_tflops (the loader's default).
    Below it the code's test for FP8 hardware (fp8 peak above the bf16 peak) would call an H800 an
    Ampere part and the FP8 MFU would divide by a peak under the work done (found by an invariant
    hunt: ``fp8_tflops: 0.1`` read an FP8 MFU of 4,203)."""
    g = sc.hardware.gpu
    if g.fp8_tflops is not None and g.fp8_tflops < g.peak_tflops:
        raise ScenarioError("hardware.gpu.fp8_tflops", f"{g.fp8_tflops:g} TFLOP/s is below the bf16 peak "
                            f"({g.peak_tflops:g}): give at least {g.peak_tflops:g}, or leave it out for a "
                            "GPU without FP8 tensor cores")


def rule_measured_within_peak(sc: Scenario) -> None:
    """A GEMM cannot run above the tensor cores' peak: the measured bf16 rate is at most the bf16
    peak (found by a hunt: ``peak_tflops: 0.1`` under the H100's measured 795 read an MFU of 1.92)."""
    g = sc.hardware.gpu
    if g.measured_matmul_tflops is not None and g.measured_matmul_tflops > g.peak_tflops:
        got = g.measured_matmul_tflops
        raise ScenarioError("hardware.gpu.peak_tflops", f"{g.peak_tflops:g} TFLOP/s is below the GPU's "
                            f"measured GEMM rate (hardware.gpu.measured_matmul_tflops {got:g}): a peak is at "
                            f"least what a GEMM reaches; give {got:g} or more, or lower the measured rate")


def rule_fp32_within_peak(sc: Scenario) -> None:
    """fp32 runs no faster than the bf16/fp16 tensor cores (half their rate as TF32, an eighth on
    a V100's CUDA cores): an fp32 peak above the bf16 peak is a typo for another field."""
    g = sc.hardware.gpu
    if g.fp32_tflops is not None and g.fp32_tflops > g.peak_tflops:
        raise ScenarioError("hardware.gpu.fp32_tflops", f"{g.fp32_tflops:g} TFLOP/s is above the bf16 peak "
                            f"({g.peak_tflops:g}): fp32 is at most as fast; give at most {g.peak_tflops:g} "
                            "(a V100 computes 14-15.7 in fp32), or leave it out for TF32 at half the bf16 "
                            "peak")


def rule_bf16_needs_ampere(sc: Scenario) -> None:
    """bf16 tensor cores (and cuBLAS's bf16 GEMMs) begin with Ampere: a Volta or Turing GPU (V100,
    T4: config/generations.py) trains in fp16 mixed precision or fp32 (PyTorch's
    ``torch.cuda.is_bf16_supported()`` is False below sm80).  Priced at its fp16 rate, a bf16 run
    on a V100 had read as fast as fp16; an fp8 one, whose recipe falls back to bf16 on a GPU
    without FP8 tensor cores, ran too."""
    g = sc.hardware.gpu
    arch = architecture(g)
    if sc.training.dtype in ("bf16", "fp8") and arch in PRE_AMPERE:
        what = "bf16 tensor cores (Ampere or later)" if sc.training.dtype == "bf16" else \
            "FP8 tensor cores (Ada, Hopper, Blackwell) and, to fall back, bf16 ones (Ampere)"
        raise ScenarioError("training.dtype", f"{sc.training.dtype} needs {what}; {g.name or g.origin} "
                            f"is a {arch.title()} GPU: use fp16 or fp32")
