"""What an HTML report shows of one run, as a record both the CLI and the app fill.

The app keeps a scenario's figures in its view cache (explorer/ui/cache.py: no task list); the CLI
has the simulated ``Result``.  Both give the same record here, so a report downloaded from the app
and one written by ``python -m explorer report`` are drawn by the same code from the same numbers.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import plotly.graph_objects as go

from ..config.loading import to_yaml
from ..fidelity.band import with_band
from ..figures.of_run import gantt_of
from ..result.memory_timeline import MemoryCurve, memory_timeline
from ..scenario import Scenario


@dataclass(frozen=True)
class ReportInputs:
    """One run's report: its scenario, the run JSON exactly as ``run --json`` prints it
    (expected_error included), the Gantt as drawn, the per-class memory (GB by kind) and names,
    the memory curves and the Gantt's fold, the per-tier utilisation, the YAML and the share link."""

    scenario: Scenario
    run_json: Mapping[str, Any]
    gantt: go.Figure
    class_names: tuple[str, ...]
    breakdown_name: str
    memory_GB: tuple[Mapping[str, float], ...]
    memory_curves: tuple[MemoryCurve, ...]
    fold: tuple[float, float, int, float] | None
    utilisation: Mapping[str, float]
    yaml: str
    link: str


def inputs_of_result(res: Any, link: str) -> ReportInputs:
    """The report of a simulated ``Result`` (explorer/simulate.py), with its share link."""
    sc = res.scenario
    draw = gantt_of(res)
    names = tuple(c.name for c in res.classes)
    return ReportInputs(sc, with_band(res.to_json_dict(), sc), draw.fig, names, names[res.breakdown_class],
                        tuple(m.as_GB() for m in res.memory_by_class), tuple(memory_timeline(res)),
                        draw.fold, dict(res.utilisation), to_yaml(sc), link)
