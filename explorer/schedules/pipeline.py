"""Per-stage program order of forward and backward passes for the pipeline schedules.

An op is ``(pass, micro_batch, chunk)`` with pass ``"F"`` or ``"B"``; ``chunk`` is the virtual
stage index on this GPU (0 unless interleaved).  Orders follow:
- GPipe: Huang et al., NeurIPS 2019 — all forwards, then all backwards (flush).
- 1F1B (PipeDream-Flush): Narayanan et al., ICML 2021 / SC21 Fig. 4 — stage i runs
  min(p-i-1, m) warm-up forwards, then alternates one forward and one backward, then drains.
- Interleaved 1F1B: Narayanan et al., SC21 Sec. 2.2.2 and Megatron-LM's
  ``forward_backward_pipelining_with_interleaving``: micro-batches advance in groups of p through
  the v chunks; warm-up is (p-i-1)*2 + (v-1)*p forwards.
The bubble of these orders is (p-1)/(m+p-1) of the iteration for GPipe/1F1B and that divided by v
for the interleaved schedule (SC21 Sec. 2.2), which the tests check on the engine's output.
"""
from __future__ import annotations

Op = tuple[str, int, int]


def gpipe(stage: int, p: int, m: int) -> list[Op]:
    return [("F", i, 0) for i in range(m)] + [("B", i, 0) for i in range(m)]


def one_f_one_b(stage: int, p: int, m: int) -> list[Op]:
    warmup = min(p - stage - 1, m)
    order: list[Op] = [("F", i, 0) for i in range(warmup)]
    f, b = warmup, 0
    while f < m:
        order.append(("F", f, 0))
        f += 1
        order.append(("B", b, 0))
        b += 1
    order += [("B", i, 0) for i in range(b, m)]
    return order


def interleaved(stage: int, p: int, m: int, v: int) -> list[Op]:
    total = m * v

    def fwd(k: int) -> Op:
        group, pos = divmod(k, p * v)
        return ("F", group * p + pos % p, (pos // p) % v)

    def bwd(k: int) -> Op:
        group, pos = divmod(k, p * v)
        return ("B", group * p + pos % p, v - 1 - (pos // p) % v)

    warmup = min((p - stage - 1) * 2 + (v - 1) * p, total)
    order = [fwd(k) for k in range(warmup)]
    f, b = warmup, 0
    while f < total:
        order.append(fwd(f))
        f += 1
        order.append(bwd(b))
        b += 1
    order += [bwd(k) for k in range(b, total)]
    return order


def stage_order(schedule: str, stage: int, p: int, m: int, v: int = 1) -> list[Op]:
    """Program order of pipeline stage ``stage`` for ``schedule``."""
    if schedule == "gpipe":
        return gpipe(stage, p, m)
    if schedule == "1f1b":
        return one_f_one_b(stage, p, m)
    if schedule == "interleaved":
        return interleaved(stage, p, m, v)
    raise ValueError(f"unknown schedule {schedule!r}")


def peak_in_flight(order: list[Op]) -> int:
    """Most chunk-micro-batches whose forward ran but backward did not yet (activation memory)."""
    live = peak = 0
    for kind, _, _ in order:
        live += 1 if kind == "F" else -1
        peak = max(peak, live)
    return peak
