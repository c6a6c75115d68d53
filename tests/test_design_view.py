"""The app's Design-space tab (issue 11, point 8): the heatmap is the library's sweep, the search's
rows reopen scenarios whose full simulation gives the row's time, the tab's settings travel in
the link (``d.`` parameters), bad input is one line, and the tab renders in a real browser."""
from __future__ import annotations

import json
import math
from urllib.parse import parse_qsl, urlsplit

import pytest

from explorer.design import open_base, sweep
from explorer.scenario import apply_overrides, from_dict
from explorer.share import parse_query, preset_raw, to_query
from explorer.simulate import simulate
from explorer.ui.views import design_runs as runs

from app_support import qp, run_app

TEACHING = "teaching-8gpu"


def chart(at, key: str) -> dict:
    """The Plotly figure (as JSON) of the chart keyed ``key``."""
    found = [e for e in at.get("plotly_chart") if e.proto.id.endswith(f"-{key}")]
    assert len(found) == 1, [e.proto.id for e in at.get("plotly_chart")]
    return json.loads(found[0].proto.spec)


def reopen(link: str):
    """The scenario a row's link opens in the app (its query string, as the app parses it)."""
    view = parse_query(dict(parse_qsl(urlsplit(link).query)))
    assert view.warnings == [], view.warnings
    return from_dict(apply_overrides(preset_raw(view.scenario), view.overrides))


@pytest.fixture(scope="module")
def opened():
    return run_app(scenario=TEACHING, view="design")


def test_the_link_opens_the_tab_without_errors(opened):
    at = opened
    assert not at.error, [e.value for e in at.error]
    assert [t.label for t in at.tabs][-1] == "Design space"
    assert qp(at, "view") == "design" and qp(at, "d.x") is None     # defaults stay out of the link
    for key in ("_d_heatmap", "_d_tornado", "_d_scaling"):
        assert chart(at, key)["data"], key


def test_the_heatmap_is_the_librarys_sweep(opened):
    """Same grid (tp 1,2,4,8 x pp 1,2,4,8, the defaults on 8 GPUs), same numbers, cell by cell; an
    invalid cell is blank and its hover gives the loader's reason."""
    fig = chart(opened, "_d_heatmap")
    heat = next(t for t in fig["data"] if t["type"] == "heatmap")
    assert heat["x"] == ["1", "2", "4", "8"] and heat["y"] == ["1", "2", "4", "8"]
    ref = sweep(open_base(TEACHING), {"parallelism.tp": [1, 2, 4, 8], "parallelism.pp": [1, 2, 4, 8]})
    cells = next(t for t in fig["data"] if t["type"] == "scatter")
    hover = {(x, y): d for x, y, d in zip(cells["x"], cells["y"], cells["customdata"], strict=True)}
    for p in ref.points:
        x, y = str(p.overrides["parallelism.tp"]), str(p.overrides["parallelism.pp"])
        z = heat["z"][heat["y"].index(y)][heat["x"].index(x)]
        if p.valid:
            assert z == p.figures["iteration_time_s"] * 1e3        # every cell under a second: in ms
            assert hover[x, y][0] == p.link
        else:
            assert z is None or math.isnan(z)
            assert "invalid: parallelism: tp*pp*cp" in hover[x, y][1].replace("<br>", " ")
    assert sum(p.valid for p in ref.points) == 10
    assert heat["colorbar"]["title"]["text"] == "ms"          # the cells' own unit


@pytest.mark.slow
def test_search_rows_reopen_their_scenarios():
    at = run_app(scenario=TEACHING, view="design")
    at.button(key="_d_search").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    caption = next(c.value for c in at.caption if "layouts enumerated" in c.value)
    assert "valid" in caption and "fit in memory" in caption
    table = next(d.value for d in at.dataframe if "layout" in d.value.columns)
    assert 1 <= len(table) <= 10
    times = list(table["iteration"] * 1e-3)        # teaching-8gpu's iterations are shown in ms
    assert times == sorted(times)
    own = simulate(from_dict(preset_raw(TEACHING))).iteration_time_s
    assert times[0] <= own * (1 + 1e-12)          # never slower than the scenario's own layout
    for t, link in zip(times, table["open"], strict=True):
        assert simulate(reopen(link)).iteration_time_s == pytest.approx(t, rel=1e-12)


