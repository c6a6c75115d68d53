"""What a kernel is asked to do: the records a workload fills and the physics prices.

A workload (explorer/workloads) describes each layer as the GEMMs it runs (:class:`Gemm`, by
shape) and the work they and its element-wise kernels amount to (:class:`Work`); the compute model
(explorer/physics/hardware.py) turns a :class:`Work` into seconds.  The records live here, below
both, so that the physics never reads a workload module and every workload family fills the same
ones.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Work:
    """Work of one kernel group: the FLOPs its matrix kernels execute on this GPU, the seconds
    those kernels take at their achieved rates, and element-wise HBM bytes; ``model_flops`` where
    the model's share differs from what executes (:attr:`Gemm.shared`), else None."""

    gemm_flops: float = 0.0
    gemm_s: float = 0.0
    stream_bytes: float = 0.0
    model_flops: float | None = None

    @property
    def model(self) -> float:
        """This GPU's share of the model's FLOPs (the SC21 / PaLM MFU numerator): the executed
        FLOPs but for GEMMs every rank of a group repeats, which count once among them."""
        return self.gemm_flops if self.model_flops is None else self.model_flops

    def __add__(self, other: Work) -> Work:
        model = None if self.model_flops is None and other.model_flops is None else self.model + other.model
        return Work(self.gemm_flops + other.gemm_flops, self.gemm_s + other.gemm_s,
                    self.stream_bytes + other.stream_bytes, model)

    def scaled(self, k: float) -> Work:
        """This work ``k`` times (FLOPs, seconds and bytes alike)."""
        return Work(self.gemm_flops * k, self.gemm_s * k, self.stream_bytes * k,
                    None if self.model_flops is None else self.model_flops * k)


ZERO_WORK = Work()


@dataclass(frozen=True)
class Gemm:
    """One weight GEMM of a layer's forward on one GPU: (m x k) activations @ (k x n) weights,
    ``count`` times (the experts of a grouped GEMM); ``fp8``: a linear layer that an FP8 recipe
    runs in FP8 (Transformer Engine's Linear modules); False for what stays in bf16; ``ragged``:
    ``m`` is the mean of row counts that vary from group to group (routed experts' tokens), so
    each group's rows are padded to whole tiles (explorer/physics/kernels.py row_tiles)."""

    m: float
    n: float
    k: float
    count: float = 1.0
    fp8: bool = True
    ragged: bool = False
    # GPUs that compute this same GEMM (Megatron-Core's "duplicated" linears on every rank of a
    # tensor-parallel group: MLA's down-projections, the MoE router): the model's FLOPs count it once
    # among them (a hunt found DeepSeek-V3's MFU x time x GPUs 2.4 % higher at tp 2 than at tp 1).
    shared: float = 1.0

    @property
    def flops(self) -> float:
        """Forward FLOPs, 2 * m * n * k per GEMM (multiply + add)."""
        return 2.0 * self.m * self.n * self.k * self.count

    @property
    def params(self) -> float:
        """Weights of the GEMM held by this GPU."""
        return self.n * self.k * self.count
