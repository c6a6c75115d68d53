"""Sweep: the cartesian product of a few fields' values, each combination validated and scored.

``--vary parallelism.tp=1,2,4,8 --vary cluster.scale_out.nic_Gbps=100,200,400,800`` gives 16
combinations, the first key varying slowest.  Each combination is the base scenario plus its
overrides, validated by the loader (an invalid one is kept with the one-line reason and the field
it names, so the reasons can be counted), then scored by the estimator or, with ``engine="full"``,
the full engine.  Values are parsed as a YAML flow list, so ``parallelism.stage_layers=[7,9],[8,8]``
and ``hardware.gpu=h100-sxm,b200`` work.
"""
from __future__ import annotations

import itertools
import re
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ..config import dormant as rules
from ..config.inputs import parse_value
from ..config.schema import excerpt
from ..estimate.equivalence import equivalents
from ..estimate.values import converted
from ..scenario import Scenario, ScenarioError
from . import chunks as work
from .base import Base, check_key, share_query, variant_query
from .executors import ExecutorSpec, map_chunks
from .progress import Progress, next_phase
from .scores import reason_field, score, score_overrides

_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
MAX_COMBINATIONS = 1_000_000    # beyond this a sweep is a typo (and its results a gigabyte)
# With the full engine each combination is a simulation (3 ms to 3.5 s, 30 ms typical): 10,000 are
# minutes to hours on a laptop; more is a job for the estimator (without --full).
MAX_FULL_COMBINATIONS = 10_000


@dataclass(frozen=True)
class Point:
    """One combination: its overrides and either its figures or why it is invalid."""

    overrides: Mapping[str, Any]
    valid: bool
    reason: str | None = None          # the loader's (or engine's) one-line message, when invalid
    reason_field: str | None = None    # the field that message names (what reasons are counted by)
    figures: Mapping[str, Any] = field(default_factory=dict)   # Scores.row(): time, mfu, memory, ...
    link: str | None = None            # share-link query string (explorer/design/base.py)
    # What ``run --set`` needs besides the overrides: the derived dp where the file gives its own
    # (a hunt: tp 1 / pp 2 on teaching-8gpu, whose file sets dp 2, did not rerun without dp 4).
    run_extra: Mapping[str, Any] = field(default_factory=dict, compare=False)
    # Settings given that nothing reads (config/dormant.py), as run --json lists them; and which
    # varied fields this combination would not read whatever their value, and why (the sweep's note).
    dormant: tuple[tuple[str, str], ...] = field(default=(), compare=False)
    unread_axes: Mapping[str, str] = field(default_factory=dict, compare=False)

    @property
    def iteration_time_s(self) -> float | None:
        return self.figures.get("iteration_time_s")

    def to_json(self) -> dict[str, Any]:
        """The ``sweep --json`` object: overrides, valid, then reason or the figures, link and
        ``dormant`` (run --json's: the settings given that nothing reads, with why)."""
        out: dict[str, Any] = {"overrides": dict(self.overrides), "valid": self.valid}
        if not self.valid:
            out["reason"] = self.reason
            out["reason_field"] = self.reason_field
            return out
        return {**out, **self.figures, "link": self.link,
                **({"run_overrides": {**self.overrides, **self.run_extra}} if self.run_extra else {}),
                "dormant": [{"field": f, "reason": why} for f, why in self.dormant]}


@dataclass(frozen=True)
class SweepResult:
    """Every combination in product order, the engine used and the wall time."""

    keys: tuple[str, ...]
    points: tuple[Point, ...]
    engine: str
    seconds: float
    scored: int = 0                      # distinct configurations scored (equivalent rows share one)
    unread: tuple[str, ...] = ()         # varied fields the scenario never reads (equivalence.py)

    @property
    def valid(self) -> list[Point]:
        return [p for p in self.points if p.valid]

    @property
    def dormant(self) -> tuple[tuple[str, str], ...]:
        """(varied field, why) for each varied field no valid combination reads (:func:`dormant_axes`)."""
        return dormant_axes(self.keys, self.points)

    def reason_counts(self) -> list[tuple[str, int, str]]:
        """(kind of reason, how many combinations it made invalid, one example message), most
        frequent first.  Messages of one kind differ only in their numbers ("2048 is not divisible
        by 4096", "... by 8192"), so the kind is the message with every number replaced by N."""
        counts: Counter[str] = Counter()
        example: dict[str, str] = {}
        for p in self.points:
            if not p.valid:
                kind = _NUMBER.sub("N", p.reason or "")
                counts[kind] += 1
                example.setdefault(kind, p.reason or "")
        return [(kind, n, example[kind]) for kind, n in counts.most_common()]


