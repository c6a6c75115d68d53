"""Which activations a rank holds through its order, as count vectors over the chunks it holds.

A rank's peak activation bytes are the largest, over the ops of its order, of the bytes alive
after the op (registry ``peak_activations``).  With one count per chunk it holds (its local chunks
of an interleaved or V placement, or its two directions), those bytes are a dot product of a count
vector with the chunks' bytes per unit, so the peak for *any* bytes is the largest dot product
with the vectors no other vector dominates — what a layer split weighs memory by without
replaying the order for each split (taskgraph/memory_split.py).  The replay is the registry's
own: pipeline.peak_activations (a forward adds its chunk; the pass completing its gradients, B or
W where the order has W passes, frees it) or dualpipe.live_vectors (directions; a fused F&B; Bz
keeps, W frees)."""
from __future__ import annotations

from collections.abc import Sequence
from operator import ge

from . import dualpipe
from .base import ChunkOp, Op
from .registry import Schedule


def live_vectors(schedule: Schedule, stage: int, p: int, m: int, v: int) -> tuple[tuple[int, ...], ...]:
    """The count vectors (one count per chunk the rank holds, in local order) that rank ``stage``
    passes through over ``m`` units, the dominated ones left out; the zero vector when it holds
    nothing at some point and nothing dominates it."""
    order = schedule.order(stage, p, m, v)
    if schedule.peak_activations is dualpipe.peak_activations:
        directed = [op for op in order if not isinstance(op, ChunkOp)]     # DualPipe's ops only
        return tuple(tuple(x) for x in dualpipe.live_vectors(directed))
    return _pipeline_vectors(order, schedule.chunks_per_rank(v))


def _pipeline_vectors(order: Sequence[Op], width: int) -> tuple[tuple[int, ...], ...]:
    """pipeline.peak_activations' replay, as counts per local chunk after each forward (only a
    forward can raise a count)."""
    release = "W" if any(op.kind == "W" for op in order) else "B"
    if width == 1:
        # One chunk: the vectors are counts, the largest dominates the others (a search asks for
        # thousands of these: no tuples, no set, no dominance test).
        now = peak = 0
        for op in order:
            if op.kind == "F":
                now += 1
                peak = max(peak, now)
            elif op.kind == release:
                now -= 1
        return ((peak,),)
    # Only the vector before a release that follows a forward (or at the end) is kept: a vector a
    # later forward raises before any release is dominated by it, so the undominated set is that
    # of these peaks (and the zero vector, which every other one dominates).
    live = [0] * width
    seen = {tuple(live)}
    rising = False
    for op in order:
        kind = op.kind
        if kind == "F":
            live[op.chunk if isinstance(op, ChunkOp) else 0] += 1      # one-direction orders are ChunkOps
            rising = True
        elif kind == release:
            if rising:
                seen.add(tuple(live))
                rising = False
            live[op.chunk if isinstance(op, ChunkOp) else 0] -= 1
    if rising:
        seen.add(tuple(live))
    return _undominated(seen)


def _undominated(seen: set[tuple[int, ...]]) -> tuple[tuple[int, ...], ...]:
    """The vectors of ``seen`` no other one dominates (at least as large everywhere), sorted.  A
    vector that dominates another is after it in lexicographic order, so from the last one down
    each is kept unless one kept dominates it (a dominating vector not kept is dominated by one
    kept); a rank's order passes through a few undominated vectors."""
    kept: list[tuple[int, ...]] = []
    for x in sorted(seen, reverse=True):
        for y in kept:
            if all(map(ge, y, x)):
                break
        else:
            kept.append(x)
    return tuple(reversed(kept))
