"""Compare A/B (issue 11, point 1): the difference of two iterations by category, the ``diff``
command and its JSON contract, the share link with ``b.`` overrides, the figures, and the app's
Compare view (streamlit.testing, and a real browser when Playwright and Chromium are there)."""
from __future__ import annotations

import json
import math

import pytest

from explorer.analysis.compare import RESIDUAL, compare, delta_by_category, waterfall_steps
from explorer.cli import load_scenario, main
from explorer.config.shipped import shipped_scenarios
from explorer.figures import compare as cfig
from explorer.scenario import apply_overrides, from_dict
from explorer.share import VIEWS, parse_query, preset_raw, to_query
from explorer.simulate import simulate
from explorer.vocabulary import CATEGORIES

from app_support import qp, run_app, seconds
from cli_support import cli

# B for each shipped scenario: one change that moves several categories, plus the pipeline
# schedules that simulate differently (DualPipe in full, PipeDream's steady state, a folded 1F1B).
VARIANTS = [
    ("teaching-8gpu", ["parallelism.pp=8", "parallelism.dp=1"]),
    ("teaching-8gpu", ["parallelism.schedule=dualpipe"]),
    ("zero-bubble-8gpu", ["parallelism.schedule=dualpipe"]),
    ("zero-bubble-8gpu", ["parallelism.schedule=pipedream-async"]),
    ("megatron-gpt3-175b", ["communication.dp_overlap=true"]),
    ("megatron-gpt3-175b", ["parallelism.schedule=dualpipe"]),
    ("llama3-405b-16k", ["cluster.scale_out.nic_Gbps=200"]),
    ("two-datacenters", ["cluster.scale_across.bandwidth_Gbps=100"]),
    ("deepseek-v3", ["parallelism.schedule=1f1b"]),
    ("fsdp-llama3-8b", ["parallelism.zero=1"]),
    ("long-context-cp", ["cluster.scale_up.bandwidth_GBps=100"]),
]


def tol(*times: float) -> float:
    return 1e-12 * max(times)


# ------------------------------------------------------------------------------------------------
# The difference by category
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", list(shipped_scenarios()))
def test_every_shipped_breakdown_sums_to_its_iteration_time(name):
    """The premise of delta_s: breakdown_s (the busiest stage's) sums to the iteration time, so
    no residual category is needed on the shipped scenarios (folded ones included)."""
    res = simulate(load_scenario(name))
    assert set(res.breakdown_s) == set(CATEGORIES)
    total = math.fsum(res.breakdown_s.values())
    assert total == pytest.approx(res.iteration_time_s, abs=tol(res.iteration_time_s))


@pytest.mark.parametrize("name,sets_b", VARIANTS, ids=lambda v: v if isinstance(v, str) else "+".join(v))
def test_delta_sums_to_the_difference(name, sets_b):
    a, b = simulate(load_scenario(name)), simulate(load_scenario(name, sets_b))
    cmp = compare(a, b)
    diff = b.iteration_time_s - a.iteration_time_s
    assert RESIDUAL not in cmp.delta_s
    assert list(cmp.delta_s) == list(CATEGORIES)
    for k in CATEGORIES:
        assert cmp.delta_s[k] == b.breakdown_s[k] - a.breakdown_s[k]
    assert sum(cmp.delta_s.values()) == pytest.approx(diff, abs=tol(a.iteration_time_s, b.iteration_time_s))
    assert cmp.difference_s == diff
    assert abs(diff) > 1e-6 * a.iteration_time_s          # every variant changes the iteration


def test_folded_and_dualpipe_sides_are_what_the_variants_cover():
    """The variants above do exercise a folded simulation and a DualPipe one."""
    assert simulate(load_scenario("megatron-gpt3-175b")).fold is not None
    assert simulate(load_scenario("zero-bubble-8gpu", ["parallelism.schedule=dualpipe"])).fold is None


