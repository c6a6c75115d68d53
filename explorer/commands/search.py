"""``search SCENARIO [--gpus N] [--top K] [--schedules A,B] [--zero 1,2] [--recompute none,full]
[--orders] [--splits] [--refine R] [--executor local|dask] [--address tcp://HOST:PORT] [--json]``.

Every layout of the scenario's model on its cluster (``--gpus N``: N GPUs, whole nodes) that is
valid and fits in memory with ``--headroom-GB`` to spare (default 1 GB: the CUDA context and
fragmentation; NCCL's buffers are in the total, explorer/analysis/verdict.py), ranked by the
estimator; the top K priced exactly (explorer/design/search.py). ``--orders`` / ``--splits`` also
score the rank placements / per-stage layer splits of the best layouts of the R fastest shapes
(explorer/design/refine.py). ``--json`` prints a list sorted by ``time_per_step_s`` (the iteration,
or the amortised step of replicas that synchronise every few steps), each with
``overrides``, ``iteration_time_s``, ``time_per_step_s``, ``memory_GB_total``,
``memory_capacity_GB``, ``free_GB``, ``link``, ``mfu``, ``tokens_per_s``, ``fits``, ``breakdown_s``,
``estimate_s``, ``layout`` (with dp, the placement ``order`` it ran and its ``pipeline_layout``, null
for the balanced split) and ``baseline`` (the scenario's own layout); the counts and
timings go to stderr as one line.
"""
from __future__ import annotations

import argparse
import sys

from ..analysis.verdict import DEFAULT_HEADROOM_GB, MAX_HEADROOM_GB
from ..config.schema import excerpt, one_line
from ..config.sections import MAX_GPUS
from ..design.base import open_base
from ..design.cli_support import (
    add_executor_arguments,
    add_set_argument,
    bounded_int,
    dumps,
    executor_spec,
    fmt_breakdown,
    fmt_s,
    parse_sets,
)
from ..design.progress import reporting
from ..design.search import TIMED_PIPELINES, SearchResult, search
from ..design.search_verdict import Candidate
from ..design.space import RECOMPUTE, REFINE, ZERO_STAGES, Space
from ..scenario import ScenarioError
from ..schedules import registry
from ..serving.guard import refuse_serving

NAME = "search"
HELP = "fastest valid layouts that fit in memory with headroom: estimator ranking, top K priced exactly"
# Each of the top K is a full simulation (3 ms to 3.5 s, the engine's budget), and a proxy's ranking
# simulates 2K: 100 is a long table, 1,000,000 a typo that would run for days.
MAX_TOP = 100
# Each refined layout yields up to 24 placements x ~20 layer splits, each an estimate (~0.3 ms).
MAX_REFINE = 10_000


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("scenario")
    parser.add_argument("--gpus", type=bounded_int(1, MAX_GPUS), default=None,
                        help=f"search at this many GPUs (whole nodes; at most {MAX_GPUS:,})")
    parser.add_argument("--top", type=bounded_int(1, MAX_TOP), default=10,
                        help=f"layouts re-simulated and printed, 1 to {MAX_TOP} (default 10)")
    parser.add_argument("--schedules", default=None, metavar="A,B",
                        help="schedules to consider (default: every synchronous one; 'all' adds "
                             "the asynchronous pipedream-async and 2bw)")
    parser.add_argument("--zero", default=None, metavar="0,1,2,3", help="ZeRO stages to consider")
    parser.add_argument("--recompute", default=None, metavar="none,selective,full",
                        help="recompute modes to consider")
    parser.add_argument("--headroom-GB", type=float, default=DEFAULT_HEADROOM_GB, dest="headroom_GB",
                        help=f"memory a ranked layout must leave free per GPU, 0-{MAX_HEADROOM_GB:g} "
                             f"(default {DEFAULT_HEADROOM_GB:g}: CUDA context, NCCL buffers, fragmentation)")
    parser.add_argument("--orders", action="store_true",
                        help="also search rank placements (parallelism.order) of the best layouts")
    parser.add_argument("--splits", action="store_true",
                        help="also search per-stage layer splits (parallelism.pipeline_layout) of the "
                             "best layouts")
    parser.add_argument("--refine", type=bounded_int(1, MAX_REFINE), default=REFINE,
                        help=f"fastest shapes (degrees, schedule, vpp) whose placements / layer splits "
                             f"are searched, 1 to {MAX_REFINE:,} (default {REFINE})")
    add_set_argument(parser)
    parser.add_argument("--json", action="store_true", help="print a JSON list sorted by iteration time")
    add_executor_arguments(parser)


def _choices(text: str | None, valid: tuple, flag: str, cast=str) -> tuple:
    """A comma list restricted to ``valid``; () when not given."""
    if text is None:
        return ()
    items = [s.strip() for s in text.split(",") if s.strip()]
    try:
        values = tuple(cast(s) for s in items)
    except ValueError:
        raise ScenarioError(flag, f"{excerpt(text)} is not a comma list of "
                            f"{', '.join(map(str, valid))}") from None
    bad = [v for v in values if v not in valid]
    if bad or not values:
        raise ScenarioError(flag, f"{excerpt(text)}: valid values are {', '.join(map(str, valid))}")
    return values


