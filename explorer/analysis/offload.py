"""Activation offloading in the iteration's breakdown: the seconds its host copies stall the
busiest stage, split out of "compute" into an ``offload`` category.

The stall is timed inside the passes' compute (explorer/taskgraph/layer.py: what one offloaded
layer's copy outlasts of the compute it runs beside), so the engine, the fold and the estimator
see one number; this module only names that share of the busiest stage's compute, from the same
per-chunk figures (ChunkWork.offload) the timeline draws its copy bars from.  A scenario without
offloading gets no ``offload`` key, so its breakdown's keys stay those of vocabulary.CATEGORIES.
"""
from __future__ import annotations

from ..taskgraph.builder import IterationBuilder
from ..vocabulary import OFFLOAD


def offload_totals(b: IterationBuilder, stage: int, m: int) -> tuple[float, float]:
    """(copy-engine seconds, exposed seconds) of one iteration's offload copies on ``stage``:
    every pipeline unit's forward copies its offloaded layers to the host and its backward copies
    them back (``m`` units, split over DualPipe's two directions as rank_chunks splits them)."""
    lanes = 2 if b.schedule.two_directions else 1
    copy = exposed = 0.0
    for c in range(b.schedule.chunks_per_rank(b.v)):
        _, per_copy, exp_f, exp_b = b.chunk_of(stage, c).offload
        copy += (m // lanes) * 2 * per_copy
        exposed += (m // lanes) * (exp_f + exp_b)
    return copy, exposed


def with_offload(breakdown: dict[str, float], copy_s: float, exposed_s: float) -> dict[str, float]:
    """``breakdown`` with ``exposed_s`` of its compute named ``offload`` (placed after compute and
    recompute; 0 when a fast host link hides every copy), or unchanged when nothing is copied
    (``copy_s`` 0: offloading off); the categories still sum to the same."""
    if copy_s <= 0:
        return breakdown
    # An overlapping-iteration schedule breaks down a window of its compute: never move more than
    # the window's compute holds.
    moved = min(exposed_s, breakdown["compute"])
    out: dict[str, float] = {}
    for k, v in breakdown.items():
        out[k] = v - moved if k == "compute" else v
        if k == "recompute":
            out[OFFLOAD] = moved
    out.setdefault(OFFLOAD, moved)
    return out
