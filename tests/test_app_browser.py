"""The Streamlit app in a real browser (Debian's Chromium through Playwright).

One Streamlit server, one browser and one page for the whole module: each check navigates that
page (a full page load is a new Streamlit session, so the link alone decides the state; reusing
the page keeps the app's JavaScript warm, about 2 s a load instead of 4).  The "restore from the
link" checks open the URL in a NEW browser context (no cache, no storage, new session) to prove
that the address bar alone reproduces the view.

Skipped only when Playwright is not importable or no Chromium is installed.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from explorer.scenario import load_raw

from browser_support import CHROMIUM_ARGS, chromium_path, metric_value, streamlit_server, wait_ready

ROOT = Path(__file__).resolve().parents[1]
# Chromium against a Streamlit server: the full suite only (-m "not slow" leaves it out).
pytestmark = pytest.mark.slow

try:
    from playwright.sync_api import Error as PlaywrightError
    from playwright.sync_api import sync_playwright
except ImportError:  # pragma: no cover - depends on the environment
    pytest.skip("playwright is not installed", allow_module_level=True)
if chromium_path() is None:  # pragma: no cover - depends on the environment
    pytest.skip("no Chromium executable found", allow_module_level=True)

METRICS = ("Iteration time", "Tokens/s", "MFU", "TFLOP/s per GPU", "Bubble", "Memory per GPU")
# The first card: the iteration, or the amortised step of replicas that train apart
# (explorer/variants/lowcomm).
FIRST_CARDS = ("Iteration time", "Time per step")
RATE_CARDS = ("Tokens/s", "Images/s", "Clips/s", "Samples/s", "Seed nodes/s")
FAMILY_CARDS = ("Epoch", "Exposed emb")        # a GNN's, a DLRM's (explorer/ui/views/metrics.py)
VIEWPORT = {"width": 1600, "height": 1000}
DEFAULT = "teaching-8gpu"


# ------------------------------------------------------------------------------------------------
# Helpers
# ------------------------------------------------------------------------------------------------
def fmt_time(s: float) -> str:
    """The app's format for the "Iteration time" card."""
    return f"{s * 1e3:.1f} ms" if s < 1 else f"{s:.3f} s"