def space_from_args(args: argparse.Namespace) -> Space:
    names = registry.names()
    schedules = names if (args.schedules or "").strip() == "all" else \
        _choices(args.schedules, names, "--schedules")
    return Space(schedules=schedules,
                 zero=_choices(args.zero, ZERO_STAGES, "--zero", int) or ZERO_STAGES,
                 recompute=_choices(args.recompute, RECOMPUTE, "--recompute") or RECOMPUTE,
                 orders=args.orders, splits=args.splits, refine=args.refine)


def run(args: argparse.Namespace) -> int:
    with reporting(NAME) as progress:
        base = open_base(args.scenario, parse_sets(args.set))
        refuse_serving(base.raw, NAME)
        # The scenario itself first, as run checks it: its layout is the baseline the search prices
        # last (a bad --set was refused only after every layout was estimated, 33 s and more).
        base.scenario()
        result = search(base, args.gpus, args.top, space_from_args(args), executor_spec(args), progress,
                        headroom_GB=args.headroom_GB)
    if args.json:
        print(counts_line(result), file=sys.stderr)
        print(dumps([c.to_json() for c in result.top]))
    else:
        print(search_text(result, base.label))
    return 0


def counts_line(r: SearchResult) -> str:
    """Counts and phase timings in one line."""
    s = r.seconds
    rate = r.enumerated / s["estimate"] if s["estimate"] > 0 else 0.0
    timed = (f" ({r.unscored:,} latency-timed ones not scored: only on the "
             f"{TIMED_PIPELINES} fastest fitting 1F1B pipelines)") if r.unscored else ""
    refined = (f" (of which {r.refined:,} placements / layer splits of the best)" if r.refined else "")
    return (f"{r.gpus:,} GPUs: {r.enumerated:,} layouts enumerated{refined}{timed}, {r.valid:,} valid, "
            f"{r.fit:,} fit in memory{' (on the proxy)' if r.proxy else ''}, {r.roomy:,} with "
            f"{r.headroom_GB:g} GB to spare (ranked"
            + (f"; the base scenario's memory: the {r.phases} run-plan phases' is judged on the layouts "
               "priced exactly" if r.phases else "") + "); "
            f"{'estimator' if r.engine == 'estimate' else 'full engine (no estimator installed)'} "
            f"{s['estimate']:.1f} s ({rate:,.0f} layouts/s), {r.simulated} layouts priced exactly "
            f"{s['full']:.1f} s, total {s['total']:.1f} s{proxy_note(r)}")


def proxy_note(r: SearchResult) -> str:
    """What the ranking left out when the estimator does not price the scenario (design/proxy.py)."""
    if not r.proxy:
        return ""
    return (f"; ranked on a proxy the estimator prices ({'; '.join(r.proxy)}), the best "
            f"{r.simulated} simulated in full as the scenario is")


def search_text(r: SearchResult, label: str) -> str:
    lines = [f"# search: {one_line(label)}", counts_line(r)]
    for field, n in r.reasons[:6]:
        lines.append(f"  {n:>8,} invalid by {one_line(field)}")
    if not r.top:
        lines.append(f"no valid layout fits in memory with {r.headroom_GB:g} GB to spare"
                     + (f" ({r.fit:,} fit with less: --headroom-GB 0 ranks them)" if r.fit else ""))
    for rank, c in enumerate(r.top, 1):
        f = c.figures
        mark = "  <- the scenario's own layout" if c.baseline else ""
        what = "proxy estimate" if r.proxy else "estimated"
        est = f" ({what} {fmt_s(c.estimate_s)})" if c.estimate_s is not None else ""
        lines += ["", f"{rank:>2}. {_time(c)}{est} · MFU {f['mfu']:.1%} · "
                      f"{c.memory.need_GB:.1f} GB ({c.memory.free_GB:.1f} free) · dp {c.dp}{mark}",
                  f"    {c.layout.label()}",
                  f"    {fmt_breakdown(f['breakdown_s'])}",
                  f"    ?{c.link}" if c.link else "    (no link: too many fields differ)"]
    b = r.baseline
    if b is not None:
        lines += ["", f"the scenario's own layout: {_time(b)} · {b.memory.label()} · "
                      f"{b.layout.label()}", r.verdict()]
    return "\n".join(lines)


def _time(c: Candidate) -> str:
    """A row's time as it is ranked: the iteration, or the time per step (and the inner step) where
    replicas synchronise every few steps."""
    if c.step_s == c.iteration_time_s:
        return fmt_s(c.iteration_time_s)
    return f"{fmt_s(c.step_s)} per step (inner step {fmt_s(c.iteration_time_s)})"
