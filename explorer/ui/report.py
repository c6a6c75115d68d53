"""The HTML report of the scenario on screen (explorer/report), built from the app's cached view
— the same figures the tabs draw, no second simulation — with the address bar's share link."""
from __future__ import annotations

from ..report import ReportInputs, report_html
from .cache import ViewData


def report_of_view(data: ViewData, link: str) -> str:
    """The report ``python -m explorer report`` writes for this scenario, as one HTML string."""
    return report_html(ReportInputs(data.scenario, data.json, data.gantt, data.names, data.breakdown_name,
                                    data.memory, data.memory_curves, data.fold, data.utilisation, data.yaml,
                                    link))
