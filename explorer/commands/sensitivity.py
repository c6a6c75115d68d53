"""``sensitivity SCENARIO [--set K=V ...] [--json]``: which 2x upgrade buys the most.

The iteration time after doubling compute, HBM bandwidth and each tier's bandwidth and halving
each tier's latency, with the full engine's figures (explorer/design/sensitivity.py).  ``--json``
prints a list of ``{change, iteration_time_s, speedup, overrides, breakdown_s, time_per_step_s,
memory_GB_total, fits}`` (speedup = base time / new time), sorted by speedup; the text form is the
same as a table.  A base over the GPU's memory is said in one line (on stderr with ``--json``).
Changes the scenario cannot express (GPU figures of datacenters' presets) are listed as not run,
on stderr with ``--json``.
"""
from __future__ import annotations

import argparse
import sys

from ..config.schema import one_line
from ..design.base import open_base
from ..design.cli_support import add_set_argument, dumps, fmt_s, parse_sets
from ..design.progress import reporting
from ..design.sensitivity import Sensitivity, sensitivity

NAME = "sensitivity"
HELP = "iteration time after doubling compute, HBM and each tier's bandwidth, halving latencies"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("scenario")
    add_set_argument(parser)
    parser.add_argument("--json", action="store_true", help="print a JSON list sorted by speedup")


def run(args: argparse.Namespace) -> int:
    with reporting(NAME) as progress:
        base = open_base(args.scenario, parse_sets(args.set), keep_dp=True)
        result = sensitivity(base, progress=progress)
    print(dumps([r.to_json() for r in result.rows]) if args.json else sensitivity_text(result, base.label))
    if args.json:
        for k in result.skipped:          # stdout stays one JSON list: the changes not run go to stderr
            print(f"not run: {k.change}: {k.reason}", file=sys.stderr)
        note = result.memory_note()
        if note:
            print(f"warning: memory: {note}", file=sys.stderr)
    return 0


def sensitivity_text(s: Sensitivity, label: str) -> str:
    what = "step" if s.per_step else "iteration"        # replicas synchronising apart: the amortised step
    lines = [f"# sensitivity of {one_line(label)}: base {what} {fmt_s(s.base_time_s)} "
             "(the full engine's figures)",
             f"{'change':<28} {what:>10} {'speedup':>8}  saved"]
    note = s.memory_note()
    if note:
        lines.insert(1, f"# warning: memory: {note}")
    for r in s.rows:
        saved = 1 - 1 / r.speedup
        lines.append(f"{r.change:<28} {fmt_s(r.step_s):>10} {r.speedup:>7.3f}x  {saved:6.1%}  "
                     + "#" * int(round(40 * max(saved, 0.0))))
    lines += [f"{k.change:<28} not run: {k.reason}" for k in s.skipped]
    return "\n".join(lines)
