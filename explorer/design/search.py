"""Search: the fastest layouts of one model on one cluster that fit in memory.

1. enumerate every layout of explorer/design/space.py (arithmetic pruning only);
2. build and validate each one's scenario with the loader's rules, and score the valid ones with
   the estimator (in chunks, on the executor): iteration time, memory, whether it fits;
   The latency-timed schedules (1f1b-latency, crosspipe: registry ``timed``), whose orders read
   the WAN delays, have no compiled program: each is a full simulation (about 50 ms to seconds).
   They are scored only on the :data:`TIMED_PIPELINES` fastest fitting layouts of their base
   order (1F1B, whose order they keep where no link delays exist) whose pipeline crosses a
   datacenter, as explorer/design/advise.py does: a timed order hides the WAN round trip of a
   pipeline that is fast already; it does not make a slow pipeline fast.  The rest are counted
   as ``unscored``;
   A scenario with features the estimator does not price (stragglers, DiLoCo, compression, ...)
   is scored on its proxy without them (explorer/design/proxy.py);
3. rank the layouts that fit by estimated time and simulate them with the full engine, best first,
   until ``top`` of them fit by the full engine's memory too (a layout the estimator let through
   but the engine finds over capacity is skipped and the next one taken) — from a proxy's
   ranking, until ``max(POOL, 2 x top)`` fit, the best ``top`` of them kept;
4. return those sorted by the full engine's time, each with its breakdown and share link, beside
   the counts (enumerated / valid / fit), the reasons layouts were invalid and each phase's time.

The scenario's own layout is simulated too and reported (``baseline``), and with
``include_baseline`` it competes in the final ranking, so the answer is never slower than what the
user already has.
"""
from __future__ import annotations

import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ..scenario import Scenario, ScenarioError
from ..schedules import registry
from . import chunks as work
from .base import Base, cluster_overrides, share_query
from .executors import ExecutorSpec, map_chunks
from .progress import Progress, next_phase
from .proxy import POOL, ranking_proxy
from .scores import estimator_available, reason_field, score
from .space import Layout, LayoutBuilder, Space, enumerate_layouts, is_timed, search_raw

MAX_EXTRA_FULL = 200           # layouts simulated beyond ``top`` when the engine rejects the estimator's fits
# Base-order (1F1B) layouts whose latency-timed variants are simulated (module docstring, step 2):
# cross-region-pp holds 14,280 timed layouts, 13 minutes on 2 cores when all were simulated.
TIMED_PIPELINES = 8


@dataclass(frozen=True)
class Candidate:
    """A layout simulated with the full engine."""

    layout: Layout
    dp: int
    figures: Mapping[str, Any]        # Scores.row() of the full engine: time, mfu, memory, fits, breakdown
    estimate_s: float | None          # the estimator's iteration time (None for the baseline)
    link: str | None
    baseline: bool = False

    @property
    def iteration_time_s(self) -> float:
        return self.figures["iteration_time_s"]

    def to_json(self) -> dict[str, Any]:
        """The ``search --json`` object."""
        return {"overrides": self.layout.overrides(), **self.figures, "estimate_s": self.estimate_s,
                "link": self.link, "baseline": self.baseline,
                "layout": {"tp": self.layout.tp, "pp": self.layout.pp, "dp": self.dp, "cp": self.layout.cp,
                           "ep": self.layout.ep, "vpp": self.layout.vpp, "schedule": self.layout.schedule,
                           "zero": self.layout.zero, "micro_batch": self.layout.micro_batch,
                           "recompute": self.layout.recompute,
                           "sequence_parallel": self.layout.sequence_parallel}}


