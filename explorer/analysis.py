"""Figures of merit of one simulated iteration: throughput, MFU, memory, traffic, breakdown.

Conventions:
- ``tflops_per_gpu``: hardware FLOPs executed per GPU per second, recomputation included — the
  convention of Megatron-LM's tables (Narayanan et al. SC21, Eq. 3 counts the recompute forward).
- ``mfu``: model FLOPs without recomputation / (time x GPUs x bf16 peak) — PaLM (Chowdhery et al.
  2022, App. B) and Llama 3 (Sec. 3.3) convention.
- Memory: bf16 weights and gradients, fp32 optimizer state (ZeRO paper, Rajbhandari et al. SC20,
  Sec. 3: 2 + 2 + 12 bytes per parameter for mixed-precision Adam), divided across the
  data-parallel group as the ZeRO stage says; activations at the peak of the stage's schedule.
- Breakdown: the compute stream of the slowest GPU class, second by second.  Busy time is split
  by the parts of the running task (compute, recompute, exposed tp/cp/ep, optimizer); idle time is
  charged to the communication the next task was waiting for (following the chain of binding
  dependencies back while it runs through communication) and otherwise to the pipeline bubble.
  The categories therefore sum exactly to the iteration time.
"""
from __future__ import annotations

from dataclasses import dataclass

from .engine import Task

CATEGORIES = ("compute", "recompute", "tp", "cp", "ep", "pp", "dp", "bubble", "optimizer")
CATEGORY_OF_PART = {"compute": "compute", "weight-grad": "compute", "recompute": "recompute", "tp": "tp",
                    "cp": "cp", "ep": "ep", "pp": "pp", "dp": "dp", "optimizer": "optimizer"}
COMM_DIMS = ("tp", "cp", "ep", "pp", "dp")


def class_breakdown(tasks: list[Task], cls: int, iteration_s: float) -> dict[str, float]:
    """Seconds of the iteration per category on GPU class ``cls`` (sums to ``iteration_s``)."""
    out = dict.fromkeys(CATEGORIES, 0.0)
    mine = [t for t in tasks if t.cls == cls]
    compute = sorted((t for t in mine if t.stream == "compute" and t.duration > 0), key=lambda t: t.start)
    for t in compute:
        for k, v in t.parts:
            out[CATEGORY_OF_PART[k]] += v

    def charge_gap(a: float, b: float, waiter: Task | None) -> None:
        cur = waiter
        while b - a > 1e-15:
            dep = tasks[cur.binding] if cur is not None and cur.binding >= 0 else None
            if dep is None or dep.stream == "compute" or dep.end < a:
                break
            lo = max(a, dep.start)
            if b > lo:
                out[CATEGORY_OF_PART.get(dep.kind, "bubble")] += b - lo
            b = lo
            cur = dep
        if b > a:
            out["bubble"] += b - a

    at = 0.0
    for t in compute:
        if t.start > at:
            charge_gap(at, t.start, t)
        at = max(at, t.end)
    if iteration_s > at:
        # Tail: the class waits for its own outstanding communication, then for the other classes.
        tail = max((t for t in mine if t.stream != "compute"), key=lambda t: t.end, default=None)
        if tail is not None and tail.end > at:
            lo = max(at, tail.start)
            out[CATEGORY_OF_PART.get(tail.kind, "bubble")] += tail.end - lo
            charge_gap(at, lo, tail)
            at = tail.end
        out["bubble"] += max(iteration_s - at, 0.0)
    return out


@dataclass(frozen=True)
class MemoryBreakdown:
    """Per-GPU memory in bytes."""

    params: float
    grads: float
    optimizer: float
    activations: float

    @property
    def total(self) -> float:
        return self.params + self.grads + self.optimizer + self.activations

    def as_GB(self) -> dict[str, float]:
        return {"params": self.params / 1e9, "grads": self.grads / 1e9, "optimizer": self.optimizer / 1e9,
                "activations": self.activations / 1e9, "total": self.total / 1e9}
