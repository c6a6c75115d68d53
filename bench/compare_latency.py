"""Update time of the Compare view in a real browser (Debian's Chromium through Playwright).

Opens ``?scenario=<name>&view=compare`` (B = A), picks a field in the B editor (default the
NVLink bandwidth), then repeatedly types a value and clicks "Set in B".  Each change is timed from
the click until the page has settled with the new figures: no run in progress, nothing stale, every
Plotly chart drawn, B's Gantt and the waterfall holding new data (not the objects drawn before the
click), and B's "Iteration time" card showing the value the core computes for A plus that
override.  First ``--repeat`` values never seen before (the server simulates B), then ``--repeat``
alternations between two values already shown (B comes from the view cache: what remains is
Streamlit, the figures and the browser).

Usage: python bench/compare_latency.py [--scenario NAME] [--field KEY] [--repeat N]
Prints one line per change and the medians in seconds.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for p in (ROOT, ROOT / "tests"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

from browser_support import CHROMIUM_ARGS, chromium_path, streamlit_server, wait_ready  # noqa: E402

VIEWPORT = {"width": 1440, "height": 900}

SETTLED_JS = """([expected]) => {
    if (document.querySelector('[data-testid="stStatusWidget"]')) return false;
    if (document.querySelector('[data-stale="true"]')) return false;
    if (document.querySelectorAll('[data-testid="stSkeleton"]').length) return false;
    for (const c of document.querySelectorAll('[data-testid="stPlotlyChart"]'))
        if (!c.querySelector('.main-svg')) return false;
    for (const key of ['gantt_b', 'waterfall']) {
        const gd = document.querySelector('.st-key-' + key + ' .js-plotly-plot');
        if (!gd || !gd.querySelector('.main-svg')) return false;
        if (window.__old && gd.data === window.__old[key]) return false;
    }
    const times = [...document.querySelectorAll('[data-testid="stMetric"]')].filter(m => {
        const l = m.querySelector('[data-testid="stMetricLabel"]');
        return l && l.innerText.trim() === 'Iteration time'; });
    if (times.length < 2) return false;
    const v = times[times.length - 1].querySelector('[data-testid="stMetricValue"]');
    return v && v.innerText.trim() === expected;
}"""

REMEMBER_JS = """() => { window.__old = {};
    for (const key of ['gantt_b', 'waterfall']) {
        const gd = document.querySelector('.st-key-' + key + ' .js-plotly-plot');
        window.__old[key] = gd ? gd.data : null; } }"""


def fmt_time(s: float) -> str:
    """The app's format for the "Iteration time" card."""
    return f"{s * 1e3:.1f} ms" if s < 1 else f"{s:.3f} s"


def expected_display(name: str, key: str, value: float) -> str:
    """B's Iteration time card for preset ``name`` with ``key`` = ``value`` (the app's path: the
    preset without dp, the override applied, validated, simulated)."""
    from explorer.scenario import apply_overrides, from_dict
    from explorer.share import preset_raw
    from explorer.simulate import simulate
    return fmt_time(simulate(from_dict(apply_overrides(preset_raw(name), {key: value}))).iteration_time_s)


def plan(name: str, key: str, repeat: int) -> tuple[list[tuple[float, str]], list[tuple[float, str]]]:
    """``repeat`` new values whose displayed times differ step to step, then ``repeat``
    alternations between the first two."""
    from explorer.scenario import from_dict, to_dict
    from explorer.share import flatten, preset_raw
    base = float(flatten(to_dict(from_dict(preset_raw(name))))[key])
    new, prev = [], expected_display(name, key, base)
    for i in range(1, 8 * repeat):
        if len(new) == repeat:
            break
        value = float(round(base * (0.05 + 0.9 * i / (8 * repeat)), 1))
        display = expected_display(name, key, value)
        if display != prev and value not in (v for v, _ in new):
            new.append((value, display))
            prev = display
    if len(new) < 2:
        raise SystemExit(f"{name}: {key} does not change the iteration time; pick another --field")
    cached = [new[(i + 1) % 2] if len(new) > 1 else new[0] for i in range(repeat)]
    if cached[0] == new[-1]:          # the first cached value must differ from what is on screen
        cached = cached[1:] + cached[:1]
    return new, cached


def pick_field(page, key: str) -> None:
    page.locator(".st-key-_b_field input").click()
    page.keyboard.type(key)
    page.get_by_role("option", name=key, exact=True).click()
    wait_ready(page)


def change(page, value: float, expected: str) -> float:
    """Type ``value``, commit it, click "Set in B"; seconds from the click until settled."""
    box = page.locator('.st-key-_b_value input')
    box.fill(f"{value:g}")
    box.press("Enter")            # commits the text (a rerun that changes nothing on screen)
    wait_ready(page)
    page.evaluate(REMEMBER_JS)
    t0 = time.perf_counter()
    page.locator('.st-key-_b_set button').click()
    page.wait_for_function(SETTLED_JS, arg=[expected], timeout=120_000, polling=20)
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scenario", default="teaching-8gpu")
    ap.add_argument("--field", default="cluster.scale_up.bandwidth_GBps")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args(argv)
    exe = chromium_path()
    if exe is None:
        print("no Chromium found (set CHROMIUM=/path/to/chromium)", file=sys.stderr)
        return 2
    from playwright.sync_api import sync_playwright

    new, cached = plan(args.scenario, args.field, args.repeat)
    with streamlit_server() as base, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=exe, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport=VIEWPORT)
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(f"{base}?scenario={args.scenario}&view=compare")
        wait_ready(page)
        pick_field(page, args.field)
        times: dict[str, list[float]] = {"new": [], "cached": []}
        for kind, values in (("new", new), ("cached", cached)):
            for value, expected in values:
                dt = change(page, value, expected)
                times[kind].append(dt)
                print(f"{kind:>6}  {args.field}={value:g}  B {expected:>10}  {dt:.2f} s", flush=True)
        exceptions = page.locator('[data-testid="stException"]').count()
        browser.close()
    print(f"compare view update, {args.scenario}: median {statistics.median(times['new']):.2f} s "
          f"(max {max(times['new']):.2f}) for a new B, median {statistics.median(times['cached']):.2f} s "
          f"(max {max(times['cached']):.2f}) for a cached B; page errors {len(errors)}, "
          f"exceptions {exceptions}")
    return 0 if not errors and not exceptions else 1


if __name__ == "__main__":
    sys.exit(main())
