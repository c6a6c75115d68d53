"""Search: the fastest layouts of one model on one cluster that fit in memory.

1. enumerate every layout of explorer/design/space.py (arithmetic pruning only);
2. build and validate each one's scenario with the loader's rules, and score the valid ones with
   the estimator (in chunks, on the executor: explorer/design/ranking.py): iteration time, memory,
   whether it fits (a layout over the GPU's memory is not timed unless placements or splits are
   refined: the ranking reads the times of those that fit);
   The latency-timed schedules (1f1b-latency, crosspipe: registry ``timed``), whose orders read
   the WAN delays, have no compiled program: each is a full simulation (about 50 ms to seconds).
   They are scored only on the :data:`TIMED_PIPELINES` fastest fitting layouts of their base
   order (1F1B, whose order they keep where no link delays exist) whose pipeline crosses a
   datacenter, as explorer/design/advise.py does: a timed order hides the WAN round trip of a
   pipeline that is fast already; it does not make a slow pipeline fast.  The rest are counted
   as ``unscored``;
   A scenario with features the estimator does not price (stragglers, DiLoCo, compression, ...)
   is scored on its proxy without them (explorer/design/proxy.py);
   With ``Space.orders`` / ``Space.splits``, the best layouts' rank placements and per-stage
   layer splits are scored too, by the same estimator and memory verdict
   (explorer/design/refine.py);
3. rank the layouts that fit with ``headroom_GB`` to spare (explorer/analysis/verdict.py: a
   recommendation must leave room for the CUDA context, NCCL's buffers and fragmentation) by
   estimated time and price them exactly, best first, until ``top`` of them fit with that
   headroom (a layout the ranking let through but the exact figures put over is skipped and the
   next one taken) — from a proxy's ranking, until ``max(POOL, 2 x top)`` do, the best ``top`` of
   them kept.  Exactly = the estimator without its fast mode, equal to the full engine to float
   rounding (tests/test_estimator.py), which itself simulates the rows it does not price (every
   proxied scenario's);
4. return those sorted by their exact time, each with its breakdown and share link, beside
   the counts (enumerated / valid / fit / fit with the headroom), the reasons layouts were
   invalid and each phase's time.

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

from ..analysis.verdict import DEFAULT_HEADROOM_GB, MAX_HEADROOM_GB
from ..config.inputs import parse_value
from ..run.phases import plan
from ..scenario import Scenario, ScenarioError, from_dict
from ..schedules import registry
from ..share import changed_fields
from . import chunks as work
from .base import Base, cluster_overrides, share_query
from .capacity import tightest_gpu
from .executors import ExecutorSpec, map_chunks
from .phase_fit import FIELD as PHASES_FIELD
from .phase_fit import phase_pins, refused_by
from .progress import Progress, next_phase
from .proxy import POOL, ranking_proxy
from .ranking import Into, score_into
from .refine import extend
from .scores import estimator_available, score
from .search_verdict import Candidate, verdict_of
from .space import Layout, LayoutBuilder, Space, enumerate_layouts, is_timed, search_raw

MAX_EXTRA_FULL = 200           # layouts simulated beyond ``top`` when the engine rejects the estimator's fits
# Base-order (1F1B) layouts whose latency-timed variants are simulated (module docstring, step 2):
# cross-region-pp holds 14,280 timed layouts, 13 minutes on 2 cores when all were simulated.
TIMED_PIPELINES = 8


@dataclass(frozen=True)
class SearchResult:
    """What a search found and what it cost."""

    gpus: int
    enumerated: int
    valid: int
    fit: int                                  # layouts that fit at all (the memory verdict)
    reasons: tuple[tuple[str, int], ...]      # (field, layouts it made invalid), most frequent first
    top: tuple[Candidate, ...]                # sorted by the full engine's iteration time
    baseline: Candidate | None                # the scenario's own layout, when valid at this size
    seconds: Mapping[str, float] = field(default_factory=dict)   # enumerate, estimate, full, total
    engine: str = "estimate"                  # what ranked the layouts ("full" while no estimator)
    simulated: int = 0                        # layouts the full-engine phase simulated
    unscored: int = 0                         # latency-timed layouts left out (module docstring, step 2)
    proxy: tuple[str, ...] = ()               # what the ranking left out (explorer/design/proxy.py)
    headroom_GB: float = DEFAULT_HEADROOM_GB  # memory a ranked layout leaves free, at least
    roomy: int = 0                            # layouts that fit with that headroom (those ranked)
    refined: int = 0                          # placement / layer-split variants scored (design/refine.py)
    phases: int = 0                           # run-plan phases: their memory is judged on the exact layouts

    def verdict(self) -> str:
        """What the search means for the scenario's own layout, in one sentence (search_verdict.py)."""
        return verdict_of(self.baseline, self.top[0] if self.top else None, self.headroom_GB)


