"""What every workload family prices its kernels with: GEMMs timed by shape and dtype on the
scenario's GPU (:class:`GemmTimer`, explorer/physics/kernels.py), and the factor that turns a
forward's element-wise traffic into its backward's.

FP8 (Micikevicius et al., "FP8 Formats for Deep Learning", arXiv 2209.05433; NVIDIA Transformer
Engine): each FP8 GEMM input is cast to FP8 with its transpose (for the weight gradient) and its
amax recorded, in forward for the activation and in backward for the output gradient
(FP8_CAST_BYTES_FWD/BWD).
"""
from __future__ import annotations

from collections.abc import Iterable

from ..config import Scenario
from ..config.frameworks import profile
from ..physics.hardware import gemm_large_efficiency
from ..physics.kernels import gemm_seconds
from ..physics.work import Gemm, Work

# Backward element-wise traffic relative to forward: read the saved input and the incoming
# gradient, write the outgoing gradient (twice the forward's read+write).
BACKWARD_STREAM_FACTOR = 2.0
# FP8 casts (Transformer Engine): in forward the cast of a GEMM input is fused into the kernel that
# produces it (LayerNormLinear, LayerNormMLP's activation), which writes the FP8 copy and its
# transpose instead of a bf16 tensor: 2 extra bytes per element; in backward the incoming bf16
# gradient is read and written as FP8 in both layouts by a separate cast-transpose: 4 bytes.
FP8_CAST_BYTES_FWD = 2
FP8_CAST_BYTES_BWD = 4


class GemmTimer:
    """Times GEMM lists on the scenario's GPU, in the dtype each GEMM runs in."""

    def __init__(self, sc: Scenario) -> None:
        self.gpu = sc.hardware.gpu
        # FP8 GEMMs need FP8 tensor cores: a GPU whose fp8 peak is its bf16 peak (A100) runs the
        # recipe in bf16 (Transformer Engine requires compute capability 8.9+ for FP8).
        self.fp8 = sc.training.dtype == "fp8" and (self.gpu.fp8_tflops or 0) > self.gpu.peak_tflops
        self.base = "bf16" if sc.training.dtype == "fp8" else sc.training.dtype
        self.eff = {d: gemm_large_efficiency(sc, d) for d in {"fp8", self.base}}
        # Weight-gradient GEMMs that add into the fp32 main_grad (kernels.ACCUMULATE_FP32_BYTES).
        self.acc = profile(sc.training.framework).wgrad_accumulate_fp32

    def dtype(self, g: Gemm) -> str:
        """The dtype ``g`` runs in: FP8 for an FP8 recipe's linear layers on FP8 tensor cores."""
        return "fp8" if self.fp8 and g.fp8 else self.base

    def passes(self, gemms: Iterable[Gemm]) -> tuple[Work, Work, Work, float, float]:
        """(forward, dgrad, wgrad) Work of ``gemms`` and the FP8 cast bytes of forward and backward."""
        flops = fs = ds = ws = cast_f = cast_b = 0.0
        for g in gemms:
            d = self.dtype(g)
            eff = self.eff[d]
            flops += g.flops
            grp = int(g.count)                       # experts run as one grouped GEMM kernel
            fs += g.count * gemm_seconds(g.m, g.n, g.k, d, self.gpu, eff, grp, ragged=g.ragged)
            ds += g.count * gemm_seconds(g.m, g.k, g.n, d, self.gpu, eff, grp, ragged=g.ragged)  # dX = dY W^T
            # dW = X^T dY: the ragged token dimension is the reduction, the output is whole weights.
            ws += g.count * gemm_seconds(g.k, g.n, g.m, d, self.gpu, eff, grp, self.acc)
            if d == "fp8":
                cast_f += FP8_CAST_BYTES_FWD * g.m * g.k * g.count
                cast_b += FP8_CAST_BYTES_BWD * g.m * g.n * g.count
        return Work(flops, fs), Work(flops, ds), Work(flops, ws), cast_f, cast_b
