"""DualPipe (DeepSeek-AI, "DeepSeek-V3 Technical Report", 2024, Sec. 3.2.1, Fig. 5 and Table 2).

Micro-batches enter the pipeline from both ends: direction 0 flows from rank 0 to rank p-1,
direction 1 from rank p-1 to rank 0, so every rank holds two model chunks (stage r of direction 0
and stage p-1-r of direction 1: two copies of the parameters).  In the steady state a rank runs a
forward of one direction fused with a backward of the other ("F&B"), whose all-to-all and
pipeline communication hide behind each other's computation; the warm-up and drain split some
backwards into B and W (zero-bubble style) to fill the gaps.  Bubble (PP/2-1)(F&B+B-3W) with B the
full backward; activations of PP+1 micro-batches.

The per-rank order follows the eight steps of the reference implementation (deepseek-ai/DualPipe):
  1. nF0                 (h - r - 1) * 2 forwards of phase 0
  2. nF0F1               r + 1 pairs
  3. nB1W1F1             h - r - 1 triples, the backward split (zero bubble)
  4. nF0B1F1B0           M/2 - p + r + 1 steps of two fused F&B ops
  5. nB1F1B0             h - r - 1
  6. nB1B0               r + 1, splitting backwards from the middle on
  7. nWB0                h - r - 1
  8. nW                  r + 1
with h = p/2, r = min(rank, p-1-rank), M micro-batches in all, and phase 0 meaning direction 0 on
the upper half of the ranks and direction 1 on the lower half.
An op is a :class:`DirectedOp` ``(kind, direction, mb)`` with kind F, B (full backward), Bz (input
gradients only) or W, or a :class:`FusedOp` — a fused forward and full backward (schedules/base.py).
"""
from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from functools import lru_cache

from .base import (
    BubbleInputs,
    DirectedOp,
    FusedOp,
    Problem,
    ScenarioLike,
    critical_path,
    directed_ops,
    idle_share,
    micro_batch_units,
)

Op = DirectedOp | FusedOp      # the op of DualPipe's orders


