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

from app_support import qp, run_app
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


def _synthetic_upload(tmp_path, sets):
    """A trace of teaching-8gpu simulated with ``sets`` (tests/trace_synth.py), as an upload."""
    from trace_synth import write_trace
    path = tmp_path / "rank0.json.gz"
    write_trace(path, load_scenario(SCENARIO, sets))
    return [(path.name, path.read_bytes(), "application/gzip")]


def _lane_rows(at) -> dict[str, float]:
    """Row label -> summed bar length (ms) of the overlay's lanes chart."""
    (chart,) = [c for c in at.get("plotly_chart") if "trace_overlay_lanes" in c.proto.id]
    fig = json.loads(chart.proto.spec)
    out: dict[str, float] = {}
    for tr in fig["data"]:
        for y, x in zip(tr["y"], tr["x"], strict=True):
            out[y] = out.get(y, 0.0) + x
    return out


@pytest.mark.slow
def test_the_lanes_chart_and_the_fit_apply_the_traces_constants(capsys, tmp_path):
    """Lanes: the measured and simulated rows of a trace of the scenario itself have the same
    busy time.  Fit: on a trace made at 55 % GEMM efficiency and 250 GB/s NVLink, the fit finds
    them; applying them makes the view's iteration the trace's."""
    truth = ["hardware.compute_efficiency=0.55", "cluster.scale_up.bandwidth_GBps=250"]
    assert main(["run", SCENARIO, "--json", *[x for s in truth for x in ("--set", s)]]) == 0
    want = json.loads(capsys.readouterr().out)["iteration_time_s"]
    at = run_app(scenario=SCENARIO, view="scenario")
    at.file_uploader(key="_trace_files").set_value(_synthetic_upload(tmp_path, [])).run()
    assert not at.exception, [e.value for e in at.exception]
    rows = _lane_rows(at)
    for lane in ("compute", "dp", "pp"):
        assert rows[f"measured · {lane}"] == pytest.approx(rows[f"simulated · {lane}"], rel=1e-3), lane
    at.file_uploader(key="_trace_files").set_value(_synthetic_upload(tmp_path, truth)).run()
    at.button(key="_trace_fit_button").click().run()
    assert not at.exception, [e.value for e in at.exception]
    (fields,) = [d.value for d in at.dataframe if "fitted" in d.value.columns and "field" in d.value.columns]
    got = dict(zip(fields["field"], fields["fitted"], strict=True))
    assert got == pytest.approx({"hardware.compute_efficiency": 0.55, "cluster.scale_up.bandwidth_GBps": 250},
                                rel=0.01)
    at.button(key="_trace_fit_apply").click().run()
    assert not at.exception, [e.value for e in at.exception]
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Simulated iteration"] == f"{want * 1e3:.2f} ms"
    # The share link carries them: it reopens the calibrated view.
    link = {k: qp(at, k) for k in at.query_params}
    assert float(link["hardware.compute_efficiency"]) == pytest.approx(0.55, rel=0.01)
    assert float(link["cluster.scale_up.bandwidth_GBps"]) == pytest.approx(250, rel=0.01)
    again = run_app(**link)
    assert {m.label: m.value for m in again.metric}["Iteration time"] == metrics["Iteration time"]
