"""``import-trace PATH --scenario NAME [--skip N] [--iteration-marker NAME] [--set K=V ...] [--fit]
[--out FILE.yaml] [--json]``: a measured iteration beside the simulated one.

PATH is a PyTorch profiler / Kineto Chrome-trace JSON (``.json`` or ``.json.gz``) of one rank, or
a directory of them, one per rank.  The traces are streamed (explorer/traces/stream.py), their
``ProfilerStep#N`` windows (or ``--iteration-marker NAME``'s events) measured per category
(explorer/traces/measure.py) and compared with ``simulate(SCENARIO)`` (explorer/traces/compare.py).
``--json`` prints ``{iterations, iteration_time_s: {measured, simulated}, categories: {NAME:
{measured_s, simulated_s}}, exposed_comm_s: {measured, simulated}, ...}``; the text names the
largest differences.  ``--fit`` fits the scenario's compute efficiency and each crossed tier's
rate to the trace (explorer/traces/run_fit.py; ``fit`` in the JSON: fields, targets before and
after, residual); ``--out`` writes the scenario with them as a YAML file.  A file that is not a
trace, is truncated or has no iteration is one line naming it, exit 2.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from ..cli import load_scenario, resolve_scenario_path
from ..config.schema import ScenarioError
from ..design.cli_support import add_set_argument, bounded_int, dumps, parse_sets
from ..traces.calibrated_file import write_calibrated
from ..traces.compare import compare, comparison_text, layout_of
from ..traces.load import read_ranks
from ..traces.measure import measure
from ..traces.run_fit import RunFit, fit_run, fit_text

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
    parser.add_argument("--fit", action="store_true",
                        help="fit compute efficiency and each tier's rate to the trace (residual shown)")
    parser.add_argument("--out", metavar="FILE.yaml", help="with --fit: write the calibrated scenario here")
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def run(args: argparse.Namespace) -> int:
    sc = load_scenario(args.scenario, args.set)        # bad scenario: one line before reading traces
    path = Path(args.path)
    traces = read_ranks(path, args.iteration_marker)
    try:
        measured = measure(traces, layout_of(sc), skip=args.skip)
    except ValueError as exc:
        raise ScenarioError(str(path), str(exc)) from None
    if args.out and not args.fit:
        raise ScenarioError("--out", "writes the fitted scenario: give --fit with it")
    comparison = compare(sc, measured)
    out = comparison.to_json()
    text = comparison_text(comparison)
    if args.fit:
        try:
            fitted = fit_run(sc, measured)
        except ValueError as exc:
            raise ScenarioError("--fit", f"{path}: {exc}") from None
        out["fit"] = fitted.to_json()
        text += "\n" + fit_text(fitted)
        if args.out:
            _write(Path(args.out), args, fitted, path)
    print(dumps(out) if args.json else text)
    return 0


def _write(out: Path, args: argparse.Namespace, fitted: RunFit, trace: Path) -> None:
    head = (f"Calibrated by `import-trace {trace.name} --fit`: "
            + ", ".join(f"{k} {v:.4g}" for k, v in fitted.fields.items())
            + f" (RMS error of the fitted times {fitted.residual:.1%}).")
    overrides = {**parse_sets(args.set), **fitted.fields}
    write_calibrated(out, resolve_scenario_path(args.scenario), overrides, str(trace), head)
