"""Latency of the Streamlit app in a real browser (Debian's Chromium through Playwright).

For every shipped scenario:

* first load — a NEW browser context (empty HTTP cache, new Streamlit session) opens
  ``?scenario=<name>``; timed from ``goto`` until the page has settled showing the scenario's
  iteration time, with every Plotly chart drawn.  The first of these is the first visit of the
  scenario on this server (its simulation is not cached yet); the others hit Streamlit's cache.
* control change — one sidebar number input (the NIC speed, or the NVLink bandwidth where the
  NIC does not matter) is set to a new value and committed with Enter; timed until the
  "Iteration time" card shows the value the core computes for it, no element is stale, no run is
  in progress and the Gantt has been redrawn with new data.  First ``--repeat`` changes go to values
  never seen before (uncached: the server simulates); then ``--repeat`` changes alternate between
  two values already visited (cached in ``st.cache_data``: what remains is Streamlit + the browser).

* tab switch (``--views``) — on a page settled on its Timeline, each other tab is clicked in turn;
  timed until that tab's panel has content, every chart in it has drawn and no run is in
  progress.  The Design space tab is opened first on a server that has not priced this scenario
  yet (its heatmap, upgrades and scaling curve run when estimated cheap): its "first open".
  Then its quick layout search is started and timed until the table is shown; the page's own
  plan ("planned about N s") is read beside it.

Times are taken when the settled state is first observed (polled every 50 ms in the page).
``tests/browser_support.wait_ready`` is then called to check that no further run follows; it adds
a fixed 300 ms pause, so the "+wait_ready" column (median over all changes) is about 0.3 s longer.
The "card" column is the first feedback: until the Iteration time card alone shows the new value
(the Gantt may still be redrawing).  "errors" counts page JS errors and Streamlit exceptions.

Targets (issue 32, a quiet 2-core machine): first load <= 3 s, control change median <= 0.5 s,
tab switch <= 1 s, Design space first open <= 5 s, the quick search within its own plan.

``--set KEY=VALUE`` (repeatable) opens every scenario with those overrides in its link, e.g. the
issue's check of a long pipeline: ``--scenario megatron-gpt3-175b --set training.global_batch=16384``.

Usage: python bench/app_latency.py [--repeat N] [--scenario NAME ...] [--set KEY=VALUE ...]
"""
from __future__ import annotations

import argparse
import re
import statistics
import sys
import time
from pathlib import Path
from urllib.parse import urlencode

