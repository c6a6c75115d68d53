"""Issue 39 item 4: ``python -m explorer report NAME --html FILE`` writes one self-contained HTML
file — the cards, every chart the app draws for the run, the scenario YAML and its share link —
whose numbers are ``run --json``'s and which loads nothing from the network."""
from __future__ import annotations

import json
from urllib.parse import parse_qsl, urlsplit

import pytest

from explorer.cli import load_scenario, main
from explorer.config.loading import to_yaml
from explorer.scenario import apply_overrides, from_dict
from explorer.share import parse_query, preset_raw
from explorer.simulate import simulate

from report_support import parse_report

# A transformer, a CNN (images/s) and a WAN run (two datacenters: the datacenter map too).
SCENARIOS = {
    "teaching-8gpu": ("gantt", "breakdown", "memory", "memory_timeline", "traffic", "topology"),
    "resnet50-cloud-dp": ("gantt", "breakdown", "memory", "memory_timeline", "traffic", "topology"),
    "two-datacenters": ("gantt", "breakdown", "memory", "memory_timeline", "traffic", "datacenters",
                        "topology"),
}
CARD_KEYS = ("iteration_time_s", "tokens_per_s", "mfu", "tflops_per_gpu", "bubble_fraction",
             "memory_GB.total", "expected_error")


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def run_json(capsys, *argv: str) -> dict:
    code, out, _ = cli(capsys, "run", *argv, "--json")
    assert code == 0
    return json.loads(out)


def write_report(capsys, tmp_path, *argv: str) -> str:
    path = tmp_path / "report.html"
    code, out, err = cli(capsys, "report", *argv, "--html", str(path))
    assert code == 0, err
    assert out.startswith("wrote ") and err == ""
    return path.read_text(encoding="utf-8")


def dotted(j: dict, key: str):
    for part in key.split("."):
        j = j[part]
    return j


@pytest.mark.parametrize("name", SCENARIOS)
def test_report_holds_every_chart_the_cards_the_yaml_and_the_link(capsys, tmp_path, name):
    html = write_report(capsys, tmp_path, name)
    r = parse_report(html)
    expected = SCENARIOS[name]
    assert tuple(r.charts) == expected
    # One Plotly div per chart, and Plotly's bundle inlined exactly once (the other charts reuse it).
    assert r.plotly_divs == [f"chart-{k}" for k in expected]
    assert html.count("Plotly.newPlot(") >= len(expected)
    assert html.count("plotly.js v") <= 2, "the bundle's banner: inlined once"   # (banner + license line)
    # Nothing from the network: no script src, no stylesheet or font link.
    assert r.scripts_with_src == [] and r.links_with_href == []
    # The numbers are exactly run --json's (same floats, not rounded text).
    j = run_json(capsys, name)
    assert r.run_json == j
    for key in CARD_KEYS:
        assert r.cards[key] == dotted(j, key), key
    unit = "Images/s" if name.startswith("resnet") else "Tokens/s"
    assert unit in r.card_labels
    assert r.yaml == to_yaml(load_scenario(name))
    assert r.link == f"http://localhost:8501/?scenario={name}"


def test_report_of_an_overridden_scenario_links_to_it(capsys, tmp_path):
    """--set changes the run, the cards and the link; the link, opened as the app opens it, gives
    the same scenario and so the same iteration time."""
    sets = ("--set", "parallelism.zero=1", "--set", "training.global_batch=64")
    r = parse_report(write_report(capsys, tmp_path, "teaching-8gpu", *sets,
                                  "--base-url", "https://explorer.example.org/app/"))
    j = run_json(capsys, "teaching-8gpu", *sets)
    assert r.cards["iteration_time_s"] == j["iteration_time_s"]
    assert r.run_json["parallelism"]["zero"] == 1
    parts = urlsplit(r.link)
    assert f"{parts.scheme}://{parts.netloc}{parts.path}" == "https://explorer.example.org/app/"
    query = dict(parse_qsl(parts.query))
    assert query["parallelism.zero"] == "1" and query["training.global_batch"] == "64"
    view = parse_query(query)
    assert not view.warnings
    res = simulate(from_dict(apply_overrides(preset_raw(view.scenario), view.overrides)))
    assert res.iteration_time_s == j["iteration_time_s"]


def test_report_of_a_scenario_file_outside_scenarios(capsys, tmp_path):
    """A file the app does not ship: the link is the default preset plus every field that differs."""
    src = tmp_path / "mine.yaml"
    src.write_text(to_yaml(load_scenario("teaching-8gpu", ["model.layers=16"])), encoding="utf-8")
    r = parse_report(write_report(capsys, tmp_path, str(src)))
    query = dict(parse_qsl(urlsplit(r.link).query))
    view = parse_query(query)
    assert not view.warnings
    res = simulate(from_dict(apply_overrides(preset_raw(view.scenario), view.overrides)))
    expected = run_json(capsys, str(src))["iteration_time_s"]
    assert res.iteration_time_s == r.cards["iteration_time_s"] == expected


@pytest.mark.parametrize(("name", "sets"), [
    ("gnn-sage-papers100m", ["model.gnn.features=64"]), ("serve-deepseek-v3-disaggregated", []),
    ("pipedream-gnmt16", ["cluster.scale_out.nic_Gbps=25"]), ("dlrm-dcnv2", ["model.dlrm.tables=13"])])
