"""The layout search of the Design-space tab, bounded to what a page should wait for.

A search waits for its button.  At its depth (:data:`DEPTHS`: about 5 s, 30 s, or the whole
space) it is priced first (:func:`plan_search`): the estimator is timed on a sample of layouts
(its cost is a compile per pipeline shape plus a little per layout), and a space too large is
narrowed step by step (sequence parallelism always on, the scenario's ZeRO stage, ...;
:func:`_steps`) until it fits; the top K asked for is always returned when K layouts fit.  The page
says in words what the narrowed search covers and gives the command that searches everything.
The search itself runs in this process (the server's threads share the machine's cores, and a
search in process stops at the next chunk when the user moves on), reporting progress per chunk.
"""
from __future__ import annotations

import json
import math
import random
import shlex
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ...analysis.verdict import DEFAULT_HEADROOM_GB
from ...design import Base, Layout, Space, search
from ...design.catalog import Catalog, Extent, shape
from ...design.executors import Progress
from ...design.proxy import POOL, ranking_proxy
from ...design.scores import score
from ...design.search import SearchResult
from ...design.space import LayoutBuilder, family_labels, search_raw
from ...scenario import Scenario, ScenarioError
from ...schedules import registry
from .design_runs import IN_PROCESS, cached, probe_seconds

DEFAULT_TOP = 10
DEPTHS = {"quick": 5.0, "thorough": 30.0, "exhaustive": None}     # seconds a search may take (None: all)
FULL_FACTOR = 12             # a top layout's full simulation against A's own (llama3-405b-16k: 3-15x)
SAMPLE = 64                  # layouts timed to price a search of this scenario (at most)
SAMPLE_SECONDS = 1.0         # ... and at most this long for their first pass
PAGE_SECONDS = 0.5           # the page's own run that draws a search's table, after it
BATCH_FACTOR = 0.6           # a search's chunk of 250 against the sample's 64, per layout
# Placement x layer-split variants of one refined layout the plan counts (design/placements.py: up
# to 25 splits of pp >= 3 stages; placements are few on most clusters).
REFINE_VARIANTS = 50


@dataclass(frozen=True)
class SearchPlan:
    """The space a search in the app covers: ``space``, its ``layouts``, the full space's count,
    what was narrowed (one phrase each), the top K, the measured seconds per layout and the
    expected seconds in all."""

    space: Space
    layouts: int
    full_layouts: int
    narrowed: tuple[str, ...]
    top: int
    per_layout_s: float
    seconds: float
    pool: int | None = None          # layouts simulated from a proxy's ranking (design/proxy.py)


def _step_schedules(own: Layout) -> tuple[str, ...]:
    """The schedules a narrowing step may keep: the scenario's own, then Megatron's without and
    with virtual stages (1F1B, interleaved)."""
    return tuple(dict.fromkeys((own.schedule, registry.megatron_schedule(1), registry.megatron_schedule(2))))


def _steps(own: Layout) -> list[tuple[str, str, Callable[[Space], Space]]]:
    """Narrowing steps, least informative choices first: (what it narrows, how, the step); a
    later step on the same choice supersedes an earlier one."""
    vpp = own.vpp if own.vpp > 1 else 2
    recompute = tuple(dict.fromkeys((own.recompute, "selective")))
    schedules = _step_schedules(own)
    # Each phrase says what the narrowed search still covers, in the user's words (a caption
    # joins them), not the field syntax.
    return [
        ("sp", "sequence parallelism always on with tensor parallelism",
         lambda s: replace(s, sequence_parallel=(True,))),
        ("zero", f"only your ZeRO stage ({own.zero})", lambda s: replace(s, zero=(own.zero,))),
        ("recompute", f"recompute {' or '.join(recompute)} only", lambda s: replace(s, recompute=recompute)),
        ("vpp", f"interleaving with {vpp} virtual stages per GPU only", lambda s: replace(s, vpp=(vpp,))),
        ("mb", "micro-batches of 1 or 2 sequences", lambda s: replace(s, max_micro_batch=2)),
        ("schedule", f"the {' and '.join(schedules)} schedules only",
         lambda s: replace(s, schedules=schedules)),
        ("mb", "micro-batches of 1 sequence", lambda s: replace(s, max_micro_batch=1)),
        ("schedule", f"only your schedule ({own.schedule})",
         lambda s: replace(s, schedules=(own.schedule,))),
    ]


@dataclass(frozen=True)
class _Price:
    """What a search costs here: seconds per layout once its shape is compiled, and per new shape."""

    per_layout: float
    per_shape: float

    def seconds(self, layouts: int, shapes: int) -> float:
        return layouts * self.per_layout + shapes * self.per_shape


