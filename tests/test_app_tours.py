"""Guided tours in the app (streamlit.testing): a tour link opens at its step — a bare
``?tour=NAME&step=N`` too, on exactly the step's scenario and view —, next/previous load the steps'
links, the sidebar starts a tour; presentation mode's charts have 18-px text and keep their
exports, titled with the scenario."""
from __future__ import annotations

import contextlib
import io
import json
import os

import plotly.graph_objects as go
import pytest

from explorer.cli import main as cli_main
from explorer.figures.fonts import PRESENT_FONT_PX, text_sizes
from explorer.teaching.tours import tours
from explorer.ui.export import for_file, images_available

from app_support import qp, run_app

STEPS = [(name, i) for name, t in sorted(tours().items()) for i in range(1, len(t.steps) + 1)]


def _first_of_each_view() -> list[tuple[str, int]]:
    """Each tour's first step and the first step of each other view it opens: a step on a view
    already checked in its tour adds a scenario, not a layout (every step's figures are checked
    against the CLI in tests/test_tours.py and tests/test_tour_*.py).  All of them with
    COMMEXPLORER_FULL_SWEEP=1."""
    if os.environ.get("COMMEXPLORER_FULL_SWEEP", "") == "1":
        return STEPS
    seen: set[tuple[str, str]] = set()
    out = []
    for name, i in STEPS:
        view = tours()[name].steps[i - 1].params.get("view", "timeline")
        if i == 1 or (name, view) not in seen:
            out.append((name, i))
        seen.add((name, view))
    return out


CHECKED = _first_of_each_view()
# The quick tier (-m "not slow") opens the first step of each tour; the full suite the first step of
# each view of each tour (every step with COMMEXPLORER_FULL_SWEEP=1).
STEP_CASES = [pytest.param(name, i, marks=[pytest.mark.slow] if i > 1 else []) for name, i in CHECKED]


def fmt_time(s: float) -> str:
    """The app's format of the first card (explorer/ui/views/metrics.py)."""
    return f"{s * 1e3:.1f} ms" if s < 1 else f"{s:.3f} s"


def cli_run(link_params: dict[str, str]) -> dict:
    """``python -m explorer run SCENARIO --set k=v ... --json`` of a step's link, in process."""
    args = ["run", link_params["scenario"]]
    for k, v in link_params.items():
        if k not in ("scenario", "view"):
            args += ["--set", f"{k}={v}"]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert cli_main(args + ["--json"]) == 0, args
    return json.loads(out.getvalue())


def first_card(at) -> tuple[str, str]:
    card = next(m for m in at.metric if m.label in ("Iteration time", "Time per step", "TTFT"))
    return card.label, card.value


def card_figure(label: str, j: dict) -> float:
    """The run --json figure the first card shows: a serving scenario's TTFT (issue 37), else the
    iteration or the amortised step."""
    if label == "TTFT":
        return j["inference"]["ttft_s"]
    return j["time_per_step_s" if label == "Time per step" else "iteration_time_s"]


def figures_of(at) -> dict[str, go.Figure]:
    """The page's Plotly charts by key, as drawn (their JSON spec)."""
    return {e.proto.id.rsplit("-", 1)[-1]: go.Figure(json.loads(e.proto.spec))
            for e in at.get("plotly_chart")}


@pytest.mark.parametrize(("name", "i"), STEP_CASES)
def test_a_bare_tour_link_opens_its_steps_scenario(name, i):
    """Issue 32: ``?tour=NAME&step=N&present=1`` opened the default scenario (1F1B, 106.3 ms) under
    the narration of GPipe (89.1 ms).  Now the card is the CLI's figure of the step's own link, the
    step's view is open, and the address bar is the step's link with the tour."""
    step = tours()[name].steps[i - 1]
    at = run_app(tour=name, step=str(i), present="1")
    j = cli_run(step.params)
    label, value = first_card(at)
    assert value == fmt_time(card_figure(label, j))
    assert qp(at, "scenario") == step.params["scenario"] and qp(at, "view") == step.params.get("view")
    assert (qp(at, "tour"), qp(at, "step"), qp(at, "present")) == (name, str(i), "1")
    assert not [w.value for w in at.warning if w.value.startswith("Link:")]
    assert any(f"step {i} of {len(tours()[name].steps)}" in e.label for e in at.expander)