def dualpipe_order(rank: int, p: int, m: int) -> list[Op]:
    """Program order of ``rank`` for p ranks (even) and m micro-batches (m/2 per direction)."""
    h = p // 2
    r = min(rank, p - 1 - rank)
    # Each direction's passes number at most m/2 + p (fewer than m/2 micro-batches still run the
    # warm-up's up to p forwards): tables of m + p cover every index.
    return eight_steps(h, r, m // 2 - p + r + 1, rank >= h, m + p)


def eight_steps(h: int, r: int, steady: int, swap: bool, table: int) -> list[Op]:
    """The eight steps of the reference implementation (module docstring) for rank ``r`` of a
    half of ``h`` ranks with ``steady`` fused steps in step 4; ``swap``: phase 0 is direction 1
    (DualPipe's lower half); ``table``: ops made per kind and direction.  DualPipeV runs the same
    steps on its V (schedules/dualpipe_v.py: h = p, its chunks as the directions)."""
    nxt_f = [0, 0]
    nxt_b = [0, 0]
    deferred: deque[tuple[int, int]] = deque()
    out: list[Op] = []
    ops = {(kind, d): directed_ops(kind, d, table) for kind in ("F", "B", "Bz", "W") for d in (0, 1)}

    def f(phase: int) -> DirectedOp:
        d = phase ^ int(swap)
        nxt_f[d] += 1
        return ops["F", d][nxt_f[d] - 1]

    def b(phase: int, zb: bool = False) -> DirectedOp:
        d = phase ^ int(swap)
        nxt_b[d] += 1
        i = nxt_b[d] - 1
        if zb:
            deferred.append((d, i))
            return ops["Bz", d][i]
        return ops["B", d][i]

    def w() -> DirectedOp:
        d, i = deferred.popleft()
        return ops["W", d][i]

    for _ in range((h - r - 1) * 2):                       # 1
        out.append(f(0))
    for _ in range(r + 1):                                 # 2
        out.append(f(0))
        out.append(f(1))
    for _ in range(h - r - 1):                             # 3
        out.append(b(1, zb=True))
        out.append(w())
        out.append(f(1))
    for k in range(steady):                                # 4
        if k == 0 and r == h - 1:
            # The innermost rank does not fuse its first pair (reference implementations' note:
            # it shrinks the bubble).
            out.append(f(0))
            out.append(b(1))
        else:
            fd = f(0)
            out.append(FusedOp(fd, b(1)))
        fd = f(1)
        out.append(FusedOp(fd, b(0)))
    for _ in range(h - r - 1):                             # 5
        out.append(b(1))
        fd = f(1)
        out.append(FusedOp(fd, b(0)))
    zb = False
    steps6 = r + 1
    for k in range(steps6):                                # 6
        if k == steps6 // 2 and r % 2 == 1:
            zb = True
        out.append(b(1, zb))
        if k == steps6 // 2 and r % 2 == 0:
            zb = True
        out.append(b(0, zb))
    for _ in range(h - r - 1):                             # 7
        out.append(w())
        out.append(b(0, zb=True))
    while deferred:                                        # 8
        out.append(w())
    return out


@lru_cache(maxsize=256)
def ideal_makespan(p: int, m: int, F: float, B: float, W: float) -> float:
    """Makespan of the DualPipe order with free communication and every rank's passes costing F
    (forward), B (input gradients) and W (weight gradients): each op starts when the previous op
    of its rank and its upstream/downstream pass of the same micro-batch are done (a fused F&B
    costs F+B+W: no communication to hide).  A critical-path evaluation of the order, independent
    of the engine; the DeepSeek-V3 closed form (PP/2-1)(F&B+B-3W) approximates it."""
    same = [(F, F)] * p
    return order_makespan(p, m, same, [(B, B)] * p, [(W, W)] * p, [(F + B + W, F + B + W)] * p)


Costs = Sequence[tuple[float, float]]         # per rank, per direction (0, 1)


def order_makespan(p: int, m: int, fwd: Costs, bwd: Costs, wgt: Costs, fused: Costs) -> float:
    """Makespan of the DualPipe order when rank r's passes of direction d take ``fwd[r][d]``
    (forward), ``bwd[r][d]`` (input gradients, the Bz of a split backward), ``wgt[r][d]`` (weight
    gradients; a full backward B takes both) and its fused F&B with the forward of direction d
    ``fused[r][d]`` (the backward is the other direction's): :func:`ideal_makespan` with passes
    that differ by rank and direction, as the chunks of an uneven layer split do."""
    orders = _orders(p, m)
    f_end: dict[tuple[int, int, int], float] = {}
    b_end: dict[tuple[int, int, int], float] = {}

    def ready(kind: str, d: int, i: int, r: int) -> float | None:
        step = 1 if d == 0 else -1
        if kind == "F":
            up = r - step
            return 0.0 if not 0 <= up < p else f_end.get((d, i, up))
        down = r + step
        return f_end.get((d, i, r)) if not 0 <= down < p else b_end.get((d, i, down))

    def finish(r: int, op: Op, clock: float) -> float | None:
        if isinstance(op, FusedOp):
            fw, bw = op.forward, op.backward
            t1, t2 = ready("F", fw.direction, fw.mb, r), ready("B", bw.direction, bw.mb, r)
            if t1 is None or t2 is None:
                return None
            end = max(clock, t1, t2) + fused[r][fw.direction]
            f_end[(fw.direction, fw.mb, r)] = end
            b_end[(bw.direction, bw.mb, r)] = end
            return end
        kind, d, i = op.kind, op.direction, op.mb
        if kind == "W":
            return clock + wgt[r][d]
        t = ready("F" if kind == "F" else "B", d, i, r)
        if t is None:
            return None
        cost = fwd[r][d] if kind == "F" else bwd[r][d] + (wgt[r][d] if kind == "B" else 0.0)
        end = max(clock, t) + cost
        (f_end if kind == "F" else b_end)[(d, i, r)] = end
        return end

    return critical_path(orders, finish, "DualPipe")


@lru_cache(maxsize=32)
def _orders(p: int, m: int) -> list[list[Op]]:
    """Every rank's order (memoised: the layer split evaluates several splits on one shape)."""
    return [dualpipe_order(r, p, m) for r in range(p)]


def dualpipe(stage: int, p: int, m: int, v: int = 1) -> list[Op]:
    """The registry's order signature: ``dualpipe_order`` of rank ``stage`` (``v`` is ignored)."""
    return dualpipe_order(stage, p, m)


def peak_activations(order: Sequence[Op], act: Sequence[float]) -> float:
    """Peak activation bytes of one rank replaying its DualPipe order; ``act[d]`` is the chunk of
    direction d.  A forward adds its chunk's activations; a full backward (B) or a weight-gradient
    pass (W) frees them (Bz keeps them for its W); a fused F&B adds the forward's, records the peak,
    then frees the backward's."""
    live = peak = 0.0
    for op in order:
        if isinstance(op, FusedOp):
            live += act[op.forward.direction]
            peak = max(peak, live)
            live -= act[op.backward.direction]
        elif op.kind == "F":
            live += act[op.direction]
        elif op.kind in ("B", "W"):
            live -= act[op.direction]
        peak = max(peak, live)
    return peak


def live_vectors(order: Sequence[Op]) -> list[tuple[int, int]]:
    """The micro-batches of direction 0 and of direction 1 whose activations one rank holds, after
    each op of its order as :func:`peak_activations` replays it (inside a fused F&B too), keeping
    those no other count dominates: peak_activations(order, act) is the largest of their dot
    products with ``act``, for any per-direction bytes."""
    live = [0, 0]
    seen = {(0, 0)}
    for op in order:
        if isinstance(op, FusedOp):
            live[op.forward.direction] += 1
            seen.add((live[0], live[1]))
            live[op.backward.direction] -= 1
        elif op.kind == "F":
            live[op.direction] += 1
        elif op.kind in ("B", "W"):
            live[op.direction] -= 1
        seen.add((live[0], live[1]))
    return sorted(v for v in seen if not any(w != v and w[0] >= v[0] and w[1] >= v[1] for w in seen))


def in_flight(stage: int, p: int, m: int, v: int = 1) -> int:
    """Micro-batches (both directions) whose activations rank ``stage`` holds at its peak: the
    report's PP+1 on the middle ranks down to p/2+1 on the edge ranks (DeepSeek-V3 Table 2 gives the
    worst case); replayed from the order, with unit activations per chunk."""
    return round(peak_activations(dualpipe_order(stage, p, m), [1.0, 1.0]))


def bubble(b: BubbleInputs) -> tuple[float, str]:
    """DualPipe's bubble: the exact idle share of the reference order under ideal costs (every
    rank runs m forwards, m input-gradient and m weight-gradient passes, so the mean idle share
    is 1 - m(F+B+W)/T with T the order's critical path), and the report's closed form beside it:
    DeepSeek-V3 report Table 2, (PP/2-1)(F&B+B-3W) with B the full backward and F&B the fused pair
    (F + full B when nothing is left to hide), i.e. (p/2-1)(F+2B-W) in our B, W."""
    p, m = b.p, b.m
    F, B, W = b.passes()
    T = ideal_makespan(p, m, F, B, W)
    val = idle_share(m * (F + B + W), T)
    ds = (p / 2 - 1) * (F + 2 * B - W)
    ds_val = ds / (m * (F + B + W) + ds)
    return val, (f"1 - m(F+B+W)/T = {val:.1%}, T the critical path of the reference DualPipe order "
                 f"with p = {p}, m = {m}, F = {F * 1e3:.3g} ms, B = {B * 1e3:.3g} ms, W = {W * 1e3:.3g} ms; "
                 f"the DeepSeek-V3 "
                 f"report's (PP/2-1)(F&B+B-3W) gives {ds_val:.1%}, as it idealises the warm-up and drain")


def rule(sc: ScenarioLike) -> Problem | None:
    """Two directions need an even number of stages and an even number of units, >= 2 per stage."""
    p, t = sc.parallelism, sc.training
    if p.pp % 2 or p.pp < 2:
        return "parallelism.pp", f"dualpipe needs an even number of stages >= 2 (got {p.pp})"
    dp, _, units = micro_batch_units(sc)
    if units % 2 or units < 2 * p.pp:
        step = 2 * t.micro_batch * dp
        return "training.global_batch", (f"{t.global_batch} gives {units} micro-batches per pipeline; "
                                         f"dualpipe feeds half from each end and needs an even count "
                                         f">= 2*pp = {2 * p.pp}; use a multiple of {step} of at least "
                                         f"{p.pp * step}")
    return None