def _price(raw: Mapping[str, Any], parsed: Scenario, catalog: Catalog) -> _Price:
    """Up to SAMPLE layouts spread over the default space, scored twice: the first pass (in groups
    of 8, stopped after SAMPLE_SECONDS: an MoE layout can cost 50 ms) compiles their shapes
    (memoised, so the search reuses them), the second runs compiled.  A search scores chunks of
    250, cheaper per layout than the sample (BATCH_FACTOR).  Within 30 % of the estimate phase on
    teaching-8gpu, llama3-405b-16k and megatron-gpt3-175b."""
    # Timed layouts are simulations, priced apart (Catalog.extent).
    every = np.flatnonzero(catalog.mask(Space()) & ~catalog.timed)
    layouts = [catalog.layout(i) for i in every[::max(1, len(every) // SAMPLE)][:SAMPLE]]
    random.Random(0).shuffle(layouts)       # any prefix spread over the whole space
    builder = LayoutBuilder(raw)

    def build(group: list[Layout]) -> list[Scenario]:
        out = []
        for layout in group:
            try:
                out.append(builder.scenario(layout))
            except ScenarioError:
                pass
        return out

    t0 = time.perf_counter()
    sample: list[Layout] = []
    for i in range(0, len(layouts), 8):
        if sample and time.perf_counter() - t0 > SAMPLE_SECONDS:
            break
        sample += layouts[i:i + 8]
        score(build(layouts[i:i + 8]), "estimate")
    t1 = time.perf_counter()
    score(build(sample), "estimate")
    t2 = time.perf_counter()
    gpus, batch = parsed.cluster.gpus, parsed.training.global_batch
    shapes = len({shape(lay, gpus, batch) for lay in sample}) or 1
    k = max(1, len(sample))
    return _Price(BATCH_FACTOR * (t2 - t1) / k, max(0.0, (t1 - t0) - (t2 - t1)) / shapes)


def plan_search(base: Base, probe_s: float, top: int = DEFAULT_TOP,
                budget_s: float | None = 5.0) -> SearchPlan:
    """The widest space whose search is expected within ``budget_s`` (None: the whole space),
    with the top K asked for: it is priced exactly by the estimator (a compile and a row each,
    explorer/design/search.py step 3).  A scenario ranked on a proxy simulates a pool in full
    (about FULL_FACTOR x A's own simulation each): twice the top K when the budget allows, never
    fewer than K (module docstring)."""
    t0 = time.perf_counter()
    raw = search_raw(base.raw)
    parsed = LayoutBuilder(raw).parsed
    own = Layout.of(base.scenario())
    space = Space()
    steps = _steps(own)
    key = json.dumps(raw, sort_keys=True, default=str)
    # Every trial space counted from one enumeration (design/catalog.py), once per scenario and
    # process; the steps' schedules and vpp may lie outside the default space (the scenario's own).
    catalog = cached(("catalog", key), lambda: Catalog(parsed, schedules=_step_schedules(own),
                                                       vpps=(own.vpp, 2)))
    ext = full = catalog.extent(space)
    # A scenario the estimator does not price is ranked on its proxy (priced here the same way),
    # and a pool of twice the top K (POOL for the whole space) simulated in full.  Priced once per
    # scenario and process: a second search here finds the sample's shapes compiled (cheap) but
    # not necessarily the rest of the space, so the first, cold price stays.
    proxy = ranking_proxy(parsed)
    rank_raw = dict(proxy.raw) if proxy is not None else raw
    price = cached(("price", json.dumps(rank_raw, sort_keys=True, default=str)),
                   lambda: _price(rank_raw, LayoutBuilder(rank_raw).parsed, catalog))
    # What the plan costs itself, and drawing the result, count in the time the user waits.
    spent = time.perf_counter() - t0 + PAGE_SECONDS
    k = top
    if proxy is None:
        pool = None
        fixed = spent + (k + 1) * (price.per_shape + price.per_layout)
    else:
        affordable = int(0.4 * budget_s / (FULL_FACTOR * probe_s)) if budget_s is not None else 2 * k
        pool = max(POOL, 2 * k) if budget_s is None else max(k, min(2 * k, affordable))
        fixed = spent + (pool + 1) * FULL_FACTOR * probe_s

    def seconds(e: Extent) -> float:
        # A timed layout is one full simulation, about A's own (probe_s).
        return price.seconds(e.priced, e.shapes) + e.timed_runs * probe_s

    # Steps in order; one that saves under a tenth (fewer layouts when the shapes cost most) is
    # left for a second pass, taken only if the first did not reach the budget.
    pending = steps if budget_s is not None else []
    narrowed: dict[str, str] = {}
    for min_saving in (0.1, 0.0):
        for step in list(pending):
            cost = seconds(ext)
            if cost + fixed <= budget_s:
                break
            trial = step[2](space)
            ext2 = catalog.extent(trial)
            if seconds(ext2) < (1 - min_saving) * cost:
                space, ext = trial, ext2
                narrowed.pop(step[0], None)
                narrowed[step[0]] = step[1]
                pending.remove(step)
    return SearchPlan(space, ext.layouts, full.layouts, tuple(narrowed.values()), k, price.per_layout,
                      seconds(ext) + fixed, pool)


def planned_text(seconds: float) -> str:
    """A plan's time as the page says it: rounded up to the half second (``3.5 s``), so that a
    search that runs as planned ends within what was said."""
    return f"{math.ceil(seconds * 2) / 2:g} s"


@dataclass(frozen=True)
class SearchRun:
    """A search as the tab shows it: its plan, the result and the wall seconds of both."""

    plan: SearchPlan
    result: SearchResult
    seconds: float


def run_search(base: Base, raw_json: str, top: int, depth: str, headroom_GB: float = DEFAULT_HEADROOM_GB,
               progress: Progress | None = None, refine: bool = False) -> SearchRun:
    """Plan (:func:`plan_search`) and run the search in this process: the estimator ranks the
    layouts that fit with ``headroom_GB`` to spare and prices the top K exactly; ``refine``: also
    the rank placements and layer splits of the best (explorer/design/refine.py), whose scores
    the plan counts at most REFINE_VARIANTS per refined layout."""
    t0 = time.perf_counter()
    plan = plan_search(base, probe_seconds(raw_json), top, DEPTHS[depth])
    if refine:
        space = replace(plan.space, orders=True, splits=True)
        extra = 2 * space.refine * REFINE_VARIANTS * plan.per_layout_s
        plan = replace(plan, space=space, seconds=plan.seconds + extra)
    result = search(base, top=plan.top, space=plan.space, executor=IN_PROCESS, progress=progress,
                    pool=plan.pool, headroom_GB=headroom_GB)
    return SearchRun(plan, result, time.perf_counter() - t0)


def cli_command(name: str, query: Mapping[str, str], top: int) -> str:
    """The command that searches A's whole space: ``python -m explorer search NAME --top K --set ...``."""
    sets = " ".join(f"--set {shlex.quote(f'{k}={v}')}" for k, v in query.items()
                    if "." in k and not k.startswith(("b.", "d.")))
    return f"python -m explorer search {name} --top {top}" + (f" {sets}" if sets else "")


def layout_label(lay: dict[str, Any]) -> str:
    """A layout in a table cell: ``tp4 pp32 dp32 cp4 · interleaved v2 · ZeRO 1 · mb1 · SP`` (1-way
    cp and ep, and no recompute, left out; a workload family's own fields first)."""
    degrees = " ".join(f"{k}{lay[k]}" for k in ("tp", "pp", "dp", "cp", "ep")
                       if k in ("tp", "pp", "dp") or lay[k] > 1)
    # A family's own fields (Layout.extra: a DLRM's sharding plan and replication threshold) first,
    # where a narrow table cell still shows them: they are what tells its rows apart.
    sched = lay["schedule"] + (f" v{lay['vpp']}" if lay["vpp"] > 1 else "")
    parts = [*family_labels((lay.get("family") or {}).items()), degrees, sched,
             f"ZeRO {lay['zero']}", f"mb{lay['micro_batch']}"]
    parts += [f"{lay['recompute']} recompute"] if lay["recompute"] != "none" else []
    parts += ["SP"] if lay["sequence_parallel"] else []
    # A refined layout's layer split (design/refine.py); its placement: table_rows.
    parts += ["layers " + "|".join(map(str, lay["pipeline_layout"]))] if lay.get("pipeline_layout") else []
    return " · ".join(parts)


def table_rows(result: SearchResult,
               href: Callable[[str | None], str | None]) -> tuple[list[dict[str, Any]], bool]:
    """The top layouts as table rows — rank, link (``href`` of the share query), iteration time,
    MFU in %, memory and what it leaves free, layout (the sidebar's own marked *yours*), the link
    first so it stays in view and the long layout last — and whether times are in milliseconds
    (all under a second)."""
    rows = [c.to_json() for c in result.top]
    ms = bool(rows) and max(r["iteration_time_s"] for r in rows) < 1
    # The placement is named only where the search chose one other than the scenario's own.
    placed = [f" · order {c.layout.order}" if c.layout.order else "" for c in result.top]
    return [{"#": i, "open": href(r["link"]), "iteration": r["iteration_time_s"] * (1e3 if ms else 1),
             "MFU (%)": 100 * r["mfu"], "GB": r["memory_GB_total"], "free": r["free_GB"],
             "layout": ("yours: " if r["baseline"] else "") + layout_label(r["layout"]) + where}
            for i, (r, where) in enumerate(zip(rows, placed, strict=True), 1)], ms
