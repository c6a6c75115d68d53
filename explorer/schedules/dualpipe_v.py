"""DualPipeV (deepseek-ai/DualPipe, ``dualpipev.py`` and its README; Sea AI Lab's "cut-in-half"
of DualPipe): DualPipe folded into a V on half the ranks.

Placement (the registry's ``placement="v"``): p ranks hold a model of 2p stages, rank r stage r
(local chunk 0, "phase 0") and stage 2p-1-r (local chunk 1, "phase 1").  Each stage's parameters
exist once, unlike DualPipe's two copies (README table: DualPipe 2x parameters per device on PP
devices; DualPipeV the same per device on PP/2 devices, i.e. one copy of each stage).  A micro-batch
flows down through chunk 0, turns on rank p-1 (a local hand-off) and climbs back through chunk 1 to
the loss on rank 0; its backward runs the other way.

The per-rank order follows the eight steps of the reference ``DualPipeV.step`` (num_ranks = p,
num_chunks = m micro-batches, m >= 2p):
  1. nF0           (p - r - 1) * 2 forwards of chunk 0
  2. nF0F1         r + 1 pairs
  3. nB1W1F1       p - r - 1 triples, the backward split (zero bubble)
  4. nF0B1F1B0     m - 2p + r + 1 steps of two fused F&B ops (rank p-1's first pair unfused)
  5. nB1F1B0       p - r - 1
  6. nB1B0         r + 1, splitting backwards from the middle on
  7. nWB0          p - r - 1
  8. nW            r + 1
An op is a :class:`DirectedOp` ``(kind, chunk, mb)`` — DualPipe's op, its ``direction`` field
read as the V's arm (the local chunk), all on one lane — or a :class:`FusedOp`.  Activation
accounting is DualPipe's (schedules/dualpipe.peak_activations): a full B or a W frees.
"""
from __future__ import annotations

from functools import lru_cache

from .base import (
    BubbleInputs,
    DirectedOp,
    FusedOp,
    Problem,
    ScenarioLike,
    critical_path,
    idle_share,
    micro_batch_units,
)
from .dualpipe import eight_steps, peak_activations
from .vshape import rule as vshape_rule

Op = DirectedOp | FusedOp


def dualpipe_v(rank: int, p: int, m: int, v: int = 1) -> list[Op]:
    """Program order of ``rank`` of ``p`` ranks for ``m`` micro-batches (``v`` is ignored): DualPipe's
    eight steps (dualpipe.eight_steps) on the V, the rank's two chunks as its phases, step 4 of
    m - 2p + r + 1 fused steps."""
    return eight_steps(p, rank, m - 2 * p + rank + 1, False, m + 2 * p)


@lru_cache(maxsize=32)
def _orders(p: int, m: int) -> tuple[tuple[Op, ...], ...]:
    return tuple(tuple(dualpipe_v(r, p, m)) for r in range(p))


def ideal_makespan(p: int, m: int, F: float, B: float, W: float) -> float:
    """Makespan of the DualPipeV order with free communication, F, B (input gradients), W per
    chunk pass and a fused F&B costing F+B+W (nothing to hide): each op starts when its rank's
    previous op and its inputs along the V (stage s-1's forward, stage s+1's gradient; the turn
    and the loss local) are done.  Independent of the engine."""
    f_end: dict[tuple[int, int], float] = {}
    b_end: dict[tuple[int, int], float] = {}

    def stage(r: int, c: int) -> int:
        return r if c == 0 else 2 * p - 1 - r

    def ready(kind: str, c: int, i: int, r: int) -> float | None:
        s = stage(r, c)
        if kind == "F":
            return 0.0 if s == 0 else f_end.get((i, s - 1))
        return f_end.get((i, s)) if s == 2 * p - 1 else b_end.get((i, s + 1))

    def finish(r: int, op: Op, clock: float) -> float | None:
        if isinstance(op, FusedOp):
            fw, bw = op.forward, op.backward
            t1, t2 = ready("F", fw.direction, fw.mb, r), ready("B", bw.direction, bw.mb, r)
            if t1 is None or t2 is None:
                return None
            end = max(clock, t1, t2) + F + B + W
            f_end[(fw.mb, stage(r, fw.direction))] = end
            b_end[(bw.mb, stage(r, bw.direction))] = end
            return end
        if op.kind == "W":
            return clock + W
        t = ready("F" if op.kind == "F" else "B", op.direction, op.mb, r)
        if t is None:
            return None
        end = max(clock, t) + {"F": F, "B": B + W, "Bz": B}[op.kind]
        (f_end if op.kind == "F" else b_end)[(op.mb, stage(r, op.direction))] = end
        return end

    return critical_path(_orders(p, m), finish, "DualPipeV")


def in_flight(stage: int, p: int, m: int, v: int = 1) -> int:
    """Chunk-micro-batches whose activations rank ``stage`` holds at its peak, replayed from the
    order (the README's table: PP+1 chunks at most, PP = 2p the stages)."""
    return round(peak_activations(dualpipe_v(stage, p, m), [1.0, 1.0]))


def bubble(b: BubbleInputs) -> tuple[float, str]:
    """DualPipeV's bubble: the exact idle share of the reference order under ideal costs,
    1 - 2m(F+B+W)/T (each rank runs both chunks' passes), and the README's closed form beside it,
    (PP/2-1)(F&B+B-3W) with PP = 2p stages, B the full backward and F&B = F + full B when nothing
    hides: (p-1)(F+2B-W) in our B (input gradients) and W."""
    p, m = b.p, b.m
    F, B, W = b.passes()
    T = ideal_makespan(p, m, F, B, W)
    val = idle_share(2 * m * (F + B + W), T)
    ds = (p - 1) * (F + 2 * B - W)
    ds_val = ds / (2 * m * (F + B + W) + ds)
    return val, (f"1 - 2m(F+B+W)/T = {val:.1%}, T the critical path of the reference DualPipeV order with "
                 f"p = {p} ranks (2p = {2 * p} stages), m = {m} {b.unit}, F = {F * 1e3:.3g} ms, "
                 f"B = {B * 1e3:.3g} ms, W = {W * 1e3:.3g} ms per chunk; the DualPipe README's "
                 f"(PP/2-1)(F&B+B-3W) gives {ds_val:.1%}")


def rule(sc: ScenarioLike) -> Problem | None:
    """The reference asserts num_chunks >= 2 * num_ranks: at least 2p micro-batches (units)."""
    p, t = sc.parallelism, sc.training
    got = vshape_rule(sc)                     # a V needs pp > 1
    if got is not None:
        return got
    dp, _, units = micro_batch_units(sc)
    if units < 2 * p.pp:
        step = t.micro_batch * dp
        return "training.global_batch", (f"{t.global_batch} gives {units} micro-batches per pipeline; "
                                         f"dualpipe-v needs at least 2*pp = {2 * p.pp} (deepseek-ai/DualPipe "
                                         f"dualpipev.py); use at least {2 * p.pp * step}")
    return None
