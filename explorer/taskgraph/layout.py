"""Where a schedule's ops sit in the pipeline: normalised passes and the chunk layout.

Schedules write their program orders in their papers' terms (schedules/); the builder reads them
through this module:
- :func:`normalise` turns an op into a :class:`Pass` (or DualPipe's :class:`Fused` pair), with
  ``kind`` F (forward), B (full backward), Bi (input gradients only: the backward of a schedule
  that splits it, zero-bubble style) or W (weight gradients);
- a :class:`Layout` maps (rank, lane, local chunk) to the position along its pipeline lane, so that
  transfers go to the neighbouring position: one lane over p*v positions (chunk k on rank k mod p,
  Narayanan et al. SC21 Sec. 2.2), DualPipe's two lanes over p positions in opposite
  directions (DeepSeek-V3 report Sec. 3.2.1: rank r holds stage r of lane 0 and p-1-r of lane 1),
  or a V: one lane over 2p positions, rank r holding position r (local chunk 0) and 2p-1-r (local
  chunk 1), so the turn from position p-1 to p stays on rank p-1 (Qi et al., "Pipeline Parallelism
  with Controllable Memory", NeurIPS 2024 Sec. 3; the registry's ``placement``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from ..schedules.base import DirectedOp, FusedOp, Op
from ..schedules.registry import Placement, Schedule


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
        lf, lb = (f.direction, b.direction) if schedule.two_directions else (0, 0)
        return Fused(Pass("F", lf, f.mb, f.direction), Pass("B", lb, b.mb, b.direction))
    if isinstance(op, DirectedOp):
        # DualPipeV's ops name the V's arm (its local chunk) as their direction, on one lane.
        lane = op.direction if schedule.two_directions else 0
        return Pass("Bi" if op.kind == "Bz" else op.kind, lane, op.mb, op.direction)
    return Pass("Bi" if op.kind == "B" and schedule.split_backward else op.kind, 0, op.mb, op.chunk)


@dataclass(frozen=True)
class Layout:
    """Positions along the pipeline lanes for ``p`` ranks and ``v`` chunks per rank."""

    p: int
    v: int
    two_directions: bool
    v_shape: bool = False

    @property
    def length(self) -> int:
        """Positions a unit passes through along its lane (the model's chunks)."""
        if self.v_shape:
            return 2 * self.p
        return self.p if self.two_directions else self.p * self.v

    @property
    def ends_on_one_rank(self) -> bool:
        """One rank holds both the first and the last chunk (DualPipe's edge ranks, a V's rank 0)."""
        return self.p == 1 or self.two_directions or self.v_shape

    def position(self, rank: int, lane: int, local: int) -> int:
        if self.two_directions:
            return rank if lane == 0 else self.p - 1 - rank
        if self.v_shape:
            return rank if local == 0 else 2 * self.p - 1 - rank
        return local * self.p + rank

    def at(self, lane: int, pos: int) -> tuple[int, int]:
        """(rank, local chunk) at position ``pos`` of ``lane``."""
        if self.two_directions:
            return (pos, lane) if lane == 0 else (self.p - 1 - pos, lane)
        if self.v_shape:
            return (pos, 0) if pos < self.p else (2 * self.p - 1 - pos, 1)
        return pos % self.p, pos // self.p

    def rank_of(self, chunk: int) -> int:
        """The rank holding global chunk ``chunk`` (position on lane 0)."""
        return self.at(0, chunk)[0]

    def chunk_index(self, rank: int, local: int) -> int:
        """Index of the chunk (in the partition's order) that ``rank`` holds as ``local``."""
        return self.position(rank, local if self.two_directions else 0, local)

    def pair(self, sender: int, receiver: int, direction: str) -> int:
        """The pp link pair (network.members: stage, stage+1 mod p) a transfer uses: one lane
        sends forward from stage s on pair s and backward on pair s-1 (the same link, wrapping
        for the interleaved hop between virtual chunks); two lanes and a V use the pair of the lower
        rank (a V's turn on one rank sends nothing: the builder hands it over locally)."""
        if self.two_directions or self.v_shape:
            return min(sender, receiver)
        return sender if direction == "forward" else (sender - 1) % self.p


def layout_for(schedule: Schedule, p: int, v: int) -> Layout:
    return Layout(p, v, schedule.two_directions, schedule.placement is Placement.V)
