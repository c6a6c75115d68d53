"""Two run plans side by side (issue 38, "compare two run plans (A/B) by days and GPU-hours"): the
figures compared and B - A of two ``run_total`` objects (run --json's), shared by ``diff`` and the
app's Compare view."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# (key of run_total, label), in the order they are shown.
RUN_KEYS = (("days", "Days"), ("gpu_hours", "GPU-hours"), ("goodput", "Goodput"),
            ("energy_MWh", "Energy (MWh)"))


def run_delta(a: Mapping[str, Any] | None, b: Mapping[str, Any] | None) -> dict[str, float | None]:
    """B - A of two run plans' totals (None where a side has no figure, e.g. energy of a GPU without
    a power figure); empty unless both scenarios have a run plan."""
    if not a or not b:
        return {}
    return {k: None if a.get(k) is None or b.get(k) is None else b[k] - a[k] for k, _ in RUN_KEYS}


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