def test_a_bare_tour_link_without_present_mode_shows_the_narration():
    at = run_app(tour="pipeline-bubbles", step="1")
    assert first_card(at) == ("Iteration time", "89.1 ms")
    assert any(m.value.startswith("Eight GPUs: a 1.3B model") for m in at.markdown)


@pytest.mark.parametrize(("query", "warning", "card"), [
    ({"tour": "nope", "step": "2"}, "Link: ignored tour=nope: not a tour", "106.3 ms"),
    ({"tour": "pipeline-bubbles", "step": "99"}, "Link: ignored step: tour pipeline-bubbles has steps 1 to 7",
     "89.1 ms"),
    ({"tour": "pipeline-bubbles", "step": "x", "present": "1"}, "Link: ignored step:", "89.1 ms"),
    # A superscript is a digit to str.isdigit, not to int(): it stopped the app.
    ({"tour": "pipeline-bubbles", "step": "²"}, "Link: ignored step:", "89.1 ms"),
])
def test_a_bad_tour_link_warns_in_one_line_and_opens_a_valid_scenario(query, warning, card):
    """An unknown tour: the default scenario (teaching-8gpu's 1F1B); a step out of range: step 1."""
    at = run_app(**query)
    assert not at.exception and not at.error
    assert [w.value for w in at.warning if w.value.startswith(warning) and "\n" not in w.value]
    assert first_card(at)[1] == card


@pytest.mark.parametrize(("scenario", "view"), [
    ("teaching-8gpu", "timeline"), ("two-datacenters", "timeline"), ("two-datacenters", "topology"),
    ("deepseek-v3", "memory"), ("teaching-8gpu", "traffic")])
def test_presentation_charts_have_18_px_text(scenario, view):
    """Every chart's tick labels, axis titles, legend, title, colour bars and annotations are at
    least 18 px in presentation mode, set explicitly (the app's Streamlit theme gives a tick label
    that inherits 12 px); outside it the figures keep their 12 px."""
    figs = figures_of(run_app(scenario=scenario, view=view, present="1"))
    assert figs
    for key, fig in figs.items():
        small = {k: v for k, v in text_sizes(fig).items() if v < PRESENT_FONT_PX}
        assert not small, (key, small)
    normal = figures_of(run_app(scenario=scenario, view=view))
    assert min(min(text_sizes(f).values()) for f in normal.values()) <= 12


def _exports(at) -> set[str]:
    return {b.key for p in at.get("popover") for b in p.children.values() if getattr(b, "key", "")}


def test_presentation_keeps_every_charts_exports_in_one_menu():
    """Issue 32: the Export buttons disappeared in presentation mode; now they gather in one menu
    beside Copy link (no row of the projector's screen)."""
    at = run_app(tour="pipeline-bubbles", step="1", present="1")
    keys = _exports(at)
    for chart in ("gantt", "breakdown"):
        assert f"{chart}_html" in keys
        assert {f"{chart}_png", f"{chart}_svg"} <= keys or not images_available()


