"""Every task of a few reduced runs as arrays: passes, pipeline transfers and optimizer steps with
the engine's ready, start and end times and binding dependency, for several unit counts at once.

The estimator's compiled program (pricing/program.py) evaluated step by step, as
pricing/critical_path.py does (:func:`_evaluate`), gives every pass's start and end and every
transfer's start and arrival bit for bit as the engine computes them (the same max and + in the
same order; tests/test_arrayfold.py), for all rows at once; rows with fewer units than the program
run it with phantom units.  Durations are the builder's own (:func:`costs`).  What the engine
also records — when a task's inputs were all there (``ready``) and which input came last
(``binding``) — follows from those times and the builder's dependencies
(taskgraph/builder.py): a pass waits for the previous pass of its stage in program order, the
transfer bringing its input, and its own forward (a backward) or backward (a weight-gradient
pass); a transfer for the pass that produced it; the buckets and the step as arrayfold/tail.py
says.

Task space (per row), in the builder's task order: pass ``i`` is ``i``, the transfer pass ``i``
sends (a forward pass sends its activations forward, a backward pass its gradients back; no pass
of a one-direction schedule sends two) is ``n + i``, then from ``2n`` each stage's gradient buckets
and optimizer step (arrayfold/tail.py).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ...pricing.program import KINDS, Program, compile_program
from ...taskgraph.builder import IterationBuilder
from .dp_stream import tail_times
from .steps import evaluate, step_indices
from .tail import Tail, tail

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
    tail: Tail                   # the per-iteration tasks from 2n on

    @property
    def n(self) -> int:
        return self.prog.n

    @property
    def p(self) -> int:
        return self.prog.p

    @property
    def g(self) -> int:
        return len(self.units)

    @property
    def steps(self) -> np.ndarray:
        """(p,) task-space index of each stage's optimizer step."""
        return 2 * self.n + self.tail.step

    def cls(self) -> np.ndarray:
        """(N,) GPU class of every task: a transfer's is its sender's (read-only, memoised)."""
        st = self.prog.stage
        return self._shape("_rows_cls", lambda: np.concatenate([st, st, self.tail.cls]))

    def compute(self) -> np.ndarray:
        """(N,) bool: the task runs on its class's compute stream (passes, optimizer steps)."""
        n = self.n
        return self._shape("_rows_compute", lambda: np.concatenate([np.ones(n, bool), np.zeros(n, bool),
                                                                     ~self.tail.bucket]))

    def kind(self) -> np.ndarray:
        """(N,) 0 a compute task, 1 a pipeline transfer (pp), 2 a gradient bucket (dp)."""
        n = self.n
        return self._shape("_rows_kind", lambda: np.concatenate([np.zeros(n, np.int64), np.ones(n, np.int64),
                                                                  2 * self.tail.bucket]))

    def _shape(self, name: str, make: Callable[[], np.ndarray]) -> np.ndarray:
        """``make()``, which depends on the program and the tail only: kept on the tail (the
        builder's, arrays/tail.py) for its program, read-only since every caller shares it (a 1T
        interleaved row has some 261,000 tasks: each concatenation is a pass over them)."""
        got = self.tail.__dict__.get(name)
        if got is None or got[0] is not self.prog:
            arr = make()
            arr.flags.writeable = False
            got = self.tail.__dict__[name] = (self.prog, arr)
        return got[1]


def costs(b: IterationBuilder) -> tuple[np.ndarray, np.ndarray]:
    """Seconds of every duration-table column (Program.dur: stage, local chunk, pass kind) and of
    one transfer on each stage pair, as the builder's tasks last (its priced passes and
    transfers): kept on the builder, which does not depend on the unit count."""
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
        got = b.__dict__["_array_costs"] = (table, pairs)
    return got


