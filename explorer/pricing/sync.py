"""The end of an iteration: gradient buckets, the optimizer step, ZeRO gathers and the window.

After its last pass a stage waits for its gradient buckets (taskgraph/techniques/dp_buckets.py),
steps the optimizer, and under ZeRO 1-2 without overlap gathers its parameters
(IterationBuilder._iteration_end).  The buckets run one at a time on the stage's dp stream, first
come first served; a bucket task j of a chunk becomes ready part-way through the pass that
completes the chunk's gradients (after (j+1)/M of its M buckets, PyTorch DDP; Li et al. VLDB 2020
Sec. 3.2.3), or after the stage's last pass when the reduction does not overlap.  A single server
serving jobs in order of arrival finishes the last at max_j (r_j + sum_{i>=j} d_i) (jobs sorted by
ready time r, durations d) — the closed form used here for every stage and row at once.

The iteration then is what the schedule's registry entry says (Window, analysis/steady_state.py):
the makespan of a flushing pipeline; the longest span of a stage when iterations overlap (ZB-H2);
PipeDream's steady-state period of m backwards, or the busiest stream's seconds per iteration
when longer (SOSP 2019 Sec. 3).  P3 bucket priorities (dp_priority) are replayed per row on a
priority queue, as the engine runs them (pricing/priority.py).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..schedules.registry import Window
from .buckets import JOBS
from .chunk_basis import F_IDX
from .pipeline import StageTimes
from .profile import RowProfile

# The breakdown category charged with the time a stream sets beyond the compute window, as
# analysis/steady_state.PACE_CATEGORY (the estimator does not import the simulator's analysis).
PACE_CATEGORY = {"compute": "optimizer", "pp": "pp", "dp": "dp"}


def fifo_end(ready: np.ndarray, dur: np.ndarray) -> np.ndarray:
    """End of the last of jobs served one at a time in order of ``ready`` (last axis)."""
    order = np.argsort(ready, axis=-1, kind="stable")
    r = np.take_along_axis(ready, order, -1)
    d = np.take_along_axis(dur, order, -1)
    suffix = np.flip(np.cumsum(np.flip(d, -1), -1), -1)
    return (r + suffix).max(axis=-1)


@dataclass(frozen=True)
class Ending:
    """Per row and stage (g, p): when things happen at the end of the iteration."""

    last_pass: np.ndarray        # end of the stage's last pass
    free: np.ndarray             # compute stream free after it (blocking sends included)
    dp_end: np.ndarray           # last gradient bucket done (0 when none)
    step_end: np.ndarray         # optimizer step done
    end: np.ndarray              # everything of the stage done (trailing gathers included)
    first: np.ndarray            # start of the stage's first pass
    dp_ready: np.ndarray         # when its last gradient bucket was ready (0 when none)
    dp_chunk: np.ndarray         # the local chunk whose gradients it carries (-1: no bucket)
    dp_dur: np.ndarray           # its seconds


def ending(profs: list[RowProfile], st: StageTimes) -> Ending:
    """When each stage of each row ends its iteration (FIFO buckets, optimizer, gathers)."""
    last_pass, free, first = st.last_end, st.free, st.first
    start, dur = st.grads_start, st.grads_dur                        # (g, p, nch)
    frac = np.stack([r.job_frac for r in profs])                     # (g, p, nch*JOBS)
    jd = np.stack([r.job_dur for r in profs])
    overlap = np.array([r.overlap_reduce for r in profs])[:, None, None]
    in_pass = np.repeat(start, JOBS, axis=-1) + frac * np.repeat(dur, JOBS, axis=-1)
    ready = np.where(overlap, in_pass, last_pass[..., None])
    ready = np.where(jd > 0, ready, 0.0)
    dp_end = np.where(jd.sum(-1) > 0, fifo_end(ready, jd), 0.0)
    opt = np.stack([r.optimizer for r in profs])
    step_end = np.maximum(free, dp_end) + opt
    # A stage's last task may be a transfer it sends after its step (a never-flushing or
    # overlapping window measures the stage's own tasks: steady_state.schedule_iteration).
    end = np.maximum(step_end + np.stack([r.trailing for r in profs]), st.last_send)
    # The bucket that ends last is the last one ready (FIFO by readiness, then in task order: chunk
    # after chunk): the optimizer's binding dependency when the buckets end after the passes
    # (pricing/walk.py follows it).
    jobs = ready.shape[-1]
    live = jd > 0
    last = jobs - 1 - np.argmax(np.where(live, ready, -np.inf)[..., ::-1], axis=-1) if jobs else \
        np.zeros(free.shape, np.int64)
    has = live.any(axis=-1) if jobs else np.zeros(free.shape, bool)
    pick = np.take_along_axis(ready, last[..., None], -1)[..., 0] if jobs else np.zeros_like(free)
    dp_ready = np.where(has, pick, 0.0)
    dp_dur = np.where(has, np.take_along_axis(jd, last[..., None], -1)[..., 0], 0.0) if jobs else dp_ready
    dp_chunk = np.where(has, last // JOBS, -1)
    return Ending(last_pass, free, dp_end, step_end, end, first, dp_ready, dp_chunk, dp_dur)


@dataclass(frozen=True)
class Window_:
    """The iteration time of each row and, when a stream other than compute sets it, the time
    beyond the compute window and the category charged with it (steady_state.PACE_CATEGORY)."""

    T: np.ndarray                # (g,)
    window_start: np.ndarray     # (g, p) where each stage's iteration starts
    pace: np.ndarray             # (g,) seconds set by a slower stream (PipeDream), else 0
    pace_category: list[str]


def window(profs: list[RowProfile], st: StageTimes, en: Ending) -> Window_:
    """The iteration time as the schedule's registry entry measures it (see module docstring)."""
    sched = profs[0].schedule
    g, p = en.end.shape
    zeros = np.zeros(g)
    if sched.window is Window.FLUSH:
        return Window_(en.end.max(axis=1), np.zeros((g, p)), zeros, ["bubble"] * g)
    if sched.window is Window.OVERLAP:
        return Window_((en.end - en.first).max(axis=1), en.first, zeros, ["bubble"] * g)
    return _async(profs, st, en)


