"""``diff A [B] [--set K=V ...] [--set-b K=V ...] [--json]``: where the iteration time goes
between two scenarios.

A and B are scenario files or shipped names, as ``run`` takes them.  ``--set`` overrides A; when B
is not given, B is A (with A's ``--set``) plus ``--set-b`` — "B is A plus overrides".  When B is
given, ``--set`` applies to A only and ``--set-b`` to B.  ``--json`` prints
``{"a": <run json>, "b": <run json>, "delta_s": {category: seconds}, ...}`` where ``a`` and ``b``
are exactly what ``run --json`` prints and ``delta_s`` sums to
``b.iteration_time_s - a.iteration_time_s`` (explorer/analysis/compare.py).  The text form puts
both headlines side by side with their differences, and draws the difference as a waterfall of
text bars.  A bad key or value raises ScenarioError naming it (one line, exit 2, by explorer.cli).
"""
from __future__ import annotations

import argparse
import json
from collections.abc import Sequence

from ..analysis.compare import Comparison, Step, compare, per_step, step_seconds, waterfall_steps
from ..analysis.verdict import over_memory_sentences
from ..config.schema import excerpt, one_line
from ..errors import InternalError
from ..numbers import figure
from ..run.compare import RUN_KEYS, loss_line, run_delta, run_value
from ..scenario import Scenario, ScenarioError, load, parse_assignments, resolve_scenario_path
from ..serving.report import serving_layout
from ..variants.hetero import gpu_summary

