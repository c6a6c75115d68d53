"""Per-stage program order of forward and backward passes for the pipeline schedules.

An op is a :class:`ChunkOp` ``(kind, mb, chunk)`` with kind ``"F"`` or ``"B"``; ``chunk`` is the virtual
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

from collections.abc import Sequence

from .base import BubbleInputs, ChunkOp, Problem, ScenarioLike, chunk_ops, micro_batch_units

Op = ChunkOp          # the op of these orders (schedules/base.py)


def gpipe(stage: int, p: int, m: int, v: int = 1) -> list[Op]:
    """All m forwards, then all m backwards (one chunk per GPU; ``v`` is ignored)."""
    return list(chunk_ops("F", 0, m)[:m] + chunk_ops("B", 0, m)[:m])


def one_f_one_b(stage: int, p: int, m: int, v: int = 1) -> list[Op]:
    """Warm-up forwards, one forward / one backward alternation, drain (``v`` is ignored)."""
    fwd, bwd = chunk_ops("F", 0, m), chunk_ops("B", 0, m)
    warmup = min(p - stage - 1, m)
    order: list[Op] = list(fwd[:warmup])
    f, b = warmup, 0
    while f < m:
        order.append(fwd[f])
        f += 1
        order.append(bwd[b])
        b += 1
    order += bwd[b:m]
    return order


def interleaved(stage: int, p: int, m: int, v: int) -> list[Op]:
    """Megatron-LM's interleaved 1F1B over ``v`` chunks per GPU."""
    total = m * v
    # Micro-batches advance in whole groups of p: with m not a multiple of p the last group's ops
    # reach past m - 1 (validation refuses such m; the textbook grid still draws them).
    n = ((total - 1) // (p * v) + 1) * p if total else 0
    fs = [chunk_ops("F", c, n) for c in range(v)]
    bs = [chunk_ops("B", c, n) for c in range(v)]

    # The k-th forward and backward: micro-batch group k // (p v), in it chunk (k mod p v) // p
    # (backwards in reverse chunk order), micro-batch (k mod p) of the group.  Listed at once
    # (a deep pipeline's orders hold millions of ops).
    fwd = [fs[(pos // p) % v][group * p + pos % p] for group in range(-(-total // (p * v)))
           for pos in range(p * v)][:total]
    bwd = [bs[v - 1 - (pos // p) % v][group * p + pos % p] for group in range(-(-total // (p * v)))
           for pos in range(p * v)][:total]
    warmup = min((p - stage - 1) * 2 + (v - 1) * p, total)
    # Warm-up forwards, then one forward and one backward alternating, then the remaining backwards.
    steady: list[Op] = [fwd[0]] * (2 * (total - warmup)) if total > warmup else []
    steady[0::2] = fwd[warmup:]
    steady[1::2] = bwd[:total - warmup]
    return fwd[:warmup] + steady + bwd[total - warmup:]


def stage_order(schedule: str, stage: int, p: int, m: int, v: int = 1) -> list[Op]:
    """Program order of pipeline stage ``stage`` for ``schedule``."""
    if schedule == "gpipe":
        return gpipe(stage, p, m)
    if schedule == "1f1b":
        return one_f_one_b(stage, p, m)
    if schedule == "interleaved":
        return interleaved(stage, p, m, v)
    raise ValueError(f"unknown schedule {schedule!r}")


def peak_activations(order: Sequence[Op], act: Sequence[float]) -> float:
    """Peak activation bytes of one stage, replaying its program order: a forward adds its chunk's
    ``act`` bytes, the pass that completes the gradients (B, or W when the backward is split)
    frees them."""
    release = "W" if any(op.kind == "W" for op in order) else "B"
    live = peak = 0.0
    for op in order:
        if op.kind == "F":
            live += act[op.chunk]
            if live > peak:               # only a forward can raise the peak
                peak = live
        elif op.kind == release:
            live -= act[op.chunk]
    return peak


def gpipe_in_flight(stage: int, p: int, m: int, v: int = 1) -> int:
    """GPipe holds every micro-batch's activations before its first backward."""
    return m


def one_f_one_b_in_flight(stage: int, p: int, m: int, v: int = 1) -> int:
    """1F1B: the warm-up forwards plus the one of the first steady step, p - stage (at most m)."""
    return min(p - stage, m)


def interleaved_in_flight(stage: int, p: int, m: int, v: int) -> int:
    """Interleaved 1F1B: warm-up (p-stage-1)*2 + (v-1)*p chunk-micro-batches plus one (at most m*v)."""
    return min((p - stage - 1) * 2 + (v - 1) * p + 1, m * v)


def flush_bubble(b: BubbleInputs) -> tuple[float, str]:
    """GPipe and 1F1B (Narayanan et al. SC21 Sec. 2.2.1): bubble time (p-1)(F+B) against m(F+B)
    of work; TeraPipe token slices (Li et al. ICML 2021 Sec. 3) pipeline like m*k micro-batches."""
    p, m = b.p, b.m
    val = (p - 1) / (m + p - 1)
    return val, (f"(p-1)/(m+p-1) = {p - 1}/{m + p - 1} = {val:.1%} with p = {p} stages, m = {m} {b.unit} "
                 f"(SC21 Sec. 2.2)")


def interleaved_bubble(b: BubbleInputs) -> tuple[float, str]:
    """Narayanan et al. SC21 Sec. 2.2.2: the bubble time shrinks by v, ((p-1)/v) / (m + (p-1)/v)."""
    p, v, m = b.p, b.v, b.m
    val = (p - 1) / v / (m + (p - 1) / v)
    return val, (f"((p-1)/v)/(m+(p-1)/v) = {val:.1%} with p = {p}, v = {v} chunks per GPU, m = {m} {b.unit} "
                 f"(SC21 Sec. 2.2.2)")


def no_rule(sc: ScenarioLike) -> Problem | None:
    """GPipe and 1F1B run on any pipeline the generic rules accept."""
    return None


def interleaved_rule(sc: ScenarioLike) -> Problem | None:
    """The interleaved schedule needs stages to interleave and whole groups of p micro-batches."""
    p, t = sc.parallelism, sc.training
    if p.pp == 1:
        return "parallelism.schedule", "interleaved needs pp > 1 (got pp=1); use 1f1b or raise pp"
    dp, mb, _ = micro_batch_units(sc)
    if mb % p.pp:
        step = t.micro_batch * dp * p.pp
        return "training.global_batch", (f"{t.global_batch} leaves ({mb}) micro-batches per pipeline, but "
                                         f"the interleaved schedule needs a multiple of pp={p.pp} "
                                         f"(Narayanan et al. SC21, Sec. 2.2.2); use a multiple of {step} "
                                         f"(micro_batch*dp*pp)")
    return None


def peak_in_flight(order: Sequence[Op]) -> int:
    """Most chunk-micro-batches whose forward ran but backward did not yet (activation memory)."""
    live = peak = 0
    for op in order:
        live += 1 if op.kind == "F" else -1
        peak = max(peak, live)
    return peak
