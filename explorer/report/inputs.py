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
from ..fidelity.band import band_json, with_band
from ..figures.of_run import gantt_of
from ..result.memory_timeline import MemoryCurve, memory_timeline
from ..run.phases import has_run
from ..run.report import run_json, total_json
from ..run.total import run_total
from ..scenario import Scenario, ScenarioError


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
    """The report of a simulated ``Result`` (explorer/simulate.py), with its share link; its run
    JSON is ``run --json``'s (explorer/cli.result_json): the run plan's ``run_total`` included."""
    sc = res.scenario
    draw = gantt_of(res)
    names = tuple(c.name for c in res.classes)
    j = with_band({**res.to_json_dict(), **run_json(res)}, sc)
    return ReportInputs(sc, j, draw.fig, names, names[res.breakdown_class],
                        tuple(m.as_GB() for m in res.memory_by_class), tuple(memory_timeline(res)),
                        draw.fold, dict(res.utilisation), to_yaml(sc), link)


def with_run(j: Mapping[str, Any], sc: Scenario) -> Mapping[str, Any]:
    """A run JSON ``j`` of ``sc`` completed with ``run_total`` as ``run --json`` prints it, when
    ``sc`` has a run plan and ``j`` lacks it: the app's view cache holds the one iteration's JSON
    only, and its report is to be the very file the CLI writes.  The phases are simulated here,
    once per report; the expected-error keys stay last, where ``run --json`` puts them."""
    if "run_total" in j or not has_run(sc):
        return j
    from ..simulate import simulate  # deferred: the CLI's path never gets here
    band = band_json(sc)
    try:
        total = run_total(sc, simulate)
    except ScenarioError:
        return j         # a plan that cannot run (goodput 0): the app's Run tab says why
    extra = total_json(total, j["warnings"], j["warning_kinds"])
    return {**{k: v for k, v in j.items() if k not in band}, **extra, **band}