@dataclass(frozen=True)
class _FullJob:
    base: Base
    raw: Mapping[str, Any]
    layout: Layout
    estimate_s: float | None
    baseline: bool = False
    searched: Scenario | None = None      # the scenario searched, loaded once (what ``changed`` is against)


def _simulate(job: _FullJob) -> Candidate | None:
    """One layout priced exactly (runs in a worker; module docstring, step 3); None when the layout
    is invalid (the baseline at another size) or the engine refuses it."""
    try:
        sc = LayoutBuilder(job.raw).scenario(job.layout)
        # A run plan's phases must take the layout too, as run, sweep and scaling check (a hunt found
        # llama3-405b-pretraining's four best layouts refused by run: a phase's dp no longer fitted).
        phases = plan(sc)
    except ScenarioError:
        return None
    # The user's own layout on the full engine, so that its row equals ``run`` to the last bit.
    s, refused = score([sc], "full" if job.baseline else "estimate", exact=True)
    if refused[0] is not None or np.isnan(s.iteration_time_s[0]):
        return None
    need: float | None = None
    cap = sc.hardware.gpu.capacity_bytes / 1e9
    if sc.cluster.datacenter_gpus:              # GPUs that differ: the tightest one (design/capacity.py)
        need, cap = tightest_gpu(sc)
    figures = dict(s.row(0))
    tight = _tightest_phase(sc, phases)
    if tight is not None:
        # The plan's verdict is its tightest phase's: a phase that raises seq_len can outgrow the GPU
        # while the layout fits on the base scenario (a hunt found a 502.5 GB phase ranked first).
        p_need, p_cap, p_fits = tight
        base_need = figures["memory_GB_total"] if need is None else need
        if p_cap - p_need < cap - base_need:
            need, cap = p_need, p_cap
        figures["fits"] = bool(figures["fits"]) and p_fits
    return Candidate(job.layout, sc.dp, figures, job.estimate_s, share_query(job.base, sc), job.baseline,
                     cap, sc.parallelism.order, need,
                     _changed(job.searched or from_dict(dict(job.base.raw)), sc))


def _tightest_phase(sc: Scenario, phases) -> tuple[float, float, bool] | None:
    """(memory, capacity) in GB of the run-plan phase of ``sc`` with the least memory to spare, and
    whether every phase fits; None without phases other than ``sc``.  Each distinct phase is
    simulated once (the top layouts only: phase_fit.py's arithmetic cannot weigh memory)."""
    from ..simulate import simulate  # deferred: the engine, for the top layouts only
    others = {ph.key: ph.scenario for ph in phases if ph.scenario is not sc}
    if not others:
        return None
    best: tuple[float, float] | None = None
    fits = True
    for phase_sc in others.values():
        r = simulate(phase_sc)
        mem, cap = r.binding_memory
        fits = fits and not r.memory_over_capacity
        if best is None or cap - mem.total < best[1] - best[0]:
            best = (mem.total / 1e9, cap / 1e9)
    assert best is not None
    return best[0], best[1], fits


def _changed(searched: Scenario, sc: Scenario) -> dict[str, Any]:
    """The dotted fields of ``sc`` that differ from the scenario ``searched``, as ``run --set`` takes
    them (a hunt found pipedream-vgg16's rows reproduced at other times: their overrides left the
    file's stage_layers in place, and with --gpus the nodes out)."""
    return {k: parse_value(v, k) for k, v in changed_fields(searched, sc).items() if k != "name"}


