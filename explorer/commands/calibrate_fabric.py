"""``calibrate-fabric FILE [--scenario NAME] [--op OP] [--ranks N] [--gpus-per-node G] [--in-place]
[--set K=V ...] [--out FILE.yaml] [--json]``: fit a fabric's constants to nccl-tests output.

FILE is the text an nccl-tests binary printed (all_reduce_perf, all_gather_perf, ...:
explorer/traces/nccl_tests.py).  The scenario (default ``megatron-gpt3-175b``: A100s, InfiniBand
HDR) is resized to the run's ranks and ranks per host, its GPU taken from the header's device
name when it names a preset, and the tier the run crosses fitted (explorer/traces/fabric_fit.py).
``--json`` prints ``{fabric: {...fitted fields...}, residual, residual_max_from_1MiB, rows, ...}``
(residual: RMS relative busbw error over every row); ``--out`` writes the scenario with the fitted
constants as a YAML file that ``run``, the app and a share link load like any other.
"""
from __future__ import annotations

import argparse
import math
from pathlib import Path

from ..cli import load_scenario, resolve_scenario_path
from ..config.presets import gpu_presets
from ..config.schema import ScenarioError
from ..design.cli_support import add_set_argument, bounded_int, dumps, parse_sets
from ..network.collectives import OPS
from ..traces import nccl_tests
from ..traces.calibrated_file import write_calibrated
from ..traces.fabric_fit import FabricFit, fit

NAME = "calibrate-fabric"
HELP = "fit a fabric's efficiency and latency to nccl-tests output (busbw curve)"
DEFAULT_SCENARIO = "megatron-gpt3-175b"
# Header device names -> GPU presets (explorer/data/gpus.yaml); the first match wins.
_GPU_OF = (("GB300", "gb300"), ("GB200", "gb200"), ("B200", "b200"), ("H200", "h200"), ("H800", "h800"),
           ("H100", "h100-sxm"), ("A100", "a100-80gb"))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", help="text output of an nccl-tests binary (with its header)")
    parser.add_argument("--scenario", default=DEFAULT_SCENARIO,
                        help=f"scenario whose cluster is calibrated (default {DEFAULT_SCENARIO})")
    parser.add_argument("--op", choices=OPS, help="the collective, when the output does not say")
    parser.add_argument("--ranks", type=bounded_int(2, 1_000_000), help="ranks, when the output does not say")
    parser.add_argument("--gpus-per-node", type=bounded_int(1, 1024), metavar="G",
                        help="ranks per host, when the output does not say")
    parser.add_argument("--in-place", action="store_true", help="fit the in-place columns")
    add_set_argument(parser)
    parser.add_argument("--out", metavar="FILE.yaml", help="write the calibrated scenario here")
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def _shape(run: nccl_tests.NcclTestsRun, args: argparse.Namespace) -> tuple[str, int, int]:
    ranks = args.ranks or run.ranks or nccl_tests.ranks_from_ratio(run)
    if ranks is None or ranks < 2:
        raise ScenarioError("--ranks", f"{args.file}: the output lists no '#  Rank' lines; give --ranks N")
    op = args.op or run.op or nccl_tests.bus_factor_op(run, ranks)
    if op is None:
        raise ScenarioError("--op", f"{args.file}: the output does not name its collective; give --op "
                            f"({'|'.join(OPS)})")
    if not args.op and op not in OPS:
        # The file's own collective (reduce_perf's reduce): named as the file's, not as a bad --op.
        raise ScenarioError(args.file, f"is nccl-tests' {op} test, which is not modelled; fit one of "
                            f"{', '.join(OPS)}")
    per_node = args.gpus_per_node or run.gpus_per_host
    if per_node is None:
        # Without the Rank lines nothing says how the ranks sit on hosts: taking them as one host
        # fitted NVLink to a 2 x 8 InfiniBand run (a hunt), so the user says it.
        raise ScenarioError("--gpus-per-node", f"{args.file}: the output lists no '#  Rank' lines, so how "
                            f"many of its {ranks} ranks share a host is unknown; give --gpus-per-node G")
    return op, ranks, per_node