def cli_iteration(scenario: str, *sets: str) -> str:
    """``python -m explorer run SCENARIO --set ... --json``'s iteration time, formatted as the app does."""
    args = [sys.executable, "-m", "explorer", "run", scenario]
    for s in sets:
        args += ["--set", s]
    proc = subprocess.run(args + ["--json"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"{args}: exit {proc.returncode}\n{proc.stderr}"
    return fmt_time(json.loads(proc.stdout)["time_per_step_s"])


def query_of(url: str) -> dict[str, list[str]]:
    return parse_qs(urlsplit(url).query, keep_blank_values=True)


def key_css(key: str) -> str:
    """The CSS class Streamlit gives the container of the widget with ``key`` (dots -> dashes)."""
    return ".st-key-" + key.replace(".", "-")


def number_input(page, key: str):
    return page.locator(f'{key_css(key)} input[data-testid="stNumberInputField"]')


def reveal(page, box):
    """Open the sidebar expander that holds ``box`` if it is collapsed."""
    if not box.is_visible():
        page.locator('[data-testid="stExpander"]', has=box).locator("summary").click()
        box.wait_for(state="visible")
    return box


def link_warnings(page) -> list[str]:
    texts = page.locator('[data-testid="stAlert"] [data-testid="stMarkdownContainer"]').all_inner_texts()
    return [t.strip() for t in texts if t.strip().startswith("Link:")]


def gantt_bars(page) -> int:
    """Number of drawn bars in the Gantt (the Plotly chart keyed ``gantt``)."""
    chart = page.locator(f'{key_css("gantt")} [data-testid="stPlotlyChart"]')
    assert chart.count() == 1, "no Gantt chart on the page"
    assert chart.locator("svg.main-svg").count() > 0, "the Gantt has no SVG"
    return chart.locator("svg .barlayer .point").count()


def assert_healthy(page, errors: list[str]) -> None:
    """No Python exception on the page, no JS error, and the six metric cards with values."""
    assert page.locator('[data-testid="stException"]').count() == 0, \
        page.locator('[data-testid="stException"]').first.inner_text()[:2000]
    assert "Traceback" not in page.content()
    assert not errors, f"page JS errors: {errors}"
    first = FIRST_CARDS[0] if page.get_by_text(FIRST_CARDS[0], exact=True).count() else FIRST_CARDS[1]
    # The rate card counts tokens, or images / clips for a convolutional network (model.conv).
    rate = next((r for r in RATE_CARDS if page.get_by_text(r, exact=True).count()), RATE_CARDS[0])
    # A family that cannot pipeline shows its epoch or its own exchange in the Bubble's place.
    fifth = next((c for c in FAMILY_CARDS if page.get_by_text(c, exact=True).count()), "Bubble")
    for label in (first, rate, *METRICS[2:4], fifth, METRICS[5]):
        assert metric_value(page, label), f"metric {label!r} is empty"


class App:
    """A browser page that collects its JS errors; :meth:`open` loads a URL as a new session."""

    def __init__(self, page, base: str):
        self.page, self.base, self.errors = page, base, []
        page.on("pageerror", lambda exc: self.errors.append(str(exc)))

    def open(self, query: str = "", check_status: bool = True):
        """Navigate to ``base + query`` (a full page load, hence a new Streamlit session) and wait
        until the run is over; returns the HTTP response."""
        self.errors.clear()
        response = self.page.goto(query if query.startswith("http") else self.base + query)
        assert response is not None
        if check_status:
            assert response.ok, f"HTTP {response.status} for {query[:200]}"
            wait_ready(self.page)
        return response

    def assert_healthy(self) -> None:
        assert_healthy(self.page, self.errors)


# ------------------------------------------------------------------------------------------------
# Fixtures: one server, one browser, one shared page
# ------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def base_url():
    with streamlit_server() as url:
        yield url


@pytest.fixture(scope="module")
def browser():
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


# Playwright waits 30 s for an action by default; on a loaded 2-core machine (the suite with -n auto,
# its own server rendering for other workers) a click has been seen to need longer.  An action that
# never completes still fails, after the same 60 s wait_ready allows a page.
ACTION_TIMEOUT_MS = 60_000


def _context(browser, viewport):
    ctx = browser.new_context(viewport=viewport)
    ctx.set_default_timeout(ACTION_TIMEOUT_MS)
    return ctx


@pytest.fixture(scope="module")
def app(browser, base_url):
    ctx = _context(browser, VIEWPORT)
    yield App(ctx.new_page(), base_url)
    ctx.close()


@pytest.fixture
def fresh(browser, base_url):
    """A page in a brand-new browser context."""
    ctx = _context(browser, VIEWPORT)
    yield App(ctx.new_page(), base_url)
    ctx.close()


@pytest.fixture(scope="module")
def default_iteration() -> str:
    return cli_iteration(DEFAULT)


def wait_metric(page, label: str, expected: str, timeout_s: float = 30) -> None:
    page.wait_for_function(
        """([label, expected]) => [...document.querySelectorAll('[data-testid="stMetric"]')].some(m => {
               const l = m.querySelector('[data-testid="stMetricLabel"]');
               const v = m.querySelector('[data-testid="stMetricValue"]');
               return l && v && l.innerText.trim() === label && v.innerText.trim() === expected; })""",
        arg=[label, expected], timeout=timeout_s * 1000, polling=100)


# ------------------------------------------------------------------------------------------------
# 1. The default page
# ------------------------------------------------------------------------------------------------
def test_default_page_renders_metrics_and_gantt(app, default_iteration):
    app.open()
    app.assert_healthy()
    page = app.page
    assert gantt_bars(page) > 0, "the Gantt drew no bars"
    assert metric_value(page, "Iteration time") == default_iteration
    assert query_of(page.url).get("scenario") == [DEFAULT]
    assert page.get_by_role("tab").all_inner_texts() == ["Timeline", "Memory", "Traffic", "Topology",
                                                                "Scenario & files", "Compare", "Design space"]
    assert page.get_by_role("button", name="Copy link").is_visible()
    assert not link_warnings(page)


# ------------------------------------------------------------------------------------------------
# 2. A share link with overrides matches the CLI
# ------------------------------------------------------------------------------------------------
def test_share_link_matches_cli(app):
    overrides = {"parallelism.pp": "2", "cluster.scale_up.bandwidth_GBps": "200"}
    query = f"?scenario={DEFAULT}&" + "&".join(f"{k}={v}" for k, v in overrides.items())
    # The app derives dp = GPUs / (tp*pp*cp) = 8 / 2 = 4; the CLI keeps the file's dp unless told.
    expected = cli_iteration(DEFAULT, *(f"{k}={v}" for k, v in overrides.items()), "parallelism.dp=4")
    app.open(query)
    app.assert_healthy()
    page = app.page
    assert not link_warnings(page), link_warnings(page)
    assert metric_value(page, "Iteration time") == expected
    q = query_of(page.url)
    assert q.get("scenario") == [DEFAULT]
    for k, v in overrides.items():
        assert q.get(k) == [v], f"address bar lost {k}={v}: {page.url}"
    assert number_input(page, "parallelism.pp").input_value() == "2"


# ------------------------------------------------------------------------------------------------
# 3. Changing a control updates the metric and the address bar; the URL restores it
# ------------------------------------------------------------------------------------------------
def test_control_change_updates_url_and_restores(app, fresh, default_iteration):
    expected = cli_iteration(DEFAULT, "parallelism.pp=2", "parallelism.dp=4")
    assert expected != default_iteration, "pick a control that changes the iteration time"
    app.open(f"?scenario={DEFAULT}")
    page = app.page
    box = reveal(page, number_input(page, "parallelism.pp"))
    assert box.input_value() == "4"
    assert metric_value(page, "Iteration time") == default_iteration
    box.fill("2")
    box.press("Enter")
    page.wait_for_url(lambda u: query_of(u).get("parallelism.pp") == ["2"], timeout=30_000)
    wait_metric(page, "Iteration time", expected)
    wait_ready(page)
    app.assert_healthy()
    assert metric_value(page, "Iteration time") == expected
    url = page.url
    assert query_of(url).get("scenario") == [DEFAULT]

    fresh.open(url)
    fresh.assert_healthy()
    assert metric_value(fresh.page, "Iteration time") == expected
    assert number_input(fresh.page, "parallelism.pp").input_value() == "2"
    assert query_of(fresh.page.url).get("parallelism.pp") == ["2"]
    assert not link_warnings(fresh.page)


# ------------------------------------------------------------------------------------------------
# 4. The tab is part of the link
# ------------------------------------------------------------------------------------------------
def test_memory_tab_in_url(app, fresh):
    app.open(f"?scenario={DEFAULT}")
    page = app.page
    page.get_by_role("tab", name="Memory").click()
    page.wait_for_url(lambda u: query_of(u).get("view") == ["memory"], timeout=30_000)
    wait_ready(page)
    app.assert_healthy()
    url = page.url

    fresh.open(url)
    fresh.assert_healthy()
    page2 = fresh.page
    assert page2.get_by_role("tab", name="Memory").get_attribute("aria-selected") == "true"
    assert page2.get_by_role("tab", name="Timeline").get_attribute("aria-selected") == "false"
    memory = page2.locator(f'{key_css("memory")} [data-testid="stPlotlyChart"]')
    assert memory.count() == 1 and memory.locator("svg.main-svg").count() > 0
    assert memory.is_visible()
    assert query_of(page2.url).get("view") == ["memory"]


def test_step_through_survives_a_tab_round_trip(app):
    """A hunt: Timeline -> Memory -> Timeline closed *Step through the schedule* and reset its mode
    and slider (the page draws only the open tab, and Streamlit drops a widget a finished run did not
    draw); the pipeline-bubbles tour asks a class to switch to Memory and back, then to use the
    textbook diagram.  The expander stays open and the textbook diagram chosen."""
    app.open(f"?scenario={DEFAULT}")
    page = app.page
    page.get_by_text("Step through the schedule (this scenario or the textbook diagram)", exact=True).click()
    wait_ready(page)
    page.get_by_text("textbook diagram (unit time)", exact=True).click()
    wait_ready(page)
    assert page.locator(key_css("textbook_chart")).count() == 1
    page.get_by_role("tab", name="Memory").click()
    page.wait_for_url(lambda u: query_of(u).get("view") == ["memory"], timeout=30_000)
    wait_ready(page)
    page.get_by_role("tab", name="Timeline").click()
    page.wait_for_url(lambda u: "view" not in query_of(u), timeout=30_000)
    wait_ready(page)
    chart = page.locator(key_css("textbook_chart"))
    chart.wait_for(timeout=30_000)
    assert chart.count() == 1
    assert page.get_by_role("radio", name="textbook diagram (unit time)").is_checked()
    app.assert_healthy()


# ------------------------------------------------------------------------------------------------
# 5. Hostile links
# ------------------------------------------------------------------------------------------------
# (query, text the "Link:" warning must mention, parameter that must not survive in the address bar)
# (d) observed with Streamlit 1.67 / Tornado: the ~100 KB URL is served (HTTP 200); the app ignores
# the value with "Link: ignored cluster.nodes: its value has 100,000 characters (limit 200)" and
# rewrites the address bar to ?scenario=teaching-8gpu.  Should a server reject it with an HTTP
# error instead, the test accepts that if the error page holds no Python traceback and the
# server still serves the app afterwards.
HOSTILE = {
    "bad-value": ("?scenario=teaching-8gpu&parallelism.tp=abc", "parallelism.tp", "parallelism.tp"),
    "unknown-key": ("?scenario=teaching-8gpu&foo=1", "foo", "foo"),
    "path-preset": ("?scenario=../../etc/passwd", "scenario=", None),
    "huge-value": ("?scenario=teaching-8gpu&cluster.nodes=" + "9" * 100_000, "cluster.nodes",
                   "cluster.nodes"),
    "bad-combination": ("?scenario=teaching-8gpu&parallelism.tp=3", "parallelism.tp", "parallelism.tp"),
}


@pytest.mark.parametrize("case", list(HOSTILE))
def test_hostile_link_warns_without_exception(app, default_iteration, case):
    query, mention, dropped = HOSTILE[case]
    try:
        status = app.open(query, check_status=False).status
    except PlaywrightError as exc:
        # Chromium reports an error status whose body is empty as a failed navigation
        # (net::ERR_HTTP_RESPONSE_CODE_FAILURE; seen once in a full run, under load): an HTTP error.
        assert "ERR_HTTP_RESPONSE_CODE_FAILURE" in str(exc)[:200], str(exc)[:200]
        status = 400
    page = app.page
    if status >= 400:            # only tolerated for the oversized link, see above
        assert case == "huge-value", f"HTTP {status}"
        assert "Traceback" not in page.content()
        app.open()
        app.assert_healthy()
        return
    wait_ready(page)
    app.assert_healthy()
    warnings = link_warnings(page)
    assert warnings, f"no 'Link:' warning for {case}"
    assert any(mention in w for w in warnings), warnings
    # Everything invalid is dropped: the link falls back to the valid default scenario.
    assert metric_value(page, "Iteration time") == default_iteration
    assert gantt_bars(page) > 0
    q = query_of(page.url)
    assert q.get("scenario") == [DEFAULT], page.url
    if dropped:
        assert dropped not in q, f"{dropped} survived in the address bar: {page.url[:300]}"


# ------------------------------------------------------------------------------------------------
# 6. Presentation mode
# ------------------------------------------------------------------------------------------------
def test_present_mode_hides_sidebar(app, default_iteration):
    app.open(f"?scenario={DEFAULT}&present=1")
    app.assert_healthy()
    page = app.page
    sidebar = page.locator('[data-testid="stSidebar"]')
    if sidebar.count():   # collapsed = slid off-screen to the left (Streamlit keeps it in the DOM)
        box = sidebar.bounding_box()
        assert box is None or box["width"] == 0 or box["x"] + box["width"] <= 0, box
        assert sidebar.get_attribute("data-collapsed") in (None, "true")
        pp = number_input(page, "parallelism.pp").bounding_box()
        assert pp is None or pp["x"] + pp["width"] <= 0, pp
    # ... and the control that opens it again is showing, whole (a hunt found it at y = -14 px, 28 px
    # tall, in the zero-height header: a sliver of its arrow), and opens it.
    opener = page.locator('[data-testid="stExpandSidebarButton"], [data-testid="stSidebarCollapsedControl"]'
                          ).first
    assert opener.is_visible()
    where = opener.bounding_box()
    assert where is not None and where["y"] >= 0 and where["x"] >= 0, where
    opener.click()
    page.wait_for_function("() => { const s = document.querySelector('[data-testid=\"stSidebar\"]');"
                           " return s && s.getBoundingClientRect().right > 100; }", timeout=10_000)
    assert gantt_bars(page) > 0
    assert page.locator(f'{key_css("gantt")} [data-testid="stPlotlyChart"]').is_visible()
    assert metric_value(page, "Iteration time") == default_iteration
    assert query_of(page.url).get("present") == ["1"]


# ------------------------------------------------------------------------------------------------
# 7. A projector: 1280x720, with and without presentation mode
# ------------------------------------------------------------------------------------------------
def _box(page, selector: str):
    loc = page.locator(selector).first
    assert loc.count() or page.locator(selector).count(), f"nothing matches {selector}"
    return loc.bounding_box()


@pytest.fixture
def projector(browser, base_url):
    ctx = _context(browser, {"width": 1280, "height": 720})
    yield App(ctx.new_page(), base_url)
    ctx.close()


TRUNCATED_JS = """() => [...document.querySelectorAll(
    '[data-testid="stMetricLabel"] p, [data-testid="stMetricValue"] div, '
    + '[data-testid="stMetricDelta"] div')]
    .filter(e => e.scrollWidth > e.clientWidth + 1).map(e => e.innerText)"""


# With the sidebar open the cards are narrowest: the longest names (llama3-405b-16k's) and each other
# family's own cards (samples/s, queries, epochs); the teaching and CNN presets' cards are checked
# in presentation mode below.
@pytest.mark.parametrize("scenario", ["llama3-405b-16k", "dlrm-dcnv2", "gnn-sage-papers100m",
                                      "pipedream-vgg16"])
def test_cards_are_never_truncated_at_1280x720(projector, scenario):
    projector.open(f"?scenario={scenario}")
    projector.assert_healthy()
    assert projector.page.evaluate(TRUNCATED_JS) == []


# A pipeline, two datacenters (the map's view), and each workload family.
@pytest.mark.parametrize("scenario", ["teaching-8gpu", "two-datacenters", "resnet50-cloud-dp", "dlrm-dcnv2",
                                      "gnn-sage-papers100m"])
def test_presentation_fits_title_cards_chart_and_sentence_on_one_projector_screen(projector, scenario):
    projector.open(f"?scenario={scenario}&present=1")
    projector.assert_healthy()
    page = projector.page
    assert page.evaluate(TRUNCATED_JS) == []
    title = _box(page, "h2")
    cards = _box(page, '[data-testid="stMetric"]')
    chart = _box(page, f'{key_css("gantt")} [data-testid="stPlotlyChart"]')
    sentence = _box(page, '[data-testid="stAlert"]')
    for name, box in (("title", title), ("cards", cards), ("chart", chart), ("bottleneck", sentence)):
        assert box is not None, name
        assert box["y"] >= 0 and box["y"] + box["height"] <= 720, (name, box)
    assert title["y"] < 60, "no empty band above the title"
    title_px = page.evaluate("() => parseFloat(getComputedStyle(document.querySelector('h2')).fontSize)")
    tab_px = page.evaluate(
        "() => parseFloat(getComputedStyle(document.querySelector('[role=tab] p')).fontSize)")
    assert title_px > tab_px


# ------------------------------------------------------------------------------------------------
# 8. Every shipped scenario's downloaded YAML uploads back (issue 7.2)
# ------------------------------------------------------------------------------------------------
SHIPPED = sorted(p.stem for p in (ROOT / "scenarios").glob("*.yaml"))
# The browser's own part (the download button's file, the file chooser, the upload message) is the
# same for every scenario; that every shipped scenario's YAML round-trips to the CLI's figure is
# checked under streamlit.testing (test_ui.py and test_app_sweep.py, all of SHIPPED).  Here one
# scenario per first card: a pipeline ("Iteration time") and replicas that sync apart ("Time per
# step").
ROUND_TRIPS = ["teaching-8gpu", "streaming-diloco-1gbps"]


@pytest.mark.parametrize("scenario", ROUND_TRIPS)
def test_downloaded_yaml_uploads_back(app, tmp_path, scenario):
    page = app.page
    app.open(f"?scenario={scenario}&view=scenario")
    with page.expect_download() as dl:
        page.get_by_role("button", name="Download scenario (YAML)").click()
    path = tmp_path / "scenario.yaml"
    dl.value.save_as(path)
    other = "zero-bubble-8gpu" if scenario == DEFAULT else DEFAULT
    app.open(f"?scenario={other}&view=scenario")
    # The scenario uploader, not the traces' beside it on the same tab (issue 39).
    page.get_by_role("region", name="Load a scenario YAML").locator(
        '[data-testid="stFileUploaderDropzoneInput"]').set_input_files(str(path))
    page.get_by_text("Loaded scenario.yaml").wait_for(timeout=60_000)
    wait_ready(page)
    app.assert_healthy()
    sync = (load_raw(ROOT / "scenarios" / f"{scenario}.yaml").get("training") or {}).get("sync") or {}
    label = FIRST_CARDS[1] if sync.get("kind", "every-step") != "every-step" else FIRST_CARDS[0]
    wait_metric(page, label, cli_iteration(scenario))


# ------------------------------------------------------------------------------------------------
# 9. A sample of controls in the browser (the full sweep runs under streamlit.testing)
# ------------------------------------------------------------------------------------------------
def choose(page, key: str, option: str) -> None:
    box = reveal(page, page.locator(key_css(key)))
    combo = box.locator('input[role="combobox"]')
    combo.scroll_into_view_if_needed()
    combo.click()
    # Typing filters the list and opens it (a click alone does not always open it, and long
    # lists are virtualised); then pick the option as a person would.
    # A rerun that lands while the list is open closes it (a heavy scenario's page may still be
    # settling), so a person would simply open it again: up to three tries.
    # The click has its own short timeout too: the list can close between "visible" and the
    # click, and a click then waits for an option that will not come back by itself.
    for attempt in range(3):
        combo.fill(option)
        opt = page.get_by_role("option", name=option, exact=True).first
        try:
            opt.wait_for(state="visible", timeout=8_000)
            opt.click(timeout=8_000)
        except Exception:
            if attempt == 2:
                raise
            wait_ready(page)
            combo.click()
            continue
        return


# A model preset is listed with its workload family (explorer/ui/sidebar.py).
@pytest.mark.parametrize("scenario,key,option", [
    ("teaching-8gpu", "model.preset", "llama3-8b · transformer"),
    ("fsdp-llama3-8b", "model.preset", "mixtral-8x7b · transformer"),
    ("pipedream-vgg16", "model.preset", "resnet-50 · convnet"),
    ("teaching-8gpu", "hardware.gpu", "b200"),
    ("megatron-gpt3-175b", "training.recompute", "selective"),
])
def test_sample_of_controls_in_chromium(app, scenario, key, option):
    app.open(f"?scenario={scenario}")
    page = app.page
    choose(page, key, option)
    page.wait_for_url(lambda u: key in query_of(u), timeout=30_000)
    wait_ready(page)
    assert page.locator('[data-testid="stException"]').count() == 0
    assert "Traceback" not in page.content()
    assert not app.errors
    errors = page.locator('[data-testid="stAlert"]').filter(has_text="⚠").all_inner_texts()
    has_metrics = bool(metric_value(page, "Iteration time"))
    assert has_metrics or errors


# ------------------------------------------------------------------------------------------------
# Teaching: click a Gantt bar to explain it (issue 14.3)
# ------------------------------------------------------------------------------------------------
def test_clicking_a_gantt_bar_explains_it(app):
    app.open()
    app.assert_healthy()
    page = app.page
    bar = page.locator(".js-plotly-plot .barlayer .point path").first
    bar.click(force=True)
    page.get_by_text("Explain this bar").first.wait_for(timeout=30_000)
    page.get_by_text("Shorter with").first.wait_for(timeout=30_000)
    panel = page.inner_text("body")
    # The numbers recompute the bar's duration (issue 14's done-when, within 1 %): FLOPs over the
    # achieved rate for a compute bar; for a collective its calls times one call's time, plus what
    # the bar waits.
    import re
    duration = float(re.search(r"· chunk [^·\n]* · ([\d.]+) ms", panel).group(1))
    flops = re.search(r"model FLOPs: ([\d.,]+) TFLOP", panel)
    if flops:
        rate = float(re.search(r"= ([\d,]+) TFLOP/s", panel).group(1).replace(",", ""))
        assert float(flops.group(1).replace(",", "")) / rate * 1e3 == pytest.approx(duration, rel=0.01)
    else:
        call_ms = float(re.search(r"it achieved: ([\d.]+) ms for these bytes", panel).group(1))
        calls = re.search(r"repeats this call about ([\d,]+) times", panel)
        wait = re.search(r"the other ([\d.]+) ms of the bar wait", panel)
        total = call_ms * (int(calls.group(1).replace(",", "")) if calls else 1)
        total += float(wait.group(1)) if wait and not calls else 0.0
        assert total == pytest.approx(duration, rel=0.01, abs=2e-3)


def test_a_collective_bar_steps_through_its_call(app):
    """Clicking a data-parallel bar opens *Step through this call*: at its last step (the default)
    every ring link has carried 2(n-1)/n of the call's bytes, the table says so, and the step's
    alpha-beta sentence is there."""
    app.open()
    app.assert_healthy()
    page = app.page
    bars = page.locator(".js-plotly-plot .barlayer .point path")
    found = False
    for i in range(bars.count() - 1, max(bars.count() - 40, -1), -1):
        bars.nth(i).click(force=True)
        page.wait_for_timeout(600)
        if page.get_by_text("Step through this call").count():
            found = True
            break
    assert found, "no collective bar opened the step-through"
    page.get_by_text("Step through this call").first.click()
    page.get_by_text("t = α + bytes / β").first.wait_for(timeout=30_000)
    sentence = page.get_by_text("t = α + bytes / β").first.inner_text()
    assert "all-reduce" in sentence and "step" in sentence
    cells = page.locator('[data-testid="stTable"] td')
    cells.first.wait_for(timeout=30_000)
    page.wait_for_timeout(300)            # the table's rows render together; let the last settle
    texts = [cells.nth(i).inner_text().strip() for i in range(cells.count())]
    mb = [float(t.replace(",", "")) for t in texts
          if t and "→" not in t and t.replace(",", "").replace(".", "").isdigit()]
    links = [t for t in texts if "→" in t]
    assert links and len(mb) == len(links), texts
    assert len(set(mb)) == 1, mb            # a ring: every link the same
    # The call as the explanation states it: "<op> of X MB over n GPUs (ring)".
    import re
    said = re.search(r"of ([\d,.]+) MB over (\d+) GPUs \((\w[\w-]*)\)", page.content().replace("<strong>", "")
                     .replace("</strong>", ""))
    assert said, "the explanation names no call"
    size, n, algorithm = float(said.group(1).replace(",", "")), int(said.group(2)), said.group(3)
    if algorithm == "ring" and 2 <= n <= 16:
        # The table has 3 decimals, the explanation's size 2: within their rounding.
        assert mb[0] == pytest.approx(2 * (n - 1) / n * size, abs=0.011)
    app.assert_healthy()


def test_the_schedule_steps_through_in_chromium(app):
    """The Timeline's *Step through the schedule*: opened, it prints one sentence per stage at the
    moment its slider names (a quarter of the timeline by default), and the keyboard moves it on;
    its textbook mode prints one per rank at unit time (zero-bubble-8gpu: 8 stages, ZB-H1)."""
    app.open("?scenario=zero-bubble-8gpu")
    app.assert_healthy()
    page = app.page
    page.get_by_text("Step through the schedule").first.click()
    slider = page.locator('[data-testid="stSlider"] input[type="range"]').last
    slider.wait_for(state="attached", timeout=60_000)
    page.get_by_text("stage 7:", exact=False).first.wait_for(timeout=30_000)
    story = page.locator('[data-testid="stMarkdownContainer"]', has_text="stage 7:").last.inner_text()
    assert story.startswith("At ") and story.count("stage ") >= 8
    before = story.splitlines()[0]
    slider.focus()
    for _ in range(3):
        page.keyboard.press("ArrowRight")
    page.wait_for_function("(b) => ![...document.querySelectorAll('[data-testid=stMarkdownContainer]')]"
                           ".some(e => e.innerText.startsWith(b))", arg=before, timeout=30_000)
    wait_ready(page)
    page.get_by_text("textbook diagram (unit time)").click()
    wait_ready(page)
    page.get_by_text("Step through (time unit)").first.wait_for(timeout=30_000)
    slider = page.locator('[data-testid="stSlider"] input[type="range"]').last
    slider.focus()
    page.keyboard.press("Home")
    for _ in range(9):                          # units 0-8 shown: rank 0 waits in unit 8 (ZB-H1)
        page.keyboard.press("ArrowRight")
    page.get_by_text("In unit 8:").first.wait_for(timeout=30_000)
    wait_ready(page)
    text = page.inner_text("body")
    assert "idle (bubble): its input gradient of micro-batch 1 waits for rank 1's gradient" in text
    app.assert_healthy()


# ------------------------------------------------------------------------------------------------
# Issue 36: a list typed in the sidebar (GNN fan-outs) and PipeDream's stage replicas
# ------------------------------------------------------------------------------------------------
def test_a_new_depth_clears_the_split_and_replicas_of_the_old_one(fresh):
    """pipedream-vgg16's 13,3 layers on 15,1 GPUs are for two stages: at pp 4 (and a global batch
    that 4 replicas x 64 divide) the run is the CLI's with both lists unset, and the layer box is
    empty, in a real browser."""
    fresh.open("?scenario=pipedream-vgg16")
    page = fresh.page
    layers = reveal(page, page.locator(f'{key_css("_text.parallelism.stage_layers")} input'))
    assert layers.input_value() == "13,3"
    pp = reveal(page, number_input(page, "parallelism.pp"))
    pp.fill("4")
    pp.press("Enter")
    # 960 images are no multiple of 4 replicas x 64: the message names the global batch, a box shown.
    page.locator("text=training.global_batch: >> visible=true").first.wait_for(state="visible")
    batch = reveal(page, number_input(page, "training.global_batch"))
    batch.fill("1024")
    batch.press("Enter")
    expected = cli_iteration("pipedream-vgg16", "parallelism.pp=4", "parallelism.dp=4",
                             "training.global_batch=1024", "parallelism.stage_layers=null",
                             "parallelism.stage_replicas=null")
    wait_metric(page, "Iteration time", expected)
    wait_ready(page)
    fresh.assert_healthy()
    assert page.locator(f'{key_css("_text.parallelism.stage_layers")} input').input_value() == ""


@pytest.mark.parametrize("scenario,key,text,expect", [
    ("gnn-sage-papers100m", "model.gnn.fanouts", "25,10,5", ("model.gnn.fanouts=25,10,5",)),
    ("pipedream-vgg16", "parallelism.stage_replicas", "14,2", ("parallelism.stage_replicas=14,2",))])
def test_a_list_typed_in_the_sidebar_is_simulated(fresh, scenario, key, text, expect):
    fresh.open(f"?scenario={scenario}")
    page = fresh.page
    box = reveal(page, page.locator(f'{key_css("_text." + key)} input'))
    before = metric_value(page, "Iteration time")
    box.fill(text)
    box.press("Enter")
    expected = cli_iteration(scenario, *expect)
    assert expected != before
    wait_metric(page, "Iteration time", expected)
    fresh.assert_healthy()
    assert query_of(page.url)[key] == [f"[{text}]"]
    box.fill(text.replace(",", ";"))
    box.press("Enter")
    page.get_by_text(f"{key}: ", exact=False).first.wait_for(state="visible")
    assert metric_value(page, "Iteration time") == expected          # the last valid value stays
