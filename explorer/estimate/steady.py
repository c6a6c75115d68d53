"""Long pipelines from short ones: the steady state extrapolated, as explorer/fold.py does for the engine.

With identical units every stage's schedule becomes periodic once the pipeline has filled: one more
period of units shifts everything after it by the same time (max-plus systems are eventually
periodic; the cyclicity may be a few periods with unequal stages).  So a row with many units is
evaluated at five reduced counts ``c, c-g, ..., c-4g`` (g the schedule's granularity,
fold_plan.granularity; c a few fills long and congruent to the row's count), a period of ``k`` = 1
or 2 steps is accepted when the last three counts ``c-2kg, c-kg, c`` give the same increment of
every per-stage time to 1e-12 of the iteration (the fold's proof, there on every task), and every
figure is extrapolated: ``X(m) = X(c) + (m-c)/(kg) (X(c) - X(c-kg))``.  When neither period holds
(a transient longer than the reduced counts) the row is evaluated at its own count.

Only flushing and overlapping windows are extrapolated: PipeDream's window reads individual
backwards of its second iteration, P3's replay the bucket order, and DualPipe's phases depend on
the count (its order cannot take phantom units either); those run in full.
"""
from __future__ import annotations

import numpy as np

from ..fold_plan import granularity
from ..schedules.registry import Window
from .pipeline import StageTimes
from .profile import RowProfile

REL_TOL = 1e-12              # increments must repeat to this, relative to the largest time
COUNTS = 5                   # reduced counts per row: c, c - g, ..., c - 4g
FILLS = 2                    # the largest reduced count covers this many pipeline fills (and more)
_TIMES = ("first", "last_end", "free", "grads_start")


def reduced_counts(prof: RowProfile) -> list[int] | None:
    """The reduced unit counts of ``prof`` (largest last), or None when it runs at its own count."""
    sched = prof.schedule
    if sched.window is Window.ASYNC or sched.two_directions or prof.sc.communication.dp_priority:
        return None
    g = granularity(prof.sc)
    fill = prof.p * prof.v + 2                          # one pipeline fill and two more units (fold_plan)
    c = -(-(FILLS * fill + (COUNTS - 1) * g) // g) * g
    c += (prof.units - c) % g
    if prof.units < 2 * c:                              # not worth it: evaluate the row itself
        return None
    return [c - k * g for k in range(COUNTS - 1, -1, -1)]


def extrapolate(st: StageTimes, units: int, counts: list[int]) -> StageTimes | None:
    """Row times at ``units`` from the rows ``st`` evaluated at ``counts`` (increasing, step g), or
    None when no period of one or two steps is proven."""
    step = counts[1] - counts[0]
    scale = max(float(np.max(st.last_end)), 1e-300)
    for k in (1, 2):
        a, b, c = len(counts) - 1 - 2 * k, len(counts) - 1 - k, len(counts) - 1
        if all(np.abs((getattr(st, f)[c] - getattr(st, f)[b]) - (getattr(st, f)[b] - getattr(st, f)[a])).max()
               <= REL_TOL * scale for f in _TIMES):
            periods = (units - counts[c]) / (k * step)
            grown = [getattr(st, f)[c] + periods * (getattr(st, f)[c] - getattr(st, f)[b])
                     for f in ("first", "last_end", "free", "grads_start", "grads_dur", "per_column", "sends")]
            return StageTimes(*(x[None] for x in grown), st.table[c:c + 1], st.fused[c:c + 1], (None,))
    return None
