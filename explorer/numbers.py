"""How the outputs (``run``, ``diff``, the HTML report, figures) print a rate or a duration: fixed
decimals in a fixed unit round small values away — a full-graph GNN's 0.121 partition passes per
second printed as "0", a DLRM's step as "0.00363 s" — so they keep three significant digits, in the
unit that reads best."""
from __future__ import annotations

from collections.abc import Iterable


def figure(x: float, places: int = 0, signed: bool = False, small: float = 100.0) -> str:
    """``x`` with thousands separators and ``places`` decimals; below ``small`` in magnitude (and not
    0) with three significant digits (0.121, 7.87, 12.9), as the app's cards print rates.
    ``signed``: a leading + on positive values (a difference)."""
    sign = "+" if signed else ""
    if x != 0 and abs(x) < small:
        return f"{x:{sign}.3g}"
    return f"{x:{sign},.{places}f}"


def seconds_text(s: float) -> str:
    """A duration with three significant digits in the unit that reads best: ``3.63 ms`` below a
    second, ``12.3 s`` from one (a DLRM's 0.00363 s labels ran into one another)."""
    if abs(s) < 0.9995:                  # below what rounds to 1,000 ms
        return f"{s * 1e3:.3g} ms"
    return f"{s:.3g} s" if abs(s) < 999.5 else f"{s:,.0f} s"


def time_scale(values: Iterable[float]) -> tuple[float, str]:
    """``(factor, unit)`` for an axis or colour scale of durations ``values`` (seconds): milliseconds
    when every one is below a second, else seconds."""
    vals = [abs(v) for v in values if v == v]            # NaN: an empty cell
    return (1e3, "ms") if vals and max(vals) < 1 else (1.0, "s")