def test_a_file_of_another_family_links_against_a_shipped_scenario_of_its_own(capsys, tmp_path, name, sets):
    """A user's file of another family was written against teaching-8gpu: the transformer's fields
    stayed and a copied gnn-sage-papers100m reopened at 844.6 s instead of 12.9 ms.  Now the link
    starts from the nearest shipped scenario of the family (share_reference.closest_preset) and
    reopens the same scenario field for field."""
    src = tmp_path / "mine.yaml"
    mine = load_scenario(name, sets)
    src.write_text(to_yaml(mine), encoding="utf-8")
    r = parse_report(write_report(capsys, tmp_path, str(src)))
    view = parse_query(dict(parse_qsl(urlsplit(r.link).query)))
    assert not view.warnings and view.scenario == name
    back = from_dict(apply_overrides(preset_raw(view.scenario), view.overrides))
    assert simulate(back).iteration_time_s == simulate(mine).iteration_time_s


def test_a_serving_report_shows_the_serving_cards(capsys, tmp_path):
    """A serving scenario's report showed a decode step as "Iteration time" and a 0 % bubble
    under "1f1b · ZeRO 1": its cards are now the app's serving cards, read from run --json."""
    html = write_report(capsys, tmp_path, "serve-llama3-70b-tp8")
    r = parse_report(html)
    j = run_json(capsys, "serve-llama3-70b-tp8")
    assert r.card_labels[:6] == ["TTFT", "TPOT", "Output tokens/s per GPU", "Requests/s", "KV cache per GPU",
                                 "Max batch"]
    assert "Bubble" not in r.card_labels and "Iteration time" not in r.card_labels
    for key in ("inference.ttft_s", "inference.tpot_s", "inference.requests_per_s"):
        assert r.cards[key] == dotted(j, key), key
    assert "ZeRO" not in html.split('<div class="cards">')[0]
    # A disaggregated deployment names its two pools (it read "tp 1 · pp 1 · ep 1").
    head = write_report(capsys, tmp_path, "serve-deepseek-v3-disaggregated").split('<div class="cards">')[0]
    assert "prefill 64 GPUs (64 x tp 1 · pp 1, ep 32) · decode 128 GPUs (128 x tp 1 · pp 1, ep 128)" in head


@pytest.mark.parametrize("argv,field", [
    (("no-such-scenario", "--html", "{tmp}/r.html"), "no-such-scenario"),
    (("teaching-8gpu", "--html", "{tmp}/missing-dir/r.html"), "--html"),
    (("teaching-8gpu", "--html", "{tmp}"), "--html"),
    (("teaching-8gpu", "--html", "{tmp}/r.html", "--base-url", "file:///etc"), "--base-url"),
    (("teaching-8gpu", "--html", "{tmp}/r.html", "--set", "parallelism.tp=3"), "parallelism."),
    (("teaching-8gpu",), "--html"),
])
def test_bad_input_is_one_line_and_exit_2(capsys, tmp_path, argv, field):
    code, out, err = cli(capsys, "report", *(a.replace("{tmp}", str(tmp_path)) for a in argv))
    assert code == 2
    assert out == "" and err.count("\n") == 1 and field in err, err
    assert not (tmp_path / "r.html").exists()


def test_a_synchronisation_window_is_drawn_as_the_timeline_tab_draws_it(capsys, tmp_path):
    """DiLoCo across regions: the window chart after the Gantt, and the time-per-step card equal to
    run --json's."""
    r = parse_report(write_report(capsys, tmp_path, "diloco-cross-region"))
    assert r.charts[:2] == ["gantt", "sync_window"] and "datacenters" in r.charts
    assert r.cards["time_per_step_s"] == run_json(capsys, "diloco-cross-region")["time_per_step_s"]
    assert r.plotly_divs == [f"chart-{k}" for k in r.charts]


RUN_PLAN = ("teaching-8gpu", "--set", "training.total_tokens=1e9",
            "--set", "reliability.price_per_gpu_hour=2")


def test_a_run_plan_is_embedded_and_shown_as_run_json_has_it(capsys, tmp_path):
    """A scenario with a run plan: the embedded JSON lacked run --json's ``run_total`` and the page
    showed none of the run's days, GPU-hours or goodput; now both are run --json's."""
    r = parse_report(write_report(capsys, tmp_path, *RUN_PLAN))
    j = run_json(capsys, *RUN_PLAN)
    assert r.run_json == j and list(r.run_json) == list(j)
    t = j["run_total"]
    # 1e9 tokens rounded up to whole batches of 16 x 4096 tokens.
    assert t["tokens"] == 1000013824.0 and t["price"] == 2 * t["gpu_hours"] and 0.03 < t["days"] < 0.05
    assert r.card_labels[-5:] == ["Days", "GPU-hours", "Goodput", "Energy", "Cost"]
    for key in ("days", "gpu_hours", "goodput", "energy_MWh", "price"):
        assert r.cards[f"run_total.{key}"] == t[key], key
    # One iteration only: no run cards (and no run_total), as before.
    plain = parse_report(write_report(capsys, tmp_path, "teaching-8gpu"))
    assert "Days" not in plain.card_labels and "run_total" not in plain.run_json


def test_the_apps_report_of_a_run_plan_is_the_clis(capsys):
    """The app builds its report from its view cache, which holds the one iteration's JSON
    (explorer/ui/report.py): the page completes it with run_total, so it is the CLI's file."""
    from explorer.fidelity.band import with_band
    from explorer.report import ReportInputs, inputs_of_result, report_html

    sc = load_scenario("teaching-8gpu", list(RUN_PLAN[2::2]))
    res = simulate(sc)
    cli_inputs = inputs_of_result(res, "http://x/?scenario=teaching-8gpu")
    app_inputs = ReportInputs(**{**cli_inputs.__dict__, "run_json": with_band(res.to_json_dict(), sc)})
    assert "run_total" not in app_inputs.run_json
    assert report_html(app_inputs) == report_html(cli_inputs)