@dataclass(frozen=True)
class SearchResult:
    """What a search found and what it cost."""

    gpus: int
    enumerated: int
    valid: int
    fit: int
    reasons: tuple[tuple[str, int], ...]      # (field, layouts it made invalid), most frequent first
    top: tuple[Candidate, ...]                # sorted by the full engine's iteration time
    baseline: Candidate | None                # the scenario's own layout, when valid at this size
    seconds: Mapping[str, float] = field(default_factory=dict)   # enumerate, estimate, full, total
    engine: str = "estimate"                  # what ranked the layouts ("full" while no estimator)
    simulated: int = 0                        # layouts the full-engine phase simulated
    unscored: int = 0                         # latency-timed layouts left out (module docstring, step 2)
    proxy: tuple[str, ...] = ()               # what the ranking left out (explorer/design/proxy.py)


@dataclass(frozen=True)
class _Job:
    raw: Mapping[str, Any]                    # what the layouts are scored on (a proxy's, or the scenario's)
    layouts: tuple[Layout, ...]
    check: Mapping[str, Any] | None = None    # the scenario's raw, whose rules a proxy's layouts must pass


@dataclass(frozen=True)
class _Scored:
    """One chunk's scores, aligned with its layouts (NaN and fits False where invalid)."""

    reason_fields: tuple[str | None, ...]     # None where valid
    iteration_time_s: np.ndarray
    memory_GB_total: np.ndarray
    fits: np.ndarray


def _score_chunk(job: _Job) -> _Scored:
    """Build, validate and estimate one chunk of layouts (runs in a worker)."""
    builder = LayoutBuilder(job.raw)
    check = LayoutBuilder(job.check) if job.check is not None else None
    n = len(job.layouts)
    reasons: list[str | None] = [None] * n
    scenarios: list[Scenario] = []
    slots: list[int] = []
    for i, layout in enumerate(job.layouts):
        try:
            if check is not None:
                check.scenario(layout)        # the scenario's own rules decide validity
            scenarios.append(builder.scenario(layout))
            slots.append(i)
        except ScenarioError as exc:
            reasons[i] = exc.field
    # Ranking only: the estimator's fast mode (within its stated bound); the top K are simulated anyway.
    s, refused = score(scenarios, "estimate", exact=False)
    t, mem, fits = np.full(n, np.nan), np.full(n, np.nan), np.zeros(n, dtype=bool)
    idx = np.asarray(slots, dtype=int)
    if len(idx):
        t[idx], mem[idx], fits[idx] = s.iteration_time_s, s.memory_GB_total, s.fits
    for j, why in enumerate(refused):
        if why is not None:
            reasons[slots[j]], fits[slots[j]] = reason_field(why), False
    return _Scored(tuple(reasons), t, mem, fits)


@dataclass(frozen=True)
class _FullJob:
    base: Base
    raw: Mapping[str, Any]
    layout: Layout
    estimate_s: float | None
    baseline: bool = False


def _simulate(job: _FullJob) -> Candidate | None:
    """One layout on the full engine (runs in a worker); None when the layout is invalid (the
    baseline at another size) or the engine refuses it."""
    try:
        sc = LayoutBuilder(job.raw).scenario(job.layout)
    except ScenarioError:
        return None
    s, refused = score([sc], "full")
    if refused[0] is not None:
        return None
    return Candidate(job.layout, sc.dp, s.row(0), job.estimate_s, share_query(job.base, sc), job.baseline)


