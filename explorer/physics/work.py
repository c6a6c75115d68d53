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
    """Work of one kernel group: model FLOPs of its matrix kernels (the SC21 convention, for MFU),
    the seconds those kernels take at their achieved rates, and element-wise HBM bytes."""

    gemm_flops: float = 0.0
    gemm_s: float = 0.0
    stream_bytes: float = 0.0

    def __add__(self, other: Work) -> Work:
        return Work(self.gemm_flops + other.gemm_flops, self.gemm_s + other.gemm_s,
                    self.stream_bytes + other.stream_bytes)

    def scaled(self, k: float) -> Work:
        """This work ``k`` times (FLOPs, seconds and bytes alike)."""
        return Work(self.gemm_flops * k, self.gemm_s * k, self.stream_bytes * k)


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

    @property
    def flops(self) -> float:
        """Forward FLOPs, 2 * m * n * k per GEMM (multiply + add)."""
        return 2.0 * self.m * self.n * self.k * self.count

    @property
    def params(self) -> float:
        """Weights of the GEMM held by this GPU."""
        return self.n * self.k * self.count
