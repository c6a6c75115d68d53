"""Times of every stage's per-iteration tasks (arrayfold/tail.py) — ZeRO 1-2 start gathers, gradient
buckets, the optimizer step, gathers after it — for every stage and row at once.

Each stage's dp stream runs its tasks one at a time (engine.run): the start gathers, all ready at
0, back to back in task order; then the buckets, the earliest ready first (equal priorities: the
queue order is ready time, then task order), each starting at the later of its ready time and the
stream's free time; the step waits for the last pass and every bucket; the gathers after it run
back to back from its end.  The stages are independent, so each of these is a loop over the
position within a stage (a few dozen tasks at most), every stage and row one numpy step — the same
max and + per stage, in the same order, as one stage at a time.
"""
from __future__ import annotations

import numpy as np

from ...pricing.program import Program
from .tail import BUCKET, GATHER_AFTER, GATHER_FIRST, Tail

NONE = -1


def _slots(tl: Tail, role: int) -> np.ndarray:
    """(p, K) the tail indices of each stage's tasks of ``role`` in task order, NONE-padded."""
    p = len(tl.step)
    sel = np.flatnonzero(tl.role == role)
    per = np.bincount(tl.cls[sel], minlength=p)
    out = np.full((p, int(per.max(initial=0))), NONE, np.int64)
    if len(sel):
        rank = np.arange(len(sel)) - np.repeat(np.cumsum(per) - per, per)    # sel is stage-ordered
        out[tl.cls[sel], rank] = sel
    return out


def tail_times(prog: Program, tl: Tail, real: np.ndarray, last: np.ndarray, start_p: np.ndarray,
               end_p: np.ndarray, dur: np.ndarray) -> tuple[np.ndarray, ...]:
    """Start, end, ready and binding ((T, g) each) of every per-iteration task (module docstring).

    A bucket is ready ``frac`` of the way through the pass that completes its chunk's gradients
    (engine.run: ``start + frac x duration``) or, without overlap, when the stage's last pass ends.
    The step is bound to the one of its inputs that ends last (ties as engine.run breaks them: the
    later start, then the dp stream, visited after compute); a gather after it, to the step."""
    T, g = len(tl), real.shape[1]
    p = len(tl.step)
    cols = np.arange(g)[None, :]
    is_bucket = tl.role == BUCKET
    if tl.overlap:
        # builder.grads_done: the last full backward or weight-gradient pass of each (stage, chunk).
        done = real & ((prog.kind == 1) | (prog.kind == 3))[:, None]
        grads = np.full((prog.p, prog.nch, g), NONE, np.int64)
        for r in range(g):
            ops = np.flatnonzero(done[:, r])
            np.maximum.at(grads[:, :, r], (prog.stage[ops], prog.local_b[ops]), ops)
        pass_of = np.where(is_bucket[:, None], grads[tl.cls, np.maximum(tl.chunk, 0)], last[tl.cls])
    else:
        pass_of = last[tl.cls]
    ready = start_p[pass_of, cols] + tl.frac[:, None] * dur[pass_of, cols]
    start = np.zeros((T, g))
    end = np.zeros((T, g))
    binding = np.where(is_bucket[:, None], pass_of, NONE)
    stages = np.arange(p)

    free = np.zeros((p, g))
    for i in _slots(tl, GATHER_FIRST).T:                 # start gathers: back to back from 0
        ok = i >= 0
        k = i[ok]
        ready[k] = 0.0
        start[k] = free[ok]
        free[ok] = free[ok] + tl.dur[k][:, None]
        end[k] = free[ok]

    slots = _slots(tl, BUCKET)
    if slots.shape[1]:
        at = np.maximum(slots, 0)
        key = np.where((slots >= 0)[:, :, None], ready[at], np.inf)          # (p, K, g)
        order = np.argsort(key, axis=1, kind="stable")                      # ties: task order
        for j in range(slots.shape[1]):
            i = slots[stages[:, None], order[:, j, :]]                        # (p, g)
            ok = i >= 0
            ii = np.maximum(i, 0)
            begin = np.maximum(ready[ii, cols], free)
            start[ii[ok], np.nonzero(ok)[1]] = begin[ok]
            free = np.where(ok, begin + tl.dur[ii], free)
            end[ii[ok], np.nonzero(ok)[1]] = free[ok]

    # The step: bound to the last pass (compute stream) unless a bucket ends later, or as late and
    # started later (or at the same instant: the dp stream is visited after compute); buckets in
    # task order.
    b_end, b_start, best = end_p[last, cols], start_p[last, cols], last.copy()
    for j in range(slots.shape[1]):
        i = slots[:, j]
        ok = (i >= 0)[:, None]
        ii = np.maximum(i, 0)
        e, s = end[ii], start[ii]
        better = ok & ((e > b_end) | ((e == b_end) & (s >= b_start)))
        best = np.where(better, 2 * prog.n + ii[:, None], best)
        b_end, b_start = np.where(better, e, b_end), np.where(better, s, b_start)
    k = tl.step
    ready[k] = b_end
    start[k] = b_end
    end[k] = b_end + tl.dur[k][:, None]
    binding[k] = best

    free = end[k].copy()
    for i in _slots(tl, GATHER_AFTER).T:                 # gathers after the step: back to back
        ok = i >= 0
        kk = i[ok]
        ready[kk] = end[k[ok]]
        start[kk] = free[ok]
        free[ok] = free[ok] + tl.dur[kk][:, None]
        end[kk] = free[ok]
        binding[kk] = 2 * prog.n + k[ok][:, None]
    return start, end, ready, binding
