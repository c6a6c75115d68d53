"""The estimator's fast mode: long pipelines evaluated at two short unit counts and extrapolated.

The exact estimator (estimate/many.py) replays every unit of every row: its cost grows with
micro-batches x stages x virtual stages, and a first call compiles each schedule's program at the
row's own (power-of-two) unit count.  Past its warm-up a pipeline repeats one period per unit, so
the end times a row's iteration is assembled from (StageTimes: each stage's last pass, free
compute stream, last transfer, gradient passes; its op counts) grow linearly in the unit count.
``estimate_many(..., exact=False)`` evaluates a row of ``units`` > 2 x :func:`base_units` at
``a = base_units`` and ``b = 2a`` units only, and extrapolates every time and count linearly to
``units`` (counts exactly: they are linear); the peak activations likewise (saturated schedules
give equal peaks at a and b, GPipe's grow by one unit's activations per unit), and the breakdown
(each count's the simulation's walk, pricing/walk.py), fitted to the extrapolated time.  ``a`` is
at least twice the pipeline's depth in units (p stages; p x v for interleaved, in whole rounds of
p), so both counts are past the warm-up.

Not exact: unequal stages and transfers can take more units than ``a`` to settle into their
critical cycle (estimate/many.py's docstring), so the slope is the one between a and b.  The bound
tests/test_estimator.py asserts is :data:`STATED_BOUND` on the shipped scenarios, random valid
scenarios and the deep grid of bench/estimator.py, with layout rankings kept (pairs within 1 %
excepted).  Rows the fast mode cannot extrapolate take the exact path: PipeDream's window and P3's
replay read individual ops, and DualPipe's phases depend on the count.  Timed (cross-datacenter)
schedules without a WAN run plain 1F1B's program (their orders are 1F1B's when no link delays
exist, schedules/registry.py ``timed``); with a WAN they come from the simulation, as exact.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from ..engine.gc_pause import paused_collector
from ..pricing.keys import memo_table
from ..pricing.link_check import maybe_link_bound
from ..pricing.memory import memory_totals, stage_memory_at
from ..pricing.pipeline import _ARRAYS, StageTimes
from ..pricing.profile import RowProfile
from ..pricing.sync import ending, window
from ..scenario import Scenario
from ..schedules.registry import get as get_schedule
from ..schedules.registry import megatron_schedule
from ..vocabulary import CATEGORIES
from .many import (
    MAX_ROW_OPS,
    _assemble,
    _gather,
    _needs_ops,
    _run,
    estimate_profiles,
    estimates_of,
    needs_simulation,
    profile,
    representatives,
    row_ops,
)
from .result import Estimates

STATED_BOUND = 5e-3            # max |relative error| of iteration time tested (the issue allows 5 %)
MIN_BASE = 32                  # ... and at least this many units (short pipelines settle slower, cost little)
DEPTHS = 2                     # the shorter count in pipeline depths (p x v units)
_PEAKS = memo_table()
# StageTimes fields that are per-row constants, not growing with the unit count.
_CONSTANT = ("first", "table", "fused", "contention")


def base_units(prof: RowProfile) -> int:
    """The shorter of the two unit counts a long row is evaluated at: twice its depth in units and
    at least MIN_BASE, rounded up to whole rounds of p for virtual-stage schedules (Megatron's
    interleaved groups: 32 units on 3 stages are not an interleaved count)."""
    p, v = prof.p, prof.v
    depth = max(MIN_BASE, DEPTHS * p * v)
    return -(-depth // p) * p if prof.schedule.virtual_stages else depth


def _extrapolable(prof: RowProfile) -> bool:
    return not (_needs_ops(prof) or prof.schedule.exact_units) and prof.units > 2 * base_units(prof)


def fast_path(prof: RowProfile) -> str | None:
    """None when the fast mode extrapolates ``prof``'s row from two short counts; otherwise what it
    does instead and why (:func:`estimate_profiles_fast`'s choice, one sentence)."""
    plain = _plain(prof)
    if plain is None:
        return "from the simulation: a variant the estimator leaves to it, or a timed schedule over a WAN"
    if _needs_ops(plain):
        return "exact: its replay reads individual ops (PipeDream's window, P3 priorities)"
    if plain.schedule.exact_units:
        return f"exact: {plain.schedule.name}'s phases depend on the unit count"
    a = base_units(plain)
    if plain.units <= 2 * a:
        where = "exact" if row_ops(plain) <= MAX_ROW_OPS else "from the simulation (too many ops)"
        return (f"{where} at its own {plain.units:,} units, not more than twice the shorter count {a} "
                f"(two pipeline depths of p x v = {plain.p * plain.v} units, at least {MIN_BASE})")
    return None


def _plain(prof: RowProfile) -> RowProfile | None:
    """The row the fast mode evaluates: a timed schedule without a WAN as 1F1B; None when the row
    must come from the exact path."""
    if needs_simulation(prof.sc):
        return None                 # the simulation's (variants/registry.needs_simulation)
    if prof.schedule.timed is None:
        return prof
    if prof.netinfo.net.net.fabric.wan is not None:
        return None
    return replace(prof, schedule=get_schedule(megatron_schedule(1)))      # 1F1B


def _extrapolate(a: StageTimes, b: StageTimes, scale: np.ndarray) -> StageTimes:
    """b + (b - a) x scale per row, for every field that grows with the units."""
    out = {}
    for f in _ARRAYS:
        xa, xb = getattr(a, f), getattr(b, f)
        if f in _CONSTANT:
            out[f] = xb
        else:
            s = scale.reshape((-1,) + (1,) * (xb.ndim - 1))
            out[f] = xb + (xb - xa) * s
    return StageTimes(**out, ops=(None,) * len(scale))


def _memory(prof: RowProfile, a: int, b: int) -> float:
    """The busiest stage's bytes at ``prof.units``, from the (p, 5) bytes per GPU per stage at a and
    b units (linear; both memoised on the memory key and the counts)."""
    key = (prof.memory_key, a, b)
    got = _PEAKS.get(key)
    if got is None:
        got = _PEAKS[key] = stage_memory_at(prof, (a, b))
    ma, mb = got
    per_stage = mb + (mb - ma) * ((prof.units - b) / (b - a))
    return float(per_stage.sum(axis=1).max())


def estimate_profiles_fast(profs: Sequence[RowProfile], unfit_times: bool = True,
                           ) -> tuple[Estimates, list[str | None]]:
    """The fast mode of many.estimate_profiles (same rows, same reasons).  ``unfit_times`` False:
    the rows of the fast mode whose memory is over the GPU's capacity (``fits`` False) keep their
    memory but not a time (NaN: iteration time, breakdown and the rates): their memory is
    computed first, and only the rows that fit are evaluated (a search ranks those alone)."""
    n = len(profs)
    maybe = [_plain(pr) for pr in profs]
    mine = [i for i, pr in enumerate(maybe) if pr is not None and not _needs_ops(pr)
            and (_extrapolable(pr) or row_ops(pr) <= MAX_ROW_OPS)]
    # The fast mode's rows: a row of ``mine`` is its plain row (never None); the others are never read
    # here (they go the exact way, ``rest``) and keep their own profile.
    plain = [pr if pr is not None else profs[i] for i, pr in enumerate(maybe)]
    taken = set(mine)
    rest = [i for i in range(n) if i not in taken]
    spans: dict[int, tuple[int, int]] = {}
    for i in mine:
        pr = plain[i]
        if _extrapolable(pr):
            a = base_units(pr)
            spans[i] = (a, 2 * a)
    pieces = []
    memory: dict[int, float] = {}
    if not unfit_times and mine:
        # Memory first (it reads the programs' orders and the layer split, not the timeline).
        mem = _memories([plain[i] for i in mine], [spans.get(i) for i in mine])
        memory = dict(zip(mine, mem.tolist(), strict=True))
        unfit = [i for i in mine if not memory[i] <= plain[i].sc.hardware.gpu.capacity_bytes]
        if unfit:
            k = len(unfit)
            pieces.append((np.array(unfit), estimates_of([plain[i] for i in unfit], np.full(k, np.nan),
                                                         np.full((k, len(CATEGORIES)), np.nan),
                                                         np.array([memory[i] for i in unfit]))))
            out = set(unfit)
            mine = [i for i in mine if i not in out]
    # Only each time_key's first row is evaluated (many.representatives); every row keeps its span.
    rep = representatives(plain, mine)
    timed = [i for i in mine if rep[i] == i]
    jobs = [(i, u) for i in timed for u in spans.get(i, (plain[i].units,))]
    runs = _run(plain, jobs, None)
    pos = 0
    done: dict[int, tuple] = {}
    for i in timed:
        k = 2 if i in spans else 1
        done[i] = tuple(runs[pos:pos + k])
        pos += k
    finals: dict[tuple, list[int]] = {}
    for i in mine:
        pr = plain[i]
        finals.setdefault((pr.schedule.name, pr.p, pr.v, pr.blocking), []).append(i)
    for idx in finals.values():
        reps = list(dict.fromkeys(rep[i] for i in idx))
        T, bd, st = _times([plain[r] for r in reps], [done[r] for r in reps], [spans.get(r) for r in reps])
        # Rows whose links might carry more than the iteration take the exact path (link_check.py).
        bound = {r for r, b in zip(reps, maybe_link_bound([plain[r] for r in reps], st, T), strict=True) if b}
        rest += [i for i in idx if rep[i] in bound]
        idx = [i for i in idx if rep[i] not in bound]
        if not idx:
            continue
        keep = [k for k, r in enumerate(reps) if r not in bound]
        reps = [reps[k] for k in keep]
        mem = (np.array([memory[i] for i in idx]) if memory else
               _memories([plain[i] for i in idx], [spans.get(i) for i in idx]))
        pieces.append((np.array(idx), _assemble([plain[i] for i in idx], T[keep], bd[keep], reps,
                                                [rep[i] for i in idx], mem)))
    reasons: list[str | None] = [None] * n
    if rest:
        est, why = estimate_profiles([profs[i] for i in rest])
        pieces.append((np.array(rest), est))
        for i, r in zip(rest, why, strict=True):
            reasons[i] = r
    return Estimates.scatter(n, pieces), reasons


def _times(profs: list[RowProfile], runs: list[tuple], spans: list[tuple[int, int] | None],
           ) -> tuple[np.ndarray, np.ndarray, StageTimes]:
    """Iteration time and breakdown of each row from its extrapolated StageTimes (returned too): a
    row evaluated at its own count as timed there (many._run); an extrapolated row's time as
    many._begin_times finds it, its breakdown extrapolated from the two counts' (each the
    simulation's walk at its count) and made to sum to that time (:func:`_fitted`)."""
    # Rows evaluated once pass their times through as b, with a = b (a zero slope).
    st_b = _gather([r[-1] for r in runs])
    st_a = _gather([r[0] for r in runs])
    scale = np.array([0.0 if s is None else (pr.units - s[1]) / (s[1] - s[0])
                      for pr, s in zip(profs, spans, strict=True)])
    st = _extrapolate(st_a, st_b, scale)
    T, bd = st.iteration.copy(), st.breakdown.copy()
    ext = np.flatnonzero([s is not None for s in spans])
    if len(ext):
        sub, rows = st.take(ext), [profs[i] for i in ext]
        en = ending(rows, sub)
        T[ext] = window(rows, sub, en).T
        bd[ext] = _fitted(sub.breakdown, T[ext])
    return T, bd, st


def _fitted(bd: np.ndarray, T: np.ndarray) -> np.ndarray:
    """Breakdown rows (CATEGORIES) made to sum to ``T``: none below zero, the difference in the
    bubble or, where the bubble cannot take it, every category scaled (rows evaluated at their own
    count already sum to it: unchanged but for rounding)."""
    bd = np.maximum(bd, 0.0)
    b = CATEGORIES.index("bubble")
    bd[:, b] += T - bd.sum(axis=1)
    short = bd[:, b] < 0
    if short.any():
        bd[short, b] = 0.0
        bd[short] *= (T[short] / bd[short].sum(axis=1))[:, None]
    return bd


def _memories(profs: list[RowProfile], spans: list[tuple[int, int] | None]) -> np.ndarray:
    """Each row's memory: exact where evaluated at its own count, else extrapolated (_memory)."""
    plain = [r for r, s in enumerate(spans) if s is None]
    mem = np.array([0.0 if s is None else _memory(pr, *s) for pr, s in zip(profs, spans, strict=True)])
    mem[plain] = memory_totals([profs[r] for r in plain])
    return mem


def estimate_many(scenarios: Sequence[Scenario], exact: bool = True, unfit_times: bool = True) -> Estimates:
    """Estimates of validated scenarios, one row each, in order: exact (many.estimate_many) or, with
    ``exact=False``, the fast mode of the module docstring (within :data:`STATED_BOUND`);
    ``unfit_times`` False (fast mode only): rows over the GPU's memory may have no time
    (:func:`estimate_profiles_fast`)."""
    with paused_collector():           # as estimate_overrides (explorer/engine/gc_pause.py)
        profs = [profile(sc) for sc in scenarios]
        return (estimate_profiles(profs) if exact else estimate_profiles_fast(profs, unfit_times))[0]