@pytest.mark.slow
def test_an_exported_chart_carries_the_pages_title():
    """The exported file of the Gantt as drawn: the page's heading is its title (during a tour the
    step's, which names what the step shows); a chart's own title becomes the subtitle; the file's
    text is at least 18 px."""
    at = run_app(tour="pipeline-bubbles", step="1", present="1")
    title = "A pipeline of four stages"
    assert any(m.value == f"## {title}" for m in at.markdown)
    figs = figures_of(at)
    out = for_file(figs["gantt"], title)
    assert out.layout.title.text == title and out.layout.title.subtitle.text is None
    assert min(text_sizes(out).values()) >= PRESENT_FONT_PX
    own = for_file(figs["breakdown"], title)
    assert own.layout.title.text == title
    assert own.layout.title.subtitle.text == figs["breakdown"].layout.title.text
    assert own.layout.title.subtitle.text == "Where the time goes · stage 0"
    if images_available():
        svg = out.to_image(format="svg", width=1920, height=1080).decode()
        assert title in svg


def test_a_tour_link_opens_at_its_step_and_next_moves_on():
    at = run_app(tour="pipeline-bubbles", step="3", scenario="teaching-8gpu",
                 **{"parallelism.ideal_pipeline": "true"})
    assert any("step 3 of 7" in m.value for m in at.markdown)
    next(b for b in at.button if b.key == "tour_next").click().run()
    assert not at.exception
    assert qp(at, "tour") == "pipeline-bubbles" and qp(at, "step") == "4"
    assert at.session_state["parallelism.schedule"] == "interleaved"
    assert at.session_state["parallelism.vpp"] == 2
    assert any("step 4 of 7" in m.value for m in at.markdown)
    next(b for b in at.button if b.key == "tour_prev").click().run()
    assert qp(at, "step") == "3" and at.session_state["parallelism.schedule"] == "1f1b"


def test_next_moves_from_the_links_step_not_the_drawn_one():
    """Clicks faster than a rerun run their callbacks with the arguments of the last page drawn:
    Next counts from the step the link holds when it runs (three quick clicks from step 1 landed
    on step 2 when each went to "drawn step + 1").  Here the link moved to step 5 after the page
    was drawn at step 3; Next goes to 6, Previous then to 5."""
    at = run_app(tour="pipeline-bubbles", step="3", scenario="teaching-8gpu",
                 **{"parallelism.ideal_pipeline": "true"})
    at.query_params["step"] = "5"
    next(b for b in at.button if b.key == "tour_next").click().run()
    assert not at.exception and qp(at, "step") == "6"
    assert any("step 6 of 7" in m.value for m in at.markdown)
    at.query_params["step"] = "7"
    next(b for b in at.button if b.key == "tour_next").click().run()
    assert qp(at, "step") == "7"             # (the last step: Next stays)
    next(b for b in at.button if b.key == "tour_prev").click().run()
    assert qp(at, "step") == "6"


def test_the_sidebar_starts_a_tour():
    at = run_app()
    next(b for b in at.button if b.key == "tour_start_zero-fsdp").click().run()
    assert not at.exception and qp(at, "tour") == "zero-fsdp" and qp(at, "scenario") == "fsdp-llama3-8b"
    assert qp(at, "parallelism.zero") == "0"


def test_the_textbook_diagram_steps_through():
    """Opening the Timeline's step-through in its textbook mode and moving its slider prints what
    every rank does and why (explorer/teaching/schedule_story.py) — here ZB-H1's first bubble on
    rank 0."""
    at = run_app(scenario="zero-bubble-8gpu")
    assert any(e.label.startswith("Step through the schedule") for e in at.expander)
    at.session_state["textbook"] = True
    at.run()
    at.radio(key="step_mode").set_value("textbook diagram (unit time)").run()
    at.slider(key="textbook_t").set_value(9).run()           # units 0-8 shown: rank 0 idles in 8
    assert not at.exception
    story = next(m.value for m in at.markdown if m.value.startswith("In unit 8:"))
    assert story.count("- **rank") == 8
    assert ("- **rank 0** — idle (bubble): its input gradient of micro-batch 1 waits for rank 1's "
            "gradient") in story


@pytest.mark.parametrize("schedule, said", [("zb-h2", "filled by the next iteration's warm-up"),
                                            ("2bw", "this schedule never flushes"), ("1f1b", None)])
