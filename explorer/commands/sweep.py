"""``sweep SCENARIO --vary KEY=V1,V2 [--vary ...] [--set K=V] [--full] [--json] [--csv OUT]``.

The cartesian product of the varied values (explorer/design/sweep.py), each combination validated
(an invalid one is listed with its one-line reason, and the reasons are counted) and scored by the
estimator, or the full engine with ``--full``.  ``--json`` prints a list, one object per
combination in product order: ``overrides``, ``valid``, then ``reason`` (and ``reason_field``) or
``iteration_time_s``, ``mfu``, ``tokens_per_s``, ``memory_GB_total``, ``fits``, ``breakdown_s`` and
``link`` (the share-link query string), ``dormant`` (run --json's: settings given that nothing
reads, each ``{field, reason}``), and ``run_total`` (days, GPU-hours, goodput, energy) when
the scenario has a run plan (explorer/design/run_sweep.py).  ``--csv`` writes the same rows as a table.
A serving scenario (``--full``) adds ``inference`` (TTFT, TPOT, tokens/s per GPU, requests/s, max
batch, ...) to each row and reads as those figures (explorer/design/serving_table.py).
"""
from __future__ import annotations

import argparse
import csv
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..analysis.compare import per_step
from ..analysis.verdict import DEFAULT_HEADROOM_GB
from ..config.overrides import phase_key
from ..config.schema import ScenarioError, one_line
from ..design import serving_table
from ..design.base import DP_KEY, open_base
from ..design.capacity import least_capacity_GB
from ..design.cli_support import (
    add_executor_arguments,
    add_set_argument,
    dumps,
    executor_spec,
    fmt_s,
    parse_sets,
)
from ..design.progress import reporting
from ..design.run_sweep import RUN_FIGURES, with_runs
from ..design.sweep import MAX_COMBINATIONS, MAX_FULL_COMBINATIONS, Point, SweepResult, parse_vary, sweep
from ..serving.guard import refuse_serving
from ..vocabulary import CATEGORIES

NAME = "sweep"
HELP = "cartesian product of field values, each validated and scored (estimator; --full: engine)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("scenario")
    parser.add_argument("--vary", action="append", default=[], metavar="KEY=V1,V2,...",
                        help=f"a field and its values (repeat for a product of at most {MAX_COMBINATIONS:,} "
                             f"combinations, {MAX_FULL_COMBINATIONS:,} with --full)")
    add_set_argument(parser)
    parser.add_argument("--full", action="store_true", help="score with the full engine, not the estimator")
    parser.add_argument("--json", action="store_true", help="print a JSON list, one object per combination")
    parser.add_argument("--csv", metavar="OUT.csv", help="write one row per combination")
    add_executor_arguments(parser)


def run(args: argparse.Namespace) -> int:
    vary = parse_vary(args.vary)
    sets = parse_sets(args.set)
    with reporting(NAME) as progress:
        base = open_base(args.scenario, sets, keep_dp=DP_KEY in vary)
        if not args.full:               # --full simulates each point (a serving one: its decode step)
            refuse_serving(base.raw, NAME)
        result = sweep(base, vary, "full" if args.full else "estimate", executor_spec(args), progress)
        # A run plan: each combination's whole run too (explorer/design/run_sweep.py).
        from ..simulate import simulate
        points, note = with_runs(base.raw, result.points, simulate)
        result = replace(result, points=points)
        free = _free_of_fastest(base, result)
    if args.csv:
        write_csv(result, Path(args.csv))
    print(dumps([p.to_json() for p in result.points]) if args.json
          else sweep_text(result, base.label, free) + (f"\n{note}" if note else ""))
    return 0