NAME = "diff"
HELP = "compare two scenarios: headlines side by side, iteration-time difference by category"
WATERFALL_WIDTH = 44      # characters of the text waterfall's axis


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("a", metavar="A", help="scenario file or shipped name")
    parser.add_argument("b", metavar="B", nargs="?", default=None,
                        help="scenario file or shipped name (default: A, with A's --set)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="override a field of A (and of B when B is not given)")
    parser.add_argument("--set-b", action="append", default=[], metavar="KEY=VALUE", dest="set_b",
                        help="override a field of B")
    parser.add_argument("--json", action="store_true", help="print one JSON object {a, b, delta_s, ...}")


def load_pair(a: str, b: str | None, sets: Sequence[str], sets_b: Sequence[str]) -> tuple[Scenario, Scenario]:
    """A and B as the command reads them.  An error while loading B says so (``B: <field>: ...``),
    so a bad ``--set-b`` key or value is told apart from A's."""
    from ..cli import load_scenario

    sc_a = load_scenario(a, sets)
    for text in sets_b:
        if "=" not in text:
            raise ScenarioError("--set-b", f"{excerpt(text)} is not of the form dotted.key=value")
    try:
        if b is None:      # A's --set, then --set-b on top: a key in both is B's change of A
            over = {**parse_assignments(sets), **parse_assignments(sets_b, "--set-b")}
            sc_b = load(resolve_scenario_path(a), over)
        else:
            sc_b = load(resolve_scenario_path(b), parse_assignments(sets_b, "--set-b"))
    except ScenarioError as exc:
        raise ScenarioError("B", str(exc)) from None
    return sc_a, sc_b


def run(args: argparse.Namespace) -> int:
    from ..fidelity.band import with_band
    from ..run.report import run_json
    from ..simulate import simulate

    sc_a, sc_b = load_pair(args.a, args.b, args.set, args.set_b)
    # a and b exactly as run --json prints them: expected_error (explorer/fidelity/band.py) and, for
    # a scenario with a run plan, run_total (explorer/run, issue 38).
    sides = []
    for sc in (sc_a, sc_b):
        res = simulate(sc)
        sides.append(with_band({**res.to_json_dict(), **run_json(res)}, sc))
    cmp = compare(*sides)
    out = cmp.to_json_dict()
    runs = run_delta(sides[0].get("run_total"), sides[1].get("run_total"))
    if runs:
        out["delta_run"] = runs
    served = serving_delta(sides[0].get("inference"), sides[1].get("inference"))
    if served:
        out["delta_inference"] = served
    try:
        text = json.dumps(out, allow_nan=False)
    except ValueError:
        raise InternalError("the simulation produced a non-finite number") from None
    if args.json:
        print(text)
    else:
        b_label = (f"A + {', '.join(args.set_b)}" if args.b is None and args.set_b
                   else "A" if args.b is None else sc_b.name)
        print(diff_text(cmp, sc_a, sc_b, b_label) + run_text(sides[0].get("run_total"),
                                                            sides[1].get("run_total")))
    return 0


# What a served request sees, beside the decode step the cards compare (a hunt found a diff of
# chunked prefill reading "+0.0 %" while TTFT went 34.7 -> 64.9 ms and TPOT 26.41 -> 25.17 ms).
SERVING_KEYS = (("ttft_s", "TTFT", "ms"), ("tpot_s", "TPOT", "ms"),
                ("output_tokens_per_s_per_gpu", "tokens/s/GPU", ""), ("requests_per_s", "requests/s", ""),
                ("max_batch", "max batch", "n"))


def serving_delta(a: dict | None, b: dict | None) -> dict[str, dict[str, float]]:
    """``{key: {a, b, delta}}`` of the served figures (:data:`SERVING_KEYS`) when both sides serve."""
    if not a or not b:
        return {}
    return {k: {"a": a[k], "b": b[k], "delta": b[k] - a[k]} for k, _, _ in SERVING_KEYS}


def _served(v: float, unit: str, signed: bool = False) -> str:
    sign = "+" if signed else ""
    if unit == "ms":
        return f"{v * 1e3:{sign},.2f} ms"
    return f"{v:{sign},.0f}" if unit == "n" else f"{v:{sign},.2f}"


def serving_text(a: dict | None, b: dict | None) -> list[str]:
    """The served figures side by side (empty unless both sides serve)."""
    deltas = serving_delta(a, b)
    lines = []
    for k, label, unit in SERVING_KEYS if deltas else ():
        d = deltas[k]
        rel = f"  ({d['delta'] / d['a']:+.1%})" if d["a"] else ""
        lines.append(f"  {label:<16} {_served(d['a'], unit):>14} {_served(d['b'], unit):>14} "
                     f"{_served(d['delta'], unit, True):>14}{rel}")
    return lines


def run_text(a: dict | None, b: dict | None) -> str:
    """The two run plans side by side (issue 38, "compare two run plans by days and GPU-hours"), or
    one line saying which side has none; empty when neither has a run plan."""
    if not a and not b:
        return ""
    if not a or not b:
        return f"\n\n  whole run: only {'B' if b else 'A'} has a run plan (training.phases or total_tokens)"

    lines = ["", "", f"  {'whole run':<16} {'A':>14} {'B':>14} {'B - A':>14}"]
    for k, label in RUN_KEYS:
        d = run_delta(a, b)[k]
        rel = f"  ({d / a[k]:+.1%})" if d is not None and k != "goodput" and a[k] else ""
        sides = f"{run_value(k, a.get(k)):>14} {run_value(k, b.get(k)):>14} {run_value(k, d, True):>14}"
        lines.append(f"  {label:<16} {sides}{rel}")
    said = loss_line(a, b)
    if said:
        lines.append(f"  {said}")
    return "\n".join(lines)


def _unit(cmp: Comparison) -> tuple[float, str]:
    longest = max(cmp.a["iteration_time_s"], cmp.b["iteration_time_s"])
    return (1e3, "ms") if longest < 10 else (1.0, "s")


def _seconds(v: float, scale: float, unit: str, signed: bool = False) -> str:
    """A time in the comparison's unit: ms with one decimal, or s with three."""
    sign = "+" if signed else ""
    return f"{v * scale:{sign},.1f} {unit}" if unit == "ms" else f"{v:{sign},.3f} s"


def _layout(sc: Scenario) -> str:
    """``sc``'s layout in one line: a training step's degrees, schedule, ZeRO and micro-batches, or
    a serving scenario's replicas and batch as run says them (it refuses those training fields)."""
    if sc.inference is not None:
        inf = sc.inference
        batch = (f"at most {inf.batch:,} decoding per replica, arriving at {inf.arrival_rate:,.4g}/s"
                 if inf.arrival_rate is not None else f"batch {inf.batch:,} per replica")
        return f"{gpu_summary(sc)} · serving: {serving_layout(sc)}; {batch}"
    p = sc.parallelism
    return (f"{gpu_summary(sc)} · tp {p.tp} · pp {p.pp} · dp {sc.dp} · cp {p.cp} · "
            f"ep {p.ep} · vpp {p.vpp} · {p.schedule} · ZeRO {p.zero} · {sc.micro_batches} micro-batches")


def _card(key: str, v: float, scale: float, unit: str, signed: bool = False) -> str:
    sign = "+" if signed else ""
    if key in ("iteration_time_s", "time_per_step_s"):
        return _seconds(v, scale, unit, signed)
    if key in ("mfu", "bubble_fraction"):
        return f"{v * 100:{sign}.1f} pt" if signed else f"{v:.1%}"
    if key == "memory_GB_total":
        return f"{v:{sign}.1f} GB"
    if key == "tflops_per_gpu":
        return figure(v, 1, signed, small=1.0)
    return figure(v, signed=signed)


def diff_text(cmp: Comparison, sc_a: Scenario, sc_b: Scenario, b_label: str) -> str:
    """The readable form: both scenarios, their cards side by side with B - A, memory by kind,
    and the waterfall of the difference."""
    scale, unit = _unit(cmp)
    lines = [f"A  {one_line(sc_a.name)}", f"   {_layout(sc_a)}",
             f"B  {one_line(b_label)}", f"   {_layout(sc_b)}", "",
             f"  {'':<16} {'A':>14} {'B':>14} {'B - A':>14}"]
    for d in cmp.metrics:
        points = d.key in ("mfu", "bubble_fraction")        # shares: their difference in points
        rel = f"  ({d.relative:+.1%})" if d.relative is not None and not points else ""
        a, b = _card(d.key, d.a, scale, unit), _card(d.key, d.b, scale, unit)
        change = _card(d.key, d.delta, scale, unit, signed=True)
        lines.append(f"  {d.label:<16} {a:>14} {b:>14} {change:>14}{rel}")
    lines += serving_text(cmp.a.get("inference"), cmp.b.get("inference"))
    lines += [f"  {one_line(x)}" for x in over_memory_sentences(cmp.a, cmp.b)]
    lines += ["", "  memory per GPU, fullest stage (GB):"]
    for d in cmp.memory_GB:
        lines.append(f"    {d.label:<12} {d.a:>10.2f} {d.b:>10.2f} {d.delta:>+10.2f}")
    lines += ["", f"  where the difference goes (B - A = {_seconds(cmp.difference_s, scale, unit, True)}; "
                  "each side's busiest stage):"]
    # Replicas that synchronise every few steps: the categories are the inner step's, the outer
    # sync is amortised into the time per step only (a hunt read "+0.0 ms" under a table whose
    # time per step moved -45.8 ms).
    sync = [(cmp.a, "A"), (cmp.b, "B")]
    outer = {side: step_seconds(j) - j["iteration_time_s"] for j, side in sync if per_step(j)}
    if outer:
        each = ", ".join(f"{side} {_seconds(v, scale, unit)}" for side, v in outer.items())
        lines[-1] = (f"  where the inner step's difference goes (B - A = "
                     f"{_seconds(cmp.difference_s, scale, unit, True)}; each side's busiest stage; the outer "
                     f"synchronisation amortised per step, {each}, is in the time per step only):")
    lines += waterfall_lines(waterfall_steps(cmp), scale, unit)
    return "\n".join(lines)


def waterfall_lines(steps: Sequence[Step], scale: float, unit: str,
                    width: int = WATERFALL_WIDTH) -> list[str]:
    """The waterfall as text: A and B as ``#`` bars from the axis start, each category as a
    segment from the running total before it to the one after it (``+`` adds time, ``-`` saves
    it).  The axis starts below the lowest running total by as much as the totals span, so the
    changes fill at least half of it; the last line gives its range."""
    path, running = [], 0.0
    for s in steps:
        running = s.value_s if s.measure != "relative" else running + s.value_s
        path.append(running)
    lo_path, hi = min(path), max(path)
    lo = max(0.0, lo_path - max(hi - lo_path, 0.05 * hi))
    span = (hi - lo) or 1.0

    def col(x: float) -> int:
        return round((x - lo) / span * width)

    out, before = [], 0.0
    for s, after in zip(steps, path, strict=True):
        if s.measure == "relative":
            a, b = sorted((col(before), col(after)))
            bar = " " * a + ("+" if s.value_s > 0 else "-") * max(1, b - a)
            value = _seconds(s.value_s, scale, unit, signed=True)
        else:
            bar = "#" * max(1, col(after))
            value = _seconds(s.value_s, scale, unit)
        out.append(f"    {s.label:<10} {value:>14}  |{bar}")
        before = after
    out.append(f"    {'':<10} {'':>14}  axis {_seconds(lo, scale, unit)} .. {_seconds(hi, scale, unit)}")
    return out