def parse_vary(specs: Sequence[str]) -> dict[str, list[Any]]:
    """``["key=v1,v2", ...]`` -> ``{key: [v1, v2]}``, values parsed as YAML; unknown keys, empty
    value lists and a key given twice raise a one-line ScenarioError naming the key."""
    out: dict[str, list[Any]] = {}
    for spec in specs:
        if "=" not in spec:
            raise ScenarioError("--vary", f"{excerpt(spec)} is not of the form dotted.key=v1,v2,...")
        key, _, text = spec.partition("=")
        key = key.strip()
        if not key:
            # "=1,2" named no field, and the empty key's message listed the sections without one
            # (as --set's did: config/overrides.parse_assignment).
            raise ScenarioError("--vary", f"{excerpt(spec)} names no field before '='; give "
                                "dotted.key=v1,v2,..., e.g. parallelism.tp=1,2")
        check_key(key)
        if key in out:
            raise ScenarioError(key, "is given to --vary twice; list all its values once: key=v1,v2")
        values = parse_value(f"[{text}]", key)
        if not isinstance(values, list) or not values or any(v is None for v in values):
            raise ScenarioError(key, f"{excerpt(text)}: give one or more comma-separated values")
        out[key] = values
    if not out:
        raise ScenarioError("--vary", "give at least one --vary dotted.key=v1,v2,...")
    return out


def combinations(vary: Mapping[str, Sequence[Any]], engine: str = "estimate") -> list[dict[str, Any]]:
    """The cartesian product as override mappings, the first key varying slowest; at most
    MAX_COMBINATIONS of them (MAX_FULL_COMBINATIONS on the full engine)."""
    n = 1
    for values in vary.values():
        n *= len(values)
    if n > MAX_COMBINATIONS:
        raise ScenarioError("--vary", f"{n:,} combinations; at most {MAX_COMBINATIONS:,} "
                            "(sweep fewer values or use search)")
    if engine == "full" and n > MAX_FULL_COMBINATIONS:
        raise ScenarioError("--vary", f"{n:,} combinations; at most {MAX_FULL_COMBINATIONS:,} with --full "
                            "(each is a full simulation: sweep fewer values, or drop --full for the "
                            "estimator)")
    keys = list(vary)
    return [dict(zip(keys, combo, strict=True)) for combo in itertools.product(*vary.values())]


@dataclass(frozen=True)
class _Job:
    """One chunk of a sweep, shipped to a worker."""

    base: Base
    overrides: tuple[Mapping[str, Any], ...]
    engine: str
    links: bool


def _evaluate(job: _Job) -> list[Point]:
    """Validate and score one chunk (runs in a worker).  Without links (which need each scenario)
    the estimator's own override path is used when it has one (explorer/design/scores.py)."""
    fast = None if job.engine != "estimate" or job.links else score_overrides(job.base.raw, job.overrides)
    if fast is not None:
        got, reasons = fast
        return [Point(ov, False, why, reason_field(why)) if why else Point(ov, True, figures=got.row(i))
                for i, (ov, why) in enumerate(zip(job.overrides, reasons, strict=True))]
    scenarios: list[Scenario] = []
    slots: list[int] = []
    out: list[Point | None] = [None] * len(job.overrides)
    for i, ov in enumerate(job.overrides):
        try:
            scenarios.append(job.base.scenario(ov))
            slots.append(i)
        except ScenarioError as exc:
            out[i] = Point(ov, False, str(exc), exc.field)
    scores, refused = score(scenarios, job.engine, overrides=[job.overrides[i] for i in slots])
    for j, (i, sc) in enumerate(zip(slots, scenarios, strict=True)):
        ov = job.overrides[i]
        why = refused[j]
        if why is not None:
            out[i] = Point(ov, False, why, reason_field(why))
            continue
        # The base derives dp (design/base.open_base drops the file's): run --set needs it spelt out.
        keep = "parallelism.dp" in ov or sc.parallelism.stage_replicas
        extra = {} if keep else {"parallelism.dp": sc.dp}
        idle = {k: why for k in ov if (why := rules.unread(sc, k)) is not None}
        out[i] = Point(ov, True, figures=scores.row(j), link=share_query(job.base, sc) if job.links else None,
                       run_extra=extra, dormant=tuple(rules.dormant_settings(sc)), unread_axes=idle)
    return [p for p in out if p is not None]