def write_csv(result: SweepResult, path: Path) -> None:
    """One row per combination: the varied values, valid, reason, the figures and the link."""
    runs = any("run_total" in p.figures for p in result.points)
    serving = serving_table.is_serving(result.points)
    cols = [*result.keys, "valid", "reason", "iteration_time_s", "mfu", "tokens_per_s", "memory_GB_total",
            "fits", *(f"breakdown_{k}_s" for k in CATEGORIES),
            *((f"run_{k}" for k in RUN_FIGURES) if runs else ()),
            *(serving_table.FIGURES if serving else ()), "link"]
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(cols)
        for p in result.points:
            f = p.figures
            b = f.get("breakdown_s", {})
            w.writerow([*(p.overrides[k] for k in result.keys), p.valid, p.reason or "",
                        *(f.get(k, "") for k in ("iteration_time_s", "mfu", "tokens_per_s", "memory_GB_total",
                                                 "fits")),
                        *(b.get(k, "") for k in CATEGORIES),
                        *((f.get("run_total", {}).get(k, "") for k in RUN_FIGURES) if runs else ()),
                        *(serving_table.csv_columns(f) if serving else ()),
                        p.link or ""])


def column(key: str) -> str:
    """A varied key's column heading: its last part, and a phase's index before it
    (``training.phases[1].overrides.training.global_batch`` -> ``phases[1].global_batch``)."""
    phase = phase_key(key)
    if phase is None:
        return key.split(".")[-1]
    index, what, inner = phase
    return f"phases[{index}].{inner.split('.')[-1] if inner else what}"


def _free_of_fastest(base: Any, result: SweepResult) -> dict[int, float]:
    """GB of GPU memory left free by the fitting rows (by position in ``result.points``), fastest
    first, up to the first that leaves the verdict's headroom: what "fastest that fits" needs
    (each row's GPU: the smallest board of a mixed cluster, design/capacity.py)."""
    step = "time_per_step_s" if any(per_step(p.figures) for p in result.valid) else "iteration_time_s"
    fit = sorted((i for i, p in enumerate(result.points) if p.valid and p.figures["fits"]),
                 key=lambda i: result.points[i].figures[step])
    out: dict[int, float] = {}
    for i in fit:
        p = result.points[i]
        try:
            cap = least_capacity_GB(base.scenario(dict(p.overrides)))
        except ScenarioError:
            continue
        out[i] = cap - p.figures["memory_GB_total"]
        if out[i] >= DEFAULT_HEADROOM_GB:
            break
    return out


