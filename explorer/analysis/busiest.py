"""Which pipeline stage a result's breakdown is read from: the busiest.

The stage with the most compute-stream work bounds throughput (simulate.assemble); among stages
whose work is equal the one that ends last, then the lowest index.  "Equal" is to a relative
1e-9, not bit for bit: the folded and the full simulation (explorer/fold) and the estimator
(explorer/pricing) sum the same seconds in different orders, so two stages of equal work can
differ by a few ulps one way in one and the other way in another — a tie broken by rounding
picked stage 1 when folded and stage 0 in full (fuzzed zb-h2 with ZeRO-3, seed 114233 of
tests/test_fold.py), and with it a different breakdown and busiest-stage bubble.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

TIE_REL = 1e-9            # seconds within this fraction of the largest are a tie


def busiest_stage(busy: Sequence[float], end: Sequence[float]) -> int:
    """The stage of most ``busy`` seconds; ties (to :data:`TIE_REL`) to the latest ``end``, then to
    the lowest index."""
    top = max(busy)
    tied = [s for s, b in enumerate(busy) if b >= top - TIE_REL * abs(top)]
    last = max(end[s] for s in tied)
    return next(s for s in tied if end[s] >= last - TIE_REL * abs(last))


def busiest_stages(busy: np.ndarray, end: np.ndarray) -> np.ndarray:
    """:func:`busiest_stage` of every row of (rows, stages) arrays, as one vector."""
    top = busy.max(axis=1, keepdims=True)
    tied = busy >= top - TIE_REL * np.abs(top)
    last = np.where(tied, end, -np.inf).max(axis=1, keepdims=True)
    return np.argmax(tied & (end >= last - TIE_REL * np.abs(last)), axis=1)
