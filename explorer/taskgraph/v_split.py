"""Layers per chunk for a V placement (rank r holds chunks r and 2p-1-r: ZB-V, V-Half, V-Min,
DualPipeV; Qi et al., "Pipeline Parallelism with Controllable Memory", NeurIPS 2024, Sec. 3).

Every micro-batch runs every chunk, so a rank's seconds are its two chunks' (plus, on rank 0, the
embedding and the output layer and loss), and the slowest rank paces the V. The split starts from
the proportional balance DualPipe's pairs use (dualpipe_split._paired: layers weighed by their mean)
and descends on each layer's own seconds (a model whose first layers are dense and the rest MoE, as
DeepSeek-V3, weighs them apart): one layer at a time leaves a chunk of the slowest rank for any
other chunk (the chunks between shift by one layer) while the slowest rank gets faster, or as fast
with a smaller sum of squares — a local optimum, which can stop one move short of the best split
(tests/test_vshape.py shows such cases against an exhaustive search). Layers weigh what their pass
takes: forward plus backward, or, for schedules that fuse a forward with a backward (DualPipeV: F&B,
DeepSeek-V3 Fig. 4), the fused pair's compute or communication, whichever is longer
(split_cost.fused_seconds).
"""
from __future__ import annotations

from .dualpipe_split import _paired
from .split_cost import SplitCosts, fused_seconds


def v_split(c: SplitCosts, chunks: int, fused: bool = False) -> tuple[int, ...]:
    """Layers per chunk of ``chunks`` (2p) V chunks: rank 0's two chunks may hold no layer (an
    embedding-only first and a loss-only last chunk, as one-direction splits allow:
    config/rules.py), inner chunks at least one.  The larger half of a rank's layers goes to its
    second chunk (chunks-1-r): a V rank holds more micro-batches of its first chunk at its peak
    (ZB-V's rank 0: 2p-1 of chunk 0, 1 of chunk 1), so the same compute needs less memory."""
    if fused:
        per = fused_seconds(c.layers, c.layers, c.sm).tolist()
        first = float(fused_seconds(c.first, c.first, c.sm))
        last = float(fused_seconds(c.last, c.last, c.sm))
    else:
        per, first, last = c.unit_seconds()
    ends = first + last
    counts = _descend(_paired(per, first, last, chunks, edge_floor=0.0), per, ends)
    for r in range(chunks // 2):
        a, b = counts[r], counts[chunks - 1 - r]
        counts[r], counts[chunks - 1 - r] = min(a, b), max(a, b)
    return tuple(counts)


def rank_seconds(counts: list[int] | tuple[int, ...], per: list[float], ends: float) -> list[float]:
    """Seconds of each V rank per unit: its chunks r and len-1-r, rank 0 with the ends' work."""
    return _rank_seconds(counts, _prefix(per), ends)


def _prefix(per: list[float]) -> list[float]:
    """Running sums of ``per`` from 0.0, added left to right (every chunk sum is a difference of two)."""
    pre = [0.0]
    for x in per:
        pre.append(pre[-1] + x)
    return pre


def _rank_seconds(counts: list[int] | tuple[int, ...], pre: list[float], ends: float) -> list[float]:
    """:func:`rank_seconds` from the layers' running sums ``pre`` (:func:`_prefix`), which a descent
    computes once instead of once per scored split (the same floats, the same differences)."""
    at = [0]
    for n in counts:
        at.append(at[-1] + n)
    chunk = [pre[at[k + 1]] - pre[at[k]] for k in range(len(counts))]
    return [chunk[r] + chunk[-1 - r] + (ends if r == 0 else 0.0) for r in range(len(counts) // 2)]


# A move must gain more than float rounding: with layers of equal seconds, shifting one between a
# rank's two chunks leaves its sum equal but for the last bits of the running sums, and such noise
# walked a 4-chunk V from [8, 8, 8, 8] to [16, 8, 8, 0], a second slower per iteration.
_REL_TOL = 1e-9


def _better(got: tuple[float, float], best: tuple[float, float]) -> bool:
    """Whether ``got`` (slowest rank, sum of squares) beats ``best`` by more than rounding."""
    if got[0] < best[0] * (1 - _REL_TOL):
        return True
    return got[0] <= best[0] * (1 + _REL_TOL) and got[1] < best[1] * (1 - _REL_TOL)


def _descend(counts: list[int], per: list[float], ends: float) -> list[int]:
    """``counts`` after the descent of the module docstring: each step tries the slowest rank's two
    chunks as givers and every other chunk as taker (2 x 2p splits scored), so a V of 2p chunks
    costs O(p) scores per step."""
    counts = list(counts)
    last = len(counts) - 1
    pre = _prefix(per)

    def score(cs: list[int]) -> tuple[float, float]:
        ranks = _rank_seconds(cs, pre, ends)
        return max(ranks), sum(x * x for x in ranks)

    best = score(counts)
    while True:
        ranks = _rank_seconds(counts, pre, ends)
        slow = max(range(len(ranks)), key=ranks.__getitem__)
        moved = False
        for give in (slow, last - slow):
            if counts[give] <= (0 if give in (0, last) else 1):
                continue
            for take in range(len(counts)):
                if take == give:
                    continue
                counts[give] -= 1
                counts[take] += 1
                got = score(counts)
                if _better(got, best):
                    best, moved = got, True
                    break
                counts[give] += 1
                counts[take] -= 1
            if moved:
                break
        if not moved:
            return counts
