"""Every task of a few reduced runs as arrays: passes, pipeline transfers and optimizer steps with
the engine's ready, start and end times and binding dependency, for several unit counts at once.

The estimator's compiled program (estimate/program.py) evaluated step by step
(estimate/critical_path.py) gives every pass's start and end and every transfer's start and arrival
to float rounding of the engine's own (the same max and + in the same order), for all rows of a
group at once; rows with fewer units than the program run it with phantom units.  What the engine
also records — when a task's inputs were all there (``ready``) and which input came last
(``binding``) — follows from those times and the builder's dependencies
(taskgraph/builder.py): a pass waits for the previous pass of its stage in program order, the
transfer bringing its input, and its own forward (a backward) or backward (a weight-gradient
pass); a transfer for the pass that produced it; the optimizer step for the stage's last pass.

Task space (per row), in the builder's task order: pass ``i`` is ``i``, the transfer pass ``i``
sends (a forward pass sends its activations forward, a backward pass its gradients back; no pass
of a one-direction schedule sends two) is ``n + i``, stage ``s``'s optimizer step ``2n + s``.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..estimate.critical_path import evaluate
from ..estimate.program import KINDS, Program, compile_program
from ..taskgraph.builder import IterationBuilder

NONE = -1


@dataclass(frozen=True)
class Rows:
    """Times of every task of ``g`` runs of one program (column r: ``units[r]`` units)."""

    prog: Program
    units: tuple[int, ...]
    real: np.ndarray             # (n, g) bool: the pass belongs to the row (not a phantom)
    dur: np.ndarray              # (N, g) seconds of every task (task space; 0 where none)
    ready: np.ndarray            # (N, g)
    start: np.ndarray            # (N, g)
    end: np.ndarray              # (N, g)
    binding: np.ndarray          # (N, g) task-space index of the binding dependency, NONE for none
    exists: np.ndarray           # (N, g) bool: the task is in the row's graph
    last: np.ndarray             # (p, g) each stage's last pass

    @property
    def n(self) -> int:
        return self.prog.n

    @property
    def p(self) -> int:
        return self.prog.p

    @property
    def g(self) -> int:
        return len(self.units)

    def cls(self) -> np.ndarray:
        """(N,) GPU class of every task: a transfer's is its sender's."""
        st = self.prog.stage
        return np.concatenate([st, st, np.arange(self.p)])

    def compute(self) -> np.ndarray:
        """(N,) bool: the task runs on its class's compute stream (passes, optimizer steps)."""
        n = self.n
        out = np.ones(2 * n + self.p, bool)
        out[n:2 * n] = False
        return out