def search(base: Base, gpus: int | None = None, top: int = 10, space: Space | None = None,
           executor: ExecutorSpec | None = None, progress: Progress | None = None,
           include_baseline: bool = True, pool: int | None = None) -> SearchResult:
    """Search the layouts of ``base``'s model and cluster (at ``gpus`` GPUs if given: whole nodes
    added or removed, explorer/design/base.py ``cluster_overrides``); the steps are in the module
    docstring; ``pool``: layouts simulated in full from a proxy's ranking (default max(POOL,
    2 x top), at least ``top``).  Raises ScenarioError when the model or cluster themselves are
    invalid."""
    if top < 1:
        raise ScenarioError("--top", f"{top} must be at least 1")
    executor = executor or ExecutorSpec()
    t0 = time.perf_counter()
    next_phase(progress, "enumerating layouts", "layouts")
    raw = search_raw(base.raw)
    parsed = LayoutBuilder(raw).parsed
    if gpus is not None:
        raw = search_raw(base.variant_raw(cluster_overrides(parsed, gpus)))
        parsed = LayoutBuilder(raw).parsed
    layouts = list(enumerate_layouts(parsed, space or Space()))
    t1 = time.perf_counter()

    # A scenario the estimator does not price is ranked on its proxy (explorer/design/proxy.py),
    # and a pool of the best simulated in full with what the proxy left out.
    proxy = ranking_proxy(parsed) if estimator_available() else None
    rank_raw = proxy.raw if proxy is not None else raw
    timed_names = {n for n in registry.names() if is_timed(n)}
    plain = [i for i, lay in enumerate(layouts) if not is_timed(lay.schedule)]
    timed = [i for i, lay in enumerate(layouts) if is_timed(lay.schedule)]
    n = len(layouts)
    reasons: list[str | None] = [None] * n
    t_est, fits = np.full(n, np.nan), np.zeros(n, dtype=bool)
    # Progress counts layouts scored: the plain ones, then at most this many timed ones.
    total = len(plain) + min(len(timed), TIMED_PIPELINES * len(timed_names))
    check = raw if proxy is not None else None
    next_phase(progress, "estimating" if proxy is None else "estimating on the proxy", "layouts", total)
    _score_into(rank_raw, [layouts[i] for i in plain], plain, reasons, t_est, fits, executor, "estimate",
                _offset(progress, 0, total), check)
    plain_at = dict(zip((layouts[i] for i in plain), plain, strict=True))
    picked = _timed_picks(rank_raw, layouts, timed, plain_at, t_est, fits, executor)
    _score_into(rank_raw, [layouts[i] for i in picked], picked, reasons, t_est, fits, executor, "full",
                _offset(progress, len(plain), total), check)
    unscored = sorted(set(timed) - set(picked))
    scored = np.ones(n, dtype=bool)
    scored[unscored] = False
    t2 = time.perf_counter()

    order = sorted(np.flatnonzero(fits), key=lambda i: (t_est[i], i))       # ties: enumeration order
    ranked = [(layouts[i], float(t_est[i])) for i in order]
    pool = top if proxy is None else max(top, pool or max(POOL, 2 * top))
    top_list, baseline, simulated = _full_phase(base, raw, Layout.of(parsed), ranked, pool, executor,
                                                next_phase(progress, "simulating in full", "layouts"))
    if (include_baseline and baseline is not None and baseline.figures["fits"]
            and all(c.layout != baseline.layout for c in top_list)):
        top_list.append(baseline)
    top_list.sort(key=lambda c: c.iteration_time_s)
    t3 = time.perf_counter()
    return SearchResult(
        gpus=parsed.cluster.gpus, enumerated=len(layouts),
        valid=sum(r is None for r, ok in zip(reasons, scored, strict=True) if ok),
        fit=int(fits.sum()), reasons=tuple(Counter(r for r in reasons if r is not None).most_common()),
        top=tuple(top_list[:top]), baseline=baseline,
        seconds={"enumerate": t1 - t0, "estimate": t2 - t1, "full": t3 - t2, "total": t3 - t0},
        engine=_ranking_engine(), simulated=simulated, unscored=len(unscored),
        proxy=proxy.left_out if proxy is not None else ())


def _offset(progress: Progress | None, done: int, total: int) -> Progress | None:
    """``progress`` told (done + d, total) for a phase's (d, its own total)."""
    if progress is None:
        return None
    return lambda d, _t: progress(done + d, total)


