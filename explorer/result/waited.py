"""Which calls a compute pass waited for: what the Gantt draws as exposed rather than hatched
(explorer/result/timeline.py)."""
from __future__ import annotations

from collections.abc import Sequence

from ..engine.scheduler import Task

OVERLAPPED = " (overlapped)"       # the kind suffix the Gantt hatches (figures/gantt.py)


def waited_on(tasks: Sequence[Task]) -> set[int]:
    """Indices of the tasks a compute pass waited for: its binding dependency (the input it was
    ready at last), when it started the instant that input ended."""
    out = set()
    for t in tasks:
        b = t.binding
        if t.stream == "compute" and 0 <= b < len(tasks) and abs(t.start - tasks[b].end) <= 1e-12:
            out.add(b)
    return out