def test_more_pipeline_stages_move_the_bubble():
    """teaching-8gpu, pp 4 -> 8 (dp 2 -> 1, 16 micro-batches): the closed form goes from 3/11 to
    7/23, the busiest stage's bubble grows, and compute per GPU is the same model over the same
    8 GPUs (the stage split changes, so it moves a little, never the sign of the bubble)."""
    a = simulate(load_scenario("teaching-8gpu"))
    b = simulate(load_scenario("teaching-8gpu", ["parallelism.pp=8", "parallelism.dp=1"]))
    cmp = compare(a, b)
    assert cmp.delta_s["bubble"] == pytest.approx(b.breakdown_s["bubble"] - a.breakdown_s["bubble"])
    assert cmp.delta_s["bubble"] > 1e-3                    # more than a millisecond more idle time
    assert b.bubble_formula == pytest.approx(7 / 23) and a.bubble_formula == pytest.approx(3 / 11)
    assert cmp.delta_s["tp"] == cmp.delta_s["cp"] == cmp.delta_s["ep"] == 0.0
    by = {d.key: d for d in cmp.metrics}
    assert by["iteration_time_s"].delta == pytest.approx(cmp.difference_s)
    assert by["bubble_fraction"].b == b.bubble_fraction and by["bubble_fraction"].a == a.bubble_fraction
    assert by["memory_GB_total"].a == pytest.approx(a.memory.as_GB()["total"])


def test_a_gap_the_categories_do_not_explain_is_its_own_category():
    a = {"iteration_time_s": 1.0, "breakdown_s": dict.fromkeys(CATEGORIES, 0.0) | {"compute": 1.0}}
    b = {"iteration_time_s": 1.5, "breakdown_s": dict.fromkeys(CATEGORIES, 0.0) | {"compute": 1.2}}
    delta = delta_by_category(a, b)
    assert delta[RESIDUAL] == pytest.approx(0.3)
    assert sum(delta.values()) == pytest.approx(0.5, abs=1e-15)
    # Float rounding is not a residual.
    b["breakdown_s"]["compute"] = 1.5 + 1e-15
    assert RESIDUAL not in delta_by_category(a, b)


# ------------------------------------------------------------------------------------------------
# The command
# ------------------------------------------------------------------------------------------------
def cli_json(*args: str) -> dict:
    proc = cli(*args)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_diff_json_contract():
    """``diff A --set-b ... --json``: a and b are exactly what ``run --json`` prints, delta_s sums
    to the difference."""
    sets_b = ["--set-b", "parallelism.pp=8", "--set-b", "parallelism.dp=1"]
    out = cli_json("diff", "teaching-8gpu", *sets_b, "--json")
    assert {"a", "b", "delta_s"} <= set(out)
    assert out["a"] == cli_json("run", "teaching-8gpu", "--json")
    assert out["b"] == cli_json("run", "teaching-8gpu", "--set", "parallelism.pp=8",
                                "--set", "parallelism.dp=1", "--json")
    assert out["b"]["parallelism"]["pp"] == 8
    diff = out["b"]["iteration_time_s"] - out["a"]["iteration_time_s"]
    assert abs(diff) > 1e-4
    assert sum(out["delta_s"].values()) == pytest.approx(diff, abs=1e-12)
    assert out["metrics"]["iteration_time_s"]["delta"] == pytest.approx(diff)