@pytest.mark.slow
def test_search_of_a_scenario_the_estimator_does_not_price_says_it_ranked_on_a_proxy():
    """cloud-25g-dp compresses its gradients: the tab's search ranks on the uncompressed proxy
    (explorer/design/proxy.py), says so, and every row's time is the scenario's own simulation."""
    at = run_app(scenario="cloud-25g-dp", view="design")
    at.button(key="_d_search").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    note = [c.value for c in at.caption if "ranked on a proxy" in c.value]
    assert len(note) == 1 and "(uncompressed gradients)" in note[0]
    table = next(d.value for d in at.dataframe if "layout" in d.value.columns)
    # Shown in ms when every row is under a second (design_search.table_rows), else in s.
    unit = 1e-3 if table["iteration"].min() >= 1 else 1.0
    assert table["iteration"].min() * unit == pytest.approx(0.34, abs=0.01)
    for t, link in zip(table["iteration"] * unit, table["open"], strict=True):
        assert simulate(reopen(link)).iteration_time_s == pytest.approx(t, rel=1e-12)


def test_the_tabs_settings_travel_in_the_link():
    at = run_app(scenario=TEACHING, view="design", **{"d.x": "cluster.scale_up.bandwidth_GBps",
                                                    "d.xv": "100,450", "d.m": "mfu", "d.scale": "strong"})
    assert not at.error and not at.warning, [w.value for w in at.warning]
    assert at.selectbox(key="_d_x").value == "cluster.scale_up.bandwidth_GBps"
    assert at.text_input(key="_d_xv").value == "100,450"
    assert (qp(at, "d.x"), qp(at, "d.xv"), qp(at, "d.m"), qp(at, "d.scale")) == \
        ("cluster.scale_up.bandwidth_GBps", "100,450", "mfu", "strong")
    heat = next(t for t in chart(at, "_d_heatmap")["data"] if t["type"] == "heatmap")
    assert heat["x"] == ["100", "450"] and heat["colorbar"]["title"]["text"] == "MFU"
    # Picking another field refills its values with that field's defaults, and the link follows.
    at.selectbox(key="_d_y").set_value("training.micro_batch").run()
    assert at.text_input(key="_d_yv").value == "1,2,4,8,16"
    assert qp(at, "d.y") == "training.micro_batch" and qp(at, "d.yv") is None


def test_bad_link_settings_fall_back_with_one_warning_each():
    at = run_app(scenario=TEACHING, view="design",
                 **{"d.x": "parallelism.nope", "d.yv": "1,{", "d.m": "speed", "d.zoom": "2"})
    warnings = [w.value for w in at.warning]
    assert any("ignored d.zoom" in w for w in warnings)
    for name in ("d.x=parallelism.nope", "d.yv=", "d.m=speed"):
        assert any(w.startswith(f"Link: ignored {name}") for w in warnings), (name, warnings)
    assert at.selectbox(key="_d_x").value == "parallelism.tp" and not at.error


def test_bad_values_are_one_line_never_an_exception():
    at = run_app(scenario=TEACHING, view="design")
    at.text_input(key="_d_xv").set_value("1,,{").run()
    errors = [e.value for e in at.error]
    assert len(errors) == 1 and errors[0].startswith("Heatmap: parallelism.tp") and "\n" not in errors[0]
    at.selectbox(key="_d_y").set_value("parallelism.tp").run()
    assert any("on both axes" in e.value for e in at.error)


def test_presentation_mode_uses_large_fonts():
    at = run_app(scenario="llama3-405b-16k", view="design", present="1")
    assert not at.error, [e.value for e in at.error]
    for key in ("_d_heatmap", "_d_tornado", "_d_scaling"):
        assert chart(at, key)["layout"]["font"]["size"] >= 18       # explorer/figures/fonts.py


def test_share_round_trips_design_settings():
    settings = {"x": "cluster.scale_out.nic_Gbps", "xv": "100,200", "y": "parallelism.tp", "m": "mfu"}
    view = parse_query({"scenario": TEACHING, "view": "design", **{f"d.{k}": v for k, v in settings.items()}})
    assert view.warnings == [] and view.view == "design" and view.design == settings
    sc = from_dict(preset_raw(TEACHING))
    assert parse_query(to_query(view, sc, sc)).design == settings


