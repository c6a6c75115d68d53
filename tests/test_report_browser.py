"""Issue 39 item 4, in a real browser: the HTML report opens in Chromium from a file:// URL with
every http(s) request refused, and every chart draws (an SVG with its traces, no JavaScript error,
no request attempted).  Screenshots at 1440x900 land in pytest's tmp_path (looked at by hand when
the report's layout changes: --basetemp keeps them).

Skipped only when Playwright is not importable or no Chromium is installed.
"""
from __future__ import annotations

import pytest

from explorer.cli import main

from browser_support import CHROMIUM_ARGS, chromium_path
from report_support import parse_report

pytestmark = pytest.mark.slow      # Chromium: the full suite only

try:
    from playwright.sync_api import sync_playwright
except ImportError:  # pragma: no cover - depends on the environment
    pytest.skip("playwright is not installed", allow_module_level=True)
if chromium_path() is None:  # pragma: no cover - depends on the environment
    pytest.skip("no Chromium executable found", allow_module_level=True)

SCENARIOS = ("teaching-8gpu", "resnet50-cloud-dp", "two-datacenters")
VIEWPORT = {"width": 1440, "height": 900}

# Per chart div: drawn by Plotly (its layout computed, its SVG in place) and how many traces it drew.
DRAWN = """() => Array.from(document.querySelectorAll('.plotly-graph-div')).map(d => ({
    id: d.id, laidOut: !!d._fullLayout, svg: !!d.querySelector('.main-svg'),
    traces: (d._fullData || []).length,
    marks: d.querySelectorAll('.trace, .shapelayer path, .layer-above path').length}))"""


@pytest.fixture(scope="module")
def browser():
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


@pytest.mark.parametrize("name", SCENARIOS)
def test_report_draws_every_chart_offline(browser, tmp_path, capsys, name):
    path = tmp_path / f"{name}.html"
    assert main(["report", name, "--html", str(path)]) == 0
    capsys.readouterr()
    expected = parse_report(path.read_text(encoding="utf-8")).plotly_divs
    context = browser.new_context(viewport=VIEWPORT, offline=True)
    requested: list[str] = []

    def refuse(route):
        requested.append(route.request.url)
        route.abort()

    context.route("http://**/*", refuse)
    context.route("https://**/*", refuse)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    try:
        page.goto(path.as_uri(), wait_until="load")
        page.wait_for_function(
            "n => document.querySelectorAll('.plotly-graph-div .main-svg').length >= n", arg=len(expected),
            timeout=30_000)     # drawn within a second or two; a CDN script would never load
        drawn = page.evaluate(DRAWN)
        page.screenshot(path=str(tmp_path / f"{name}-1440x900.png"))
        page.screenshot(path=str(tmp_path / f"{name}-full.png"), full_page=True)
        cards = page.locator(".card").count()
        link = page.locator("#share-link").get_attribute("href")
    finally:
        context.close()
    assert errors == [] and requested == [], (errors, requested)
    assert [d["id"] for d in drawn] == expected
    for d in drawn:
        assert d["laidOut"] and d["svg"] and d["traces"] > 0 and d["marks"] > 0, d
    assert cards >= 7 and link == f"http://localhost:8501/?scenario={name}"
