"""The app on a low-communication scenario (streamlit.testing): the Time per step card, the window
chart, and the one-click comparison with every-step synchronisation that the share link carries."""
from __future__ import annotations

from urllib.parse import parse_qsl

from explorer.scenario import load
from explorer.simulate import simulate
from explorer.ui.views.metrics import fmt_time

from app_support import qp, run_app
from conftest import ROOT


def _links(at) -> dict[str, dict[str, str]]:
    """Label -> query parameters of each link button on the page."""
    return {b.proto.label: dict(parse_qsl(b.proto.url.lstrip("?"))) for b in at.get("link_button")}


def test_diloco_scenario_shows_time_per_step_and_the_window():
    at = run_app(scenario="diloco-cross-region")
    cards = {m.label: m.value for m in at.metric}
    res = simulate(load(ROOT / "scenarios" / "diloco-cross-region.yaml"))
    assert cards["Time per step"] == fmt_time(res.time_per_step_s) and "Iteration time" not in cards
    assert any("whole-model synchronisation" in c.value for c in at.caption)
    assert "Compare with every-step synchronisation" in _links(at)


def test_the_baseline_link_opens_compare_with_every_step():
    at = run_app(scenario="diloco-cross-region")
    query = _links(at)["Compare with every-step synchronisation"]
    assert query == {"scenario": "diloco-cross-region", "b.training.sync.kind": "every-step",
                     "view": "compare"}
    # The link reproduces it: B's iteration is the synchronous 2.90 s, A's step 1.578 s.
    again = run_app(**query)
    assert qp(again, "view") == "compare" and qp(again, "b.training.sync.kind") == "every-step"
    seconds = [float(m.value.split()[0]) for m in again.metric if m.value.endswith(" s")]
    assert any(abs(v - 2.90) <= 0.015 for v in seconds), [m.value for m in again.metric]
    assert any(abs(v - 1.578) <= 0.01 for v in seconds), [m.value for m in again.metric]


def test_an_impossible_sync_names_its_field():
    """A link asking for DiLoCo in one datacenter is ignored with a warning naming the field; the
    same choice in the sidebar shows the one-line reason and keeps the last valid result."""
    at = run_app(scenario="teaching-8gpu", **{"training.sync.kind": "diloco"})
    assert any("training.sync.kind" in w.value and "datacenters" in w.value for w in at.warning)
    at.selectbox(key="training.sync.kind").set_value("diloco").run()
    assert not at.exception
    assert any("training.sync.kind" in e.value and "datacenters" in e.value for e in at.error)
    assert any(m.label == "Iteration time" for m in at.metric)


def test_compression_and_gossip_baselines_are_one_link_away():
    links = _links(run_app(scenario="cloud-25g-dp"))
    assert links["Compare without compression"]["b.communication.compression.kind"] == "none"
    at = run_app(scenario="gossip-exponential")
    assert any("gossip-exponential" in c.value for c in at.caption)
    query = _links(at)["Compare with the gradient all-reduce"]
    assert query["b.parallelism.dp_kind"] == "allreduce" and query["view"] == "compare"


def test_the_window_unfolds_on_request():
    at = run_app(scenario="streaming-diloco-1gbps")
    assert any(e.label == "Every inner step, unfolded" for e in at.expander)
    assert not at.exception


def test_the_consensus_curve_opens_in_the_timeline():
    at = run_app(scenario="diloco-cross-region")
    exp = next(e for e in at.expander if e.label == "How many replicas, how often to synchronise")
    assert exp is not None



def test_async_gossip_in_the_sidebar_runs_past_a_straggler():
    """On gossip-exponential with one GPU at half speed (a link's overrides), the sidebar's "Replicas
    agree by" set to gossip-async moves the step from the straggler's pace (synchronous gossip) to
    the aggregate rate, and the captions say what asynchrony buys and what it costs (staleness)."""
    from app_support import seconds
    link = {"scenario": "gossip-exponential", "cluster.stragglers.count": "1",
            "cluster.stragglers.slowdown": "2"}
    at = run_app(**link)
    sync = seconds(at)
    assert any(c.value.startswith("Replicas at different speeds") and "waits for the slowest" in c.value
               for c in at.caption)
    at.selectbox(key="parallelism.dp_kind").set_value("gossip-async").run()
    assert not at.exception
    ov = {"parallelism.dp_kind": "gossip-async", "cluster.stragglers.count": 1,
          "cluster.stragglers.slowdown": 2}
    res = simulate(load(ROOT / "scenarios" / "gossip-exponential.yaml", ov))
    assert seconds(at) < 0.6 * sync
    card = next(m for m in at.metric if m.label == "Iteration time")
    assert card.value == fmt_time(res.time_per_step_s) and "own pace" in card.help
    captions = [c.value for c in at.caption]
    assert any("own pace" in c and "synchronous gossip would hold" in c for c in captions), captions
    assert any(c.startswith("Quality") and "ICML 2018" in c and "staleness" in c for c in captions)
    query = _links(at)["Compare with synchronous gossip"]
    assert query["b.parallelism.dp_kind"] == "gossip-exponential"
    assert query["b.parallelism.gossip_peers"] == "1"


def test_the_speedup_and_dilocos_loss_stand_side_by_side():
    """diloco-cross-region: the window's speed-up per step over every-step synchronisation
    (simulated) and the tokens DiLoCo needs to reach data-parallel's loss (Charles et al. 2025's
    law, an estimate) as two cards, the law's caveats in the caption below."""
    at = run_app(scenario="diloco-cross-region")
    res = simulate(load(ROOT / "scenarios" / "diloco-cross-region.yaml"))
    w = res.sync_window
    cards = {m.label: m.value for m in at.metric}
    assert cards["Per step, against every-step sync"] == f"{w.speedup:.3g}x faster"
    assert cards["Tokens to data-parallel's loss"] == f"{w.loss['compute_ratio']:.3g}x"
    assert any(c.value.startswith("Loss (estimate from the literature") and "H = 500" in c.value
               for c in at.caption)
