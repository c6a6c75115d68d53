"""The app on a low-communication scenario (streamlit.testing): the Time per step card, the window
chart, and the one-click comparison with every-step synchronisation that the share link carries."""
from __future__ import annotations

from app_support import qp, run_app


def test_diloco_scenario_shows_time_per_step_and_the_window():
    at = run_app(scenario="diloco-cross-region")
    cards = {m.label: m.value for m in at.metric}
    assert cards["Time per step"] == "1.596 s" and "Iteration time" not in cards
    assert any("whole-model synchronisation" in c.value for c in at.caption)
    assert any(b.label == "Compare with every-step synchronisation" for b in at.button)


def test_the_baseline_button_opens_compare_with_every_step_in_the_link():
    at = run_app(scenario="diloco-cross-region")
    next(b for b in at.button if b.key == "sync_baseline").click().run()
    assert not at.exception
    assert qp(at, "view") == "compare" and qp(at, "b.training.sync.kind") == "every-step"
    # The link reproduces it: B's iteration is the synchronous 2.91 s, A's step 1.596 s.
    again = run_app(scenario="diloco-cross-region", view="compare", **{"b.training.sync.kind": "every-step"})
    assert any("2.91" in m.value or "2.914" in m.value for m in again.metric), [m.value for m in again.metric]


def test_an_impossible_sync_names_its_field():
    """A link asking for DiLoCo in one datacenter is ignored with a warning naming the field; the
    same choice in the sidebar shows the one-line reason and keeps the last valid result."""
    at = run_app(scenario="teaching-8gpu", **{"training.sync.kind": "diloco"})
    assert any("training.sync.kind" in w.value and "datacenters" in w.value for w in at.warning)
    at.selectbox(key="training.sync.kind").set_value("diloco").run()
    assert not at.exception
    assert any("training.sync.kind" in e.value and "datacenters" in e.value for e in at.error)
    assert any(m.label == "Iteration time" for m in at.metric)
