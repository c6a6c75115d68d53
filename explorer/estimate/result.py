"""What the estimator returns: one row per configuration, numpy arrays of equal length."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..vocabulary import CATEGORIES


@dataclass(frozen=True)
class Estimates:
    """Estimated figures of many configurations (row i of every array is configuration i).

    The conventions are Result's (explorer/simulate.py): ``breakdown_s`` has the categories of
    ``Result.breakdown_s`` for the stage with the most compute-stream work (but ``offload``: the
    host copies' stall stays in ``compute``) and sums to ``iteration_time_s``; ``memory_GB_total``
    is the busiest stage's per-GPU peak in GB = 1e9 bytes, ``Result.memory.as_GB()['total']``;
    ``fits`` is the simulation's judgement (``not Result.memory_over_capacity``: the total within
    the GPU's capacity in bytes).  ``time_per_step_s`` is Result's: the iteration, or where replicas
    synchronise only every few steps (training.sync) the amortised step, which tokens/s and MFU
    divide by and which a ranking compares.  Rows of
    invalid configurations (estimate_overrides) are NaN, and ``fits`` False."""

    iteration_time_s: np.ndarray
    breakdown_s: dict[str, np.ndarray]
    memory_GB_total: np.ndarray
    fits: np.ndarray
    mfu: np.ndarray
    tokens_per_s: np.ndarray
    tflops_per_gpu: np.ndarray
    time_per_step_s: np.ndarray

    def __len__(self) -> int:
        return len(self.iteration_time_s)

    def row(self, i: int) -> dict:
        """Row ``i`` as plain Python numbers (what a CLI prints or a JSON carries)."""
        return {"iteration_time_s": float(self.iteration_time_s[i]),
                "breakdown_s": {k: float(v[i]) for k, v in self.breakdown_s.items()},
                "memory_GB_total": float(self.memory_GB_total[i]), "fits": bool(self.fits[i]),
                "mfu": float(self.mfu[i]), "tokens_per_s": float(self.tokens_per_s[i]),
                "tflops_per_gpu": float(self.tflops_per_gpu[i]),
                "time_per_step_s": float(self.time_per_step_s[i])}

    def take(self, idx: np.ndarray) -> Estimates:
        """The rows ``idx`` (repeats allowed), in that order."""
        return Estimates(self.iteration_time_s[idx], {k: v[idx] for k, v in self.breakdown_s.items()},
                         self.memory_GB_total[idx], self.fits[idx], self.mfu[idx], self.tokens_per_s[idx],
                         self.tflops_per_gpu[idx], self.time_per_step_s[idx])

    @staticmethod
    def empty(n: int) -> Estimates:
        """``n`` rows of NaN (invalid configurations), ``fits`` False."""
        nan = np.full(n, np.nan)
        return Estimates(nan.copy(), {k: nan.copy() for k in CATEGORIES}, nan.copy(), np.zeros(n, bool),
                         nan.copy(), nan.copy(), nan.copy(), nan.copy())

    @staticmethod
    def scatter(n: int, parts: Sequence[tuple[np.ndarray, Estimates]]) -> Estimates:
        """``n`` rows assembled from (row indices, estimates of those rows) pieces; others NaN."""
        out = Estimates.empty(n)
        for idx, est in parts:
            out.iteration_time_s[idx] = est.iteration_time_s
            for k in CATEGORIES:
                out.breakdown_s[k][idx] = est.breakdown_s[k]
            out.memory_GB_total[idx] = est.memory_GB_total
            out.fits[idx] = est.fits
            out.mfu[idx] = est.mfu
            out.tokens_per_s[idx] = est.tokens_per_s
            out.tflops_per_gpu[idx] = est.tflops_per_gpu
            out.time_per_step_s[idx] = est.time_per_step_s
        return out
