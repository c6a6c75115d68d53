"""Guided tours in the app (streamlit.testing): a tour link opens at its step, next/previous load
the steps' links, the sidebar starts a tour."""
from __future__ import annotations

from app_support import qp, run_app


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
