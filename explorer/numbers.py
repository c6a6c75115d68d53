"""How the text outputs (``run``, ``diff``, the HTML report) print a throughput or a rate: fixed
decimals round small values away — a full-graph GNN's 0.121 partition passes per second printed
as "0" — so below a threshold three significant digits are printed instead."""
from __future__ import annotations


def figure(x: float, places: int = 0, signed: bool = False, small: float = 100.0) -> str:
    """``x`` with thousands separators and ``places`` decimals; below ``small`` in magnitude (and not
    0) with three significant digits (0.121, 7.87, 12.9), as the app's cards print rates.
    ``signed``: a leading + on positive values (a difference)."""
    sign = "+" if signed else ""
    if x != 0 and abs(x) < small:
        return f"{x:{sign}.3g}"
    return f"{x:{sign},.{places}f}"
