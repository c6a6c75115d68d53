"""``scaling SCENARIO [--gpus 1024,2048,...] [--mode weak|strong] [--set K=V ...] [--json]``.

Iteration time, MFU and exposed communication per dimension as the cluster grows by data-parallel
replicas (explorer/design/scaling.py): weak scaling grows the global batch with dp, strong scaling
keeps it.  ``--json`` prints a list, one object per size: ``gpus``, ``overrides``, ``valid``, then
``reason`` or ``dp``, ``global_batch``, ``iteration_time_s``, ``mfu``, ``tokens_per_s``,
``tokens_per_gpu`` (what the family's throughput counts: images for a CNN), ``samples_per_s``,
``memory_GB_total``, ``fits``, ``memory_capacity_GB``, ``breakdown_s``, ``exposed_s`` and ``link``.
"""
from __future__ import annotations

import argparse

from ..config.schema import excerpt, one_line
from ..config.sections import MAX_GPUS
from ..design.base import open_base
from ..design.cli_support import add_set_argument, bounded_int, dumps, fmt_s, parse_sets
from ..design.progress import reporting
from ..design.scaling import MODES, ScalePoint, scaling
from ..scenario import ScenarioError
from ..serving.guard import refuse_serving
from ..vocabulary import COMM_DIMS
from ..workloads.registry import nouns

NAME = "scaling"
HELP = "iteration time, MFU and exposed communication as GPUs grow (weak or strong scaling)"
MAX_SIZES = 64


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("scenario")
    parser.add_argument("--gpus", default=None, metavar="N1,N2,...",
                        help=f"cluster sizes, 1 to {MAX_SIZES} of them (each 1 to {MAX_GPUS:,}), each a "
                             "full simulation (default: the scenario's GPUs x 1/4 .. 8)")
    parser.add_argument("--mode", choices=MODES, default="weak",
                        help="weak: global batch grows with dp (default); strong: global batch fixed")
    add_set_argument(parser)
    parser.add_argument("--json", action="store_true", help="print a JSON list, one object per size")


def parse_gpus(text: str | None) -> list[int] | None:
    """``--gpus``'s comma list as GPU counts (None: the default sizes).  An empty item (``8,,16``, a
    trailing comma), a non-number or a count outside 1 .. MAX_GPUS (search's bound and wording) is a
    ScenarioError naming --gpus: dropped silently, ``8,,16`` would run without the size meant there,
    and 1e11 GPUs would reach the loader as an invalid global batch row."""
    if text is None:
        return None
    items = text.split(",")
    if not text.strip() or len(items) > MAX_SIZES:
        raise ScenarioError("--gpus", f"give 1 to {MAX_SIZES} GPU counts")
    if any(not s.strip() for s in items):
        raise ScenarioError("--gpus", f"{excerpt(text)} has an empty item; give GPU counts separated by "
                            "single commas (e.g. 8,16,32)")
    count = bounded_int(1, MAX_GPUS)
    try:
        return [count(s) for s in items]
    except argparse.ArgumentTypeError as exc:
        raise ScenarioError("--gpus", str(exc)) from None


def run(args: argparse.Namespace) -> int:
    sizes = parse_gpus(args.gpus)
    with reporting(NAME) as progress:
        base = open_base(args.scenario, parse_sets(args.set))
        # A serving scenario's training section is the loader's placeholder: its rows would be a
        # training step's batch and tokens/GPU, the same in weak and strong mode.
        refuse_serving(base.raw, NAME, "data-parallel replicas growing the global batch")
        points = scaling(base, sizes, args.mode, progress)
    unit = nouns(base.scenario().model).per_second
    print(dumps([p.to_json() for p in points]) if args.json else
          scaling_text(points, base.label, args.mode, unit))
    return 0


def scaling_text(points: list[ScalePoint], label: str, mode: str, unit: str = "tokens") -> str:
    """The table of ``points``; ``unit``: what the family's throughput counts (tokens, images)."""
    replicas = any("parallelism.stage_replicas" in p.overrides for p in points)
    grown = "PipeDream's stage replicas, each stage's in proportion" if replicas else "data-parallel replicas"
    lines = [f"# {mode} scaling of {one_line(label)} (the full engine's figures; extra GPUs are {grown})",
             f"{'GPUs':>8} {'dp':>6} {'batch':>7} {'iteration':>10} {'MFU':>6} {unit + '/GPU':>10} "
             f"{'memory':>10}  " + " ".join(f"{'exp ' + d:>9}" for d in COMM_DIMS)]
    for p in points:
        if not p.valid:
            lines.append(f"{p.gpus:>8,}  invalid: {one_line(p.reason or '')}")
            continue
        f = p.figures
        # A size over the GPU's memory is marked, as sweep's NO and advise's "!" (a hunt found one
        # printed plain, with the table's best MFU).
        memory = f"{f['memory_GB_total']:.1f} GB" + ("!" if not p.fits else " ")
        lines.append(f"{p.gpus:>8,} {p.dp:>6,} {p.global_batch:>7,} {fmt_s(f['iteration_time_s']):>10} "
                     f"{f['mfu']:>6.1%} {p.tokens_per_gpu:>10,.0f} {memory:>10}  "
                     + " ".join(f"{fmt_s(p.exposed_s[d]):>9}" for d in COMM_DIMS))
    over = [p for p in points if p.valid and not p.fits]
    if over:
        cap = over[0].figures.get("memory_capacity_GB")
        of = f" of {cap:.1f} GB" if cap else ""
        lines.append(f"! over the GPU's memory{of}: {', '.join(f'{p.gpus:,}' for p in over)} GPUs cannot run "
                     "this layout as set; their figures are what it would do if it fitted")
    return "\n".join(lines)
