"""The ranking phase of a search (explorer/design/search.py, step 2): layouts built, validated and
scored by the estimator's fast mode in chunks on the executor, their scores written back in
enumeration order.  The ranking reads the times of the layouts that fit only, so a search that
refines nothing asks the estimator not to time the layouts over the GPU's memory
(estimate/fast.py ``unfit_times``): the figures of those that fit are the same to the bit."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..analysis.verdict import DEFAULT_HEADROOM_GB
from ..engine.gc_pause import paused_collector
from ..scenario import Scenario, ScenarioError
from . import chunks as work
from .capacity import least_capacity_GB
from .executors import ExecutorSpec, map_chunks
from .progress import Progress
from .scores import Scores, estimator_available, reason_field, score
from .scores import _from_estimates as scores_of
from .space import Layout, LayoutBuilder, work_key


@dataclass(frozen=True)
class _Job:
    raw: Mapping[str, Any]                    # what the layouts are scored on (a proxy's, or the scenario's)
    layouts: tuple[Layout, ...]
    check: Mapping[str, Any] | None = None    # the scenario's raw, whose rules a proxy's layouts must pass
    headroom_GB: float = DEFAULT_HEADROOM_GB
    unfit_times: bool = True                  # False: layouts over the GPU's memory are not timed (NaN)


@dataclass(frozen=True)
class _Scored:
    """One chunk's scores, aligned with its layouts (NaN and fits False where invalid); ``roomy``:
    fits with the job's headroom to spare."""

    reason_fields: tuple[str | None, ...]     # None where valid
    step_s: np.ndarray                        # time per step (Scores.step_s: what rankings compare)
    memory_GB_total: np.ndarray
    fits: np.ndarray
    roomy: np.ndarray


def _score_chunk(job: _Job) -> _Scored:
    """Build, validate and estimate one chunk of layouts (runs in a worker), the cyclic collector
    paused (explorer/engine/gc_pause.py: thousands of short-lived scenarios, few cycles)."""
    with paused_collector():
        return _scored(job)


def _scored(job: _Job) -> _Scored:
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
    s, refused = _ranking_scores(scenarios, job.unfit_times)
    t, mem, fits = np.full(n, np.nan), np.full(n, np.nan), np.zeros(n, dtype=bool)
    cap = np.full(n, np.nan)
    idx = np.asarray(slots, dtype=int)
    if len(idx):
        t[idx], mem[idx], fits[idx] = s.step_s(), s.memory_GB_total, s.fits     # the time per step
        cap[idx] = [least_capacity_GB(sc) for sc in scenarios]
    for j, why in enumerate(refused):
        if why is not None:
            reasons[slots[j]], fits[slots[j]] = reason_field(why), False
    roomy = fits & (cap - mem >= job.headroom_GB)
    return _Scored(tuple(reasons), t, mem, fits, roomy)


def _ranking_scores(scenarios: list[Scenario], unfit_times: bool) -> tuple[Scores, list[str | None]]:
    """The fast mode's scores of ``scenarios`` (scores.score with ``exact=False``); with
    ``unfit_times`` False and the estimator installed, the rows whose memory is over the GPU's are
    not timed (their time NaN, ``fits`` False: estimate/fast.py), since the ranking reads only the
    layouts that fit; the others' figures are the same to the bit."""
    if unfit_times or not scenarios or not estimator_available():
        return score(scenarios, "estimate", exact=False)
    from ..estimate import estimate_many
    return scores_of(estimate_many(scenarios, exact=False, unfit_times=False)), [None] * len(scenarios)


@dataclass(frozen=True)
class Into:
    """Where scores go, aligned with the enumeration: reason, ranking time, fit, fit with
    ``headroom_GB`` to spare."""

    reasons: list[str | None]
    t_est: np.ndarray
    fits: np.ndarray
    roomy: np.ndarray
    headroom_GB: float
    unfit_times: bool = True          # False: layouts over the GPU's memory keep a NaN time


def score_into(raw: Mapping[str, Any], layouts: list[Layout], slots: list[int], into: Into,
               executor: ExecutorSpec, cost: str, progress: Progress | None,
               check: Mapping[str, Any] | None = None) -> None:
    """Score ``layouts`` on the executor (chunks sized for the ``cost`` of one: "estimate" or a
    "full" simulation) and write their reason, estimated time and fit at ``slots`` of ``into``;
    with ``check`` (a proxy's scenario raw), a layout its rules refuse is invalid."""
    if not layouts:
        return
    # Layouts of one pipeline depth and unit count go together (chunks.grouped, space.work_key).
    sc = LayoutBuilder(raw).parsed
    parts = work.grouped([work_key(lay, sc.cluster.gpus, sc.training.global_batch) for lay in layouts],
                         work.chunk_size(cost))
    jobs = [_Job(raw, tuple(layouts[k] for k in part), check, into.headroom_GB, into.unfit_times)
            for part in parts]
    out = map_chunks(_score_chunk, jobs, executor, sizes=[len(j.layouts) for j in jobs],
                     in_process=work.in_process(len(layouts), cost), progress=progress)
    slots = [slots[k] for part in parts for k in part]
    idx = np.asarray(slots, dtype=int)
    into.t_est[idx] = np.concatenate([c.step_s for c in out])
    into.fits[idx] = np.concatenate([c.fits for c in out])
    into.roomy[idx] = np.concatenate([c.roomy for c in out])
    for i, why in zip(slots, (r for c in out for r in c.reason_fields), strict=True):
        into.reasons[i] = why
