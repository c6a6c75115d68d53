"""Issue 39 item 4: the app's Scenario & files tab offers the HTML report of the scenario on
screen — the very file ``python -m explorer report`` writes for it, with the app's share link."""
from __future__ import annotations

import pytest
import streamlit.testing.v1.app_test as app_test_module
from streamlit.runtime.media_file_manager import MediaFileManager

from explorer.cli import load_scenario
from explorer.report import inputs_of_result, report_html
from explorer.simulate import simulate

from app_support import run_app
from report_support import parse_report

LABEL = "Download report (HTML)"


class _Recording(MediaFileManager):
    """AppTest's media manager, remembered so a deferred download's callable can be called."""

    made: list[MediaFileManager] = []

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        _Recording.made.append(self)


def downloaded(monkeypatch, **query) -> tuple[str, str]:
    """The report button's file (made as a click makes it) and the address bar's share link."""
    _Recording.made.clear()
    monkeypatch.setattr(app_test_module, "MediaFileManager", _Recording)
    at = run_app(view="scenario", **query)
    buttons = [b for b in at.get("download_button") if b.label == LABEL]
    assert len(buttons) == 1, [b.label for b in at.get("download_button")]
    file_id = buttons[0].proto.deferred_file_id      # made on click only, not on every rerun
    assert file_id
    mgr = _Recording.made[-1]
    html = mgr._deferred_callables[file_id]["callable"]()
    return html, at.session_state["_share_link"]


@pytest.mark.parametrize("query,sets", [
    ({"scenario": "teaching-8gpu"}, []),
    ({"scenario": "teaching-8gpu", "parallelism.zero": "1", "training.global_batch": "64"},
     ["parallelism.zero=1", "training.global_batch=64"]),
])
def test_the_button_downloads_the_report_of_the_current_scenario(monkeypatch, query, sets):
    html, link = downloaded(monkeypatch, **query)
    sc = load_scenario(query["scenario"], sets)
    # Byte for byte what the CLI's builder makes of a fresh simulation, given the app's link.
    assert html == report_html(inputs_of_result(simulate(sc), link))
    r = parse_report(html)
    assert r.link == link and "scenario=teaching-8gpu" in link
    assert ("parallelism.zero=1" in link) == bool(sets)
    assert r.run_json["parallelism"]["zero"] == (1 if sets else sc.parallelism.zero)
    assert len(r.plotly_divs) == 6


def test_a_scenario_too_large_for_the_trace_download_still_offers_the_report(monkeypatch):
    """The report is bounded (the Gantt at most figures/of_run.MAX_BARS bars) and built from the
    cached view: offered where the per-layer trace and CSV are refused."""
    html, _ = downloaded(monkeypatch, scenario="teaching-8gpu", **{"model.layers": "100000",
                                                                    "training.global_batch": "16"})
    r = parse_report(html)
    assert sum(r.run_json["stage_layers"]) == 100000 and "layers: 100000" in r.yaml
    assert len(html) < 8e6 and r.plotly_divs[0] == "chart-gantt"