def evaluate_rows(b: IterationBuilder, units: list[int]) -> Rows:
    """The tasks of builder ``b``'s scenario run with each of ``units`` pipeline units."""
    sched = b.schedule
    prog = compile_program(sched.name, b.p, b.v, max(units))
    g = len(units)
    tl = tail(b)
    if tl is None:
        raise ValueError("evaluate_rows: the graph holds tasks the array runs do not (fold/arrays/tail.py)")
    real, realf, sent, dur, seconds, all_dur, exists = _inputs(b, prog, units, tl)
    gated = bool((tl.gates >= 0).any())
    if gated:
        start_p, end_p, t_start = _evaluate_gated(prog, dur, seconds, realf, tl.gate_ends())
    else:
        start_p, end_p, t_start = evaluate(prog, dur, seconds, realf)

    # The last real pass of each stage, whose end releases its buckets (without overlap) and step.
    every = prog.__dict__.get("_every_real") if g == 1 and units[0] == prog.units else None
    if every is None:
        every = _real_structure(prog, real)
        if g == 1 and units[0] == prog.units:
            prog.__dict__["_every_real"] = every          # a row of every unit: kept on the program
    last, prev, arrival, sent_binding = every
    k_start, k_end, k_ready, k_binding = tail_times(prog, tl, real, last, start_p, end_p, dur)
    # Transfers: ready when the pass that sends them ends, bound to it; arrival = start + seconds.
    start = np.concatenate([start_p, t_start, k_start])
    end = np.concatenate([end_p, t_start + seconds, k_end])

    # Passes: the previous real pass of the stage, then the transfer they receive.
    keys = b.__dict__.get("_array_keys")
    if keys is None or keys[0] is not prog:       # per program and builder (its tail): kept on it
        keys = b.__dict__["_array_keys"] = (prog, binding_key(prog, tl))
    p_ready, p_binding = _binding(prog, prev, arrival, start, end, keys[1])
    if gated:
        # A chunk's first forward also waits for its last start gather (builder._gathers_at_start).
        src = prog.src
        gate = np.where(src[:, 3] > 0, tl.gates[np.maximum(src[:, 3] - 1, 0)], NONE)
        gate = np.where(real & (gate >= 0)[:, None], (2 * prog.n + gate)[:, None], NONE)
        p_ready, p_binding = _binding(prog, p_binding, gate, start, end, keys[1])
    ready = np.concatenate([p_ready, end_p, k_ready])
    binding = np.concatenate([p_binding, sent_binding, k_binding])
    return Rows(prog, tuple(units), real, all_dur, ready, start, end, binding, exists, last, tl)


def _inputs(b: IterationBuilder, prog: Program, units: list[int], tl: Tail) -> tuple[np.ndarray, ...]:
    """Which passes are real ((n, g) bool and float), which send a transfer, the seconds of every
    pass and transfer ((n, g) each), and every task's seconds and existence ((N, g), task space).
    A row of every unit depends on the builder (its prices and tail) and the program only: kept on
    the builder for its program, read-only (a 1T interleaved row has some 261,000 tasks)."""
    whole = len(units) == 1 and units[0] == prog.units
    memo = b.__dict__.get("_array_inputs")
    if whole and memo is not None and memo[0] is prog and memo[1] is tl:
        return memo[2]
    g = len(units)
    table, transfer = costs(b)
    real = prog.mb[:, None] < np.array(units)[None, :]
    realf = real.astype(float)
    pair = np.where(prog.send_f >= 0, prog.send_f, prog.send_b)
    sent = (pair >= 0)[:, None] & real
    dur = table[prog.dur][:, None]
    seconds = np.where(pair >= 0, transfer[np.maximum(pair, 0)], 0.0)[:, None]
    if g > 1 or not real.all():          # phantom units take no time (x 1.0 elsewhere: skipped)
        dur, seconds = dur * realf, seconds * realf
    all_dur = np.concatenate([dur, seconds, np.broadcast_to(tl.dur[:, None], (len(tl), g))])
    exists = np.concatenate([real, sent, np.ones((len(tl), g), bool)])
    got = (real, realf, sent, dur, seconds, all_dur, exists)
    if whole:
        for a in got:
            a.flags.writeable = False
        b.__dict__["_array_inputs"] = (prog, tl, got)
    return got