ROOT = Path(__file__).resolve().parents[1]
for p in (ROOT, ROOT / "tests"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

from browser_support import CHROMIUM_ARGS, chromium_path, streamlit_server, wait_ready  # noqa: E402

TARGET_CHANGE_S = 0.5
TARGET_LOAD_S = 3.0
TARGET_TAB_S = 1.0
TARGET_DESIGN_S = 5.0
TABS = ("Memory", "Traffic", "Topology", "Scenario & files", "Compare", "Design space")
TAB_SETTLED_JS = """(label) => {
    if (document.querySelector('[data-testid="stStatusWidget"]')) return false;
    if (document.querySelector('[data-stale="true"]')) return false;
    if (document.querySelectorAll('[data-testid="stSkeleton"]').length) return false;
    const tab = [...document.querySelectorAll('[role="tab"]')].find(b => b.innerText.trim() === label);
    if (!tab || tab.getAttribute('aria-selected') !== 'true') return false;
    const panel = document.getElementById(tab.getAttribute('aria-controls'));
    if (!panel || panel.innerText.trim().length === 0) return false;
    for (const c of panel.querySelectorAll('[data-testid="stPlotlyChart"]'))
        if (!c.querySelector('.main-svg')) return false;
    return true;
}"""
VIEWPORT = {"width": 1600, "height": 1000}
BASE: dict = {}          # --set overrides, applied to every scenario (in its link too)
CONTROLS = ("cluster.scale_out.nic_Gbps", "cluster.scale_up.bandwidth_GBps", "model.seq_len")

SETTLED_JS = """([label, expected, oldData]) => {
    if (document.querySelector('[data-testid="stStatusWidget"]')) return false;
    if (document.querySelector('[data-stale="true"]')) return false;
    if (document.querySelectorAll('[data-testid="stSkeleton"]').length) return false;
    for (const c of document.querySelectorAll('[data-testid="stPlotlyChart"]'))
        if (!c.querySelector('.main-svg')) return false;
    const gd = document.querySelector('.st-key-gantt .js-plotly-plot');
    if (!gd || !gd.querySelector('.main-svg')) return false;
    if (oldData && window.__benchOldGantt && gd.data === window.__benchOldGantt) return false;
    for (const m of document.querySelectorAll('[data-testid="stMetric"]')) {
        const l = m.querySelector('[data-testid="stMetricLabel"]');
        const v = m.querySelector('[data-testid="stMetricValue"]');
        if (l && v && l.innerText.trim() === label) return v.innerText.trim() === expected;
    }
    return false;
}"""


def fmt_time(s: float) -> str:
    """The app's format for the "Iteration time" card."""
    return f"{s * 1e3:.1f} ms" if s < 1 else f"{s:.3f} s"


def expected_display(name: str, overrides: dict) -> str:
    """What the app shows for preset ``name`` plus ``overrides`` (same path as app.py: the preset
    without dp, the overrides applied, validated, simulated)."""
    from explorer.scenario import apply_overrides, from_dict
    from explorer.share import preset_raw
    from explorer.simulate import simulate
    raw = apply_overrides(preset_raw(name), {**BASE, **overrides})
    return fmt_time(simulate(from_dict(raw)).iteration_time_s)


def plan_changes(
    name: str, repeat: int
) -> tuple[str, float, list[tuple[float, str]], list[tuple[float, str]]]:
    """Pick the control and its values: ``repeat`` never-seen values whose displayed iteration
    times differ from one step to the next, then ``repeat`` alternations between two visited
    values.  Returns (key, base value, new [(value, display)], cached [(value, display)])."""
    from explorer.scenario import apply_overrides, from_dict, to_dict
    from explorer.share import flatten, preset_raw
    flat = flatten(to_dict(from_dict(apply_overrides(preset_raw(name), BASE))))
    base_display = expected_display(name, {})
    for key in CONTROLS:
        base = float(flat[key])
        new: list[tuple[float, str]] = []
        prev = base_display
        seen = {base}
        for i in range(4 * repeat):
            if len(new) == repeat:
                break
            value = float(round(base * (0.1 + 0.85 * i / (4 * repeat))))
            if value in seen or value <= 0:
                continue
            try:
                display = expected_display(name, {key: value})
            except ValueError:      # ScenarioError: this value breaks a rule; try the next one
                continue
            if display != prev:
                new.append((value, display))
                seen.add(value)
                prev = display
        if len(new) < repeat or new[0][1] == base_display or new[-1][1] == base_display:
            continue
        pair = [(base, base_display), new[0]]
        cached = [pair[i % 2] for i in range(repeat)]
        return key, base, new, cached
    raise SystemExit(f"{name}: none of {', '.join(CONTROLS)} changes the iteration time; "
                     "pick another control")


def settle(page, expected: str, gantt_must_change: bool, timeout_s: float = 120) -> float:
    page.wait_for_function(SETTLED_JS, arg=["Iteration time", expected, gantt_must_change],
                           timeout=timeout_s * 1000, polling=50)
    return time.perf_counter()


def number_box(page, key: str):
    box = page.locator(f'.st-key-{key.replace(".", "-")} input[data-testid="stNumberInputField"]')
    if not box.is_visible():   # inside a collapsed sidebar expander: open it
        page.locator('[data-testid="stExpander"]', has=box).locator("summary").click()
        box.wait_for(state="visible")
    return box


def load_once(browser, url: str, expected: str) -> tuple[float, float]:
    """Open ``url`` in a new context; (seconds until settled, seconds until wait_ready returned)."""
    ctx = browser.new_context(viewport=VIEWPORT)
    try:
        page = ctx.new_page()
        t0 = time.perf_counter()
        page.goto(url)
        t1 = settle(page, expected, False)
        wait_ready(page)
        return t1 - t0, time.perf_counter() - t0
    finally:
        ctx.close()


CARD_JS = """([label, expected]) => [...document.querySelectorAll('[data-testid="stMetric"]')].some(m => {
    const l = m.querySelector('[data-testid="stMetricLabel"]');
    const v = m.querySelector('[data-testid="stMetricValue"]');
    return l && v && l.innerText.trim() === label && v.innerText.trim() === expected; })"""


def change_once(page, box, value: float, expected: str) -> tuple[float, float, float]:
    """Set ``box`` to ``value``; (seconds until the card shows ``expected``, until the page has
    settled, until wait_ready returned)."""
    page.evaluate("() => { const gd = document.querySelector('.st-key-gantt .js-plotly-plot');"
                  " window.__benchOldGantt = gd ? gd.data : null; }")
    t0 = time.perf_counter()
    box.fill(f"{value:g}")
    box.press("Enter")
    page.wait_for_function(CARD_JS, arg=["Iteration time", expected], timeout=120_000, polling=20)
    t_card = time.perf_counter()
    t1 = settle(page, expected, True)
    wait_ready(page)
    return t_card - t0, t1 - t0, time.perf_counter() - t0


def views_once(browser, url: str, expected: str) -> tuple[dict[str, float], float, float | None]:
    """Open ``url`` (settled on the Timeline), open Design space first, then every other tab; then
    run the quick layout search.  Returns ({tab: seconds until its panel settled}, the search's
    seconds until its table showed, the seconds the page had planned for it)."""
    ctx = browser.new_context(viewport=VIEWPORT)
    try:
        page = ctx.new_page()
        page.goto(url)
        settle(page, expected, False)
        wait_ready(page)
        out: dict[str, float] = {}
        for label in ("Design space", *[t for t in TABS if t != "Design space"]):
            t0 = time.perf_counter()
            page.get_by_role("tab", name=label, exact=True).click()
            page.wait_for_function(TAB_SETTLED_JS, arg=label, timeout=300_000, polling=50)
            out[label] = time.perf_counter() - t0
        page.get_by_role("tab", name="Design space", exact=True).click()
        page.wait_for_function(TAB_SETTLED_JS, arg="Design space", timeout=300_000, polling=50)
        t0 = time.perf_counter()
        page.locator(".st-key-_d_search button").click()
        caption = page.get_by_text("layouts enumerated").first
        caption.wait_for(state="visible", timeout=600_000)
        searched = time.perf_counter() - t0
        planned = re.search(r"planned about ([\d,.]+) s", caption.inner_text())
        return out, searched, float(planned.group(1).replace(",", "")) if planned else None
    finally:
        ctx.close()


def stats(xs: list[float]) -> tuple[float, float]:
    return statistics.median(xs), max(xs)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=7, help="loads and changes (of each kind) per scenario [7]")
    ap.add_argument("--scenario", action="append", help="only this shipped scenario (repeatable)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="override applied to every scenario, in its link too (repeatable)")
    ap.add_argument("--views", action="store_true",
                    help="also time every tab switch, the Design space's first open and its quick search")
    args = ap.parse_args(argv)
    from explorer.scenario import parse_assignment
    BASE.update(dict(parse_assignment(s) for s in args.set))
    if args.repeat < 2:
        ap.error("--repeat must be at least 2")
    exe = chromium_path()
    if exe is None:
        print("no Chromium found (set CHROMIUM=/path/to/chromium)", file=sys.stderr)
        return 2
    from playwright.sync_api import sync_playwright

    from explorer.share import shipped_scenarios
    names = args.scenario or list(shipped_scenarios())
    unknown = set(names) - set(shipped_scenarios())
    if unknown:
        ap.error(f"unknown scenario(s): {', '.join(sorted(unknown))}")
    plans = {n: plan_changes(n, args.repeat) for n in names}

    rows = []
    view_rows: list[tuple[str, dict[str, float], float, float | None]] = []
    all_load, all_first_load, all_new, all_cached, all_card, all_wr = [], [], [], [], [], []
    with streamlit_server() as base, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=exe, args=CHROMIUM_ARGS)
        # Server cold start: the first page ever imports the app's modules.  Use a scenario
        # variant no measurement below will ask for, so that every scenario's first visit stays
        # uncached.
        cold_set = {**{k: str(v) for k, v in BASE.items()}, "cluster.scale_up.latency_us": "2.5"}
        cold_url = f"{base}?{urlencode({'scenario': names[0], **cold_set})}"
        cold, _ = load_once(browser, cold_url,
                            expected_display(names[0], {"cluster.scale_up.latency_us": 2.5}))
        print(f"server cold start (first page after launch, new context): {cold:.2f} s", flush=True)
        for name in names:
            key, base_value, new, cached = plans[name]
            base_display = expected_display(name, {})
            url = f"{base}?{urlencode({'scenario': name, **{k: str(v) for k, v in BASE.items()}})}"
            loads = [load_once(browser, url, base_display)[0] for _ in range(args.repeat)]
            ctx = browser.new_context(viewport=VIEWPORT)
            page = ctx.new_page()
            errors: list[str] = []
            page.on("pageerror", lambda exc, errors=errors: errors.append(str(exc)))
            page.goto(url)
            settle(page, base_display, False)
            wait_ready(page)
            box = number_box(page, key)
            t_new, t_cached, t_card, t_wr = [], [], [], []
            for value, display in new:
                c, a, b = change_once(page, box, value, display)
                t_card.append(c)
                t_new.append(a)
                t_wr.append(b)
            for value, display in cached:
                c, a, b = change_once(page, box, value, display)
                t_card.append(c)
                t_cached.append(a)
                t_wr.append(b)
            exc = page.locator('[data-testid="stException"]').count()
            ctx.close()
            if args.views:
                tabs, searched, planned = views_once(browser, url, base_display)
                view_rows.append((name, tabs, searched, planned))
                print(f"  {name}: tabs " + ", ".join(f"{k} {v:.2f}" for k, v in tabs.items())
                      + f" s; quick search {searched:.2f} s (planned {planned} s)", flush=True)
            rows.append((name, key.split(".")[-1], f"{base_value:g}", loads[0], *stats(loads), *stats(t_new),
                         *stats(t_cached), statistics.median(t_card), statistics.median(t_wr),
                         len(errors) + exc))
            all_load += loads
            all_first_load.append(loads[0])
            all_new += t_new
            all_cached += t_cached
            all_wr += t_wr
            all_card += t_card
            print(f"  {name}: done; each change until settled, new then cached: "
                  f"{' '.join(f'{t:.2f}' for t in t_new)} | {' '.join(f'{t:.2f}' for t in t_cached)} s",
                  flush=True)
        browser.close()

    n = args.repeat
    print()
    print(f"App latency in Chromium, seconds.  Per scenario: {n} first loads, "
          "each in a new browser context;\n"
          f"{n} changes to never-seen values (new: the server simulates), "
          f"{n} between two visited values (cached).\n"
          "load/new/cached: until settled (card shows the new value, no run in progress, charts redrawn);\n"
          "card: until the Iteration time card alone shows it; +wait_ready: until wait_ready returned\n"
          "(includes its fixed 0.3 s pause); card and +wait_ready are medians over all changes.")
    hdr = (f"{'scenario':<20} {'control':<19} {'load 1st':>8} {'load med':>8} {'load max':>8} | "
           f"{'new med':>7} {'new max':>7} | {'cached med':>10} {'cached max':>10} | "
           f"{'card':>5} {'+wait_ready':>11} | "
           f"{'errors':>6} {'target':>6}")
    print(hdr)
    print("-" * len(hdr))
    failing = []
    for r in rows:
        name, ctl, bv, l1, lmed, lmax, nmed, nmax, cmed, cmax, card, wr, err = r
        ok = lmed <= TARGET_LOAD_S and nmed <= TARGET_CHANGE_S and cmed <= TARGET_CHANGE_S and not err
        if not ok:
            failing.append(name)
        print(f"{name:<20} {ctl + '=' + bv:<19} {l1:>8.2f} {lmed:>8.2f} {lmax:>8.2f} | "
              f"{nmed:>7.2f} {nmax:>7.2f} | {cmed:>10.2f} {cmax:>10.2f} | {card:>5.2f} {wr:>11.2f} | "
              f"{err:>6} {'ok' if ok else 'MISS':>6}")
    print("-" * len(hdr))
    lmed, lmax = stats(all_load)
    nmed, nmax = stats(all_new)
    cmed, cmax = stats(all_cached)
    print(f"{'overall':<20} {'':<19} {statistics.median(all_first_load):>8.2f} {lmed:>8.2f} {lmax:>8.2f} | "
          f"{nmed:>7.2f} {nmax:>7.2f} | {cmed:>10.2f} {cmax:>10.2f} | {statistics.median(all_card):>5.2f} "
          f"{statistics.median(all_wr):>11.2f} |")
    print(f"targets: median <= {TARGET_CHANGE_S} s after a control change (new and cached), median <= "
          f"{TARGET_LOAD_S} s first load, per scenario -> "
          + ("all scenarios meet them" if not failing else f"MISSED by {', '.join(failing)}")
          + f"; overall medians: change {nmed:.2f} s new / {cmed:.2f} s cached, first load {lmed:.2f} s "
          f"(worst {lmax:.2f} s); server cold start {cold:.2f} s")
    if view_rows:
        print()
        print(f"{'scenario':<20} {'design 1st':>10} {'tab med':>8} {'tab max':>8} | {'quick search':>12} "
              f"{'planned':>8} | target")
        switches: list[float] = []
        for name, tabs, searched, planned in view_rows:
            others = [v for k, v in tabs.items() if k != "Design space"]
            switches += others
            ok = (tabs["Design space"] <= TARGET_DESIGN_S and max(others) <= TARGET_TAB_S
                  and (planned is None or searched <= planned))
            print(f"{name:<20} {tabs['Design space']:>10.2f} {statistics.median(others):>8.2f} "
                  f"{max(others):>8.2f} | "
                  f"{searched:>12.2f} {planned if planned is not None else float('nan'):>8.0f} | "
                  f"{'ok' if ok else 'MISS'}")
        print(f"targets: Design space first open <= {TARGET_DESIGN_S} s, tab switch <= {TARGET_TAB_S} s, "
              f"quick search within its plan; tab switches: median {statistics.median(switches):.2f} s, "
              f"max {max(switches):.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
