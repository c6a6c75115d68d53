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

from dataclasses import dataclass

import numpy as np

from ...pricing.program import KINDS, Program, compile_program
from ...taskgraph.builder import IterationBuilder
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
        """(N,) GPU class of every task: a transfer's is its sender's."""
        st = self.prog.stage
        return np.concatenate([st, st, self.tail.cls])

    def compute(self) -> np.ndarray:
        """(N,) bool: the task runs on its class's compute stream (passes, optimizer steps)."""
        n = self.n
        return np.concatenate([np.ones(n, bool), np.zeros(n, bool), ~self.tail.bucket])

    def kind(self) -> np.ndarray:
        """(N,) 0 a compute task, 1 a pipeline transfer (pp), 2 a gradient bucket (dp)."""
        n = self.n
        return np.concatenate([np.zeros(n, np.int64), np.ones(n, np.int64), 2 * self.tail.bucket])


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
    g, n = len(units), prog.n
    table, transfer = costs(b)
    real = prog.mb[:, None] < np.array(units)[None, :]
    realf = real.astype(float)
    dur = table[prog.dur][:, None] * realf
    pair = np.where(prog.send_f >= 0, prog.send_f, prog.send_b)
    sent = (pair >= 0)[:, None] & real
    seconds = np.where(pair >= 0, transfer[np.maximum(pair, 0)], 0.0)[:, None] * realf
    start_p, end_p, t_start = _evaluate(prog, dur, seconds, realf)

    # The last real pass of each stage, whose end releases its buckets (without overlap) and step.
    stage_start = stage_starts(prog)
    last = np.maximum.reduceat(np.where(real, np.arange(n)[:, None], NONE), stage_start, axis=0)
    tl = tail(b)
    if tl is None:
        raise ValueError("evaluate_rows: the graph holds tasks the array runs do not (fold/arrays/tail.py)")
    k_start, k_end, k_ready, k_binding = _tail_times(prog, tl, real, last, start_p, end_p, dur)
    # Transfers: ready when the pass that sends them ends, bound to it; arrival = start + seconds.
    start = np.concatenate([start_p, t_start, k_start])
    end = np.concatenate([end_p, t_start + seconds, k_end])
    all_dur = np.concatenate([dur, seconds, np.broadcast_to(tl.dur[:, None], (len(tl), g))])
    exists = np.concatenate([real, sent, np.ones((len(tl), g), bool)])

    # Passes: the previous real pass of the stage, then the transfer they receive.
    prev = previous(real, stage_start)
    end0, src = prog.end0, prog.src
    arrival = np.maximum(src[:, 0], src[:, 1])            # a pass receives one transfer at most
    arrival = np.where(real & (arrival > 0)[:, None], (n + (arrival - end0) % n)[:, None], NONE)
    p_ready, p_binding = _binding(prev, arrival, start, end, binding_key(prog, tl))
    ready = np.concatenate([p_ready, end_p, k_ready])
    binding = np.concatenate([p_binding, np.where(sent, np.arange(n)[:, None], NONE), k_binding])
    return Rows(prog, tuple(units), real, all_dur, ready, start, end, binding, exists, last, tl)


def _tail_times(prog: Program, tl: Tail, real: np.ndarray, last: np.ndarray, start_p: np.ndarray,
                end_p: np.ndarray, dur: np.ndarray) -> tuple[np.ndarray, ...]:
    """Start, end, ready and binding ((T, g) each) of every stage's buckets and optimizer step.

    A bucket is ready ``frac`` of the way through the pass that completes its chunk's gradients
    (engine.run: ``start + frac x duration``) or, without overlap, when the stage's last pass ends;
    each stage's dp stream runs its buckets in order of readiness, then task order.  The step waits
    for the last pass and every bucket, bound to the one that ends last (ties as engine.run breaks
    them: the later start, then the dp stream, visited after compute)."""
    T, g = len(tl), real.shape[1]
    cols = np.arange(g)[None, :]
    if tl.overlap:
        # builder.grads_done: the last full backward or weight-gradient pass of each (stage, chunk).
        done = real & ((prog.kind == 1) | (prog.kind == 3))[:, None]
        grads = np.full((prog.p, prog.nch, g), NONE, np.int64)
        for r in range(g):
            ops = np.flatnonzero(done[:, r])
            np.maximum.at(grads[:, :, r], (prog.stage[ops], prog.local_b[ops]), ops)
        pass_of = np.where(tl.bucket[:, None], grads[tl.cls, np.maximum(tl.chunk, 0)], last[tl.cls])
    else:
        pass_of = last[tl.cls]
    ready = start_p[pass_of, cols] + tl.frac[:, None] * dur[pass_of, cols]
    start = np.zeros((T, g))
    end = np.zeros((T, g))
    binding = np.where(tl.bucket[:, None], pass_of, NONE)
    row = cols[0]
    for s, k in enumerate(tl.step):
        bucket = np.arange(tl.step[s - 1] + 1 if s else 0, k)
        if len(bucket):
            order = np.argsort(ready[bucket], axis=0, kind="stable")       # ties: task order
            free = np.zeros(g)
            for j in range(len(bucket)):
                i = bucket[order[j]]
                begin = np.maximum(ready[i, row], free)
                start[i, row] = begin
                free = begin + tl.dur[i]
                end[i, row] = free
        # The step: bound to the last pass (compute stream) unless a bucket ends later, or as late
        # and started later (or at the same instant: the dp stream is visited after compute).
        ls = last[s]
        b_end, b_start, best = end_p[ls, row], start_p[ls, row], ls.copy()
        for i in bucket:
            better = (end[i] > b_end) | ((end[i] == b_end) & ((start[i] > b_start) | (start[i] == b_start)))
            best = np.where(better, 2 * prog.n + i, best)
            b_end, b_start = np.where(better, end[i], b_end), np.where(better, start[i], b_start)
        ready[k] = b_end
        start[k] = b_end
        end[k] = b_end + tl.dur[k]
        binding[k] = best
    return start, end, ready, binding


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


