"""The hover record of one Gantt bar: what the chart shows on hover and what a click hands back.

The Gantt (explorer/figures/gantt.py) stores each exact bar's record as the trace's Plotly
``customdata`` row; *Explain this bar* (explorer/teaching/explain.py) and the step-through of a
collective (explorer/ui/views/collective.py) read a clicked bar's row back.  Plotly keeps only
lists, so the order of the fields is the row's layout — written by :meth:`GanttBar.customdata`,
read by :meth:`GanttBar.from_customdata` and named in hover templates by :meth:`GanttBar.ref`, and
nowhere else.  An aggregated bar (too many operations to draw one by one) carries a
:class:`SpanBar` instead, which no reader explains.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

NONE_TEXT = "–"          # what the hover shows for a bar without a micro-batch or chunk


class GanttBar(NamedTuple):
    """One drawn operation: its kind (a Gantt trace: forward, dp, ...), micro-batch and chunk (None
    for an operation of the whole iteration), the operation's name (``detail``: all-reduce, ...),
    where it runs (GPU class and lane), its duration, two hover lines of text, and the raw numbers
    *Explain this bar* derives from: model FLOPs of a compute bar; bytes, group size, achieved bus
    bandwidth, limiting tier and algorithm of a communication bar (0 or "" where they do not
    apply)."""

    kind: str
    micro_batch: int | None
    chunk: int | None
    detail: str
    where: str
    duration_ms: float
    what: str                 # FLOPs and rate, or bytes and group
    how: str                  # algorithm and limiting tier ("" for compute)
    flops: float
    bytes: float
    group: int
    busbw_GBps: float
    tier: str
    algorithm: str

    @classmethod
    def ref(cls, field: str, fmt: str = "") -> str:
        """The Plotly hover-template reference to ``field`` (``fmt``: a d3 format such as ``:.3f``)."""
        return f"%{{customdata[{cls._fields.index(field)}]{fmt}}}"

    def customdata(self) -> list[Any]:
        """The Plotly customdata row (a missing micro-batch or chunk shows as a dash)."""
        return [NONE_TEXT if v is None else v for v in self]

    @classmethod
    def from_customdata(cls, row: Sequence[Any] | None) -> GanttBar | None:
        """The bar whose customdata row is ``row`` (as a click event hands it back, numbers possibly
        turned into floats by JSON), or None for an aggregated bar's row or no row."""
        if row is None or len(row) != len(cls._fields):
            return None
        raw = dict(zip(cls._fields, row, strict=True))
        return cls(kind=str(raw["kind"]), micro_batch=_int_or_none(raw["micro_batch"]),
                   chunk=_int_or_none(raw["chunk"]), detail=str(raw["detail"] or ""), where=str(raw["where"]),
                   duration_ms=float(raw["duration_ms"]), what=str(raw["what"]), how=str(raw["how"]),
                   flops=float(raw["flops"] or 0.0), bytes=float(raw["bytes"] or 0.0),
                   group=int(raw["group"] or 0), busbw_GBps=float(raw["busbw_GBps"] or 0.0),
                   tier=str(raw["tier"] or ""), algorithm=str(raw["algorithm"] or ""))


class SpanBar(NamedTuple):
    """One bar of the aggregated Gantt: in one row and pixel column, the kind that fills most of it —
    how many operations start there, the span's length, the GPU class and row, and how busy the row
    is over the span (percent)."""

    operations: int
    span_ms: float
    lane: str
    row: str
    busy_pct: float

    @classmethod
    def ref(cls, field: str, fmt: str = "") -> str:
        """The Plotly hover-template reference to ``field``."""
        return f"%{{customdata[{cls._fields.index(field)}]{fmt}}}"

    def customdata(self) -> list[Any]:
        """The Plotly customdata row."""
        return list(self)


def _int_or_none(v: Any) -> int | None:
    return None if v is None or v == NONE_TEXT else int(v)
