"""``consensus SCENARIO [--replicas 2,4,8,16] [--periods 1,10,100,1000] [--set K=V ...] [--json]``.

Time per step and the synchronisation's share of it against the number of replicas (datacenters,
weak scaling) and the synchronisation period H, with each curve's knee (explorer/variants/lowcomm/
consensus.py).  ``--json`` prints {kind, knee_share, points: [{replicas, inner_steps,
inner_step_s, time_per_step_s, sync_share, tokens_per_s}], knees: {replicas: H or null}, skipped}.
"""
from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from typing import Any

from ..config.schema import excerpt, one_line
from ..design.base import open_base
from ..design.cli_support import add_set_argument, dumps, fmt_s, parse_sets
from ..design.consensus import KNEE_SHARE, PERIODS, REPLICAS, ConsensusCurve, consensus
from ..design.progress import reporting
from ..scenario import ScenarioError
from ..serving.guard import refuse_serving

NAME = "consensus"
HELP = "time per step against replicas and synchronisation period (local SGD / DiLoCo), with the knee"
MAX_VALUES = 32


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("scenario")
    parser.add_argument("--replicas", default=None, metavar="D1,D2,...",
                        help=f"replica (datacenter) counts, 1 to {MAX_VALUES} of them, each a full "
                             "simulation; default " + ",".join(map(str, REPLICAS)))
    parser.add_argument("--periods", default=None, metavar="H1,H2,...",
                        help=f"synchronisation periods in inner steps, 1 to {MAX_VALUES} of them; default "
                             + ",".join(map(str, PERIODS)))
    add_set_argument(parser)
    parser.add_argument("--json", action="store_true", help="print the curve as JSON")


def _ints(text: str | None, flag: str, default: tuple[int, ...]) -> tuple[int, ...]:
    if text is None:
        return default
    try:
        values = tuple(int(s.replace("_", "")) for s in text.split(",") if s.strip())
    except ValueError:
        raise ScenarioError(flag, f"{excerpt(text)} is not a comma list of whole numbers") from None
    if not values or len(values) > MAX_VALUES or min(values) < 1:
        raise ScenarioError(flag, f"give 1 to {MAX_VALUES} whole numbers of at least 1")
    return values


def run(args: argparse.Namespace) -> int:
    replicas = _ints(args.replicas, "--replicas", REPLICAS)
    periods = _ints(args.periods, "--periods", PERIODS)
    with reporting(NAME) as progress:
        base = open_base(args.scenario, parse_sets(args.set), keep_dp=True)
        refuse_serving(base.raw, NAME)
        _refuse_stage_replicas(base.raw)
        progress.phase("simulating", "replica counts", len(replicas))
        curve = consensus(base.raw, replicas, periods, progress)
    print(dumps(curve.to_json()) if args.json else consensus_text(curve, base.label))
    if args.json:                    # stdout stays one JSON object: the warning goes to stderr too
        for D, (need, cap) in curve.over_memory.items():
            print(f"warning: memory: at {D} replicas each GPU needs {need:.1f} of {cap:.1f} GB: it does not "
                  "fit", file=sys.stderr)
    return 0


def _refuse_stage_replicas(raw: Mapping[str, Any]) -> None:
    """A one-line error for PipeDream's per-stage replicas: they are one pipeline's own data
    parallelism over the whole cluster, which replicas of that cluster cannot repeat (a hunt found
    every row "cannot run" with a message that contradicted itself: "1920 ... at least 1024")."""
    par = raw.get("parallelism")
    if isinstance(par, Mapping) and par.get("stage_replicas") is not None:
        raise ScenarioError("parallelism.stage_replicas", f"{NAME} replicates a data-parallel pipeline "
                            "across datacenters; PipeDream's stage replicas are that pipeline's own data "
                            "parallelism over the cluster: remove them "
                            "(--set parallelism.stage_replicas=null) to study it")


def consensus_text(curve: ConsensusCurve, label: str) -> str:
    periods = sorted({p.inner_steps for p in curve.points})
    lines = [f"# {curve.kind}: time per step of {one_line(label)} by replicas (rows) and period H (columns); "
             f"* marks each row's knee (synchronisation <= {KNEE_SHARE:.0%} of a step)"
             + (f"; the scenario's {curve.scenario_kind} is priced as {curve.kind} (the kinds this curve "
                "models: local-sgd, diloco)" if curve.scenario_kind not in ("", "every-step") else ""),
             f"{'replicas':>8} {'inner':>9}  " + " ".join(f"{'H=' + str(h):>9}" for h in periods)]
    for D, knee in curve.knees.items():
        row = {p.inner_steps: p for p in curve.points if p.replicas == D}
        cells = [f"{fmt_s(row[h].time_per_step_s) + ('*' if h == knee else ' '):>9}" for h in periods]
        lines.append(f"{D:>8} {fmt_s(row[periods[0]].inner_step_s):>9}  " + " ".join(cells))
    for D, why in curve.skipped.items():
        lines.append(f"{D:>8}  cannot run: {one_line(why)}")
    for D, (need, cap) in curve.over_memory.items():
        lines.append(f"# warning: memory: at {D} replicas each GPU needs {need:.1f} of {cap:.1f} GB: it does "
                     "not fit, so its row is the time of a layout that cannot run as set (no knee marked)")
    return "\n".join(lines)