def _evaluate(prog: Program, dur: np.ndarray, seconds: np.ndarray,
              real: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Start and end of every pass and start of every transfer (by sending pass) of ``prog`` for g
    rows: pricing/critical_path.evaluate for graphs without parameter gathers or blocking sends.

    The same max and + in the same order, with two shortcuts: a pass's own forward (or backward)
    ran earlier on its stage and never delays it, so it waits for its stage and one transfer; and
    a stage's compute stream is free when its previous op ended, its pp stream when its previous
    transfer arrived (first in, first out), so both are read from the time vector where those ops
    wrote, instead of being kept apart.  Starts are recomputed after the loop from the same maxima.
    One row (the array run, direct.py) is evaluated on a flat time vector: the loop's cost is its
    numpy calls, one step after another (a 530B Table 5 row: 1,748 steps)."""
    n, g = prog.n, dur.shape[1]
    end0 = prog.end0
    one = g == 1
    times = np.zeros(end0 + 3 * n) if one else np.zeros((end0 + 3 * n, g))
    st = _step_indices(prog)
    order, bounds = prog.order, prog.bounds
    dur_o = dur[order, 0] if one else dur[order]
    sent = seconds[prog.send_ops, 0] if one else seconds[prog.send_ops]
    real_o = real[order]
    phantom = (np.logical_and.reduceat(real_o, np.asarray(bounds[:-1]), axis=0).min(axis=1) == 0).tolist()
    ops = prog.send_ops
    end_ops = prog.end0 + ops
    # First assuming every pp stream is free when its next transfer is sent (arrival = end of the
    # sending pass + seconds), which drops a gather and a max per step; when that holds for every
    # transfer of the result, each max the engine takes picks the same operand and the times are
    # the exact loop's bit for bit (by induction over the steps), else the exact loop runs.
    for free in (True, False):
        times[:] = 0.0
        _loop(times, st, bounds, dur_o, sent, real_o if any(phantom) else None, phantom, one, free)
        # (Steps with phantom units take the max: a phantom's zero-second transfer passes the
        # stream's previous arrival on; the check is the other steps'.)
        if not free:
            break
        held = times[st.prev_slot] <= times[end_ops]
        if ((held if one else held.all(axis=1)) | np.asarray(phantom)[st.send_step]).all():
            break
    if one:
        times = times[:, None]
    wait = times[st.arrival_all] * real
    start = np.maximum(times[st.before_all], wait, out=wait)
    t_start = np.zeros((n, g))
    t_start[ops] = np.maximum(times[st.prev_slot], times[end0 + ops])
    return start, times[end0:end0 + n], t_start


def _loop(times: np.ndarray, st: StepIndices, bounds: tuple[int, ...], dur_o: np.ndarray, sent: np.ndarray,
          real_o: np.ndarray | None, phantom: list[bool], one: bool, free: bool) -> None:
    """The steps of :func:`_evaluate` into ``times``: each op ends at the later of its stage's
    previous op and the transfer it waits for, plus its seconds; each transfer arrives at the
    later of the previous transfer on its sender's pp stream and the end of the sending op, plus
    its seconds (``free``: the sending op's end, the stream assumed free)."""
    mx = np.maximum
    for k, (inputs, s, plan) in enumerate(zip(st.inputs, st.slot, st.plans, strict=True)):
        lo, hi = bounds[k], bounds[k + 1]
        t = times[inputs]                                           # the stage's previous op, the transfer
        ready = t[hi - lo:]
        if phantom[k]:
            assert real_o is not None
            ready *= real_o[lo:hi, 0] if one else real_o[lo:hi]     # phantoms wait for nothing
        e0 = mx(t[:hi - lo], ready, out=ready)
        e0 += dur_o[lo:hi]
        times[s] = e0
        for pos, slot, prev, a, b in plan:
            if free and not phantom[k]:
                times[slot] = (e0 if pos is None else e0[pos]) + sent[a:b]
            else:
                arrive = mx(times[prev], e0 if pos is None else e0[pos])
                arrive += sent[a:b]
                times[slot] = arrive


@dataclass(frozen=True)
class StepIndices:
    """Per step of a program, the time-vector indices its loop reads and writes (kept on the
    program: they depend on the shape only)."""

    # The previous op of each op's stage (0: none, the stage's first), then the transfer each op
    # waits for (0: none): one gather per step.
    inputs: list[np.ndarray]
    slot: list[np.ndarray]        # where each op's end goes
    # Per step its sends: (positions in the step or None for all in order, arrival slots, the
    # slots of the transfers their stages sent before, slice lo:hi of the sends).
    plans: list[list[tuple[np.ndarray | None, np.ndarray, np.ndarray, int, int]]]
    prev_slot: np.ndarray         # every send's previous transfer's slot on its stage (0: none)
    send_step: np.ndarray         # every send's step
    arrival_all: np.ndarray       # (n,) arrival index of every op (program order)
    before_all: np.ndarray        # (n,)


def _step_indices(prog: Program) -> StepIndices:
    """The :class:`StepIndices` of ``prog`` (memoised on it)."""
    got = prog.__dict__.get("_step_indices")
    if got is not None:
        return got
    n, end0 = prog.n, prog.end0
    order, cuts = prog.order, np.asarray(prog.bounds[1:-1])
    arrival = np.maximum(prog.src[:, 0], prog.src[:, 1])
    first = np.r_[True, prog.stage[1:] != prog.stage[:-1]]
    before = np.where(first, 0, end0 + np.arange(n) - 1)           # the previous op's end: 0 first
    # Sends in plan order (the pp streams' FIFO order): each one's slot and the slot of the
    # transfer its stage sent before it (0: none, the stream free from the start).
    ops = prog.send_ops
    slots = np.where(prog.send_cols == 0, end0 + n + ops, end0 + 2 * n + ops)
    by_stage = np.argsort(prog.stage[ops], kind="stable")
    prev_slot = np.zeros(len(ops), np.int64)
    same = prog.stage[ops][by_stage][1:] == prog.stage[ops][by_stage][:-1]
    prev_slot[by_stage[1:][same]] = slots[by_stage[:-1][same]]
    plans = []
    for k, plan in enumerate(prog.sends):
        w = prog.bounds[k + 1] - prog.bounds[k]
        plans.append([(None if len(pos) == w and bool((pos == np.arange(w)).all()) else pos, slot,
                       prev_slot[a:b], a, b) for pos, _, _, slot, a, b in plan])
    arrival_o, before_o = np.split(arrival[order], cuts), np.split(before[order], cuts)
    inputs = [np.concatenate([b, a]) for a, b in zip(arrival_o, before_o, strict=True)]
    send_step = np.zeros(len(ops), np.int64)
    for k, plan in enumerate(prog.sends):
        for *_, a, b in plan:
            send_step[a:b] = k
    got = StepIndices(inputs, np.split(end0 + order, cuts), plans, prev_slot, send_step, arrival, before)
    prog.__dict__["_step_indices"] = got
    return got


def _binding(prev: np.ndarray, arrival: np.ndarray, start: np.ndarray, end: np.ndarray,
             key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Ready time and binding dependency of passes whose inputs are the previous pass of their
    stage ``prev`` and the transfer ``arrival`` ((n, g) each, NONE where absent).  Their own
    forward (or backward) ended no later than ``prev``: it binds only as ``prev`` itself.  The
    engine (engine.run) updates a task's binding as each input starts, keeping the last one whose
    end is at least the latest so far: the later end wins, then the later start, then the stream
    it visits later at the same instant."""
    g = prev.shape[1]
    cols = np.arange(g)[None, :]
    has_p, has_a = prev >= 0, arrival >= 0
    # Flat indices into the (N, g) arrays: one take each (2-D fancy indexing costs several times more).
    fp, fa = np.maximum(prev, 0) * g + cols, np.maximum(arrival, 0) * g + cols
    end_f = end.ravel()
    ep, ea = end_f.take(fp), end_f.take(fa)
    ep[~has_p] = -np.inf
    ea[~has_a] = -np.inf
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