def _real_structure(prog: Program, real: np.ndarray) -> tuple[np.ndarray, ...]:
    """What of a row depends on which units are real only: each stage's last real pass, each
    pass's previous real pass on its stage and the transfer it receives (NONE: none), and each
    transfer's binding (the pass sending it), ((p, g) and (n, g) each)."""
    n = prog.n
    stage_start = stage_starts(prog)
    last = np.maximum.reduceat(np.where(real, np.arange(n)[:, None], NONE), stage_start, axis=0)
    prev = previous(real, stage_start)
    end0, src = prog.end0, prog.src
    arrival = np.maximum(src[:, 0], src[:, 1])            # a pass receives one transfer at most
    arrival = np.where(real & (arrival > 0)[:, None], (n + (arrival - end0) % n)[:, None], NONE)
    pair = np.where(prog.send_f >= 0, prog.send_f, prog.send_b)
    sent_binding = np.where((pair >= 0)[:, None] & real, np.arange(n)[:, None], NONE)
    return last, prev, arrival, sent_binding


def previous(mask: np.ndarray, stage_start: np.ndarray) -> np.ndarray:
    """(n, g) for each op where ``mask`` holds, the previous op of its stage where ``mask`` holds
    (program order), NONE for none: a running maximum of indices, each stage's lifted above every
    earlier stage's so that one accumulation over all ops never carries across stages."""
    n = mask.shape[0]
    if mask.all():                     # every op real (an array run): the op before, within its stage
        prev = np.arange(-1, n - 1)
        prev[stage_start] = NONE
        return np.broadcast_to(prev[:, None], mask.shape).copy()
    seen = np.where(mask, np.arange(n)[:, None], NONE)
    first = np.zeros(n, bool)
    first[stage_start] = True
    shifted = np.empty_like(seen)
    shifted[0] = NONE
    shifted[1:] = seen[:-1]
    shifted[first] = NONE
    off = (np.cumsum(first) - 1)[:, None] * (n + 1)
    prev = np.maximum.accumulate(np.where(shifted >= 0, shifted + off, off - 1), axis=0) - off
    return np.where(mask & (prev >= 0), prev, NONE)


def stage_starts(prog: Program) -> np.ndarray:
    """(p,) index of each stage's first op (ops are stage-major)."""
    return np.r_[0, prog.last_op[:-1] + 1]


def binding_key(prog: Program, tl: Tail) -> np.ndarray:
    """(N,) the order in which the engine processes tasks that start at the same instant: by GPU
    class, then stream name (compute, dp, pp) — engine._starts visits streams sorted so."""
    st = prog.stage * 3
    return np.concatenate([st, st + 2, tl.cls * 3 + tl.bucket])