def _async(profs: list[RowProfile], st: StageTimes, en: Ending) -> Window_:
    """PipeDream (analysis/steady_state.schedule_iteration, Window.ASYNC): one period of m
    backwards in the second of two iterations, or the busiest stream per iteration."""
    g, p = en.end.shape
    T = np.zeros(g)
    starts = np.zeros((g, p))
    pace = np.zeros(g)
    cats: list[str] = []
    for r, prof in enumerate(profs):
        kept = st.ops[r]
        assert kept is not None            # PipeDream's rows are evaluated in full (StageTimes.ops)
        _, times, col, ops = kept
        m = prof.m
        ends = times.end[:, col]
        ks = [m - 1 - (p - 1 - s) for s in range(p)]
        if min(ks) >= 0:
            first = [ends[ops.backward_ops[s, ks[s]]] for s in range(p)]
            measured = max(ends[ops.backward_ops[s, ks[s] + m]] - first[s] for s in range(p))
        else:
            first = [ends[ops.backward_ops[s, m - 1]] for s in range(p)]
            measured = max(en.end[r, s] - first[s] for s in range(p))
        busy, stream = busiest_stream(prof, st, r)
        starts[r] = first
        if busy <= measured:
            T[r], cats = measured, [*cats, "bubble"]
        else:
            T[r], pace[r] = busy, busy - measured
            cats.append(PACE_CATEGORY[stream])
    return Window_(T, starts, pace, cats)


def busiest_stream(prof: RowProfile, st: StageTimes, r: int) -> tuple[float, str]:
    """steady_state.stream_busy: per-unit tasks count m/m_sim of their seconds, the buckets, gathers
    and the optimizer step once; the largest over stages and streams."""
    p, m, units = prof.p, prof.m, prof.units
    share = m / units
    table = st.table[r]                                              # (p, nch, KINDS)
    best = (-1.0, "compute")
    fsdp = prof.feat[prof.holds, F_IDX["fsdp_hidden_f"]] + prof.feat[prof.holds, F_IDX["fsdp_hidden_b"]]
    for s in range(p):
        compute = (units * share * (table[s, :, 0] + table[s, :, 1]).sum() + prof.optimizer[s]
                   + share * st.contention[r, s])      # a lengthened pass counts as per-unit work
        # Every transfer the stage sends (StageTimes.sends: per stage pair, over the units simulated),
        # as breakdowns counts them: an interleaved stage sends at each of its chunks' boundaries, not
        # one forward and one backward a unit (a blocking sender's compute stream was undercounted).
        sends = share * float(st.sends[r, s] @ prof.transfer[:p])
        pp = 0.0
        if prof.blocking:
            compute += sends
        else:
            pp = sends
        dp = (prof.job_dur[s].sum() + prof.trailing[s] + prof.gates[s].max(initial=0.0)
              + units * share * fsdp[s].sum())
        for cand in ((compute, "compute"), (pp, "pp"), (dp, "dp")):
            best = max(best, cand)              # ties: as steady_state's max over (seconds, stream)
    return best
