"""Two run plans side by side (issue 38, "compare two run plans (A/B) by days and GPU-hours"): the
figures compared and B - A of two ``run_total`` objects (run --json's), shared by ``diff`` and the
app's Compare view."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .convergence import CITATION, days_to_reach

# (key of run_total, label), in the order they are shown.
RUN_KEYS = (("days", "Days"), ("gpu_hours", "GPU-hours"), ("goodput", "Goodput"),
            ("energy_MWh", "Energy (MWh)"))


def run_delta(a: Mapping[str, Any] | None, b: Mapping[str, Any] | None) -> dict[str, float | None]:
    """B - A of two run plans' totals (None where a side has no figure, e.g. energy of a GPU without
    a power figure); empty unless both scenarios have a run plan."""
    if not a or not b:
        return {}
    out: dict[str, float | None] = {k: None if a.get(k) is None or b.get(k) is None else b[k] - a[k]
                                    for k, _ in RUN_KEYS}
    la, lb = a.get("loss_estimate"), b.get("loss_estimate")
    if la and lb:
        # The days B needs to make A's progress towards its loss (run/convergence.py, first order):
        # "B is faster per step" and "B reaches the same loss later" side by side.
        days = days_to_reach(b["days"], lb["equivalent_tokens"], la["equivalent_tokens"])
        out["b_days_to_a_loss"] = days
        out["b_days_to_a_loss_vs_a"] = days / a["days"] - 1 if a["days"] > 0 else None
    return out


def run_value(key: str, v: float | None, signed: bool = False) -> str:
    """One figure as both views print it: days and energy with two decimals, GPU-hours in
    millions, goodput in percent (its difference in points)."""
    sign = "+" if signed else ""
    if v is None:
        return "unknown"
    if key == "goodput":
        return f"{v * 100:{sign}.2f} pt" if signed else f"{v:.2%}"
    if key == "gpu_hours":
        return f"{v / 1e6:{sign},.3f}M"
    return f"{v:{sign},.2f}"


def loss_line(a: Mapping[str, Any], b: Mapping[str, Any]) -> str | None:
    """B's days to A's loss in one line (an estimate from the literature), or None unless both
    run plans estimate their loss."""
    d = run_delta(a, b)
    if "b_days_to_a_loss" not in d or d["b_days_to_a_loss"] is None:
        return None
    rel = d.get("b_days_to_a_loss_vs_a")
    ra, rb = a["loss_estimate"], b["loss_estimate"]
    return (f"B reaches A's loss in {d['b_days_to_a_loss']:,.2f} days"
            + (f" ({rel:+.1%} vs A)" if rel is not None else "")
            + f": data efficiency {ra['data_efficiency']:.1%} (A), {rb['data_efficiency']:.1%} (B) — an "
              f"estimate from the literature ({CITATION})")
