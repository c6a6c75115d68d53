"""The step loop of the array runs (arrayfold/rows.py): every pass's end and every transfer's
arrival of a compiled program (pricing/program.py), for one or several rows at once, the engine's
max and + in the engine's order (pricing/critical_path.evaluate without parameter gathers or
blocking sends).

A step holds at most one op per stage (the program's steps), so it is one numpy call per
operation for all stages and rows; the cost of a run is its number of steps times those calls
(a 530B Table 5 row: 1,748 steps), which is why the per-step indices are kept on the program and
the transfers are first read as leaving on a free stream (:func:`evaluate`).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...pricing.program import Program

NONE = -1


def evaluate(prog: Program, dur: np.ndarray, seconds: np.ndarray,
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
    st = step_indices(prog)
    order, bounds = prog.order, prog.bounds
    all_real = bool(real.all())
    dur_o, sent, recv = _in_step_order(prog, st, dur, seconds, one, all_real)
    if all_real:                       # no phantom units (an array run)
        real_o, phantom = None, [False] * (len(bounds) - 1)
    else:
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
        if free and real_o is None:
            # No phantoms: a transfer's arrival is read as its sender's end plus its seconds (the
            # engine's max(stream free, sender's end) + seconds when the stream is free), no
            # arrival written during the loop; written after it for what reads them.
            assert recv is not None            # (no phantoms: _in_step_order made it)
            _loop_free(times, st, bounds, dur_o, recv)
            sender_end = times[end_ops]
            times[st.send_slot] = sender_end + sent
        else:
            _loop(times, st, bounds, dur_o, sent, real_o, phantom, one, free)
            sender_end = times[end_ops]
        # (Steps with phantom units take the max: a phantom's zero-second transfer passes the
        # stream's previous arrival on; the check is the other steps'.)
        stream_free = times[st.prev_slot]
        if not free:
            break
        held = stream_free <= sender_end
        if real_o is None:             # no phantom step: every send's check counts
            if (held if one else held.all(axis=1)).all():
                break
        elif ((held if one else held.all(axis=1)) | np.asarray(phantom)[st.send_step]).all():
            break
    if one:                            # on the flat vector, then as one column
        wait = times[st.arrival_all]
        if real_o is not None:         # (x 1.0 leaves a time as it is: skipped when every unit is real)
            wait *= real[:, 0]
        start = np.maximum(times[st.before_all], wait, out=wait)
        t_start = np.zeros(n)
        t_start[ops] = np.maximum(stream_free, sender_end)   # (times[prev_slot], times[end_ops] as read last)
        return start[:, None], times[end0:end0 + n, None], t_start[:, None]
    wait = times[st.arrival_all] * real
    start = np.maximum(times[st.before_all], wait, out=wait)
    t_start = np.zeros((n, g))
    t_start[ops] = np.maximum(times[st.prev_slot], times[end_ops])
    return start, times[end0:end0 + n], t_start


def _in_step_order(prog: Program, st: StepIndices, dur: np.ndarray, seconds: np.ndarray, one: bool,
                   all_real: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """The seconds of every op in step order, of every send (plan order) and, without phantom
    units (``all_real``), of the transfer each op waits for (step order, 0 for none; else None);
    ``one``: of one row, as flat vectors.  For one row of every unit whose ``dur`` and ``seconds``
    are read-only (an array run's, kept on its builder: rows._inputs) the three are kept on the
    program for them."""
    memo = prog.__dict__.get("_in_step_order")
    frozen = one and all_real and not dur.flags.writeable and not seconds.flags.writeable
    if frozen and memo is not None and memo[0] is dur and memo[1] is seconds:
        return memo[2]
    order = prog.order
    recv = None
    if one:
        dur_o, sent = dur[order, 0], seconds[prog.send_ops, 0]
        if all_real:               # (the senders in step order are kept on the program: one gather)
            recv = np.where(st.has_sender_o, seconds[st.sender_o, 0], 0.0)
    else:
        dur_o, sent = dur[order], seconds[prog.send_ops]
        if all_real:
            recv = np.where(st.sender[:, None] >= 0, seconds[np.maximum(st.sender, 0)], 0.0)[order]
    got = (dur_o, sent, recv)
    if frozen:
        prog.__dict__["_in_step_order"] = (dur, seconds, got)
    return got


def _loop_free(times: np.ndarray, st: StepIndices, bounds: tuple[int, ...], dur_o: np.ndarray,
               recv: np.ndarray) -> None:
    """The steps of :func:`evaluate` without phantom units, every pp stream assumed free: an op
    ends at the later of its stage's previous op and its sender's end plus the transfer's
    seconds (``recv``, in step order), plus its own seconds."""
    mx = np.maximum
    for k, (inputs, s) in enumerate(zip(st.inputs_free, st.slot, strict=True)):
        lo, hi = bounds[k], bounds[k + 1]
        t = times[inputs]                                  # the stage's previous op, the sender
        ready = t[hi - lo:]
        ready += recv[lo:hi]
        e0 = mx(t[:hi - lo], ready, out=ready)
        e0 += dur_o[lo:hi]
        times[s] = e0


def _loop(times: np.ndarray, st: StepIndices, bounds: tuple[int, ...], dur_o: np.ndarray, sent: np.ndarray,
          real_o: np.ndarray | None, phantom: list[bool], one: bool, free: bool) -> None:
    """The steps of :func:`evaluate` into ``times``: each op ends at the later of its stage's
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
    inputs_free: list[np.ndarray]  # ... then the end of the op sending that transfer (0: none)
    sender: np.ndarray            # (n,) the op sending the transfer each op waits for (-1: none)
    sender_o: np.ndarray          # (n,) the same in step order, 0 for none ...
    has_sender_o: np.ndarray      # (n,) ... and whether there is one
    send_slot: np.ndarray         # every send's arrival slot (plan order)
    slot: list[np.ndarray]        # where each op's end goes
    # Per step its sends: (positions in the step or None for all in order, arrival slots, the
    # slots of the transfers their stages sent before, slice lo:hi of the sends).
    plans: list[list[tuple[np.ndarray | None, np.ndarray, np.ndarray, int, int]]]
    prev_slot: np.ndarray         # every send's previous transfer's slot on its stage (0: none)
    send_step: np.ndarray         # every send's step
    arrival_all: np.ndarray       # (n,) arrival index of every op (program order)
    before_all: np.ndarray        # (n,)


def step_indices(prog: Program) -> StepIndices:
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
    sender = np.where(arrival > 0, (arrival - end0) % n, NONE)
    sender_o = np.split(np.where(sender >= 0, end0 + sender, 0)[order], cuts)
    inputs_free = [np.concatenate([b, a]) for a, b in zip(sender_o, before_o, strict=True)]
    send_step = np.zeros(len(ops), np.int64)
    for k, plan in enumerate(prog.sends):
        for *_, a, b in plan:
            send_step[a:b] = k
    got = StepIndices(inputs, inputs_free, sender, np.maximum(sender, 0)[order], (sender >= 0)[order],
                      slots, np.split(end0 + order, cuts), plans, prev_slot,
                      send_step, arrival, before)
    prog.__dict__["_step_indices"] = got
    return got
