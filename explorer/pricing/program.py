"""A schedule's program order compiled once into arrays: the estimator's view of the task graph.

The builder (taskgraph/builder.py) turns every stage's program order (schedules/registry.py) into
tasks with dependencies; the engine then starts each task when its stream is free and its inputs
have arrived.  The pipeline part of that graph depends only on the schedule, p, v and the units
simulated, so it is compiled here once per shape (memoised) into flat arrays:

- one entry per op (a pass, or DualPipe's fused F&B) in stage-major program order, with the
  duration it takes (an index into the per-row table of pass durations, :data:`KINDS` x chunk, or
  the fused table for F&B);
- the up to four times its start waits for, as indices into one time vector (see
  :class:`Program`): the previous op of its stage (program order), the arrival of the forward
  transfer from the previous pipeline position, the arrival of the backward transfer from the
  next position, its own forward (a backward) or its own input-gradient pass (a weight-gradient
  pass), and for the first forward of each chunk the ZeRO 1-2 parameter gather it waits for
  (builder._gathers_at_start);
- the transfers it sends when it ends, on which stage pair (layout.pair), forward before backward
  (the order the builder creates them, which is the pp stream's FIFO order);
- a *step* per op such that every op's inputs come from strictly earlier steps: at most one op per
  stage per step, so a step is evaluated for all stages (and all rows) at once
  (pricing/critical_path.py).

Nothing here is a model of its own: the orders are the registry's, the dependencies the builder's
(``_data_dependencies``, ``_compute_tasks``), the pairs the layout's.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from itertools import chain
from typing import cast

import numpy as np

from ..schedules.base import Op
from ..schedules.registry import Schedule
from ..schedules.registry import get as get_schedule
from ..taskgraph.layout import Fused, layout_for, normalise

KINDS = ("F", "B", "Bi", "W")          # pass kinds of the duration table (B: full backward)


@dataclass(frozen=True)
class Program:
    """The compiled order of one shape (schedule, p, v, units simulated).

    Time vector layout (per row): ``[0, gates (p*nch), op ends (n), F arrivals (n), B arrivals (n)]``;
    index 0 is the constant 0 (an input that does not exist).  ``src`` columns: previous op of
    the stage is not listed (the stage clock carries it); 0 forward arrival, 1 backward arrival,
    2 same-stage input (own forward / own backward), 3 gate.
    """

    schedule: str
    p: int
    v: int
    units: int                       # pipeline units simulated (m x iterations simulated)
    nch: int                         # chunks per rank
    stage: np.ndarray                # (n,) stage of each op
    dur: np.ndarray                  # (n,) index into the row's duration table (see durations_index)
    src: np.ndarray                  # (n, 4) time-vector indices of the inputs
    send_f: np.ndarray               # (n,) pair of the forward transfer it sends, -1 none
    send_b: np.ndarray               # (n,) pair of the backward transfer it sends, -1 none
    steps: tuple[np.ndarray, ...]    # op indices of each step (at most one per stage)
    # Per step: the ops that send, in the order they send (forward before backward), as
    # (positions in the step, sending ops, their stages, arrival slots in the time vector, and the
    # slice lo:hi of send_cols/send_ops they are); a fused F&B sends twice.
    sends: tuple[tuple[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int, int], ...], ...]
    kind: np.ndarray                 # (n,) 0 F, 1 B, 2 Bi, 3 W, 4 fused F&B
    local: np.ndarray                # (n,) local chunk (the forward's for F&B)
    local_b: np.ndarray              # (n,) the backward's local chunk for F&B, else local
    mb: np.ndarray                   # (n,) unit (the backward's for F&B)
    grads_op: np.ndarray             # (p, nch) op completing each chunk's gradients (builder.grads_done)
    last_op: np.ndarray              # (p,) last op of each stage
    order: np.ndarray                # (n,) the ops step after step (the steps concatenated)
    bounds: tuple[int, ...]          # step k is order[bounds[k]:bounds[k + 1]]
    send_cols: np.ndarray            # every send, step after step: 0 forward, 1 backward transfer
    send_ops: np.ndarray             # ... and the op that sends it
    # src in step order (src[order]) with each op's existing inputs first, and per step how many
    # columns any of its ops uses: evaluation gathers only those (most ops have one or two inputs;
    # the gate column is used by first forwards only).  A max over fewer zeros is the same max.
    order_src: np.ndarray
    widths: tuple[int, ...]

    @property
    def n(self) -> int:
        return len(self.stage)

    @property
    def gate0(self) -> int:
        return 1

    @property
    def end0(self) -> int:
        return 1 + self.p * self.nch

    def durations_index(self, s: int, local: int, kind: str) -> int:
        """Column of the duration table: stage-major, then chunk, then KINDS; fused after."""
        return (s * self.nch + local) * len(KINDS) + KINDS.index(kind)

    def fused_index(self, s: int, lf: int, lb: int) -> int:
        return self.p * self.nch * len(KINDS) + (s * self.nch + lf) * self.nch + lb


def program_units(schedule, units: int, p: int) -> int:
    """The units a program is compiled for to serve a row of ``units`` on ``p`` stages: the next
    power of two, so that rows and sweeps share programs (phantom units pad the row,
    pricing/critical_path.py), rounded up to whole groups of p for virtual-stage schedules, whose
    order takes the units p at a time (Megatron's interleaved 1F1B, Narayanan et al. SC21 Sec.
    2.2.2: its order of 8 units on 3 stages names a unit 8); exactly ``units`` for DualPipe and the
    other schedules whose phases depend on the count (registry ``exact_units``)."""
    if schedule.exact_units:
        return units
    n = 1 << max(0, units - 1).bit_length()
    return -(-n // p) * p if schedule.virtual_stages else n


# Compiled programs kept for reuse, least recently used first out, up to this many ops in all
# (a program holds about 150 bytes per op: some 150 MB).
MAX_CACHED_OPS = 1_000_000
_PROGRAMS: dict[tuple, Program] = {}


def compile_program(schedule: str, p: int, v: int, units: int) -> Program:
    """The program of ``schedule`` for p stages, v virtual stages and ``units`` pipeline units
    simulated (the builder's m_sim), memoised."""
    key = (schedule, p, v, units)
    prog = _PROGRAMS.pop(key, None)
    if prog is None:
        prog = _compile(schedule, p, v, units)
        while _PROGRAMS and sum(x.n for x in _PROGRAMS.values()) + prog.n > MAX_CACHED_OPS:
            del _PROGRAMS[next(iter(_PROGRAMS))]
    _PROGRAMS[key] = prog                      # most recently used last
    return prog


def serving_program(schedule, p: int, v: int, units: int) -> Program:
    """A program whose ops of unit < ``units`` are a row's order: a cached one with at least as many
    units when the schedule keeps its units in order (the phantom-unit property of
    pricing/critical_path.py), else compile_program at program_units.  For readers of the order
    alone (pricing/memory.py's replay), to which a longer program costs a filter, not a walk."""
    need = program_units(schedule, units, p)
    if not schedule.exact_units:
        best = None
        for (name, pp, vv, u), prog in _PROGRAMS.items():
            if (name, pp, vv) == (schedule.name, p, v) and u >= need and (best is None or u < best.units):
                best = prog
        if best is not None:
            return compile_program(schedule.name, p, v, best.units)      # marks it recently used
    return compile_program(schedule.name, p, v, need)


def clear_programs() -> None:
    """Forget every compiled program."""
    _PROGRAMS.clear()


# Per schedule: each op of its order as its passes' records (KINDS index, lane, unit, local chunk),
# as taskgraph/layout.normalise reads it.  Every stage's order repeats the same ops (F of unit i on
# chunk c ...) and so do programs of other p or unit counts: each op is normalised once.
Member = tuple[int, int, int, int]
_MEMBERS: dict[str, dict[Op, tuple[Member, ...]]] = {}
_MAX_MEMBERS = 2_000_000


def _members(sched: Schedule, order: Iterable[Op]) -> list[tuple[Member, ...]]:
    """The records of every op of ``order`` (memoised per schedule and op)."""
    memo = _MEMBERS.get(sched.name)
    if memo is None or len(memo) > _MAX_MEMBERS:
        memo = _MEMBERS[sched.name] = {}
    ops = list(order)
    got = list(map(memo.get, ops))
    if None in got:
        for k, op in enumerate(ops):
            if got[k] is None:
                st = normalise(op, sched)
                got[k] = memo[op] = tuple((KINDS.index(ps.kind), ps.lane, ps.mb, ps.local)
                                          for ps in ((st.f, st.b) if isinstance(st, Fused) else (st,)))
    # Every None was filled just above; cast, not a filtering pass (millions of ops on deep pipelines).
    return cast(list[tuple[Member, ...]], got)


def _compile(schedule: str, p: int, v: int, units: int) -> Program:
    sched = get_schedule(schedule)
    lay = layout_for(sched, p, v)
    nch = sched.chunks_per_rank(v)
    L = lay.length
    # One record per pass ("member"; a fused F&B has two): op, stage, kind, lane, unit, local chunk.
    per_op: list[tuple] = []
    per_stage: list[int] = []
    for s in range(p):
        got = _members(sched, sched.order(s, p, units, v))
        per_op += got
        per_stage.append(len(got))
    n = len(per_op)
    sizes = np.fromiter(map(len, per_op), np.int64, n)
    flat = [m[0] for m in per_op] if sizes.max(initial=1) == 1 else list(chain.from_iterable(per_op))
    members = np.array(flat, dtype=np.int64).reshape(-1, 4)
    ids = np.repeat(np.arange(n, dtype=np.int64), sizes)
    r = np.column_stack([ids, np.repeat(np.repeat(np.arange(p, dtype=np.int64), per_stage), sizes), members])
    m_op, m_stage, m_kind, m_lane, m_unit, m_local = r.T
    fused = np.bincount(m_op, minlength=n) == 2
    first = np.concatenate(([True], m_op[1:] != m_op[:-1]))       # a fused op: its F member comes first
    prog_stage = m_stage[first]
    kind = np.where(fused, 4, m_kind[first])
    local = m_local[first]
    local_b = np.where(fused, m_local[~first][np.cumsum(fused) - 1] if fused.any() else 0, local)
    mb = np.where(fused, m_unit[~first][np.cumsum(fused) - 1] if fused.any() else 0, m_unit[first])
    # Positions along the lane (layout.Layout.position), the rank at each position (Layout.at) and
    # which op holds each pass there.
    lanes = 2 if sched.two_directions else 1
    pos_of = np.array([[[lay.position(s, ln, c) for c in range(nch)] for s in range(p)]
                       for ln in range(lanes)],
                      dtype=np.int64).reshape(lanes, p, nch)
    rank_at = np.array([[lay.at(ln, q)[0] for q in range(L)] for ln in range(lanes)], dtype=np.int64)
    pos = pos_of[m_lane, m_stage, m_local]
    is_f = m_kind == KINDS.index("F")
    is_b = (m_kind == KINDS.index("B")) | (m_kind == KINDS.index("Bi"))
    is_w = m_kind == KINDS.index("W")
    at_f = np.full((lanes, units, L), -1, np.int64)
    at_b = np.full((lanes, units, L), -1, np.int64)
    at_f[m_lane[is_f], m_unit[is_f], pos[is_f]] = m_op[is_f]
    at_b[m_lane[is_b], m_unit[is_b], pos[is_b]] = m_op[is_b]
    end0 = 1 + p * nch
    src = np.zeros((n, 4), np.int64)
    # An input from the neighbouring position arrives by transfer, unless that position is on the
    # same rank (a V's turn, builder._data_dependencies): then it is the pass's end itself.
    f_in = is_f & (pos > 0)
    f_local = rank_at[m_lane[f_in], pos[f_in] - 1] == m_stage[f_in]
    src[m_op[f_in], 0] = end0 + np.where(f_local, 0, n) + at_f[m_lane[f_in], m_unit[f_in], pos[f_in] - 1]
    b_in = is_b & (pos + 1 < L)
    b_local = rank_at[m_lane[b_in], pos[b_in] + 1] == m_stage[b_in]
    src[m_op[b_in], 1] = end0 + np.where(b_local, 0, 2 * n) + at_b[m_lane[b_in], m_unit[b_in], pos[b_in] + 1]
    src[m_op[is_b], 2] = end0 + at_f[m_lane[is_b], m_unit[is_b], pos[is_b]]
    src[m_op[is_w], 2] = end0 + at_b[m_lane[is_w], m_unit[is_w], pos[is_w]]
    gate = is_f & (m_unit == 0)                               # builder._gathers_at_start
    src[m_op[gate], 3] = 1 + m_stage[gate] * nch + m_local[gate]
    # The stage pair a transfer uses (layout.Layout.pair): forward from stage s on pair s,
    # backward on pair s-1 (wrapping between virtual chunks); two lanes and a V use the lower rank's.
    send_f = np.full(n, -1, np.int64)
    send_b = np.full(n, -1, np.int64)
    f_out = is_f & (pos + 1 < L)
    f_out[f_out] = rank_at[m_lane[f_out], pos[f_out] + 1] != m_stage[f_out]      # a V's turn sends nothing
    b_out = is_b & (pos > 0)
    b_out[b_out] = rank_at[m_lane[b_out], pos[b_out] - 1] != m_stage[b_out]
    if lay.two_directions or lay.v_shape:
        send_f[m_op[f_out]] = np.minimum(m_stage[f_out], rank_at[m_lane[f_out], pos[f_out] + 1])
        send_b[m_op[b_out]] = np.minimum(m_stage[b_out], rank_at[m_lane[b_out], pos[b_out] - 1])
    else:
        send_f[m_op[f_out]] = m_stage[f_out]
        send_b[m_op[b_out]] = (m_stage[b_out] - 1) % p
    # Duration-table columns (Program.durations_index / fused_index).
    dur = np.where(kind == 4, p * nch * len(KINDS) + (prog_stage * nch + local) * nch + local_b,
                   (prog_stage * nch + local) * len(KINDS) + np.minimum(kind, 3))
    grads = np.zeros((p, nch), np.int64)
    done = (m_kind == KINDS.index("B")) | is_w                # builder: B or W completes the gradients
    np.maximum.at(grads, (m_stage[done], m_local[done]), m_op[done])
    last = np.append(np.flatnonzero(prog_stage[1:] != prog_stage[:-1]), n - 1)
    steps = _steps(prog_stage, src, end0, n)
    order = np.concatenate(steps)
    bounds = np.concatenate(([0], np.cumsum([len(x) for x in steps])))
    plans, send_cols, send_ops = _send_plans(order, bounds, prog_stage, send_f, send_b, end0, n)
    order_src, widths = _compact_inputs(src[order], bounds)
    return Program(schedule, p, v, units, nch, prog_stage, dur, src, send_f, send_b, steps, plans, kind,
                   local, local_b, mb, grads, last, order, tuple(bounds.tolist()), send_cols, send_ops,
                   order_src, widths)


def _compact_inputs(src_o: np.ndarray, bounds: np.ndarray) -> tuple[np.ndarray, tuple[int, ...]]:
    """``src_o`` (ops in step order x 4 input slots, 0 where none) with each row's inputs sorted
    largest first, so slot 0 (the constant zero) comes last, and per step the number of leading
    columns holding any input (at least 1)."""
    srt = -np.sort(-src_o, axis=1)
    used = (srt > 0).sum(axis=1)
    widths = np.maximum.reduceat(used, bounds[:-1]) if len(used) else np.zeros(0, np.int64)
    return np.ascontiguousarray(srt), tuple(max(1, int(w)) for w in widths)


def _send_plans(order: np.ndarray, bounds: np.ndarray, stage: np.ndarray, send_f: np.ndarray,
                send_b: np.ndarray, end0: int, n: int) -> tuple[tuple, np.ndarray, np.ndarray]:
    """Per step (``order[bounds[k]:bounds[k + 1]]``), its sends as passes over disjoint stages: every
    op's first send, then the second send of the ops that send two (DualPipe's F&B: forward, then
    backward).  Computed for the whole program at once and cut per step (a step's arrays are views).
    Also every send's (column, op), passes one after the other: a pass's ``lo:hi`` slices them."""
    steps = len(bounds) - 1
    step_of = np.repeat(np.arange(steps), np.diff(bounds))
    f, b = send_f[order] >= 0, send_b[order] >= 0
    cut_passes = []
    flat_cols, flat_ops = [], []
    base = 0
    for mask, use_f in (((f | b), None), ((f & b), False)):
        at = np.flatnonzero(mask)
        if not len(at):
            continue
        ops = order[at]
        fwd = f[at] if use_f is None else np.zeros(len(at), bool)
        col = np.where(fwd, 0, 1)
        cols = (at - bounds[step_of[at]], ops, stage[ops], np.where(fwd, end0 + n + ops, end0 + 2 * n + ops))
        cut_passes.append((cols, np.searchsorted(at, bounds).tolist(), base))
        flat_cols.append(col)
        flat_ops.append(ops)
        base += len(at)
    out = []
    for k in range(steps):
        passes = []
        for cols, cuts, first in cut_passes:
            lo, hi = cuts[k], cuts[k + 1]
            if hi > lo:
                passes.append((*(c[lo:hi] for c in cols), first + lo, first + hi))
        out.append(tuple(passes))
    empty = np.zeros(0, np.int64)
    return (tuple(out), np.concatenate(flat_cols) if flat_cols else empty,
            np.concatenate(flat_ops) if flat_ops else empty)


def _steps(stage: np.ndarray, src: np.ndarray, end0: int, n: int) -> tuple[np.ndarray, ...]:
    """Level of each op: one after the previous op of its stage and after every op it waits for
    (through a transfer or on its own stage), so a level holds at most one op per stage.  Stages
    advance round-robin as far as their inputs are levelled (schedules.base.critical_path's walk)."""
    prod = np.where(src[:, :3] >= end0, (src[:, :3] - end0) % n, -1)
    # An input on the op's own stage, earlier in its order, is levelled before it and below it (a
    # stage's levels rise op by op): it never delays the op, so only the other inputs are walked.
    own = (prod >= 0) & (stage[np.maximum(prod, 0)] == stage[:, None]) & (prod < np.arange(n)[:, None])
    prod = np.where(own, -1, prod)
    starts = np.flatnonzero(np.concatenate(([True], stage[1:] != stage[:-1]))).tolist()
    if (prod >= 0).sum(axis=1).max(initial=0) <= 1:
        level = _walk_one(prod.max(axis=1).tolist(), starts, n)
    else:
        level = _walk(prod.tolist(), starts, n)
    lv = np.array(level)
    order = np.argsort(lv, kind="stable")
    bounds = np.searchsorted(lv[order], np.arange(lv.max() + 2))
    return tuple(order[bounds[k]:bounds[k + 1]] for k in range(len(bounds) - 1) if bounds[k + 1] > bounds[k])


def _walk_one(producer: list[int], starts: list[int], n: int) -> list[int]:
    """:func:`_walk` for ops waiting for one op at most (-1: none), the common case (no fused F&B)."""
    level = [-1] * n
    ends = starts[1:] + [n]
    pos = list(starts)
    left = n
    while left:
        progressed = False
        for k in range(len(starts)):
            i, end = pos[k], ends[k]
            prev = level[i - 1] if i > starts[k] else -1
            while i < end:
                j = producer[i]
                if j >= 0:
                    lj = level[j]
                    if lj < 0:
                        break
                    if lj > prev:
                        prev = lj
                prev += 1
                level[i] = prev
                i += 1
            if i > pos[k]:
                left -= i - pos[k]
                progressed = True
            pos[k] = i
        if not progressed:
            raise RuntimeError("schedule order deadlocks")      # a schedule bug, never user input
    return level


def _walk(producer: list[list[int]], starts: list[int], n: int) -> list[int]:
    """Levels of ops (stage-major, a stage's ops from ``starts``) waiting for the ops listed per op
    (-1: none): stage by stage round-robin, each as far as its inputs are levelled."""
    level = [-1] * n
    ends = starts[1:] + [n]
    pos = list(starts)
    left = n
    while left:
        progressed = False
        for k in range(len(starts)):
            i, end = pos[k], ends[k]
            prev = level[i - 1] if i > starts[k] else -1
            while i < end:
                need = prev + 1
                blocked = False
                for j in producer[i]:
                    if j >= 0:
                        lj = level[j]
                        if lj < 0:
                            blocked = True
                            break
                        if lj >= need:
                            need = lj + 1
                if blocked:
                    break
                level[i] = prev = need
                i += 1
            if i > pos[k]:
                left -= i - pos[k]
                progressed = True
            pos[k] = i
        if not progressed:
            raise RuntimeError("schedule order deadlocks")      # a schedule bug, never user input
    return level