def sweep(base: Base, vary: Mapping[str, Sequence[Any]], engine: str = "estimate",
          executor: ExecutorSpec | None = None, progress: Progress | None = None,
          links: bool = True) -> SweepResult:
    """Validate and score every combination of ``vary`` on ``base`` (explorer/design/base.py
    ``open_base``; open it with ``keep_dp=True`` to vary ``parallelism.dp`` itself); ``links`` adds
    each valid point's share link (about 0.5 ms each).

    Combinations that differ only in network fields the scenario never reads (the WAN of one
    datacenter: explorer/estimate/equivalence.py) are scored once and share their figures: a sweep
    of 25 x 20 x 20 NIC, NVLink and WAN values on one datacenter scores 500 configurations."""
    for key in vary:
        check_key(key)
        if key in base.sets:
            raise ScenarioError(key, "is both set (--set) and varied (--vary); give it once")
    combos = combinations(vary, engine)
    t0 = time.perf_counter()
    eff, rep = equivalents(base.raw, combos)
    distinct = [c for i, c in enumerate(combos) if rep[i] == i]
    verb = "estimating" if engine == "estimate" else "simulating"
    next_phase(progress, verb, "combinations", len(distinct))
    jobs = [_Job(base, tuple(c), engine, links) for c in work.split(distinct, work.chunk_size(engine))]
    results = map_chunks(_evaluate, jobs, executor or ExecutorSpec(), sizes=[len(j.overrides) for j in jobs],
                         in_process=work.in_process(len(distinct), engine), progress=progress)
    scored = [p for chunk in results for p in chunk]
    slot = {i: k for k, i in enumerate(i for i in range(len(combos)) if rep[i] == i)}
    points = tuple(_as(scored[slot[rep[i]]], ov, eff[i], base, links) for i, ov in enumerate(combos))
    unread = tuple(k for k in vary if all(k not in e for e, ov in zip(eff, combos, strict=True) if k in ov))
    return SweepResult(tuple(vary), points, engine, time.perf_counter() - t0, len(distinct), unread)


def dormant_axes(keys: Sequence[str], points: Sequence[Point]) -> tuple[tuple[str, str], ...]:
    """(field, why) for each of ``keys`` that every valid point leaves unread (config/dormant.py):
    its values cannot change a figure, which the rows alone do not say.  The distinct reasons are
    joined, in the rows' order (a dtype varied beside an FP8 recipe gives one per dtype)."""
    valid = [p for p in points if p.valid]
    out = []
    for k in keys:
        if valid and all(k in p.unread_axes for p in valid):
            out.append((k, " / ".join(dict.fromkeys(p.unread_axes[k] for p in valid))))
    return tuple(out)


def _as(point: Point, overrides: Mapping[str, Any], kept: Mapping[str, Any], base: Base,
        links: bool) -> Point:
    """``point`` (scored for an equivalent combination, whose overrides are ``kept``) as the point of
    ``overrides``: the same figures, its own overrides and, with links, its own share link."""
    if point.overrides is overrides:
        return point
    link = None
    if links and point.valid:
        dropped = {k: converted(k, v) for k, v in overrides.items() if k not in kept}
        link = variant_query(base, point.link, dropped) or share_query(base, base.scenario(overrides))
    return replace(point, overrides=overrides, link=link)
