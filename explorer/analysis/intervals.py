"""Unions of time intervals: what a lane is busy with, merged (the trace overlay's lanes and the
trace fit's in-flight times, explorer/traces/lanes.py, and their figure)."""
from __future__ import annotations

Interval = tuple[float, float]


def merged(spans: list[Interval], gap: float = 0.0) -> list[Interval]:
    """``spans`` sorted and merged where they overlap or lie within ``gap`` of each other."""
    out: list[Interval] = []
    for s, e in sorted(spans):
        if out and s <= out[-1][1] + gap:
            if e > out[-1][1]:
                out[-1] = (out[-1][0], e)
        else:
            out.append((s, e))
    return out


def union_length(spans: list[Interval]) -> float:
    """Length of the union of ``spans``."""
    return sum(e - s for s, e in merged(spans))
