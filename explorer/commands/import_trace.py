"""``import-trace PATH --scenario NAME [--skip N] [--iteration-marker NAME] [--set K=V ...] [--json]``:
a measured iteration beside the simulated one.

PATH is a PyTorch profiler / Kineto Chrome-trace JSON (``.json`` or ``.json.gz``) of one rank, or
a directory of them, one per rank.  The traces are streamed (explorer/traces/stream.py), their
``ProfilerStep#N`` windows (or ``--iteration-marker NAME``'s events) measured per category
(explorer/traces/measure.py) and compared with ``simulate(SCENARIO)`` (explorer/traces/compare.py).
``--json`` prints ``{iterations, iteration_time_s: {measured, simulated}, categories: {NAME:
{measured_s, simulated_s}}, exposed_comm_s: {measured, simulated}, ...}``; the text names the
largest differences.  A file that is not a trace, is truncated or has no iteration is one line
naming it, exit 2.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from ..cli import load_scenario
from ..config.schema import ScenarioError
from ..design.cli_support import add_set_argument, bounded_int, dumps
from ..traces.compare import compare, comparison_text, layout_of
from ..traces.load import read_ranks
from ..traces.measure import measure

NAME = "import-trace"
HELP = "measured iteration of a PyTorch profiler (Kineto) trace vs the scenario's simulation"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", help="a trace (.json/.json.gz) or a directory with one per rank")
    parser.add_argument("--scenario", required=True, help="scenario to compare with (name or file)")
    parser.add_argument("--skip", type=bounded_int(0, 1_000_000), default=0, metavar="N",
                        help="leave out the first N profiled iterations (warm-up); default 0")
    parser.add_argument("--iteration-marker", metavar="NAME",
                        help="name of the event that spans one iteration (a record_function of yours), "
                             "instead of ProfilerStep#N")
    add_set_argument(parser)
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def run(args: argparse.Namespace) -> int:
    sc = load_scenario(args.scenario, args.set)        # bad scenario: one line before reading traces
    path = Path(args.path)
    traces = read_ranks(path, args.iteration_marker)
    try:
        measured = measure(traces, layout_of(sc), skip=args.skip)
    except ValueError as exc:
        raise ScenarioError(str(path), str(exc)) from None
    comparison = compare(sc, measured)
    print(dumps(comparison.to_json()) if args.json else comparison_text(comparison))
    return 0