def _sets(run: nccl_tests.NcclTestsRun, ranks: int, per_node: int, user: dict) -> dict:
    """The cluster resized to the run: ``per_node`` ranks a node, enough nodes, one dp group."""
    nodes = math.ceil(ranks / per_node)
    out: dict = {"cluster.gpus_per_node": per_node, "cluster.nodes": nodes, "parallelism.tp": 1,
                 "parallelism.pp": 1, "parallelism.cp": 1, "parallelism.dp": nodes * per_node,
                 "cluster.datacenters": 1}
    gpu = next((preset for key, preset in _GPU_OF if key in run.device.upper()), None)
    if gpu and "hardware.gpu" not in user:
        out["hardware.gpu"] = gpu
        # ... with its own NVLink, as the scenario's (a hunt found an H100 run started from the
        # A100 scenario's 300 GB/s): the fit starts from the GPU the output names.
        link = gpu_presets()[gpu].get("scale_up_GBps")
        if link is not None and "cluster.scale_up.bandwidth_GBps" not in user:
            out["cluster.scale_up.bandwidth_GBps"] = link
    return {**out, **user}


# Two constants are fitted (efficiency and latency): at least one size more than that leaves a residual.
MIN_ROWS = 3
# Largest message a row may give: 1 TB (nccl-tests' -e of real runs stays under tens of GB).
MAX_ROW_BYTES = 1e12


def _check_rows(data: nccl_tests.NcclTestsRun, source: str) -> None:
    """A one-line error naming the file when its rows cannot be fitted: too few sizes with a time
    (all-zero times stopped the fit with a division by zero; one row fitted two constants exactly),
    or a size no collective has."""
    usable = {r.size_bytes for r in data.rows if r.time_us > 0 and r.size_bytes > 0}
    if len(usable) < MIN_ROWS:
        raise ScenarioError(source, f"has {len(usable)} message size(s) with a positive size and time; "
                            f"the fit of efficiency and latency needs at least {MIN_ROWS}")
    big = max(r.size_bytes for r in data.rows)
    if big > MAX_ROW_BYTES:
        raise ScenarioError(source, f"a row of {big:.4g} bytes: message sizes above {MAX_ROW_BYTES:.0e} "
                            "bytes are not nccl-tests output")


def run(args: argparse.Namespace) -> int:
    data = nccl_tests.read(Path(args.file), in_place=args.in_place)
    op, ranks, per_node = _shape(data, args)
    _check_rows(data, args.file)
    sets = _sets(data, ranks, per_node, parse_sets(args.set))
    path = resolve_scenario_path(args.scenario)
    sc = load_scenario(args.scenario, [f"{k}={v}" for k, v in sets.items()])
    result = fit(sc, data, op, ranks)
    if args.out:
        _write(Path(args.out), path, {**sets, **result.overrides()}, result, args.file)
    print(dumps(result.to_json()) if args.json else fit_text(result, args.file))
    return 0


def _write(out: Path, base: Path, overrides: dict, result: FabricFit, source: str) -> None:
    head = (f"Calibrated by `calibrate-fabric {Path(source).name}`: {result.tier} "
            + ", ".join(f"{k} {v:.4g}" for k, v in result.fields.items())
            + f" (RMS busbw error {result.rms:.1%}, worst from 1 MiB {result.max_from_1mib:.1%}).")
    write_calibrated(out, base, overrides, source, head)


def fit_text(r: FabricFit, source: str) -> str:
    lines = [f"# {Path(source).name}: {r.op} over {r.ranks} ranks -> {r.tier} fitted",
             *(f"  {k:16} {r.start[k]:10.4g} -> {v:10.4g}" for k, v in r.fields.items()),
             f"  residual: RMS busbw error {r.rms:.1%} over {len(r.rows)} rows (before: {r.rms_before:.1%}), "
             f"worst {r.max_from_1mib:.1%} from 1 MiB up",
             f"{'size':>12} {'measured':>10} {'fitted':>10} {'error':>8}"]
    lines += [f"{row['size_bytes']:>12} {row['busbw_GBps']:>10.2f} {row['fitted_busbw_GBps']:>10.2f} "
              f"{row['relative_error']:>+8.1%}" for row in r.rows]
    return "\n".join(lines)
