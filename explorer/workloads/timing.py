"""What every workload family prices its kernels with: GEMMs timed by shape and dtype on the
scenario's GPU (:class:`GemmTimer`, explorer/physics/kernels.py), and the factor that turns a
forward's element-wise traffic into its backward's.

FP8 (Micikevicius et al., "FP8 Formats for Deep Learning", arXiv 2209.05433; NVIDIA Transformer
Engine): each FP8 GEMM input is cast to FP8 with its transpose (for the weight gradient) and its
amax recorded, in forward for the activation and in backward for the output gradient; how many
bytes that takes, and the GEMM rate, depend on the scaling recipe (explorer/config/fp8_recipes.py,
``training.fp8_recipe``: current scaling's amax pass, block scales).  The FP8 weight copies are cast
once per step and cached across micro-batches (TE "FP8 weight caching"), not per micro-batch.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from ..config import Scenario
from ..config.fp8_recipes import GEMM_RATE, cast_bytes, resolved_recipe, supports_mx
from ..config.frameworks import profile
from ..config.generations import runs_fp8
from ..physics.hardware import gemm_large_efficiency
from ..physics.kernels import DEFAULT_SMS, gemm_seconds
from ..physics.work import Gemm, Work

# Backward element-wise traffic relative to forward: read the saved input and the incoming
# gradient, write the outgoing gradient (twice the forward's read+write).
BACKWARD_STREAM_FACTOR = 2.0
# FP8 casts (Transformer Engine): in forward the cast of a GEMM input is fused into the kernel that
# produces it (LayerNormLinear, LayerNormMLP's activation), which writes the FP8 copy and its
# transpose instead of a bf16 tensor: 2 extra bytes per element; in backward the incoming bf16
# gradient is read and written as FP8 in both layouts by a separate cast-transpose: 4 bytes.  The
# delayed recipe's figures (fp8_recipes.CAST_BYTES_FWD/BWD); fp8_recipes.cast_bytes adds the other
# recipes' passes and scales.
# The output projection's input is the attention kernel's bf16 output, which no producer kernel
# casts: Transformer Engine's Linear runs a separate cast-transpose over it (read 2 bytes, write
# the FP8 copy and its transpose, 2 bytes), 2 bytes more than a fused cast
# (transformer_engine/pytorch/module/linear.py: the input is quantized inside _Linear.forward
# unless it already is an FP8 tensor; DotProductAttention returns bf16).
FP8_UNFUSED_CAST_EXTRA_BYTES = 2



def ub_overlap(sc: Scenario) -> bool:
    """The TP overlap runs as chunked all-gather/reduce-scatter GEMMs (Transformer Engine's
    userbuffers, PyTorch's async TP): ``communication.tp_overlap`` with sequence parallelism and
    tp > 1.  Megatron-LM refuses tp_comm_overlap without sequence parallelism (arguments.py:
    "Tensor parallel communication/GEMM overlap can happen only when sequence parallelism is
    enabled"); without it the overlap keeps the idealised collective matmul of tp_overlap.py."""
    p = sc.parallelism
    return sc.communication.tp_overlap and p.sequence_parallel and p.tp > 1


def tp_overlap_slowdown(sc: Scenario) -> float:
    """Time factor of the GEMMs that share the GPU with an SM-driven TP communication kernel:
    sms / (sms - comm SMs) under a chunked TP overlap (:func:`ub_overlap`), else 1.  The comm SMs
    are the framework's (frameworks.py ``tp_overlap_sms``: Transformer Engine's userbuffers take 16
    SMs with an SM margin for the pipelined/bulk overlaps; PyTorch's async TP uses the copy engine)."""
    if not ub_overlap(sc):
        return 1.0
    sms = sc.hardware.gpu.sms or DEFAULT_SMS
    comm = profile(sc.training.framework).tp_overlap_sms
    return sms / max(sms - comm, 1)


class GemmTimer:
    """Times GEMM lists on the scenario's GPU, in the dtype each GEMM runs in."""

    def __init__(self, sc: Scenario) -> None:
        self.gpu = sc.hardware.gpu
        # FP8 GEMMs need FP8 tensor cores: a GPU whose fp8 peak is its bf16 peak (A100) runs the
        # recipe in bf16 (config/generations.runs_fp8).
        self.fp8 = runs_fp8(sc)
        self.base = "bf16" if sc.training.dtype == "fp8" else sc.training.dtype
        # The FP8 scaling recipe (config/fp8_recipes.py): its cast bytes per GEMM input and its
        # GEMM rate relative to per-tensor FP8 (block scales applied on CUDA cores on Hopper).
        self.recipe = resolved_recipe(sc.training.fp8_recipe, self.gpu.origin, self.gpu.name)
        mx = supports_mx(self.gpu.origin, self.gpu.name)
        self.cast_fwd, self.cast_bwd = cast_bytes(self.recipe, mx)
        self.eff = {d: gemm_large_efficiency(sc, d) for d in {"fp8", self.base}}
        if self.fp8 and not mx:
            self.eff["fp8"] *= GEMM_RATE[self.recipe]      # Blackwell's MMA applies block scales itself
        # Weight-gradient GEMMs that add into the fp32 main_grad (kernels.ACCUMULATE_FP32_BYTES).
        self.acc = profile(sc.training.framework).wgrad_accumulate_fp32

    def dtype(self, g: Gemm) -> str:
        """The dtype ``g`` runs in: FP8 for an FP8 recipe's linear layers on FP8 tensor cores."""
        return "fp8" if self.fp8 and g.fp8 else self.base

    def passes(self, gemms: Iterable[Gemm]) -> tuple[Work, Work, Work, float, float]:
        """(forward, dgrad, wgrad) Work of ``gemms`` and the FP8 cast bytes of forward and backward."""
        flops = model = fs = ds = ws = cast_f = cast_b = 0.0
        for g in gemms:
            d = self.dtype(g)
            eff = self.eff[d]
            flops += g.flops
            model += g.flops / g.shared
            grp = int(g.count)                       # experts run as one grouped GEMM kernel
            fs += g.count * gemm_seconds(g.m, g.n, g.k, d, self.gpu, eff, grp, ragged=g.ragged)
            ds += g.count * gemm_seconds(g.m, g.k, g.n, d, self.gpu, eff, grp, ragged=g.ragged)  # dX = dY W^T
            # dW = X^T dY: the ragged token dimension is the reduction, the output is whole weights.
            ws += g.count * gemm_seconds(g.k, g.n, g.m, d, self.gpu, eff, grp, self.acc)
            if d == "fp8":
                cast_f += self.cast_fwd * g.m * g.k * g.count
                cast_b += self.cast_bwd * g.m * g.n * g.count
        mf = None if model == flops else model          # (Work.model: what MFU counts)
        return Work(flops, fs, 0.0, mf), Work(flops, ds, 0.0, mf), Work(flops, ws, 0.0, mf), cast_f, cast_b

    def split_passes(self, gemms: Iterable[Gemm], parts: int) -> tuple[Work, Work, Work]:
        """(forward, dgrad, wgrad) Work of ``gemms`` when each runs as ``parts`` GEMMs of m/parts rows
        one after another (a comm-GEMM overlap's chunks: each chunk is its own kernel with its own
        wave tail, Transformer Engine's userbuffers ``num_splits``)."""
        gemms = list(gemms)
        f, d, w, _, _ = self.passes(replace(g, m=g.m / parts, ragged=False) for g in gemms)
        return f.scaled(parts), d.scaled(parts), w.scaled(parts)