def sweep_text(result: SweepResult, label: str, free: Mapping[int, float] | None = None) -> str:
    """The readable table: one line per combination, then the counts and reasons; ``free``: GB each
    fitting row leaves (by position; rows left out are taken to leave the headroom)."""
    keys = result.keys
    widths = [max(len(column(k)), *(len(one_line(str(p.overrides[k]))) for p in result.points))
              for k in keys]
    head = "  ".join(f"{column(k):>{w}}" for k, w in zip(keys, widths, strict=True))
    runs = any("run_total" in p.figures for p in result.points)
    title = f"# sweep of {one_line(label)} ({'full engine' if result.engine == 'full' else 'estimator'})"
    if serving_table.is_serving(result.points):
        lines = [title, *serving_table.table(result.points, keys, widths, head)]
        return "\n".join(lines + _tail(result, serving_table.best_line(result.points)))
    # Replicas that synchronise every few steps (training.sync): the amortised step is what the rows
    # are compared on (a hunt found the slowest WAN ranked fastest on its inner steps alone).
    step = "time_per_step_s" if any(per_step(p.figures) for p in result.valid) else "iteration_time_s"
    lines = [title, f"{head}  {'step' if step != 'iteration_time_s' else 'iteration':>10}  {'MFU':>6}  "
             f"{'memory':>9}  fits"
             + (f"  {'run days':>9}  {'GPU-hours':>10}  {'goodput':>8}" if runs else "")]
    for p in result.points:
        values = "  ".join(f"{one_line(str(p.overrides[k])):>{w}}" for k, w in zip(keys, widths, strict=True))
        if p.valid:
            f = p.figures
            lines.append(f"{values}  {fmt_s(f[step]):>10}  {f['mfu']:>6.1%}  "
                         f"{f['memory_GB_total']:>6.1f} GB  {'yes' if f['fits'] else 'NO'}" + _run_cells(f))
        else:
            lines.append(f"{values}  invalid: {one_line(p.reason or '')}")
    # A recommendation leaves the verdict's headroom free (analysis/verdict.py): a row that fits
    # with less is listed "yes" but not named the fastest (a hunt found one named at 0.11 GB free).
    room = dict(free or {})
    at = {id(p): i for i, p in enumerate(result.points)}

    def _free_GB(p: Point) -> float:
        return room.get(at[id(p)], float("inf"))
    fit = [p for p in result.valid if p.figures["fits"] and _free_GB(p) >= DEFAULT_HEADROOM_GB]
    tight = [p for p in result.valid if p.figures["fits"] and _free_GB(p) < DEFAULT_HEADROOM_GB]
    best = min(fit, key=lambda p: p.figures[step]) if fit else None
    spare = f" with {DEFAULT_HEADROOM_GB:g} GB to spare" if tight else ""
    # A varied field no row reads is not part of the answer (a regression hunt read "fastest ... at
    # model.gnn.overlap=True" under a note that overlap is read by no row); the link keeps the row.
    idle = {k for k, _ in result.dormant}

    def read(p: Point) -> str:
        shown = [f"{k}={one_line(str(v))}" for k, v in p.overrides.items() if k not in idle]
        return ", ".join(shown) or "any of the values (none is read)"

    lines += _tail(result, None if best is None else
                   f"fastest that fits{spare}: {fmt_s(best.figures[step])}{_per(step)} at {read(best)}"
                   + (f"  (?{best.link})" if best.link else ""))
    faster = [p for p in tight if best is None or p.figures[step] < best.figures[step]]
    if faster:
        t = min(faster, key=lambda p: p.figures[step])
        lines.append(f"  (faster but with {_free_GB(t):.2f} GB free, under the {DEFAULT_HEADROOM_GB:g} GB a "
                     f"GPU needs beside the model (CUDA context, NCCL): {fmt_s(t.figures[step])} at "
                     f"{read(t)})")
    ran = [p for p in fit if "run_total" in p.figures]
    if ran:
        best = min(ran, key=lambda p: p.figures["run_total"]["days"])
        lines.append(f"shortest run that fits: {best.figures['run_total']['days']:,.2f} days at "
                     + ", ".join(f"{k}={one_line(str(v))}" for k, v in best.overrides.items())
                     + (f"  (?{best.link})" if best.link else ""))
    return "\n".join(lines)


def _tail(result: SweepResult, best: str | None) -> list[str]:
    """The counts, the unread fields (network and dormant), the reasons and the best combination's line."""
    valid = result.valid
    fit = [p for p in valid if p.figures["fits"]]
    lines = ["", f"{len(result.points):,} combinations: {len(valid):,} valid ({len(fit):,} fit in memory), "
                 f"{len(result.points) - len(valid):,} invalid; {result.seconds:.2f} s"]
    if result.unread:
        lines.append(f"  {result.scored:,} distinct configurations scored: this scenario never reads "
                     f"{', '.join(result.unread)} (one datacenter, or one NVLink domain), so its values "
                     "give equal figures")
    # A setting no valid row reads (config/dormant.py): its rows differ in nothing, which run notes.
    lines += [f"  note: {k} is not read: {why} (on every valid row, so its values give equal figures)"
              for k, why in result.dormant]
    for _, n, example in result.reason_counts():
        lines.append(f"  {n:>6,} x {one_line(example)}")
    return lines + ([best] if best else [])


def _run_cells(f: Mapping[str, Any]) -> str:
    """A combination's whole run (days, GPU-hours, goodput), when the scenario has a run plan."""
    r = f.get("run_total")
    if r is None:
        return ""
    return f"  {r['days']:>9,.4g}  {r['gpu_hours']:>10,.0f}  {r['goodput']:>8.2%}"


def _per(step: str) -> str:
    return "" if step == "iteration_time_s" else " per step"