def _evaluate_gated(prog: Program, dur: np.ndarray, seconds: np.ndarray, real: np.ndarray,
              gates: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Start and end of every pass and start of every transfer (by sending pass) of ``prog`` for g
    rows, when ZeRO 1-2 start gathers gate chunks' first forwards: arrays/steps.evaluate's loop
    (without its shortcuts) with the gates read as inputs.

    The same max and + in the same order, with two shortcuts: a pass's own forward (or backward)
    ran earlier on its stage and never delays it, so it waits for its stage and one transfer; and
    a stage's compute stream is free when its previous op ended, its pp stream when its previous
    transfer arrived (first in, first out), so both are read from the time vector where those ops
    wrote, instead of being kept apart.  Starts are recomputed after the loop from the same maxima.
    ``gates`` (p * nch,): when each chunk's first forward may start (ZeRO 1-2 start gathers), or None."""
    n, g = prog.n, dur.shape[1]
    end0 = prog.end0
    times = np.zeros((end0 + 3 * n, g))
    gate_o = None
    if gates is not None:
        times[1:end0] = gates[:, None]
        gate_o = prog.src[prog.order, 3]
    order, bounds = prog.order, prog.bounds
    # The program's indices (previous op's end, the transfer each op waits for, each send's previous
    # transfer on its stage's pp stream) are arrays/steps.py's, kept on the program.
    st = step_indices(prog)
    arrival, before, prev_slot, ops = st.arrival_all, st.before_all, st.prev_slot, prog.send_ops
    arrival_o, before_o, slot_o, dur_o, real_o = (arrival[order], before[order], end0 + order, dur[order],
                                                  real[order])
    phantom = np.logical_and.reduceat(real_o, np.asarray(bounds[:-1]), axis=0).min(axis=1) == 0
    sent = seconds[ops]                                             # one send per pass
    for k, plan in enumerate(prog.sends):
        lo, hi = bounds[k], bounds[k + 1]
        ready = times[arrival_o[lo:hi]]
        if gate_o is not None:
            np.maximum(ready, times[gate_o[lo:hi]], out=ready)
        if phantom[k]:
            ready *= real_o[lo:hi]                                  # phantoms wait for nothing
        e0 = np.maximum(times[before_o[lo:hi]], ready, out=ready)
        e0 += dur_o[lo:hi]
        times[slot_o[lo:hi]] = e0
        for pos, _, _, slot, a, b in plan:
            arrive = np.maximum(times[prev_slot[a:b]], e0[pos])
            arrive += sent[a:b]
            times[slot] = arrive
    wait = times[arrival] if gates is None else np.maximum(times[arrival], times[prog.src[:, 3]])
    wait *= real
    start = np.maximum(times[before], wait, out=wait)
    t_start = np.zeros((n, g))
    t_start[ops] = np.maximum(times[prev_slot], times[end0 + ops])
    return start, times[end0:end0 + n], t_start


def _binding(prog: Program, prev: np.ndarray, arrival: np.ndarray, start: np.ndarray, end: np.ndarray,
             key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Ready time and binding dependency of passes whose inputs are the previous pass of their
    stage ``prev`` and the transfer ``arrival`` ((n, g) each, NONE where absent).  Their own
    forward (or backward) ended no later than ``prev``: it binds only as ``prev`` itself.  The
    engine (engine.run) updates a task's binding as each input starts, keeping the last one whose
    end is at least the latest so far: the later end wins, then the later start, then the stream
    it visits later at the same instant."""
    has_a, fp, fa, no_p, no_a = _binding_indices(prog, prev, arrival)
    g = prev.shape[1]
    end_f = end.ravel()
    ep, ea = end_f.take(fp), end_f.take(fa)
    ep.ravel()[no_p] = -np.inf
    ea.ravel()[no_a] = -np.inf
    take_a = ea > ep
    # Equal ends (rare): the later start, then the stream visited later; only those are compared.
    tie = np.flatnonzero((ea == ep) & has_a)
    if len(tie):
        start_f = start.ravel()
        ia, ip = fa.ravel()[tie], fp.ravel()[tie]
        sa, sp = start_f[ia], start_f[ip]
        take_a.ravel()[tie] = (sa > sp) | ((sa == sp) & (key[ia // g] >= key[ip // g]))
    best = np.where(take_a, arrival, prev)
    return np.where(best >= 0, np.maximum(ep, ea), 0.0), best


def _binding_indices(prog: Program, prev: np.ndarray, arrival: np.ndarray) -> tuple[np.ndarray, ...]:
    """For :func:`_binding`: where a transfer is received, the flat indices of ``prev`` and
    ``arrival`` into (N, g) arrays (one take each: 2-D fancy indexing costs several times more),
    and the flat positions without a previous pass or a transfer.  The last pair of inputs is
    remembered on the program by identity (a row of every unit passes the program's memoised
    arrays, ``_every_real``: the indices then depend on the program only)."""
    memo = prog.__dict__.get("_binding_indices")
    if memo is not None and memo[0] is prev and memo[1] is arrival:
        return memo[2]
    g = prev.shape[1]
    cols = np.arange(g)[None, :]
    has_p, has_a = prev >= 0, arrival >= 0
    fp, fa = np.maximum(prev, 0) * g + cols, np.maximum(arrival, 0) * g + cols
    got = (has_a, fp, fa, np.flatnonzero(~has_p), np.flatnonzero(~has_a))
    for a in got:
        a.flags.writeable = False
    prog.__dict__["_binding_indices"] = (prev, arrival, got)
    return got
