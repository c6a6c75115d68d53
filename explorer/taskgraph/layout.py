"""Where a schedule's ops sit in the pipeline: normalised passes and the chunk layout.

Schedules write their program orders in their papers' terms (schedules/); the builder reads them
through this module:
- :func:`normalise` turns an op into a :class:`Pass` (or DualPipe's :class:`Fused` pair), with
  ``kind`` F (forward), B (full backward), Bi (input gradients only: the backward of a schedule
  that splits it, zero-bubble style) or W (weight gradients);
- a :class:`Layout` maps (rank, lane, local chunk) to the position along its pipeline lane, so that
  transfers go to the neighbouring position: one lane over p*v positions (chunk k on rank k mod p,
  Narayanan et al. SC21 Sec. 2.2), or DualPipe's two lanes over p positions in opposite
  directions (DeepSeek-V3 report Sec. 3.2.1: rank r holds stage r of lane 0 and p-1-r of lane 1).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from ..schedules.base import DirectedOp, FusedOp, Op
from ..schedules.registry import Schedule


class Pass(NamedTuple):
    """One pass: ``kind`` F | B | Bi | W of micro-batch ``mb`` of ``lane`` on local chunk ``local``
    (a named tuple: an immutable record that is cheap to create, one per op of every order)."""

    kind: str
    lane: int
    mb: int
    local: int


@dataclass(frozen=True)
class Fused:
    """DualPipe's F&B: a forward and another unit's full backward run as one task."""

    f: Pass
    b: Pass


def normalise(op: Op, schedule: Schedule) -> Pass | Fused:
    """The op of ``schedule``'s program order as a Pass (or Fused pair).  A direction is its
    lane, and its local chunk (DualPipe's rank holds one chunk of each direction)."""
    if isinstance(op, FusedOp):
        f, b = op.forward, op.backward
        return Fused(Pass("F", f.direction, f.mb, f.direction), Pass("B", b.direction, b.mb, b.direction))
    if isinstance(op, DirectedOp):
        return Pass("Bi" if op.kind == "Bz" else op.kind, op.direction, op.mb, op.direction)
    return Pass("Bi" if op.kind == "B" and schedule.split_backward else op.kind, 0, op.mb, op.chunk)


@dataclass(frozen=True)
class Layout:
    """Positions along the pipeline lanes for ``p`` ranks and ``v`` chunks per rank."""

    p: int
    v: int
    two_directions: bool

    @property
    def length(self) -> int:
        """Positions a unit passes through along its lane."""
        return self.p if self.two_directions else self.p * self.v

    def position(self, rank: int, lane: int, local: int) -> int:
        if self.two_directions:
            return rank if lane == 0 else self.p - 1 - rank
        return local * self.p + rank

    def at(self, lane: int, pos: int) -> tuple[int, int]:
        """(rank, local chunk) at position ``pos`` of ``lane``."""
        if self.two_directions:
            return (pos, lane) if lane == 0 else (self.p - 1 - pos, lane)
        return pos % self.p, pos // self.p

    def chunk_index(self, rank: int, local: int) -> int:
        """Index of the chunk (in the partition's order) that ``rank`` holds as ``local``."""
        return self.position(rank, local if self.two_directions else 0, local)

    def pair(self, sender: int, receiver: int, direction: str) -> int:
        """The pp link pair (network.members: stage, stage+1 mod p) a transfer uses: one lane
        sends forward from stage s on pair s and backward on pair s-1 (the same link, wrapping
        for the interleaved hop between virtual chunks); two lanes use the pair of the lower rank."""
        if self.two_directions:
            return min(sender, receiver)
        return sender if direction == "forward" else (sender - 1) % self.p


def layout_for(schedule: Schedule, p: int, v: int) -> Layout:
    return Layout(p, v, schedule.two_directions)
