"""``advise SCENARIO [--top K] [--json] [--set K=V ...] [--executor local|dask]``.

Which dimensions of the scenario's training should cross its datacenters: every placement (span
dp / pp / dp+pp, pipeline depth, flat or hierarchical DP, schedule) ranked by the estimator, the
top K, the naive placement (DP flat across everything) and the scenario's own simulated with the
full engine (explorer/design/advise.py).  ``--json`` prints a list sorted by ``time_per_step_s``
(the iteration, or the amortised step of replicas that synchronise every few steps), then the naive
and own placements where they are not among it
(full engine), each with ``placement`` (label), ``overrides`` (apply them with ``--set``),
``iteration_time_s``, ``mfu``, ``tokens_per_s``, ``memory_GB_total``, ``fits``, ``breakdown_s``,
``wan_links`` (summary), ``estimate_s``, ``link`` (share query string), ``own`` and ``naive``;
the counts, timings and the gain over the naive placement go to stderr as one line.
"""
from __future__ import annotations

import argparse
import sys

from ..analysis.verdict import DEFAULT_HEADROOM_GB
from ..config.schema import one_line
from ..design.advise import Advice, AdviceResult, advise
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

NAME = "advise"
HELP = "placement advisor: which dimensions should cross datacenters, ranked (best vs naive DP-across)"
# Each of the top K (+2 spare) is a full simulation, about 0.3 s at 32K GPUs; a scenario has a few
# hundred placements, and 50 rows is more than a reader compares.
MAX_TOP = 50


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("scenario")
    parser.add_argument("--top", type=bounded_int(1, MAX_TOP), default=5,
                        help=f"placements simulated in full and printed, 1 to {MAX_TOP} (default 5)")
    add_set_argument(parser)
    parser.add_argument("--json", action="store_true",
                        help="print a JSON list: the placements ranked by time per step, then naive, own")
    add_executor_arguments(parser)


def run(args: argparse.Namespace) -> int:
    with reporting(NAME) as progress:
        base = open_base(args.scenario, parse_sets(args.set))
        result = advise(base, args.top, executor_spec(args), progress)
    if args.json:
        print(summary_line(result), file=sys.stderr)
        print(dumps([a.to_json() for a in json_rows(result)]))
    else:
        print(advise_text(result, base.label))
    return 0


def json_rows(r: AdviceResult) -> list[Advice]:
    """The ranked placements, then the naive and the scenario's own where not among them (each
    flagged ``naive`` / ``own``, as the text's extra rows: a hunt found them in the text only)."""
    rows = list(r.top)
    for a in (r.naive, r.own):
        if a is not None and all(a.label != b.label for b in rows):
            rows.append(a)
    return rows


def gain_line(r: AdviceResult) -> str:
    """The best placement against the naive one (DP flat across everything)."""
    if not r.top:
        return "no placement fits in memory"
    if r.best is None:
        free = r.top[0].figures["free_GB"]
        return (f"no placement leaves the {DEFAULT_HEADROOM_GB:g} GB a GPU needs beside the model (the "
                f"fastest that fits leaves {free:.2f} GB free): none is recommended")
    speedup = r.speedup
    if r.naive is None or speedup is None:
        return "the naive placement (DP flat across all datacenters) is not valid for this pipeline"
    fits = "" if r.naive.figures["fits"] else ", which does not fit in memory"
    head = f"best vs naive (DP flat ring across all datacenters, {fmt_s(r.naive.step_s)}{fits}): "
    best = r.best
    assert best is not None                  # (speedup is None without it)
    # Replicas that sync every few steps compare their time per step (a regression hunt read "per
    # iteration" beside a per-step ranking); the own placement is said when it is the best.
    per = "per step" if best.step_s != best.iteration_time_s else "per iteration"
    own = "; the best is the scenario's own placement" if best.own else ""
    if speedup >= 1:
        return head + f"{speedup:.2f}x faster, {1 - 1 / speedup:.0%} less time {per}{own}"
    # Slower than a naive placement that does not fit: the best is what runs, not a loss to it.
    why = ("; the naive placement cannot run as set" if not r.naive.figures["fits"] else "")
    return head + f"{1 / speedup:.2f}x slower, {1 / speedup - 1:.0%} more time {per}{why}{own}"


def summary_line(r: AdviceResult) -> str:
    """Counts and phase timings in one line, then the gain over the naive placement."""
    s = r.seconds
    return (f"{r.gpus:,} GPUs in {r.datacenters} datacenters: {r.enumerated} placements, {r.valid} valid, "
            f"{r.fit} fit; estimator {s['estimate']:.1f} s, timed schedules {s['timed']:.1f} s, "
            f"full engine {s['full']:.1f} s, total {s['total']:.1f} s; {gain_line(r)}")


def advise_text(r: AdviceResult, label: str) -> str:
    """The ranked table, the naive and own placements and the gain of the best over the naive."""
    lines = [f"# advise: {one_line(label)}", summary_line(r)]
    for fld, n in r.reasons[:4]:
        lines.append(f"  {n:>6,} placements invalid by {one_line(fld)}")
    # Replicas that synchronise every few steps are ranked by their time per step (design/advise.py).
    per_step = any(a.step_s != a.iteration_time_s for a in json_rows(r))
    lines += ["", f"{'#':>5}  {'per step' if per_step else 'iteration':>10}  {'MFU':>6}  {'memory':>8}  "
                  f"{'WAN util':>8}  placement"]
    for rank, a in enumerate(r.top, 1):
        lines.append(_row(str(rank), a))
    for tag, other in (("naive", r.naive), ("own", r.own)):
        if other is not None and all(other.label != b.label for b in r.top):
            lines.append(_row(tag, other))
    if r.best is not None:
        best = r.best
        lines += ["", f"best: {best.label}", f"  {fmt_breakdown(best.figures['breakdown_s'])}",
                  "  --set " + " --set ".join(f"{k}={v}" for k, v in best.overrides.items())]
        if best.link:
            lines.append(f"  ?{best.link}")
    lines += ["", gain_line(r)]
    return "\n".join(lines)


def _row(rank: str, a: Advice) -> str:
    f = a.figures
    mem = f"{f['memory_GB_total']:.1f} GB" + ("" if f["fits"] else "!")
    tight = (f"  ({f['free_GB']:.2f} GB free: under the {DEFAULT_HEADROOM_GB:g} GB a GPU needs beside the "
             "model)" if f["fits"] and not a.roomy else "")
    return (f"{rank:>5}  {fmt_s(a.step_s):>10}  {f['mfu']:>6.1%}  {mem:>8}  "
            f"{a.wan_links['max_utilisation']:>8.0%}  {a.label}{tight}")