def costs(b: IterationBuilder) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Seconds of every duration-table column (Program.dur: stage, local chunk, pass kind), of one
    transfer on each stage pair and of each stage's optimizer step, as the builder's tasks last
    (its priced passes, transfers and step): kept on the builder, which does not depend on the
    unit count."""
    got = b.__dict__.get("_array_costs")
    if got is None:
        p, nch = b.p, b.schedule.chunks_per_rank(b.v)
        kinds = KINDS if b.schedule.split_backward else KINDS[:2]
        table = np.zeros(p * nch * len(KINDS))
        for s in range(p):
            for local in range(nch):
                for kind in kinds:
                    col = (s * nch + local) * len(KINDS) + KINDS.index(kind)
                    table[col] = b._pass_shape(s, local, kind)[2]
        pairs = np.array([b._transfer_shape(q, q, "forward")[3] for q in range(p)])
        got = b.__dict__["_array_costs"] = (table, pairs, np.array([b.optimizer_time(s) for s in range(p)]))
    return got


def evaluate_rows(b: IterationBuilder, units: list[int]) -> Rows:
    """The tasks of builder ``b``'s scenario run with each of ``units`` pipeline units."""
    sched = b.schedule
    prog = compile_program(sched.name, b.p, b.v, max(units))
    g, n, p = len(units), prog.n, b.p
    table, transfer, optimizer = costs(b)
    real = prog.mb[:, None] < np.array(units)[None, :]
    realf = real.astype(float)
    dur = table[prog.dur][:, None] * realf
    pair = np.where(prog.send_f >= 0, prog.send_f, prog.send_b)
    sent = (pair >= 0)[:, None] & real
    seconds = np.where(pair >= 0, transfer[np.maximum(pair, 0)], 0.0)[:, None] * realf
    t_start = np.zeros((n, g))
    gates = np.zeros((prog.end0 - 1, g))                 # no parameter gathers (fold.holds_all)
    ops = evaluate(prog, dur, np.stack([seconds, seconds]), realf, gates, False, t_start)

    # The last real pass of each stage, whose end releases its optimizer step.
    stage_start = np.r_[0, prog.last_op[:-1] + 1]
    last = np.maximum.reduceat(np.where(real, np.arange(n)[:, None], NONE), stage_start, axis=0)
    cols = np.arange(g)[None, :]
    step_ready = ops.end[last, cols]
    # Transfers: ready when the pass that sends them ends, bound to it; arrival = start + seconds.
    # Optimizer steps: ready when the stage's last pass ends, its compute stream free then.
    start = np.concatenate([ops.start, t_start, step_ready])
    end = np.concatenate([ops.end, t_start + seconds, step_ready + optimizer[:, None]])
    all_dur = np.concatenate([dur, seconds, np.broadcast_to(optimizer[:, None], (p, g))])
    exists = np.concatenate([real, sent, np.ones((p, g), bool)])

    # Passes: the previous real pass of the stage, then the inputs the program lists.
    seen = np.where(real, np.arange(n)[:, None], NONE)
    first_of_stage = np.zeros(n, bool)
    first_of_stage[stage_start] = True
    shifted = np.empty((n, g), np.int64)
    shifted[0] = NONE
    shifted[1:] = seen[:-1]
    shifted[first_of_stage] = NONE
    # The running maximum of real indices within a stage: each stage's values lifted above every
    # earlier stage's, so that one accumulation over all ops never carries across stages.
    off = (np.cumsum(first_of_stage) - 1)[:, None] * (n + 1)
    prev = np.maximum.accumulate(np.where(shifted >= 0, shifted + off, off - 1), axis=0) - off
    prev = np.where(real & (prev >= 0), prev, NONE)
    end0, src = prog.end0, prog.src
    arrival = np.maximum(src[:, 0], src[:, 1])            # a pass receives one transfer at most
    inputs = (np.where(arrival > 0, n + (arrival - end0) % n, NONE),
              np.where(src[:, 2] > 0, src[:, 2] - end0, NONE))
    cands = [prev] + [np.where(real & (c[:, None] >= 0), c[:, None], NONE) for c in inputs]
    p_ready, p_binding = _binding(cands, start, end, binding_key(prog))
    ready = np.concatenate([p_ready, ops.end, step_ready])
    binding = np.concatenate([p_binding, np.where(sent, np.arange(n)[:, None], NONE), last])
    return Rows(prog, tuple(units), real, all_dur, ready, start, end, binding, exists, last)


def binding_key(prog: Program) -> np.ndarray:
    """(N,) the order in which the engine processes tasks that start at the same instant: by GPU
    class, then stream name (compute before pp) — engine._starts visits streams sorted so."""
    st = prog.stage * 2
    return np.concatenate([st, st + 1, np.arange(prog.p) * 2])


def _binding(cands: list[np.ndarray], start: np.ndarray, end: np.ndarray,
             key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Ready time and binding dependency of tasks with the candidate inputs ``cands`` (each (n, g),
    NONE where absent).  The engine (engine.run) updates a task's binding as each input starts,
    keeping the last one whose end is at least the latest so far: the latest end wins, then — at
    equal ends — the later start, then the stream it visits later at the same instant."""
    g = cands[0].shape[1]
    cols = np.arange(g)[None, :]
    C = np.stack(cands)                                              # (k, n, g)
    safe = np.maximum(C, 0)
    E = np.where(C >= 0, end[safe, cols], -np.inf)
    ready = E.max(axis=0)
    win = (E == ready) & (C >= 0)
    best = np.take_along_axis(C, win.argmax(axis=0)[None], 0)[0]
    # Equal ends of distinct inputs (rare: a tie of two arrivals, or zero-second transfers): the
    # engine's order of processing decides, replayed on those tasks alone.
    other = np.where(win, C, best[None])
    tie = (other != best[None]).any(axis=0)
    if tie.any():
        t_i, t_r = np.nonzero(tie)
        pick = np.full(len(t_i), NONE, np.int64)
        b_start = np.full(len(t_i), -np.inf)
        b_key = np.full(len(t_i), -1, np.int64)
        for k in range(len(cands)):
            c = C[k, t_i, t_r]
            ok = win[k, t_i, t_r]
            cs = np.where(ok, start[np.maximum(c, 0), t_r], -np.inf)
            ck = np.where(ok, key[np.maximum(c, 0)], -1)
            better = ok & ((cs > b_start) | ((cs == b_start) & (ck >= b_key)))
            pick = np.where(better, c, pick)
            b_start = np.where(better, cs, b_start)
            b_key = np.where(better, ck, b_key)
        best[t_i, t_r] = pick
    found = best >= 0
    return np.where(found, ready, 0.0), np.where(found, best, NONE)
