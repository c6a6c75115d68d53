"""The pipeline's timeline from its compiled program (pricing/program.py), for many rows at once.

What the engine (explorer/engine/scheduler.py) does with the pipeline part of the task graph is a longest
path: every pass starts when its stage's previous pass has ended and its inputs have arrived; a
transfer starts when its producer has ended and the sender's pp stream is free (first in, first
out, in production order) or, for a framework whose sends block (frameworks.blocking_p2p), right
after its producer on the compute stream.  Evaluating the program step by step with numpy, every
stage and every row of a step at once, reproduces the engine's pass times to float rounding (the
same max and + in the same order; tests/test_estimator.py checks it against the engine).  It is
the critical path of the schedule's order that schedules/base.critical_path evaluates for the
registry's ideal-pipeline formulas, here with real, unequal per-stage costs and transfers.

Rows with fewer units than the program's share it: the ops of the units a row does not have are
*phantoms* — no duration, no transfer time, ready at once — which leave every real op's time
unchanged when the row's own order is the program's order with those ops removed (true of every
schedule whose order keeps its units in order: GPipe, 1F1B, interleaved, zero bubble, PipeDream;
DualPipe's phases depend on the count, so it is compiled per count, estimate/many.py).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .program import Program


@dataclass(frozen=True)
class OpTimes:
    """Per op (first axis) and row (last axis): start and end of every op of the program, and what
    the breakdown's walk (pricing/walk.py) reads besides: the whole time vector (Program's layout:
    gates, op ends, transfer arrivals), the ops' seconds and which are the row's own."""

    start: np.ndarray            # (n, g)
    end: np.ndarray              # (n, g) end of the pass (before a blocking send)
    clock: np.ndarray            # (p, g) each stage's compute stream free after its last op
    pp_free: np.ndarray          # (p, g) each stage's pp stream free after its last transfer
    times: np.ndarray            # (end0 + 3n, g) the time vector (``end`` is a view of it)
    dur: np.ndarray              # (n, g) seconds of each op
    real: np.ndarray             # (n, g) 1.0 for the row's own ops, 0.0 for phantoms


def arena_size(prog: Program, g: int) -> int:
    """Floats of the time vector and the starts of ``g`` rows of ``prog`` (:func:`evaluate`'s ``out``)."""
    return (prog.end0 + 4 * prog.n) * g


def evaluate(prog: Program, dur: np.ndarray, sends: np.ndarray, real: np.ndarray, gates: np.ndarray,
             blocking: bool, out: np.ndarray | None = None) -> OpTimes:
    """Times of every op of ``prog`` for g rows.

    ``dur``: (n, g) seconds of each op; ``sends``: (2, n, g) seconds of the forward and backward
    transfer it sends (0 where none); ``real``: (n, g) 1.0 for the row's own ops, 0.0 for phantoms;
    ``gates``: (p*nch, g) when each chunk's first forward may start (ZeRO 1-2 parameter gathers);
    ``blocking``: sends run on the sender's compute stream instead of its pp stream; ``out``: a
    zeroed buffer of :func:`arena_size` floats to hold the time vector and the starts (the
    breakdown's walk reads several groups' from one buffer, pricing/walk.py), else new arrays."""
    g = dur.shape[1]
    n, p = prog.n, prog.p
    end0 = prog.end0
    size = (end0 + 3 * n) * g
    times = np.zeros((end0 + 3 * n, g)) if out is None else out[:size].reshape(end0 + 3 * n, g)
    times[1:end0] = gates
    clock = np.zeros((p, g))
    pp_free = np.zeros((p, g))
    # Everything a step reads of its own ops, laid out step after step: a step takes slices.
    order, bounds = prog.order, prog.bounds
    stage_o, src_o, slot_o = prog.stage[order], prog.order_src, end0 + order
    widths = prog.widths
    dur_o = dur[order]
    # Without phantoms (every row as long as the program) the mask is all ones: skipped.
    real_o = None if real.all() else real[order]
    sent = sends[prog.send_cols, prog.send_ops]                     # every send's seconds, in plan order
    start_o = np.empty((n, g))
    for k, plan in enumerate(prog.sends):
        lo, hi = bounds[k], bounds[k + 1]
        st = stage_o[lo:hi]
        w = widths[k]
        # One input per op: the gathered times are the max (a copy, as the max would be).
        ready = times[src_o[lo:hi, 0]] if w == 1 else times[src_o[lo:hi, :w]].max(axis=1)
        if real_o is not None:
            ready *= real_o[lo:hi]                                  # phantoms wait for nothing
        s0 = np.maximum(clock[st], ready, out=ready)
        start_o[lo:hi] = s0
        e0 = s0 + dur_o[lo:hi]
        times[slot_o[lo:hi]] = e0
        for pos, _, ss, slot, a, b in plan:
            after = e0[pos]
            if blocking:
                arrive = after + sent[a:b]
                e0 = e0.copy()
                e0[pos] = arrive                                   # the compute stream sends
            else:
                arrive = np.maximum(pp_free[ss], after)
                arrive += sent[a:b]
                pp_free[ss] = arrive
            times[slot] = arrive
        clock[st] = e0
    start = np.empty((n, g)) if out is None else out[size:size + n * g].reshape(n, g)
    start[order] = start_o
    return OpTimes(start, times[end0:end0 + n], clock, pp_free, times, dur, real)