def _score_into(raw: Mapping[str, Any], layouts: list[Layout], slots: list[int], reasons: list[str | None],
                t_est: np.ndarray, fits: np.ndarray, executor: ExecutorSpec, cost: str,
                progress: Progress | None, check: Mapping[str, Any] | None = None) -> None:
    """Score ``layouts`` on the executor (chunks sized for the ``cost`` of one: "estimate" or a
    "full" simulation) and write their reason, estimated time and fit at ``slots``; with
    ``check`` (a proxy's scenario raw), a layout its rules refuse is invalid."""
    if not layouts:
        return
    jobs = [_Job(raw, tuple(c), check) for c in work.split(layouts, work.chunk_size(cost))]
    out = map_chunks(_score_chunk, jobs, executor, sizes=[len(j.layouts) for j in jobs],
                     in_process=work.in_process(len(layouts), cost), progress=progress)
    idx = np.asarray(slots, dtype=int)
    t_est[idx] = np.concatenate([c.iteration_time_s for c in out])
    fits[idx] = np.concatenate([c.fits for c in out])
    for i, why in zip(slots, (r for c in out for r in c.reason_fields), strict=True):
        reasons[i] = why


def _timed_picks(raw: Mapping[str, Any], layouts: list[Layout], timed: list[int], plain_at: dict[Layout, int],
                 t_est: np.ndarray, fits: np.ndarray, executor: ExecutorSpec) -> list[int]:
    """The timed layouts to score: those whose base-order (1F1B) layout is among the
    TIMED_PIPELINES fastest that fit (a timed order keeps at least 1F1B's units in flight unless
    ``parallelism.max_in_flight`` caps crosspipe lower, schedules/crosspipe.py: a base over
    capacity rules its variants out).  Bases the space does not hold (``--schedules
    1f1b-latency``) are estimated here, for the choice only."""
    if not timed:
        return []
    one_f = registry.megatron_schedule(1)
    base_of = {i: replace(layouts[i], schedule=one_f) for i in timed}
    missing = list(dict.fromkeys(b for b in base_of.values() if b not in plain_at))
    extra: dict[Layout, tuple[float, bool]] = {}
    if missing:
        r: list[str | None] = [None] * len(missing)
        t, ok = np.full(len(missing), np.nan), np.zeros(len(missing), dtype=bool)
        _score_into(raw, missing, list(range(len(missing))), r, t, ok, executor, "estimate", None)
        extra = {b: (float(t[k]), bool(ok[k])) for k, b in enumerate(missing)}

    def score_of(b: Layout) -> tuple[float, bool]:
        j = plain_at.get(b)
        return (float(t_est[j]), bool(fits[j])) if j is not None else extra[b]

    bases = sorted((score_of(b)[0], b) for b in set(base_of.values()) if score_of(b)[1])
    best = {b for _, b in bases[:TIMED_PIPELINES]}
    return [i for i in timed if base_of[i] in best]


def _full_phase(base: Base, raw: Mapping[str, Any], own: Layout, ranked: list[tuple[Layout, float]], top: int,
                executor: ExecutorSpec, progress: Progress | None = None
                ) -> tuple[list[Candidate], Candidate | None, int]:
    """Simulate ``ranked`` (layout, estimated time) best first, in batches of the places still
    open, until ``top`` fit by the full engine's memory or MAX_EXTRA_FULL more were tried; the first
    batch also simulates the scenario's own layout.  Returns (fitting candidates, baseline,
    layouts simulated); ``progress`` counts the simulations (the total grows with each batch)."""
    found: list[Candidate] = []
    baseline: Candidate | None = None
    tried = 0
    ran = 0                   # simulations finished, the baseline's included
    batch = [_FullJob(base, raw, own, None, baseline=True)]
    while True:
        room = min(top - len(found), top + MAX_EXTRA_FULL - tried)
        batch += [_FullJob(base, raw, lay, est) for lay, est in ranked[tried:tried + max(room, 0)]]
        if not batch:
            return found, baseline, tried
        counted = _offset(progress, ran, ran + len(batch))
        ran += len(batch)
        for job, cand in zip(batch, map_chunks(_simulate, batch, executor, progress=counted,
                                               in_process=work.in_process(len(batch), "full")), strict=True):
            if job.baseline:
                baseline = cand
                continue
            tried += 1
            if cand is not None and cand.figures["fits"]:
                found.append(cand)
        batch = []
        if len(found) >= top or tried >= len(ranked) or room <= 0:
            return found, baseline, tried


def _ranking_engine() -> str:
    return "estimate" if estimator_available() else "full"
