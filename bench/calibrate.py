"""The fidelity report: every published reference row next to the simulator's prediction.

Run: python bench/calibrate.py [--markdown] [--regimes] [--write-bands]
Groups: training runs (Megatron-LM SC21 Table 1 and the sourced rows of
explorer/data/reference/training_runs.csv, explorer/fidelity/training.py), collectives
(explorer.fidelity.collectives) and GEMMs (explorer.fidelity.kernels), when those modules exist.
Each row shows measured, predicted, error and role (calibration rows are the ones default constants
may be fitted to; validation rows never are); then mean and max |error| per group and per role;
then the training runs by regime (GPU generation, context length, framework, precision, dense/MoE,
scale; explorer/fidelity/bands.py), calibration and validation apart.
--markdown prints the rows and the by-regime table as Markdown (the README's fidelity section);
--regimes prints only the by-regime table (with --markdown: as Markdown);
--write-bands writes explorer/data/reference/error_bands.csv, the per-regime validation errors every
``run`` reports as ``expected_error`` (explorer/fidelity/band.py), the README's by-regime table and
the report at the end of docs/fidelity.md: rerun it after a model change (tests/test_error_band.py
fails until then).
"""
from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from explorer.fidelity.bands import regime_markdown, regime_text, with_readme_table, write_table  # noqa: E402
from explorer.fidelity.report import ROLES, ReferenceRow, summary  # noqa: E402
from explorer.fidelity.training import training_reference_rows  # noqa: E402

DOCS_TABLE = "| group | setup | measured |"      # where docs/fidelity.md's generated report starts


def _optional(module: str, function: str) -> Callable[[], list[ReferenceRow]] | None:
    """A reference-row producer of a module being written by another area, if it exists yet."""
    try:
        mod = __import__(module, fromlist=[function])
    except ImportError:
        return None
    return getattr(mod, function, None)


def all_rows() -> tuple[list[ReferenceRow], list[str], int]:
    """Every reference row (the training runs first), the producers that are not available yet, and
    how many of the rows are training runs."""
    rows = training_reference_rows()
    training = len(rows)
    missing = []
    for module, function in (("explorer.fidelity.collectives", "collective_reference_rows"),
                             ("explorer.fidelity.kernels", "gemm_reference_rows"),
                             ("explorer.fidelity.moe_dispatch", "dispatch_reference_rows")):
        produce = _optional(module, function)
        if produce is None:
            missing.append(f"{module}.{function}")
        else:
            rows += produce()
    return rows, missing, training


def _groups(rows: list[ReferenceRow]) -> dict[str, list[ReferenceRow]]:
    out: dict[str, list[ReferenceRow]] = {}
    for r in rows:
        out.setdefault(r.group, []).append(r)
    return out


def _fmt(x: float) -> str:
    return f"{x:.3f}" if abs(x) < 10 else f"{x:,.1f}"


def text_report(rows: list[ReferenceRow], training: int = 0) -> str:
    """The rows by group with each group's summary, then by role; ``training``: how many of the
    first rows are training runs (summarised together too: the README's "Training runs" figures)."""
    lines = []
    for group, mine in _groups(rows).items():
        lines.append(f"\n{group}  [{mine[0].unit}]")
        lines.append(f"  {'setup':<46} {'measured':>11} {'predicted':>11} {'error':>8}  role")
        for r in mine:
            lines.append(f"  {r.label:<46} {_fmt(r.measured):>11} {_fmt(r.predicted):>11} {r.error:>+8.1%}  "
                         f"{r.role}")
        mean, worst, n = summary(mine)
        lines.append(f"  -> {n} rows: mean |error| {mean:.1%}, max {worst:.1%}")
        # Per role too: a group's validation rows were never fitted to, so they are reported apart.
        for role in ROLES:
            mean, worst, n = summary(mine, role)
            if n:
                lines.append(f"     {role:<12} {n:3d} rows: mean |error| {mean:.1%}, max {worst:.1%}")
    if training:
        lines.append("\nTraining runs (every training group above), by role:")
        for role in ROLES:
            mean, worst, n = summary(rows[:training], role)
            lines.append(f"  {role:<12} {n:3d} rows: mean |error| {mean:.1%}, max {worst:.1%}")
        lines.append(regime_text(rows[:training]))
    lines.append("\nBy role:")
    for role in ROLES:
        mean, worst, n = summary(rows, role)
        lines.append(f"  {role:<12} {n:3d} rows: mean |error| {mean:.1%}, max {worst:.1%}")
    return "\n".join(lines)


def markdown_report(rows: list[ReferenceRow], training: int = 0) -> str:
    lines = ["| group | setup | measured | predicted | error | role | source |",
             "|---|---|---|---|---|---|---|"]
    for group, mine in _groups(rows).items():
        for r in mine:
            lines.append(f"| {group} | {r.label} | {_fmt(r.measured)} {r.unit} | {_fmt(r.predicted)} | "
                         f"{r.error:+.1%} | {r.role} | {r.source} |")
    lines += ["", "| group | rows | mean \\|error\\| | max \\|error\\| |", "|---|---|---|---|"]
    for group, mine in _groups(rows).items():
        mean, worst, n = summary(mine)
        lines.append(f"| {group} | {n} | {mean:.1%} | {worst:.1%} |")
    for role in ROLES:
        mean, worst, n = summary(rows, role)
        lines.append(f"| all {role} rows | {n} | {mean:.1%} | {worst:.1%} |")
    if training:
        lines += ["", "Training runs by regime:", "", regime_markdown(rows[:training])]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--markdown", action="store_true", help="print the table as Markdown (docs/fidelity.md)")
    ap.add_argument("--regimes", action="store_true", help="print only the training runs by regime")
    ap.add_argument("--write-bands", action="store_true",
                    help="write explorer/data/reference/error_bands.csv (run --json's expected_error)")
    args = ap.parse_args(argv)
    rows, missing, training = all_rows()
    if args.write_bands:
        n = write_table(rows[:training])
        readme = ROOT / "README.md"
        text = with_readme_table(readme.read_text(encoding="utf-8"), rows[:training])
        readme.write_text(text, encoding="utf-8")
        # docs/fidelity.md ends with the whole report as Markdown: rewrite it from its first row on.
        docs = ROOT / "docs" / "fidelity.md"
        text = docs.read_text(encoding="utf-8")
        text = text[:text.index(DOCS_TABLE)] + markdown_report(rows, training) + "\n"
        docs.write_text(text, encoding="utf-8")
        print(f"wrote {n} regimes to explorer/data/reference/error_bands.csv, the README's table and "
              "docs/fidelity.md's report")
        return
    if args.regimes:
        print(regime_markdown(rows[:training]) if args.markdown else regime_text(rows[:training]))
        return
    print(markdown_report(rows, training) if args.markdown else text_report(rows, training))
    for name in missing:
        print(f"\n(not yet available: {name})", file=sys.stderr)


if __name__ == "__main__":
    main()