def search(base: Base, gpus: int | None = None, top: int = 10, space: Space | None = None,
           executor: ExecutorSpec | None = None, progress: Progress | None = None,
           include_baseline: bool = True, pool: int | None = None,
           headroom_GB: float = DEFAULT_HEADROOM_GB) -> SearchResult:
    """Search the layouts of ``base``'s model and cluster (at ``gpus`` GPUs if given: whole nodes
    added or removed, explorer/design/base.py ``cluster_overrides``); the steps are in the module
    docstring; ``pool``: layouts simulated in full from a proxy's ranking (default max(POOL,
    2 x top), at least ``top``); ``headroom_GB``: memory a ranked layout must leave free.  Raises
    ScenarioError when the model or cluster themselves are invalid."""
    if top < 1:
        raise ScenarioError("--top", f"{top} must be at least 1")
    if not 0 <= headroom_GB <= MAX_HEADROOM_GB:
        raise ScenarioError("--headroom-GB", f"{headroom_GB:g} must be between 0 and {MAX_HEADROOM_GB:g} GB")
    executor = executor or ExecutorSpec()
    t0 = time.perf_counter()
    next_phase(progress, "enumerating layouts", "layouts")
    raw = search_raw(base.raw)
    parsed = LayoutBuilder(raw).parsed
    if gpus is not None:
        raw = search_raw(base.variant_raw(cluster_overrides(parsed, gpus)))
        parsed = LayoutBuilder(raw).parsed
    space = space or Space()
    layouts = list(enumerate_layouts(parsed, space))
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
    t_est, fits, roomy = np.full(n, np.nan), np.zeros(n, dtype=bool), np.zeros(n, dtype=bool)
    # Progress counts layouts scored: the plain ones, then at most this many timed ones.
    total = len(plain) + min(len(timed), TIMED_PIPELINES * len(timed_names))
    check = raw if proxy is not None else None
    # The ranking reads the times of the layouts that fit only, unless placements and layer splits
    # are refined: refine.seeds starts from the fastest valid layouts, fitting or not.
    unfit_times = space.orders or space.splits
    into = Into(reasons, t_est, fits, roomy, headroom_GB, unfit_times)
    next_phase(progress, "estimating" if proxy is None else "estimating on the proxy", "layouts", total)
    score_into(rank_raw, [layouts[i] for i in plain], plain, into, executor, "estimate",
                _offset(progress, 0, total), check)
    plain_at = dict(zip((layouts[i] for i in plain), plain, strict=True))
    picked = _timed_picks(rank_raw, layouts, timed, plain_at, into, executor)
    score_into(rank_raw, [layouts[i] for i in picked], picked, into, executor, "full",
                _offset(progress, len(plain), total), check)
    # Placements and layer splits of the best (explorer/design/refine.py), scored alike.
    refined, t_est, fits, roomy = extend(
        raw, layouts, reasons, t_est, fits, roomy, space, lambda lays, at, t, f, r: score_into(
            rank_raw, lays, at, Into(reasons, t, f, r, headroom_GB, unfit_times), executor, "estimate", None,
            check))
    n = len(layouts)
    unscored = sorted(set(timed) - set(picked))
    scored = np.ones(n, dtype=bool)
    scored[unscored] = False
    t2 = time.perf_counter()

    # A run plan's phases must take the layout too (design/phase_fit.py): refused ones are invalid
    # under training.phases before any is priced exactly.
    pins = phase_pins(from_dict(dict(base.raw)))
    if pins:
        for i in np.flatnonzero(fits | roomy):
            if reasons[i] is None and refused_by(pins, parsed, layouts[i]) is not None:
                reasons[i], fits[i], roomy[i] = PHASES_FIELD, False, False
    order = sorted(np.flatnonzero(roomy), key=lambda i: (t_est[i], i))      # ties: enumeration order
    ranked = [(layouts[i], float(t_est[i])) for i in order]
    pool = top if proxy is None else max(top, pool or max(POOL, 2 * top))
    top_list, baseline, simulated = _full_phase(base, raw, Layout.of(parsed), ranked, pool, executor,
                                                headroom_GB,
                                                next_phase(progress, "pricing the best exactly", "layouts"))
    # The user's own layout competes when it fits with the headroom, so the answer is never slower
    # than what they have; one short of it is said beside the ranking, not ranked above layouts that
    # have it (a hunt found it first, 0.2 GB free, over 570 that keep 1 GB, and the verdict then
    # said nothing had the headroom).
    if include_baseline and baseline is not None and baseline.memory.roomy(headroom_GB):
        if all(c.layout != baseline.layout for c in top_list):
            top_list.append(baseline)
        else:       # found among the best: shown as the user's own (priced alike, on the full engine)
            top_list = [baseline if c.layout == baseline.layout else c for c in top_list]
    top_list.sort(key=lambda c: c.step_s)
    t3 = time.perf_counter()
    return SearchResult(
        gpus=parsed.cluster.gpus, enumerated=len(layouts),
        valid=sum(r is None for r, ok in zip(reasons, scored, strict=True) if ok),
        fit=int(fits.sum()), reasons=tuple(Counter(r for r in reasons if r is not None).most_common()),
        top=tuple(top_list[:top]), baseline=baseline,
        seconds={"enumerate": t1 - t0, "estimate": t2 - t1, "full": t3 - t2, "total": t3 - t0},
        engine=_ranking_engine(), simulated=simulated, unscored=len(unscored),
        proxy=proxy.left_out if proxy is not None else (), headroom_GB=headroom_GB, roomy=int(roomy.sum()),
        refined=refined, phases=len(pins))


