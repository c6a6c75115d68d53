"""The app's trace upload (Scenario & files tab): measured vs simulated per category.

streamlit.testing cannot drive a file uploader, so the page test checks the uploader is on the
tab, and the overlay is drawn by AppTest from a function with the fixture traces' comparison,
its table checked against import-trace's numbers."""
from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from streamlit.testing.v1 import AppTest

from explorer.cli import load_scenario, main
from explorer.config.schema import ScenarioError
from explorer.ui.views.trace_overlay import comparison_of

from app_support import run_app
from conftest import ROOT

DDP = ROOT / "tests" / "fixtures" / "traces" / "ddp"
SCENARIO = "teaching-8gpu"


def _data():
    """What comparison_of reads of a ViewData: the scenario and the run's summary."""
    sc = load_scenario(SCENARIO)
    assert main(["run", SCENARIO, "--json"]) == 0
    return sc


def _view(capsys):
    sc = _data()
    run = json.loads(capsys.readouterr().out)
    return SimpleNamespace(scenario=sc, summary=SimpleNamespace(iteration_time_s=run["iteration_time_s"],
                                                                breakdown_s=run["breakdown_s"]))


def _uploads():
    return [(p.name, p.read_bytes()) for p in sorted(DDP.glob("rank*.json.gz"))]


def test_uploaded_traces_give_import_traces_numbers(capsys):
    c = comparison_of(_view(capsys), _uploads())
    assert main(["import-trace", str(DDP), "--scenario", SCENARIO, "--json"]) == 0
    cli = json.loads(capsys.readouterr().out)
    got = c.to_json()
    assert got["iteration_time_s"] == pytest.approx(cli["iteration_time_s"], rel=1e-12)
    for k, v in cli["categories"].items():
        assert got["categories"][k] == pytest.approx(v, rel=1e-12)
    assert got["exposed_comm_s"] == pytest.approx(cli["exposed_comm_s"], rel=1e-12)


def test_a_bad_upload_is_one_line_naming_it(capsys):
    with pytest.raises(ScenarioError) as err:
        comparison_of(_view(capsys), [("notes.json", b"hello")])
    text = str(err.value)
    assert text.startswith("notes.json: ") and "\n" not in text and "tmp" not in text


def _overlay_script():
    import json as _json

    import streamlit as _st

    from explorer.traces.compare import Comparison as _C
    from explorer.traces.load import read_ranks as _read
    from explorer.traces.measure import Layout as _L
    from explorer.traces.measure import measure as _measure
    from explorer.ui.views.trace_overlay import show as _show
    args = _json.loads(_st.session_state["args"])
    m = _measure(_read(__import__("pathlib").Path(args["path"])), _L({"dp": 1}, {"dp": 2}))
    _show(_C(scenario="s", measured=m, simulated_iteration_s=args["sim_t"], simulated=args["sim"]))


def test_the_overlay_draws_measured_beside_simulated():
    at = AppTest.from_function(_overlay_script, default_timeout=60)
    at.session_state["args"] = json.dumps({"path": str(DDP), "sim_t": 0.05,
                                           "sim": {"compute": 0.04, "dp": 0.01}})
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Simulated iteration"] == "50.00 ms"
    table = at.dataframe[0].value
    rows = {r["category"]: r for r in table.to_dict("records")}
    assert rows["dp"]["simulated ms"] == pytest.approx(10.0)
    assert rows["dp"]["measured ms"] > 0
    measured_total = sum(r["measured ms"] for k, r in rows.items() if k != "exposed communication")
    assert float(metrics["Measured iteration"].split()[0]) == pytest.approx(measured_total, rel=0.01)
    assert any("of the measured iteration" in md.value for md in at.markdown)


def test_uploading_the_ddp_traces_on_the_scenario_tab_shows_import_traces_numbers(capsys):
    assert main(["import-trace", str(DDP), "--scenario", SCENARIO, "--json"]) == 0
    cli = json.loads(capsys.readouterr().out)
    at = run_app(scenario=SCENARIO, view="scenario")
    files = [(p.name, p.read_bytes(), "application/gzip") for p in sorted(DDP.glob("rank*.json.gz"))]
    at.file_uploader(key="_trace_files").set_value(files).run()
    assert not at.exception, [e.value for e in at.exception]
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Measured iteration"] == f"{cli['iteration_time_s']['measured'] * 1e3:.2f} ms"
    (table,) = [d.value for d in at.dataframe if "measured ms" in d.value.columns]
    rows = {r["category"]: r for r in table.to_dict("records")}
    assert rows["dp"]["measured ms"] == pytest.approx(cli["categories"]["dp"]["measured_s"] * 1e3)
    assert rows["dp"]["simulated ms"] == pytest.approx(cli["categories"]["dp"]["simulated_s"] * 1e3)


def test_a_bad_trace_upload_shows_one_line():
    at = run_app(scenario=SCENARIO, view="scenario")
    at.file_uploader(key="_trace_files").set_value([("notes.json", b"hello", "application/json")]).run()
    assert not at.exception
    errors = [e.value for e in at.error]
    assert any(e.startswith("notes.json: ") and "\n" not in e for e in errors), errors
