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
  explained by walking back the chain of binding dependencies of the task that ends it (across
  classes): time covered by communication is charged to its dimension, time covered by other
  classes' compute to the pipeline bubble.
  The categories therefore sum exactly to the iteration time.  A never-flushing pipeline whose
  period a slower stream sets (PipeDream's steady state, analysis/steady_state.py) is broken down
  over its compute window and the time beyond it is charged to that stream: dp, pp, or optimizer
  for the compute stream (the step the window between backwards never holds).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..engine.scheduler import Task
from ..vocabulary import CATEGORIES, CATEGORY_OF_PART, COMM_DIMS  # noqa: F401 - re-exported


def group_by_class(tasks: list[Task], classes: int) -> list[list[Task]]:
    """The tasks of each GPU class, in task order (one pass, so later stages never loop over
    classes x tasks)."""
    out: list[list[Task]] = [[] for _ in range(classes)]
    for t in tasks:
        out[t.cls].append(t)
    return out


def class_breakdown(tasks: list[Task], cls: int, iteration_s: float, start_s: float = 0.0,
                    mine: list[Task] | None = None,
                    last_enders: list[Task] | None = None) -> dict[str, float]:
    """Seconds of the iteration per category on GPU class ``cls`` (sums to ``iteration_s``).

    The iteration is the window [start_s, start_s + iteration_s]: 0 for schedules that flush,
    the class's first compute for schedules whose consecutive iterations overlap.  ``mine`` (the
    class's tasks) and ``last_enders`` (the tasks that end last, in task order) may be passed
    precomputed, so breaking down every class costs one pass over the tasks, not one per class."""
    out = dict.fromkeys(CATEGORIES, 0.0)
    if mine is None:
        mine = [t for t in tasks if t.cls == cls]
    compute = [t for t in mine if t.stream == "compute" and t.duration > 0]
    compute.sort(key=_start)
    end = start_s + iteration_s
    category_of = CATEGORY_OF_PART

    def explain(a: float, b: float, d: Task | None) -> None:
        """Charge the idle interval [a, b] by walking back the chain of binding dependencies:
        communication (and the wait for its stream) is charged to its dimension, other classes'
        compute to the bubble; the walk stops at this class's own compute."""
        while d is not None and b - a > 1e-15:
            if d.stream == "compute":
                if d.cls == cls:
                    break
                cat = "bubble"
            else:
                cat = category_of.get(d.kind, "bubble")
            lo = d.ready if d.ready > a else a
            if b > lo:
                out[cat] += b - lo
                b = lo
            d = tasks[d.binding] if d.binding >= 0 else None
        if b > a:
            out["bubble"] += b - a

    at = start_s
    for t in compute:
        ts, te = t.start, t.end
        lo = ts if ts > start_s else start_s
        hi = te if te < end else end
        if ts > at and at < end:
            explain(at, ts if ts < end else end, tasks[t.binding] if t.binding >= 0 else None)
        if hi > lo:
            # Only the part of the task inside the window counts (overlapping-iteration schedules
            # simulate more than one iteration), its parts in proportion.
            share = (hi - lo) / t.duration
            for k, v in t.parts:
                out[category_of[k]] += v * share
        if hi > at:
            at = hi
    if end > at:
        # Tail: this class is done; explain what the iteration still waits for.
        if last_enders is None:
            last_end = max(t.end for t in tasks)
            last_enders = [t for t in tasks if t.end == last_end]
        # The last task to end, preferring this class's own (first in task order among equals).
        last = next((t for t in last_enders if t.cls == cls), last_enders[0])
        explain(at, end, last)
    return out


def _start(t: Task) -> float:
    return t.start


@dataclass(frozen=True)
class MemoryBreakdown:
    """Per-GPU memory in bytes."""

    params: float
    grads: float
    optimizer: float
    activations: float
    reserved: float = 0.0      # NCCL communicators' buffers (taskgraph/techniques/nccl_buffers.py)

    @property
    def total(self) -> float:
        return self.params + self.grads + self.optimizer + self.activations + self.reserved

    def as_GB(self) -> dict[str, float]:
        return {"params": self.params / 1e9, "grads": self.grads / 1e9, "optimizer": self.optimizer / 1e9,
                "activations": self.activations / 1e9, "reserved": self.reserved / 1e9,
                "total": self.total / 1e9}