def test_the_textbook_caption_says_what_one_drawn_batch_leaves_out(schedule, said):
    """ZB-H2's diagram looked like ZB-H1's (27 units each) and 2BW's showed idle units beside a
    Bubble card of 0: one batch drawn alone leaves out the next one that fills them."""
    at = run_app(scenario="zero-bubble-8gpu", **{"parallelism.schedule": schedule})
    at.session_state["textbook"] = True
    at.run()
    at.radio(key="step_mode").set_value("textbook diagram (unit time)").run()
    assert not at.exception
    caption = next(c.value for c in at.caption if c.value.startswith("As the papers draw it"))
    if said is None:
        assert "drawn alone" not in caption and "drawn flushed" not in caption
    else:
        assert said in caption


def test_the_scenario_timeline_steps_through():
    """The same expander on the scenario's own timeline: one sentence per stage at the moment the
    slider names; moving it from the warm-up into the cool-down changes the phases it reports."""
    at = run_app(scenario="teaching-8gpu")
    at.session_state["textbook"] = True
    at.run()
    at.slider(key="step_scenario").set_value(10).run()
    early = next(m.value for m in at.markdown if m.value.startswith("At "))
    assert early.count("\n- stage") == 4 and "stage 0: warm-up — forward of micro-batch" in early
    assert "stage 3: idle (bubble)" in early or "stage 3: warm-up" in early
    at.slider(key="step_scenario").set_value(185).run()
    late = next(m.value for m in at.markdown if m.value.startswith("At "))
    assert "warm-up" not in late and ("cool-down" in late or "optimizer" in late)


# ------------------------------------------------------------------------------------------------
# In Chromium at a projector's 1280x720 (Playwright; tests/browser_support.py)
# ------------------------------------------------------------------------------------------------
# The chart a step's view opens with: the Gantt on the Timeline, else the view's first chart.
VIEW_CHART = {"timeline": "gantt", "memory": "memory", "traffic": "traffic", "topology": "datacenters",
              "serving": "serving_curve", "run": "run_timeline"}


@pytest.mark.slow
@pytest.mark.parametrize("half", [0, 1])
def test_every_tour_step_fits_a_projector_in_chromium(half):
    """Issue 32: at 1280x720 with present=1 the narration box pushed the Gantt to y = 458-854, cut
    off at 720.  For the first step of each view of each tour (CHECKED) opened from a bare link:
    the card is the CLI's figure of the step's own link, and the title, the cards, the step's chart
    (the Gantt on the Timeline) and, on the Timeline, the bottleneck sentence lie inside the 720-px
    screen; the Export menu is there.  In two halves (alternate steps), so that two workers share
    the minute it takes."""
    pw_api = pytest.importorskip("playwright.sync_api")
    from browser_support import CHROMIUM_ARGS, chromium_path, streamlit_server, wait_ready
    if chromium_path() is None:
        pytest.skip("no Chromium executable found")
    failures = []
    with streamlit_server() as base, pw_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
        page = browser.new_context(viewport={"width": 1280, "height": 720}).new_page()
        page.set_default_timeout(60_000)
        for name, i in CHECKED[half::2]:
            step = tours()[name].steps[i - 1]
            page.goto(f"{base}?tour={name}&step={i}&present=1")
            wait_ready(page)
            j = cli_run(step.params)
            card = page.locator('[data-testid="stMetric"]').first
            label = card.locator('[data-testid="stMetricLabel"]').inner_text().strip()
            want = fmt_time(card_figure(label, j))
            got = card.locator('[data-testid="stMetricValue"]').inner_text().strip()
            view = step.params.get("view", "timeline")
            boxes = {"title": "h2", "cards": '[data-testid="stMetric"]',
                     "chart": f'.st-key-{VIEW_CHART[view]} [data-testid="stPlotlyChart"]'}
            if view == "timeline":
                boxes["bottleneck"] = '[data-testid="stColumn"] [data-testid="stAlert"]'
            where = {k: page.locator(sel).first.bounding_box() for k, sel in boxes.items()}
            outside = {k: b for k, b in where.items()
                       if b is None or b["y"] < 0 or b["y"] + b["height"] > 720}
            export = page.get_by_role("button", name="Export").count()
            if got != want or outside or not export:
                failures.append((name, i, got, want, outside, export))
        browser.close()
    assert not failures, failures