def test_default_values_are_sensible():
    sc = from_dict(preset_raw("llama3-405b-16k"))
    assert runs.default_values("parallelism.tp", sc) == [1, 2, 4, 8]
    assert runs.default_values("parallelism.pp", sc) == [1, 2, 4, 8, 16, 32, 64]
    assert runs.default_values("cluster.scale_out.nic_Gbps", sc) == [100.0, 200.0, 400.0, 800.0, 1600.0]
    assert runs.default_values("parallelism.schedule", sc)[:2] == ["gpipe", "1f1b"]


# ------------------------------------------------------------------------------------------------
# A real browser
# ------------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_the_tab_renders_in_a_browser():
    """Chromium: no JS error or Streamlit exception; the three charts drawn; Search layouts fills
    the table; clicking a heatmap cell shows that cell's link."""
    pytest.importorskip("playwright")
    from browser_support import CHROMIUM_ARGS, chromium_path, streamlit_server, wait_ready
    if chromium_path() is None:
        pytest.skip("no Chromium executable found")
    from playwright.sync_api import sync_playwright

    with streamlit_server() as base, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1440, "height": 900})
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.goto(f"{base}?scenario={TEACHING}&view=design")
            wait_ready(page)
            for key in ("_d_heatmap", "_d_tornado", "_d_scaling"):
                drawn = page.locator(f".st-key-{key} [data-testid='stPlotlyChart'] svg.main-svg")
                assert drawn.count() > 0, key
            assert page.get_by_role("tab", name="Design space").get_attribute("aria-selected") == "true"
            page.get_by_role("button", name="Search layouts").click()
            page.get_by_text("layouts enumerated").wait_for(timeout=60_000)
            wait_ready(page)
            # The search's table is the one table in view (the others are in closed expanders).
            assert page.locator("[data-testid='stDataFrame']").filter(visible=True).count() == 1
            cell = page.locator(".st-key-_d_heatmap .nsewdrag").first.bounding_box()
            # The lower left cell: tp 1, pp 1.
            page.mouse.click(cell["x"] + cell["width"] * 0.12, cell["y"] + cell["height"] * 0.88)
            page.get_by_text("open this scenario").first.wait_for(timeout=30_000)
            href = page.get_by_role("link", name="open this scenario ↗").first.get_attribute("href")
            assert reopen(href) == from_dict(apply_overrides(preset_raw(TEACHING),
                                                             {"parallelism.tp": 1, "parallelism.pp": 1}))
            assert page.locator('[data-testid="stException"]').count() == 0
            assert "Traceback" not in page.content() and not errors, errors
        finally:
            browser.close()


@pytest.mark.slow
def test_the_tornado_says_which_upgrades_datacenters_of_gpu_presets_cannot_take():
    """mixed-generations: the tab renders without an error (the sensitivity raised 'hardware.gpu is
    a custom mapping' before) and a caption names the changes not run and why."""
    at = run_app(scenario="mixed-generations", view="design")
    assert not at.error, [e.value for e in at.error]
    assert chart(at, "_d_tornado")["data"]
    notes = [c.value for c in at.caption if c.value.startswith("Not run: ")]
    assert notes == ["Not run: 2x compute, 2x HBM bandwidth, 2x scale-up bandwidth — cluster.datacenters: "
                     "the datacenters' GPUs are presets (h100-sxm, b200), whose figures a change cannot "
                     "scale; compare other presets instead (diff --set-b)"]


def test_the_scaling_caption_gives_each_reason_with_its_own_sizes():
    """deepseek-v3's strong curve: 512 GPUs are left out for ep, 8,192 and 16,384 for DualPipe's
    micro-batches; the caption named the first reason for all three."""
    from explorer.design.base import open_base
    from explorer.design.scaling import scaling
    from explorer.ui.views.design_runs import left_out
    pts = scaling(open_base("deepseek-v3"), mode="strong")
    bad = {p.gpus: p.reason for p in pts if not p.valid}
    text = left_out(pts)
    assert len(set(bad.values())) >= 2
    for why in set(bad.values()):
        sizes = ", ".join(f"{g:,}" for g, r in bad.items() if r == why)
        assert f"{sizes} GPUs ({why})" in text
    assert left_out([p for p in pts if p.valid]) == ""
