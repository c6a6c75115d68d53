"""Step through this scenario's own timeline: what every GPU class computes at a moment, and why.

The textbook diagram (unit_time.py) shows a schedule at unit cost; this is the same idea on the
simulated timeline, with the scenario's real durations and its blocking communication.  The
Gantt's rows (explorer/result/timeline.py COLUMNS) are condensed per class into *passes*: consecutive rows
of the compute stream with the same kind, micro-batch and chunk, the blocking TP/CP/EP collectives
inside them counted as the pass's communication (they are drawn on the compute stream because
compute waits for them).  :func:`narrate_at` then says, per class, which pass runs at time t and
which phase it is in, or for an idle class which pass it waits to start and when.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..vocabulary import BLOCKING_DIMS

# Passes that consume gradients: a class's first one ends its warm-up.
BACKWARD_KINDS = frozenset({"backward", "weight-grad", "F&B", "recompute", "backward+recompute"})
FORWARD_KINDS = frozenset({"forward", "F&B"})
BLOCKING_LANES = frozenset(BLOCKING_DIMS)
NAMES = {"forward": "forward", "backward": "backward", "weight-grad": "weight gradient",
         "backward+recompute": "backward (recomputing its activations first)",
         "F&B": "fused forward and backward", "recompute": "recomputation", "optimizer": "optimizer step"}
TOUCH_S = 1e-9           # rows closer than this are one pass (the engine's float rounding)


@dataclass(frozen=True)
class Pass:
    """One pass of one GPU class on its compute stream, in seconds."""

    start: float
    end: float
    kind: str
    mb: int | None
    chunk: int | None
    comm_s: float = 0.0      # blocking collectives inside it


FAMILY = {"recompute": "backward", "backward": "backward", "weight-grad": "backward"}


def passes(columns: dict[str, list]) -> tuple[tuple[Pass, ...], ...]:
    """The Gantt's rows condensed per GPU class (index = class) into passes on the compute stream.

    Touching rows of one micro-batch and chunk form one pass: the engine draws a pass layer by
    layer, a backward as recompute / input-gradient / weight-gradient pieces (merged into one
    backward, named after the pieces it has), and a blocking collective joins the pass around it.
    """
    n = len(columns["start_s"])
    classes = max(columns["gpu_class"], default=-1) + 1
    rows: list[list[int]] = [[] for _ in range(classes)]
    for i in range(n):
        lane = columns["lane"][i]
        if lane == "compute" or (lane in BLOCKING_LANES and not columns["overlapped"][i]):
            rows[columns["gpu_class"][i]].append(i)
    out: list[tuple[Pass, ...]] = []
    for mine in rows:
        mine.sort(key=lambda i: columns["start_s"][i])
        merged: list[list] = []          # [start, end, family, mb, chunk, comm_s, kinds]
        for i in mine:
            s, e = columns["start_s"][i], columns["end_s"][i]
            comm = columns["lane"][i] != "compute"
            kind, mb, ch = columns["kind"][i], columns["micro_batch"][i], columns["chunk"][i]
            family = FAMILY.get(kind, kind)
            last = merged[-1] if merged else None
            if last is not None and s <= last[1] + TOUCH_S and mb == last[3] and (
                    comm or (family, ch) == (last[2], last[4])):
                last[1] = max(last[1], e)
                if comm:
                    last[5] += e - s
                else:
                    last[6].add(kind)
            else:
                merged.append([s, e, kind if comm else family, mb, ch, e - s if comm else 0.0,
                               set() if comm else {kind}])
        out.append(tuple(Pass(m[0], m[1], _kind(m[2], m[6]), m[3], m[4], m[5]) for m in merged))
    return tuple(out)


def _kind(family: str, kinds: set[str]) -> str:
    """A merged pass's kind: a backward made only of weight gradients (zero-bubble's deferred W) or
    only of input gradients keeps that name; recompute inside a backward is said so."""
    if family != "backward" or len(kinds) == 1:
        return next(iter(kinds)) if len(kinds) == 1 else family
    return "backward+recompute" if "recompute" in kinds else "backward"


def _name(p: Pass) -> str:
    what = NAMES.get(p.kind, f"blocking {p.kind} collective")
    mb = "" if p.mb is None else f" of micro-batch {p.mb}"
    chunk = "" if not p.chunk else f" (chunk {p.chunk})"
    return f"{what}{mb}{chunk}"


def _phase(mine: Sequence[Pass], p: Pass) -> str:
    first_back = next((q.start for q in mine if q.kind in BACKWARD_KINDS), None)
    last_fwd = max((q.start for q in mine if q.kind in FORWARD_KINDS), default=None)
    if p.kind == "optimizer":
        return "after the flush"
    if first_back is None or p.start < first_back:
        return "warm-up"
    return "cool-down" if last_fwd is not None and p.start > last_fwd else "steady state"


def narrate_at(all_passes: Sequence[Sequence[Pass]], names: Sequence[str], t: float) -> list[str]:
    """One sentence per GPU class: what it does at ``t`` seconds (or what it waits to do)."""
    lines = []
    for name, mine in zip(names, all_passes, strict=True):
        if not mine:
            lines.append(f"{name}: no compute")
            continue
        now = next((p for p in mine if p.start <= t < p.end), None)
        if now is None:
            nxt = next((p for p in mine if p.start > t), None)
            if nxt is None:
                lines.append(f"{name}: done with its passes (its gradient reduction may still run)")
                continue
            if nxt.kind == "optimizer":
                lines.append(f"{name}: idle until {nxt.start * 1e3:,.2f} ms — its optimizer step waits "
                             "for the gradient reduction (and the last stage's flush)")
                continue
            why = {"forward": " — it needs a neighbouring stage's activations first",
                   "F&B": " — it needs one neighbour's activations and the other's gradient"}.get(
                nxt.kind, " — it needs a neighbouring stage's gradient first")
            lines.append(f"{name}: idle (bubble) until {nxt.start * 1e3:,.2f} ms, when its "
                         f"{_name(nxt)} starts{why}")
            continue
        share = f"; {now.comm_s / (now.end - now.start):.0%} of it blocking collectives" if now.comm_s else ""
        lines.append(f"{name}: {_phase(mine, now)} — {_name(now)}, {(now.end - now.start) * 1e3:,.2f} ms "
                     f"({now.start * 1e3:,.2f}-{now.end * 1e3:,.2f} ms){share}")
    return lines