def _offset(progress: Progress | None, done: int, total: int) -> Progress | None:
    """``progress`` told (done + d, total) for a phase's (d, its own total)."""
    if progress is None:
        return None
    return lambda d, _t: progress(done + d, total)


def _timed_picks(raw: Mapping[str, Any], layouts: list[Layout], timed: list[int], plain_at: dict[Layout, int],
                 into: Into, executor: ExecutorSpec) -> list[int]:
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
        k = len(missing)
        aside = Into([None] * k, np.full(k, np.nan), np.zeros(k, dtype=bool), np.zeros(k, dtype=bool),
                      into.headroom_GB, into.unfit_times)
        score_into(raw, missing, list(range(k)), aside, executor, "estimate", None)
        extra = {b: (float(aside.t_est[i]), bool(aside.fits[i])) for i, b in enumerate(missing)}

    def score_of(b: Layout) -> tuple[float, bool]:
        j = plain_at.get(b)
        return (float(into.t_est[j]), bool(into.fits[j])) if j is not None else extra[b]

    bases = sorted((score_of(b)[0], b) for b in set(base_of.values()) if score_of(b)[1])
    best = {b for _, b in bases[:TIMED_PIPELINES]}
    return [i for i in timed if base_of[i] in best]


def _full_phase(base: Base, raw: Mapping[str, Any], own: Layout, ranked: list[tuple[Layout, float]], top: int,
                executor: ExecutorSpec, headroom_GB: float, progress: Progress | None = None
                ) -> tuple[list[Candidate], Candidate | None, int]:
    """Price ``ranked`` (layout, estimated time) exactly, best first, in batches of the places still
    open, until ``top`` fit with ``headroom_GB`` to spare or MAX_EXTRA_FULL more were tried; the
    first batch also prices the scenario's own layout.  Returns (candidates, baseline, layouts
    priced); ``progress`` counts them (the total grows with each batch)."""
    found: list[Candidate] = []
    baseline: Candidate | None = None
    tried = 0
    ran = 0                   # simulations finished, the baseline's included
    searched = from_dict(dict(base.raw))
    batch = [_FullJob(base, raw, own, None, baseline=True, searched=searched)]
    while True:
        room = min(top - len(found), top + MAX_EXTRA_FULL - tried)
        batch += [_FullJob(base, raw, lay, est, searched=searched)
                  for lay, est in ranked[tried:tried + max(room, 0)]]
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
            if cand is not None and cand.memory.roomy(headroom_GB):
                found.append(cand)
        batch = []
        if len(found) >= top or tried >= len(ranked) or room <= 0:
            return found, baseline, tried


def _ranking_engine() -> str:
    return "estimate" if estimator_available() else "full"
