"""The app on a low-communication scenario (streamlit.testing): the Time per step card, the window
chart, and the one-click comparison with every-step synchronisation that the share link carries."""
from __future__ import annotations

from explorer.scenario import load
from explorer.simulate import simulate
from explorer.ui.views.metrics import fmt_time

from app_support import qp, run_app
from conftest import ROOT


def test_diloco_scenario_shows_time_per_step_and_the_window():
    at = run_app(scenario="diloco-cross-region")
    cards = {m.label: m.value for m in at.metric}
    res = simulate(load(ROOT / "scenarios" / "diloco-cross-region.yaml"))
    assert cards["Time per step"] == fmt_time(res.time_per_step_s) and "Iteration time" not in cards
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


def test_compression_and_gossip_baselines_are_one_click_away():
    at = run_app(scenario="cloud-25g-dp")
    next(b for b in at.button if b.key == "compression_baseline").click().run()
    assert not at.exception and qp(at, "b.communication.compression.kind") == "none"
    at = run_app(scenario="gossip-exponential")
    assert any("gossip-exponential" in c.value for c in at.caption)
    next(b for b in at.button if b.key == "dp_baseline").click().run()
    assert not at.exception and qp(at, "b.parallelism.dp_kind") == "allreduce" and qp(at, "view") == "compare"


def test_the_window_unfolds_on_request():
    at = run_app(scenario="streaming-diloco-1gbps")
    at.toggle(key="sync_fold").set_value(False).run()
    assert not at.exception


def test_the_consensus_curve_opens_in_the_timeline():
    at = run_app(scenario="diloco-cross-region")
    exp = next(e for e in at.expander if e.label == "How many replicas, how often to synchronise")
    assert exp is not None