@pytest.mark.parametrize("present", ["1", "0"])
def test_a_tour_steps_heading_is_its_title_not_the_presets(present):
    """Found walking the app: the serving tour's step 3 runs TP 16 on two nodes under the preset's
    title "... on 8 x H100, TP 8" (in presentation mode the narration is folded, so that title was
    all the audience read).  The heading is now the step's title; off the projector what the step
    sets on its preset is said under it (a hunt found the preset's title repeated there, "... TP 8,
    as this tour step sets it", over the TP-16 step)."""
    step = tours()["serving"].steps[2]
    at = run_app(tour="serving", step="3", present=present)
    headings = [m.value for m in at.markdown if m.value.startswith("#")]
    assert any(step.title in h for h in headings), headings
    assert not any("TP 8" in h for h in headings), headings
    captions = [c.value for c in at.caption]
    assert not any("TP 8" in c for c in captions), captions
    if present == "0":
        assert ("This step runs the preset serve-llama3-70b-tp8 with cluster.nodes=2, inference.batch=8, "
                "parallelism.tp=16") in captions


@pytest.mark.parametrize("present", ["1", "0"])
def test_a_control_changed_during_a_tour_marks_the_step_modified(present):
    """Found by a hunt: changing a control during a tour kept the step's narration over cards that no
    longer matched it, with no marker (the "modified" note is off during tours), and the link spread
    it.  The heading is now marked *modified*, and off the projector the change is named; the link,
    reopened, says the same."""
    at = run_app(tour="serving", step="1", present=present)
    assert not any("*modified*" in m.value for m in at.markdown)
    at.number_input(key="inference.batch").set_value(64).run()
    assert not at.exception
    assert any(m.value.startswith("#") and m.value.endswith("· *modified*") for m in at.markdown)
    said = [c.value for c in at.caption if c.value.startswith("Changed since this tour step")]
    assert said == ([] if present == "1" else [
        "Changed since this tour step: inference.batch=64 — the narration describes the step as it set them"])
    again = run_app(**{k: qp(at, k) for k in at.query_params})
    assert any(m.value.endswith("· *modified*") for m in again.markdown)


def _right_column(at) -> list[tuple[str, str]]:
    """(element type, text start) of the Timeline's right column, in page order."""
    out: list = []

    def walk(node) -> None:
        kids = getattr(node, "children", None) or {}
        for child in (kids.values() if isinstance(kids, dict) else kids):
            value = getattr(child, "value", "")
            out.append((type(child).__name__, value[:20] if isinstance(value, str) else ""))
            walk(child)
    walk(at.main)
    start = next(i for i, (kind, text) in enumerate(out)
                 if kind == "Info" and text.startswith("Bubble takes"))
    return [e for e in out[start:start + 8] if e[0] in ("Info", "Caption", "UnknownElement")]


@pytest.mark.parametrize("present, want", [("1", ["Info", "UnknownElement", "Caption"]),
                                           (None, ["Info", "Caption", "UnknownElement"])])
def test_on_a_projector_the_breakdown_precedes_the_formula_sentence(present, want):
    """At 1280x720 the formula sentence pushed the breakdown's bubble bar (which the pipeline tour
    asks the class to read) under the screen's edge; presentation mode draws the breakdown first."""
    query = {"scenario": "teaching-8gpu", **({"present": present} if present else {})}
    got = [kind for kind, _ in _right_column(run_app(**query))]
    assert got[:3] == want
