"""A sweep of a serving scenario as its users read it (``sweep SERVING --full``): per combination
TTFT, TPOT, output tokens/s per GPU, requests/s (within the latency target when one is set) and
the largest batch memory allows, instead of a training step's iteration and MFU; the best layout
is the one that serves the most output tokens/s per GPU with its batch in memory — or, with a
target, the most requests/s within it.  E.g. how a model's heads (tp) and layers (pp) are spread
over the chips of serve-3d-dram."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..config.schema import one_line

FIGURES = ("ttft_s", "tpot_s", "output_tokens_per_s_per_gpu", "requests_per_s", "max_batch",
           "requests_per_s_at_target")


def is_serving(points: Sequence[Any]) -> bool:
    """Whether the sweep's valid rows are a serving scenario's (they carry ``inference``)."""
    return any("inference" in p.figures for p in points if p.valid)


def _fits(f: Mapping[str, Any]) -> bool:
    inf = f["inference"]
    return bool(f["fits"]) and inf.get("max_batch", 0) >= inf.get("batch", 0)


def _score(f: Mapping[str, Any]) -> float:
    inf = f["inference"]
    return float(inf["requests_per_s_at_target"] if "requests_per_s_at_target" in inf
                 else inf["output_tokens_per_s_per_gpu"])


def table(points: Sequence[Any], keys: Sequence[str], widths: Sequence[int], head: str) -> list[str]:
    """The header and one line per combination."""
    target = any("requests_per_s_at_target" in p.figures.get("inference", {}) for p in points if p.valid)
    lines = [f"{head}  {'TTFT':>9}  {'TPOT':>9}  {'tok/s/GPU':>9}  {'req/s':>8}"
             + (f"  {'at target':>9}" if target else "") + f"  {'max batch':>9}  fits"]
    for p in points:
        values = "  ".join(f"{one_line(str(p.overrides[k])):>{w}}" for k, w in zip(keys, widths, strict=True))
        if not p.valid:
            lines.append(f"{values}  invalid: {one_line(p.reason or '')}")
            continue
        f = p.figures["inference"]
        lines.append(f"{values}  {f['ttft_s'] * 1e3:>6.1f} ms  {f['tpot_s'] * 1e3:>6.2f} ms  "
                     f"{f['output_tokens_per_s_per_gpu']:>9,.0f}  {f['requests_per_s']:>8,.2f}"
                     + (f"  {f.get('requests_per_s_at_target', 0.0):>9,.2f}" if target else "")
                     + f"  {f['max_batch']:>9,}  {'yes' if _fits(p.figures) else 'NO'}")
    return lines


def best_line(points: Sequence[Any]) -> str | None:
    """The layout that serves the most (module docstring), as the sweep's last line."""
    fit = [p for p in points if p.valid and "inference" in p.figures and _fits(p.figures)]
    if not fit:
        return None
    best = max(fit, key=lambda p: _score(p.figures))
    f = best.figures["inference"]
    what = (f"{f['requests_per_s_at_target']:,.2f} requests/s within the target"
            if "requests_per_s_at_target" in f else
            f"{f['output_tokens_per_s_per_gpu']:,.0f} output tokens/s per GPU "
            f"(TPOT {f['tpot_s'] * 1e3:,.2f} ms)")
    return ("serves the most that fits: " + what + " at "
            + ", ".join(f"{k}={one_line(str(v))}" for k, v in best.overrides.items())
            + (f"  (?{best.link})" if best.link else ""))


def csv_columns(f: Mapping[str, Any]) -> list[Any]:
    """A row's serving figures for ``sweep --csv`` (empty cells for an invalid row)."""
    inf = f.get("inference", {})
    return [inf.get(k, "") for k in FIGURES]
