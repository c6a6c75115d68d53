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
    at = run_app(scenario="zero-bubble-8gpu")
    exp = next(e for e in at.expander if e.label.startswith("Textbook diagram"))
    assert exp is not None