def test_set_applies_to_both_unless_b_is_given(capsys):
    assert main(["diff", "teaching-8gpu", "--set", "training.global_batch=32", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["a"]["micro_batches"] == out["b"]["micro_batches"] == 16
    assert all(v == 0.0 for v in out["delta_s"].values())
    assert main(["diff", "teaching-8gpu", "zero-bubble-8gpu", "--set", "training.global_batch=32",
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["a"]["micro_batches"] == 16
    assert out["b"]["micro_batches"] == load_scenario("zero-bubble-8gpu").micro_batches
    assert sum(out["delta_s"].values()) == pytest.approx(
        out["b"]["iteration_time_s"] - out["a"]["iteration_time_s"], abs=1e-12)


@pytest.mark.parametrize("bad,named", [
    ("parallelism.ppp=2", "parallelism.ppp"),
    ("nonsense.key=1", "nonsense"),
    ("parallelism.tp=abc", "parallelism.tp"),
    ("parallelism.pp=3", "parallelism"),
    ("pp", "--set-b"),
])
def test_bad_set_b_exits_2_with_one_line_naming_the_field(capsys, bad, named):
    assert main(["diff", "teaching-8gpu", "--set-b", bad]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and named in lines[0], lines


def test_diff_text_shows_both_headlines_and_the_waterfall(capsys):
    assert main(["diff", "teaching-8gpu", "--set-b", "parallelism.pp=8", "--set-b", "parallelism.dp=1"]) == 0
    text = capsys.readouterr().out
    a = simulate(load_scenario("teaching-8gpu"))
    b = simulate(load_scenario("teaching-8gpu", ["parallelism.pp=8", "parallelism.dp=1"]))
    assert f"{a.iteration_time_s * 1e3:,.1f} ms" in text and f"{b.iteration_time_s * 1e3:,.1f} ms" in text
    assert f"{(b.iteration_time_s - a.iteration_time_s) * 1e3:+,.1f} ms" in text
    rows = {line.split()[0]: line for line in text.splitlines() if "|" in line}
    assert set(rows) >= {"A", "B", "bubble", "compute"}
    assert "+" in rows["bubble"].split("|")[1] and "#" in rows["A"].split("|")[1]


# ------------------------------------------------------------------------------------------------
# Share links
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("scenario,a_over,b_over", [
    ("teaching-8gpu", {}, {"parallelism.pp": "2"}),
    ("llama3-405b-16k", {"parallelism.pp": "8"}, {"cluster.scale_out.oversubscription": "4",
                                                   "communication.algorithm": "tree"}),
    ("teaching-8gpu", {"hardware.gpu": "b200"},
     {"parallelism.stage_layers": "[5,7,7,5]", "hardware.gpu": "a100-80gb"}),
])
def test_compare_link_round_trips(scenario, a_over, b_over):
    query = {"scenario": scenario, **a_over, **{f"b.{k}": v for k, v in b_over.items()}, "view": "compare"}
    view = parse_query(query)
    assert view.warnings == [] and view.view == "compare" and "compare" in VIEWS
    base_raw = preset_raw(scenario)
    sc_a = from_dict(apply_overrides(base_raw, view.overrides))
    sc_b = from_dict(apply_overrides(apply_overrides(base_raw, view.overrides), view.b_overrides))
    out = to_query(view, from_dict(base_raw), sc_a)
    assert out == query
    again = parse_query(out)
    assert from_dict(apply_overrides(base_raw, again.overrides)) == sc_a
    assert from_dict(apply_overrides(apply_overrides(base_raw, again.overrides), again.b_overrides)) == sc_b
    assert sc_b != sc_a


@pytest.mark.parametrize("key,value,expect", [
    ("b.foo", "1", "ignored b.foo: not a scenario field"),
    ("b.description", "x", "ignored b.description: not a scenario field"),
    ("b.parallelism.tp", "abc", "ignored b.parallelism.tp="),
    ("b.parallelism.tp", "3", "ignored b.parallelism.tp=3: "),
    ("b.\x1b[31mred\nline", "1", "ignored b.\\x1b[31mred\\nline: not a scenario field"),
    ("b.parallelism.tp", "!!python/object:os.system", "ignored b.parallelism.tp="),
    ("b.cluster.nodes", "9" * 1000, "ignored b.cluster.nodes: its value has 1,000 characters"),
])
def test_hostile_b_keys_are_dropped_with_one_line(key, value, expect):
    view = parse_query({"scenario": "teaching-8gpu", "b.parallelism.pp": "2", key: value, "view": "compare"})
    assert view.b_overrides == {"parallelism.pp": 2}
    assert len(view.warnings) == 1 and "\n" not in view.warnings[0], view.warnings
    assert view.warnings[0].startswith(expect), view.warnings


# ------------------------------------------------------------------------------------------------
# Figures
# ------------------------------------------------------------------------------------------------
def _pair(sets_b):
    return compare(simulate(load_scenario("teaching-8gpu")), simulate(load_scenario("teaching-8gpu", sets_b)))


@pytest.mark.parametrize("sets_b", [["parallelism.pp=8", "parallelism.dp=1"],
                                    ["communication.dp_overlap=false"]])
def test_waterfall_bars_sum_to_the_difference(sets_b):
    cmp = _pair(sets_b)
    fig = cfig.waterfall(cmp)
    trace = fig.data[0]
    measure, x, labels = list(trace.measure), list(trace.x), list(trace.y)
    assert measure[0] == "absolute" and measure[-1] == "total" and set(measure[1:-1]) == {"relative"}
    assert labels[0] == "A" and labels[-1] == "B"
    scale = 1e3                                   # teaching-8gpu is drawn in ms
    assert x[0] == pytest.approx(cmp.a["iteration_time_s"] * scale)
    assert sum(x[1:-1]) == pytest.approx(cmp.difference_s * scale, abs=1e-9)
    assert x[0] + sum(x[1:-1]) == pytest.approx(x[-1])
    assert len(x) - 2 == len(waterfall_steps(cmp)) - 2 >= 2


def test_the_two_gantts_share_one_time_axis_and_memory_sits_side_by_side():
    from explorer.ui.cache import view_data
    raw_a = preset_raw("teaching-8gpu")
    raw_b = apply_overrides(raw_a, {"parallelism.pp": 2})
    da, db = (view_data(json.dumps(r, sort_keys=True, default=str)) for r in (raw_a, raw_b))
    cached_range = tuple(db.gantt.layout.xaxis.range)
    ga, gb = cfig.shared_time_axis(da.gantt, db.gantt, heights=(300, 200))
    assert list(ga.layout.xaxis.range) == list(gb.layout.xaxis.range)
    longer = max(da.json["iteration_time_s"], db.json["iteration_time_s"]) * 1e3
    shorter = min(da.json["iteration_time_s"], db.json["iteration_time_s"]) * 1e3
    assert ga.layout.xaxis.range[1] >= longer > shorter and (ga.layout.height, gb.layout.height) == (300, 200)
    assert tuple(db.gantt.layout.xaxis.range) == cached_range      # the cached figure is untouched
    mem = cfig.memory_side_by_side(compare(da.json, db.json))
    stacked = [sum(t.y[i] for t in mem.data) for i in range(2)]
    assert stacked == pytest.approx([da.json["memory_GB"]["total"], db.json["memory_GB"]["total"]], rel=1e-9)


# ------------------------------------------------------------------------------------------------
# The app (streamlit.testing)
# ------------------------------------------------------------------------------------------------
def _fmt_time(s: float) -> str:
    return f"{s * 1e3:.1f} ms" if s < 1 else f"{s:.3f} s"


def _metrics(at, label: str) -> list:
    return [m for m in at.metric if m.label == label]


def test_compare_link_shows_both_iteration_times_and_the_delta():
    at = run_app(scenario="teaching-8gpu", **{"b.parallelism.pp": "2"}, view="compare")
    assert not at.error, [e.value for e in at.error]
    ta = simulate(from_dict(preset_raw("teaching-8gpu"))).iteration_time_s
    tb = simulate(from_dict(apply_overrides(preset_raw("teaching-8gpu"), {"parallelism.pp": 2})))\
        .iteration_time_s
    cards = _metrics(at, "Iteration time")
    assert [c.value for c in cards] == [_fmt_time(ta), _fmt_time(tb)]
    assert cards[0].delta in ("", None)
    assert cards[1].delta == f"{(tb - ta) * 1e3:+,.1f} ms"
    assert seconds(at) == pytest.approx(ta, rel=1e-3)
    assert qp(at, "b.parallelism.pp") == "2" and qp(at, "view") == "compare"
    assert [b.label for b in at.button if b.key == "_b_rm_parallelism.pp"] == ["parallelism.pp = 2"]


@pytest.mark.slow
def test_editing_b_updates_the_cards_and_the_link_and_an_invalid_b_keeps_the_last():
    at = run_app(scenario="teaching-8gpu", view="compare")
    cards = _metrics(at, "Iteration time")
    assert cards[0].value == cards[1].value                     # B = A until something is set
    at.selectbox(key="_b_field").set_value("communication.dp_overlap").run()
    assert at.text_input(key="_b_value").value == "true"        # A's value, ready to edit
    at.text_input(key="_b_value").set_value("false").run()
    at.button(key="_b_set").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert qp(at, "b.communication.dp_overlap") == "false"
    slower = _metrics(at, "Iteration time")[1].value
    assert slower != cards[0].value and _metrics(at, "Iteration time")[1].delta.startswith("+")
    # tp 3 does not divide 8 GPUs: one line, no traceback, the last valid B stays (and the link).
    at.selectbox(key="_b_field").set_value("parallelism.tp").run()
    at.text_input(key="_b_value").set_value("3").run()
    at.button(key="_b_set").click().run()
    assert not at.exception
    errors = [e.value for e in at.error]
    assert len(errors) == 1 and "parallelism" in errors[0] and "\n" not in errors[0], errors
    assert _metrics(at, "Iteration time")[1].value == slower
    assert qp(at, "b.parallelism.tp") is None and qp(at, "b.communication.dp_overlap") == "false"
    # Removing the bad override makes B valid again; removing the other one makes B = A.
    at.button(key="_b_rm_parallelism.tp").click().run()
    assert not at.error
    at.button(key="_b_rm_communication.dp_overlap").click().run()
    assert qp(at, "b.communication.dp_overlap") is None
    assert _metrics(at, "Iteration time")[1].value == cards[0].value


def test_an_unparsable_b_value_is_refused_with_one_line():
    at = run_app(scenario="teaching-8gpu", view="compare")
    at.selectbox(key="_b_field").set_value("parallelism.pp").run()
    at.text_input(key="_b_value").set_value("!!python/object:os.system").run()
    at.button(key="_b_set").click().run()
    assert not at.exception
    errors = [e.value for e in at.error]
    assert len(errors) == 1 and errors[0].startswith("Not set — parallelism.pp") and "\n" not in errors[0]
    assert qp(at, "b.parallelism.pp") is None


@pytest.mark.parametrize("present", ["0", "1"])
def test_compare_view_renders_in_both_modes_on_a_folded_scenario(present):
    at = run_app(scenario="megatron-gpt3-175b", view="compare", present=present,
                 **{"b.cluster.scale_out.nic_Gbps": "100"})
    assert not at.error, [e.value for e in at.error]
    cards = _metrics(at, "Iteration time")
    assert len(cards) == (1 if present == "1" else 2)
    assert cards[-1].delta.startswith("+")


# ------------------------------------------------------------------------------------------------
# A real browser
# ------------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_compare_link_renders_in_a_browser():
    """The compare link in Chromium: no Python or JS exception, both Gantts and the waterfall
    drawn, the two Iteration time cards show A's and B's times."""
    pytest.importorskip("playwright")
    from browser_support import CHROMIUM_ARGS, chromium_path, streamlit_server, wait_ready
    if chromium_path() is None:
        pytest.skip("no Chromium executable found")
    from playwright.sync_api import sync_playwright

    ta = simulate(from_dict(preset_raw("teaching-8gpu"))).iteration_time_s
    tb = simulate(from_dict(apply_overrides(preset_raw("teaching-8gpu"), {"parallelism.pp": 2})))\
        .iteration_time_s
    with streamlit_server() as base, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1440, "height": 900})
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.goto(f"{base}?scenario=teaching-8gpu&b.parallelism.pp=2&view=compare")
            wait_ready(page)
            assert page.locator('[data-testid="stException"]').count() == 0
            assert "Traceback" not in page.content() and not errors, errors
            for key in ("gantt_a", "gantt_b", "waterfall", "memory_ab"):
                chart = page.locator(f".st-key-{key} [data-testid='stPlotlyChart'] svg.main-svg")
                assert chart.count() > 0, f"{key} not drawn"
            assert page.locator(".st-key-gantt_b svg .barlayer .point").count() > 0
            label = page.get_by_text("Iteration time", exact=True)
            cards = page.locator('[data-testid="stMetric"]', has=label)
            values = cards.locator('[data-testid="stMetricValue"]').all_inner_texts()
            assert [v.strip() for v in values] == [_fmt_time(ta), _fmt_time(tb)]
            assert "b.parallelism.pp=2" in page.url and "view=compare" in page.url
        finally:
            browser.close()


def test_a_folded_side_is_redrawn_in_real_time_for_the_shared_axis():
    """megatron-gpt3-175b folds its steady state (its own Gantt is drawn compressed); the Compare
    view draws it unfolded so both charts share one time axis in seconds of the iteration."""
    from explorer.ui.cache import view_data
    from explorer.ui.views.compare import unfolded
    raw_a = preset_raw("megatron-gpt3-175b")
    raw_b = apply_overrides(raw_a, {"parallelism.pp": 16})
    ja, jb = (json.dumps(r, sort_keys=True, default=str) for r in (raw_a, raw_b))
    da, db = view_data(ja), view_data(jb)
    assert da.fold is not None and db.fold is not None
    (ua, real_a), (ub, real_b) = unfolded(da, ja), unfolded(db, jb)
    assert real_a and real_b and ua.fold is None and ub.fold is None
    ga, gb = cfig.shared_time_axis(ua.gantt, ub.gantt)
    longer = max(da.json["iteration_time_s"], db.json["iteration_time_s"]) * 1e3
    assert ga.layout.xaxis.range[1] == gb.layout.xaxis.range[1] >= longer
    ends = [max(b + x for b, x in zip(t.base, t.x, strict=True)) for t in gb.data if t.base is not None]
    assert max(ends) == pytest.approx(db.json["iteration_time_s"] * 1e3, rel=0.02)   # real time, not folded
    assert da.gantt.layout.xaxis.ticktext                    # the cached folded chart is untouched


def test_presentation_legend_runs_in_columns_above_lanes_that_keep_their_height():
    """At 1280x720 in presentation mode the A/B Gantts' legends fell back to one entry per row and
    covered the lanes (mixed-generations: 8 lanes in about 150 px).  With ``columns`` the legend is
    a grid of equal columns above the plot, the figure grows by its rows, and a B whose legend is
    hidden keeps A's plot height."""
    from explorer.ui.cache import view_data
    raw_a = preset_raw("mixed-generations")
    raw_b = apply_overrides(raw_a, {"parallelism.tp": 4})
    da, db = (view_data(json.dumps(r, sort_keys=True, default=str)) for r in (raw_a, raw_b))
    plain, _ = cfig.shared_time_axis(da.gantt, db.gantt, heights=(310, 310))
    ga, gb = cfig.shared_time_axis(da.gantt, db.gantt, heights=(310, 310), columns=2)
    entries = sum(1 for t in ga.data if t.showlegend is not False and t.name)
    assert (ga.layout.legend.entrywidth, ga.layout.legend.entrywidthmode) == (0.5, "fraction")
    rows = -(-entries // 2)
    assert ga.layout.height - ga.layout.margin.t == 310 > plain.layout.height - plain.layout.margin.t
    assert ga.layout.margin.t > plain.layout.margin.t and rows >= 4
    if gb.layout.showlegend is False:
        assert gb.layout.height - gb.layout.margin.t == ga.layout.height - ga.layout.margin.t


@pytest.mark.parametrize(("name", "label"), [("pipedream-vgg16", "Images/s"), ("teaching-8gpu", "Tokens/s"),
                                             ("pipedream-gnmt16", "Tokens/s")])
def test_the_throughput_card_counts_what_the_family_counts(name, label):
    """diff's and the Compare view's rate card reads run --json's throughput_unit, as the page's
    card does (a hunt found "Tokens/s" over VGG-16's images)."""
    res = simulate(load_scenario(name, []))
    labels = [m.label for m in compare(res, res).metrics]
    assert labels[1] == label
    assert res.to_json_dict()["throughput_unit"] == label[:-2].lower()


def test_scaling_names_the_familys_unit(capsys):
    assert main(["scaling", "resnet50-cloud-dp", "--gpus", "8,16"]) == 0
    out = capsys.readouterr().out
    assert "images/GPU" in out and "tokens/GPU" not in out
    assert main(["scaling", "resnet50-cloud-dp", "--gpus", "8", "--json"]) == 0
    (point,) = json.loads(capsys.readouterr().out)
    rate = point["global_batch"] / point["time_per_step_s"]
    assert point["samples_per_s"] == pytest.approx(rate, rel=1e-12)


def test_diff_says_the_waterfall_is_the_inner_steps_where_replicas_sync_every_few_steps():
    """A hunt: diff streaming-diloco-1gbps with a 10 Gb/s WAN for B printed "Time per step 1,621.8
    ms -> 1,575.9 ms" in its table and "where the difference goes (B - A = +0.0 ms ...)" under it:
    the categories are the inner step's, the amortised outer sync is only in the time per step.
    The sentence now says so and gives each side's outer sync per step."""
    got = cli("diff", "streaming-diloco-1gbps", "--set-b", "cluster.scale_across.bandwidth_Gbps=10")
    assert got.returncode == 0
    a = simulate(load_scenario("streaming-diloco-1gbps", []))
    outer_ms = (a.time_per_step_s - a.iteration_time_s) * 1e3
    assert outer_ms > 1
    line = next(ln for ln in got.stdout.splitlines() if "difference goes" in ln)
    assert line.startswith("  where the inner step's difference goes (B - A = +0.0 ms;")
    assert f"the outer synchronisation amortised per step, A {outer_ms:,.1f} ms" in line
