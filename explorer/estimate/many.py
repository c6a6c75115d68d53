"""estimate_many: validated scenarios in, one row of estimates each out.

Rows are priced one by one from memoised pieces (pricing/profile.py); rows equal on everything
their timing reads (:func:`time_key`: a sweep's ZeRO 1 and ZeRO 2 rows) are timed once.  Their
pipelines run grouped by what a compiled program shares — the schedule, p, v, whether sends block,
and unit counts within a factor of 2**SCALE_BITS (phantom units pad the shorter; DualPipe by its
exact count).  Each group is timed while its op times are at hand: the buckets, optimizer and
iteration window (pricing/sync.py) and the breakdown, whose idle time follows the simulation's
walk along binding dependencies (pricing/walk.py) — groups evaluated into one buffer (up to ARENA
floats) walk together, the walks' numpy steps shared; then, per schedule, p, v and send kind, the
memory for all rows at once.  Throughput and MFU follow
simulate.assemble: tokens per iteration over its time; model FLOPs without recompute per GPU over
time and the bf16 dense peak (PaLM App. B); hardware FLOPs with recompute for TFLOP/s (Megatron-LM
SC21 Eq. 3).

Every unit of every row is evaluated: extrapolating a periodic steady state from a few short runs
(as explorer/fold/steady.py does) needs the fold's proof on every task and its binding dependency —
per-stage end times alone repeating over a few counts do not prove it (unequal stages and pipeline
transfers can take many units to settle into their critical cycle), and the engine itself then
simulates in full.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from ..fold import replica_choice
from ..pricing.breakdown import Pending, begin, breakdowns
from ..pricing.critical_path import arena_size
from ..pricing.link_check import maybe_link_bound
from ..pricing.memory import memory_totals
from ..pricing.pipeline import StageTimes, group_program, run_group
from ..pricing.priority import p3_period
from ..pricing.profile import RowProfile, row_profile
from ..pricing.sync import PACE_CATEGORY, Window_, busiest_stream, ending, window
from ..scenario import Scenario, ScenarioError
from ..schedules.registry import Window
from ..simulate import simulate
from ..variants.registry import needs_simulation
from ..vocabulary import CATEGORIES, OFFLOAD
from .result import Estimates

__all__ = ["estimate", "estimate_many", "estimate_profiles", "needs_simulation", "profile"]

SCALE_BITS = 3          # rows of one program: unit counts within a factor of 2**SCALE_BITS
# A row of more ops than this (units x stages x chunks x passes) is left to the full simulation,
# which folds its steady state (explorer/fold/steady.py): a validated scenario may hold millions of
# micro-batches when its fold is small, and the estimator evaluates every unit.  About the work
# budget of one simulation (config/budget.MAX_WORK).
MAX_ROW_OPS = 300_000
MAX_ELEMENTS = 2_000_000  # ops x rows of one evaluation (about 16 MB per array)
# Floats of the time vectors evaluated into one buffer and walked together (64 MB: a group's is some
# four floats per op and row; groups of a sweep are mostly far smaller, and their walks' steps add up).
ARENA = 4 * MAX_ELEMENTS


def profile(sc: Scenario) -> RowProfile:
    """The row's profile (pricing/profile.row_profile) of the plan the run takes: PipeDream's
    ``stage_replicas: auto`` resolved as simulate resolves it (fold/replica_choice.resolved, which
    the pricing layer below cannot call)."""
    return row_profile(replica_choice.resolved(sc))


def _needs_ops(prof: RowProfile) -> bool:
    """PipeDream's window and P3's replay read individual op times."""
    return prof.schedule.window is Window.ASYNC or prof.sc.communication.dp_priority


def _run(profs: Sequence[RowProfile], jobs: list[tuple[int, int]],
         keep: Sequence[bool] | None = None) -> list[tuple[StageTimes, int]]:
    """Evaluate (row, units) jobs grouped by program and time each at its units (StageTimes'
    ``iteration`` and ``breakdown``, while its op times are at hand); per job its group's times, op
    times dropped, and its column.  ``keep`` is not read: every row keeps its op times until it is
    timed here (PipeDream's window, P3's replay and the breakdown's walk read them)."""
    groups: dict[tuple, list[int]] = {}
    for j, (i, units) in enumerate(jobs):
        pr = profs[i]
        sched = pr.schedule
        scale = units if sched.exact_units else (units - 1).bit_length() // SCALE_BITS
        groups.setdefault((sched.name, pr.p, pr.v, pr.blocking, scale), []).append(j)
    out: list[tuple[StageTimes, int] | None] = [None] * len(jobs)
    parts = []
    for members in groups.values():
        size = max(1, MAX_ELEMENTS // max(row_ops(profs[jobs[j][0]]) for j in members))
        for k in range(0, len(members), size):
            part = members[k:k + size]
            need = arena_size(group_program([profs[jobs[j][0]] for j in part], [jobs[j][1] for j in part]),
                              len(part))
            parts.append((part, need))
    # Deeper pipelines walk longer chains: batched together, their steps are shared most.
    parts.sort(key=lambda x: -profs[jobs[x[0][0]][0]].p)
    batch: list[tuple[list[int], int]] = []
    for part, need in parts:
        if batch and sum(x for _, x in batch) + need > ARENA:
            _time_batch(profs, jobs, batch, out)
            batch = []
        batch.append((part, need))
    if batch:
        _time_batch(profs, jobs, batch, out)
    done = [x for x in out if x is not None]
    assert len(done) == len(jobs)                 # every job is in one group
    return done


def _time_batch(profs: Sequence[RowProfile], jobs: list[tuple[int, int]], batch: list[tuple[list[int], int]],
                out: list[tuple[StageTimes, int] | None]) -> None:
    """Evaluate the parts of ``batch`` (jobs, floats of their times) into one buffer and time them,
    the parts of one schedule, p, v and send kind together: their breakdowns' walks share the
    buffer and their steps (pricing/walk.py)."""
    arena = np.zeros(sum(x for _, x in batch))
    kinds: dict[tuple, list[tuple[list[int], StageTimes]]] = {}
    at = 0
    for part, need in batch:
        rows = [profs[jobs[j][0]] for j in part]
        st = run_group(rows, [jobs[j][1] for j in part], arena[at:at + need])
        at += need
        pr = rows[0]
        kinds.setdefault((pr.schedule.name, pr.p, pr.v, pr.blocking), []).append((part, st))
    pending = []
    for parts in kinds.values():
        members = [j for part, _ in parts for j in part]
        st = StageTimes.concat([x for _, x in parts])
        pend = _begin_times([profs[jobs[j][0]] for j in members], st)
        pending.append((members, replace(st, ops=(None,) * len(members)), pend))
    for (members, st, pend), bd in zip(pending, breakdowns([x[2] for x in pending]), strict=True):
        st = replace(st, iteration=pend.T, breakdown=bd)
        for col, j in enumerate(members):
            out[j] = (st, col)


def row_ops(prof: RowProfile) -> int:
    """The ops of one row's program (units x stages x chunks x passes per chunk and unit)."""
    return prof.units * prof.p * prof.nch * (3 if prof.schedule.split_backward else 2)


def time_key(prof: RowProfile, i: int) -> tuple:
    """Everything the pipeline, the iteration's end, its window and the breakdown read of row ``i``
    (pricing/pipeline.py, sync.py, breakdown.py): the memoised pieces by identity (equal keys
    share one object), the shape and counts by value.  Rows equal on it take the same seconds —
    a sweep's ZeRO 1 and ZeRO 2 rows, which differ in memory only, are timed once.  Rows whose
    replay reads their own options (PipeDream's window, P3) are their own key."""
    if _needs_ops(prof):
        return (i,)
    return (prof.schedule.name, prof.p, prof.v, prof.blocking, prof.units, prof.m, id(prof.layout),
            prof.sm_factor, prof.overlap_reduce, id(prof.transfer), id(prof.job_frac), id(prof.job_dur),
            id(prof.gates), id(prof.trailing), id(prof.optimizer))


def representatives(profs: Sequence[RowProfile], rows: Sequence[int]) -> dict[int, int]:
    """Per row of ``rows`` the first row with its :func:`time_key` (itself when it is the first)."""
    first: dict[tuple, int] = {}
    return {i: first.setdefault(time_key(profs[i], i), i) for i in rows}


def estimate_profiles(profs: Sequence[RowProfile]) -> tuple[Estimates, list[str | None]]:
    """Estimates of already-profiled rows (in their order), and per row None or the one-line reason
    the full simulation refused a row too long for the estimator (its row NaN)."""
    n = len(profs)
    # Orders that depend on the row's own costs (registry ``timed``: cross-datacenter schedules)
    # share no compiled program: those rows come from the simulation, exact by construction.
    # So do the rows of needs_simulation.
    mine = [i for i, pr in enumerate(profs) if row_ops(pr) <= MAX_ROW_OPS and pr.schedule.timed is None
            and not needs_simulation(pr.sc)]
    rep = representatives(profs, mine)
    timed = [i for i in mine if rep[i] == i]
    runs = _run(profs, [(i, profs[i].units) for i in timed], None)
    done = dict(zip(timed, runs, strict=True))
    finals: dict[tuple, list[int]] = {}
    for i in mine:
        pr = profs[i]
        finals.setdefault((pr.schedule.name, pr.p, pr.v, pr.blocking), []).append(i)
    pieces = []
    taken = set(mine)
    for idx in finals.values():
        reps = list(dict.fromkeys(rep[i] for i in idx))
        st = _gather([done[r] for r in reps])
        T, bd = st.iteration, st.breakdown
        # Rows whose links might carry more than the iteration: the simulation (link_check.py).
        bound = {r for r, b in zip(reps, maybe_link_bound([profs[r] for r in reps], st, T), strict=True) if b}
        taken -= {i for i in idx if rep[i] in bound}
        idx = [i for i in idx if rep[i] not in bound]
        if not idx:
            continue
        keep = [k for k, r in enumerate(reps) if r not in bound]
        reps = [reps[k] for k in keep]
        rows = [profs[i] for i in idx]
        pieces.append((np.array(idx), _assemble(rows, T[keep], bd[keep], reps, [rep[i] for i in idx],
                                                memory_totals(rows))))
    reasons: list[str | None] = [None] * n
    for i in (i for i in range(n) if i not in taken):
        est, reasons[i] = simulated(profs[i].sc)
        pieces.append((np.array([i]), est))
    return Estimates.scatter(n, pieces), reasons


def _assemble(profs: list[RowProfile], T: np.ndarray, bd: np.ndarray, reps: list[int], rep_of: list[int],
              mem: np.ndarray) -> Estimates:
    """estimates_of for ``profs``, each taking the time and breakdown of its representative (the
    rows ``reps`` that ``T`` and ``bd`` are aligned with) and its own memory."""
    pos = {r: k for k, r in enumerate(reps)}
    sel = np.array([pos[r] for r in rep_of])
    return estimates_of(profs, T[sel], bd[sel], mem)


def simulated(sc: Scenario) -> tuple[Estimates, str | None]:
    """One row from the full simulation (explorer.simulate.simulate, its steady state folded), or
    a NaN row and the one-line reason it refused the scenario."""
    try:
        r = simulate(sc)
    except ScenarioError as exc:
        return Estimates.empty(1), str(exc)
    mem = r.memory.total
    # The estimator's categories have no ``offload``: the host copies' stall stays in compute, as
    # the priced rows keep it (simulate's with_offload moves it out of compute), so the row sums.
    parts = {k: r.breakdown_s[k] for k in CATEGORIES}
    parts["compute"] += r.breakdown_s.get(OFFLOAD, 0.0)
    return Estimates(np.array([r.iteration_time_s]), {k: np.array([v]) for k, v in parts.items()},
                     np.array([mem / 1e9]), np.array([not r.memory_over_capacity]), np.array([r.mfu]),
                     np.array([r.tokens_per_s]), np.array([r.tflops_per_gpu]),
                     np.array([r.time_per_step_s])), None


def _gather(rows: list[tuple[StageTimes, int]]) -> StageTimes:
    """One StageTimes of ``rows`` (each a column of a group's), taking each group's columns at once."""
    sources: dict[int, tuple[StageTimes, list[int], list[int]]] = {}
    for pos, (st, col) in enumerate(rows):
        got = sources.setdefault(id(st), (st, [], []))
        got[1].append(pos)
        got[2].append(col)
    parts = [st.take(cols) for st, _, cols in sources.values()]
    order = [p for _, poss, _ in sources.values() for p in poss]
    st = parts[0] if len(parts) == 1 else StageTimes.concat(parts)
    if order != list(range(len(rows))):
        st = st.take(np.argsort(order))
    return st


def estimate_many(scenarios: Sequence[Scenario]) -> Estimates:
    """Estimates of validated scenarios (explorer.scenario.from_dict), one row each, in order.  A
    row of more than MAX_ROW_OPS ops comes from the full simulation (NaN if it refuses)."""
    return estimate_profiles([profile(sc) for sc in scenarios])[0]


def estimate(sc: Scenario) -> Estimates:
    """The estimate of one validated scenario (one row)."""
    return estimate_many([sc])


def _begin_times(profs: list[RowProfile], st: StageTimes) -> Pending:
    """Iteration time and breakdown (but its walk: pricing/breakdown.begin) of rows sharing
    schedule, p, v, with their op times: the iteration's end, its window (P3 rows replayed on their
    priority queue, their last bucket the one the queue serves last)."""
    en = ending(profs, st)
    win = window(profs, st, en)
    p3 = [r for r, pr in enumerate(profs) if pr.sc.communication.dp_priority]
    if p3:
        T, starts = win.T.copy(), win.window_start.copy()
        pace, cats = win.pace.copy(), list(win.pace_category)
        ready, chunk, dur = en.dp_ready.copy(), en.dp_chunk.copy(), en.dp_dur.copy()
        for r in p3:
            T[r], starts[r], last = p3_period(profs[r], st, r)
            ready[r], chunk[r], dur[r] = last.T
            # Every stream carries one iteration's work per period (steady_state.schedule_iteration).
            busy, stream = busiest_stream(profs[r], st, r)
            if busy > T[r]:
                pace[r], cats[r], T[r] = busy - T[r], PACE_CATEGORY[stream], busy
        win = Window_(T, starts, pace, cats)
        en = replace(en, dp_ready=ready, dp_chunk=chunk, dp_dur=dur)
    return begin(profs, st, en, win)


def estimates_of(profs: Sequence[RowProfile], T: np.ndarray, bd: np.ndarray, mem: np.ndarray) -> Estimates:
    """The figures of each row from its iteration time ``T``, breakdown columns ``bd`` (CATEGORIES
    order) and peak memory ``mem`` in bytes: fit against the GPU's capacity, MFU over the bf16 peak,
    tokens/s and hardware TFLOP/s per GPU (the conventions of explorer/analysis/breakdown.py)."""
    cap = np.array([pr.sc.hardware.gpu.capacity_bytes for pr in profs])
    hw = np.array([pr.layout.hw_flops * pr.m / pr.p for pr in profs])
    model = np.array([pr.layout.model_flops * pr.m / pr.p for pr in profs])
    peak = np.array([pr.sc.hardware.gpu.peak_tflops * 1e12 for pr in profs])
    tokens = np.array([pr.sc.training.global_batch * pr.sc.model.seq_len for pr in profs], dtype=float)
    return Estimates(T, {k: bd[:, i] for i, k in enumerate(CATEGORIES)}, mem / 1e9, mem <= cap,
                     model / T / peak, tokens / T, hw / T / 1e12, T)
