"""Between two interleaved splits, the one whose pipeline ends first, when layers' forward and
backward seconds are not in one ratio.

partition.split_layers balances each chunk's forward + backward seconds.  Where every layer's
forward is the same share of its pass that balance is also the forward's and the backward's, but
frozen layers (``training.frozen_layers``: forward only, no backward) break it: the balance piles
them onto the first chunk (126 layers of Llama 3 405B on 16 x 2 chunks with 8 frozen: 9 layers on
chunk 0 against 4), whose forwards then pace the interleaved schedule's warm-up, where every stage
waits for the first one's forwards (Narayanan et al. SC21 Sec. 2.2: the warm-up runs forwards
only) — 7.93 s against 6.78 s with the unfrozen model's split (a hunt's finding).

So, in that case only, the split balancing the forwards alone is a second candidate, and the two
are compared by the makespan of the schedule's own order (schedules/pipeline.interleaved) with the
chunks' forward and backward seconds, no transfers (schedules/base.critical_path): first by the
steady state's period per micro-batch (the makespan's growth from 2p to 4p micro-batches, which
rules a long iteration), then by the makespan of 2p (warm-up and cool-down); the first is kept
unless the second is better.  The comparison reads no micro-batch count, so the split is the same
for every count (the folds' reduced runs split as the full run does), and the forward split is
never taken for a longer period (a hunt: comparing over 2p alone took it at 16 micro-batches of
4 stages where it ran 14 % slower).
"""
from __future__ import annotations

from collections.abc import Sequence

from ..schedules.base import ChunkOp, critical_path
from ..schedules.pipeline import interleaved
from .partition import split_layers

# Forward shares of a pass differing by less than this (relative) are one ratio: the balance of
# forward + backward is then the balance of each.
RATIO_TOL = 1e-3


def uneven(fwd: Sequence[float], per: Sequence[float]) -> bool:
    """Whether the layers' forward shares of their forward + backward differ (frozen layers)."""
    shares = [f / t for f, t in zip(fwd, per, strict=True) if t > 0]
    return bool(shares) and max(shares) - min(shares) > RATIO_TOL * max(shares)


def chunk_seconds(split: Sequence[int], fwd: Sequence[float], per: Sequence[float],
                  ends: tuple[float, float, float, float]) -> tuple[list[float], list[float]]:
    """Per chunk, its forward and its backward seconds for one unit; ``ends``: the first chunk's
    extra forward and forward + backward, the last chunk's."""
    first_f, first, last_f, last = ends
    F, B, at = [], [], 0
    for n in split:
        f = sum(fwd[at:at + n])
        F.append(f)
        B.append(sum(per[at:at + n]) - f)
        at += n
    F[0] += first_f
    B[0] += first - first_f
    F[-1] += last_f
    B[-1] += last - last_f
    return F, B


def makespan(p: int, v: int, F: Sequence[float], B: Sequence[float], m: int | None = None) -> float:
    """End of ``m`` (default 2p) micro-batches of Megatron-LM's interleaved order on ``p`` stages
    of ``v`` chunks, global chunk g = c p + s on stage s; a forward waits for the previous chunk's,
    a backward for the next chunk's (the last chunk's for its own forward)."""
    m, last = 2 * p if m is None else m, p * v - 1
    orders = [interleaved(s, p, m, v) for s in range(p)]
    done: dict[tuple[str, int, int], float] = {}

    def finish(s: int, op: ChunkOp, clock: float) -> float | None:
        g = op.chunk * p + s
        if op.kind == "F":
            ready = 0.0 if g == 0 else done.get(("F", op.mb, g - 1))
        else:
            ready = done.get(("F", op.mb, g) if g == last else ("B", op.mb, g + 1))
        if ready is None:
            return None
        end = max(clock, ready) + (F[g] if op.kind == "F" else B[g])
        done[(op.kind, op.mb, g)] = end
        return end

    return critical_path(orders, finish, "interleaved split")


def pick(split: tuple[int, ...], fwd: Sequence[float], per: Sequence[float],
         ends: tuple[float, float, float, float], stages: int,
         extras: Sequence[float] | None) -> tuple[int, ...]:
    """``split`` (partition.split_layers of ``per``), or the split of the forwards alone when the
    layers' forward shares differ and its schedule ends earlier (module docstring)."""
    chunks = len(split)
    if stages >= chunks or not uneven(fwd, per):
        return split
    first_f, _, last_f, _ = ends
    other = split_layers(list(fwd), chunks, first_f, last_f, stages=stages, extras=extras)
    if other == split:
        return split
    v = chunks // stages
    mine, theirs = _judged(stages, v, split, fwd, per, ends), _judged(stages, v, other, fwd, per, ends)
    # Period first (within rounding), then the 2p makespan (module docstring).
    if theirs[0] > mine[0] * (1 + 1e-9):
        return split
    if theirs[0] < mine[0] * (1 - 1e-9):
        return other
    return other if theirs[1] < mine[1] * (1 - 1e-9) else split


def _judged(p: int, v: int, split: tuple[int, ...], fwd: Sequence[float], per: Sequence[float],
            ends: tuple[float, float, float, float]) -> tuple[float, float]:
    """(steady-state period per micro-batch, makespan of 2p micro-batches) of ``split``."""
    F, B = chunk_seconds(split, fwd, per, ends)
    short, long = makespan(p, v, F, B), makespan(p, v, F, B, 4 * p)
    return (long - short) / (2 * p), short
