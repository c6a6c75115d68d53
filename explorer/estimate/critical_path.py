"""The pipeline's timeline from its compiled program (estimate/program.py), for many rows at once.

What the engine (explorer/engine.py) does with the pipeline part of the task graph is a longest
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
DualPipe's phases depend on the count, so it is compiled per count, estimate/pipeline.py).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .program import Program


@dataclass(frozen=True)
class OpTimes:
    """Per op (first axis) and row (last axis): start and end of every op of the program."""

    start: np.ndarray            # (n, g)
    end: np.ndarray              # (n, g) end of the pass (before a blocking send)
    free: np.ndarray             # (n, g) when the stage's compute stream is free after it (sends included)


def evaluate(prog: Program, dur: np.ndarray, send_f: np.ndarray, send_b: np.ndarray, real: np.ndarray,
             gates: np.ndarray, blocking: bool) -> OpTimes:
    """Times of every op of ``prog`` for g rows.

    ``dur``: (n, g) seconds of each op; ``send_f``/``send_b``: (n, g) seconds of the forward/backward
    transfer it sends (0 where none); ``real``: (n, g) 1.0 for the row's own ops, 0.0 for phantoms;
    ``gates``: (p*nch, g) when each chunk's first forward may start (ZeRO 1-2 parameter gathers);
    ``blocking``: sends run on the sender's compute stream instead of its pp stream."""
    g = dur.shape[1]
    n, p = prog.n, prog.p
    end0 = prog.end0
    times = np.zeros((end0 + 3 * n, g))
    times[1:end0] = gates
    start = np.empty((n, g))
    free_after = np.empty((n, g))
    clock = np.zeros((p, g))
    pp_free = np.zeros((p, g))
    has_f, has_b = prog.send_f >= 0, prog.send_b >= 0
    for idx in prog.steps:
        st = prog.stage[idx]
        ready = times[prog.src[idx]].max(axis=1) * real[idx]      # phantoms wait for nothing
        s0 = np.maximum(clock[st], ready)
        e0 = s0 + dur[idx]
        start[idx] = s0
        times[end0 + idx] = e0
        free = e0
        for sends, mask_all, base in ((send_f, has_f, end0 + n), (send_b, has_b, end0 + 2 * n)):
            mask = mask_all[idx]
            if not mask.any():
                continue
            sel = idx[mask]
            after = free[mask]
            if blocking:
                arrive = after + sends[sel]
                free = free.copy()
                free[mask] = arrive
            else:
                ss = prog.stage[sel]
                arrive = np.maximum(pp_free[ss], after) + sends[sel]
                pp_free[ss] = arrive
            times[base + sel] = arrive
        clock[st] = free
        free_after[idx] = free
    return OpTimes(start, times[end0:end0 + n], free_after)
