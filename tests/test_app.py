"""The app under streamlit.testing: presets render, controls move the numbers the way physics says,
bad input shows a message (never an exception), links set and reflect the scenario."""
from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from explorer.scenario import load, load_raw
from explorer.ui.views.metrics import SERVING_CARDS

from app_support import qp, run_app, seconds
from conftest import ROOT, SCENARIO_FILES

# The quick tier renders one preset of each kind of page (a transformer pipeline, every workload
# family, serving, a DiLoCo window, a CNN); the full suite renders every preset.
QUICK_PRESETS = {"teaching-8gpu", "gnn-sage-papers100m", "dlrm-dcnv2", "pipedream-vgg16",
                 "pipedream-gnmt16", "serve-llama3-70b-tp8", "diloco-cross-region", "resnet50-cloud-dp",
                 "llama3-405b-pretraining"}


@pytest.mark.parametrize("path", [pytest.param(p, marks=() if p.stem in QUICK_PRESETS else pytest.mark.slow)
                                  for p in SCENARIO_FILES], ids=lambda p: p.stem)
def test_every_preset_renders_metrics_and_charts(path):
    at = run_app(scenario=path.stem)
    labels = [m.label for m in at.metric]
    if "inference" in load_raw(path):     # a serving scenario shows its own cards (issue 37)
        assert labels == list(SERVING_CARDS)
        assert qp(at, "scenario") == path.stem
        return
    # Replicas that train apart show the amortised step first (explorer/variants/lowcomm).
    sync = (load_raw(path).get("training") or {}).get("sync") or {}
    first = "Time per step" if sync.get("kind", "every-step") != "every-step" else "Iteration time"
    # A convolutional network counts images (or clips), a transformer tokens.
    rate = f"{load(path).model.samples.capitalize()}/s"
    # A family that cannot pipeline shows its epoch or its own exchange instead of the Bubble
    # (explorer/ui/views/metrics._family_card).
    fourth = {"gnn-sage-papers100m": "Epoch", "dlrm-dcnv2": "Exposed emb"}.get(path.stem, "Bubble")
    # A DiLoCo window adds its two trade cards under the Gantt (explorer/ui/views/sync.py).
    trade = ["Per step, against every-step sync", "Tokens to data-parallel's loss"] \
        if sync.get("kind") in ("diloco", "streaming-diloco") else []
    assert labels == [first, rate, "MFU", "TFLOP/s per GPU", fourth, "Memory per GPU", *trade]
    assert seconds(at) > 0
    assert not [w for w in at.warning if w.value.startswith("Link:")]
    assert qp(at, "scenario") == path.stem


def change(at: AppTest, key: str, value) -> float:
    before = seconds(at)
    at.number_input(key=key).set_value(value).run()
    assert not at.exception
    assert not at.error, [e.value for e in at.error]
    return before


def test_fewer_pipeline_stages_shrink_the_bubble_and_the_iteration():
    at = run_app(scenario="teaching-8gpu")
    before = change(at, "parallelism.pp", 2)
    assert seconds(at) < before
    assert qp(at, "parallelism.pp") == "2"


def test_more_tensor_parallelism_over_slow_links_is_slower():
    at = run_app(scenario="teaching-8gpu", **{"cluster.scale_up.bandwidth_GBps": "20"})
    before = change(at, "parallelism.tp", 2)
    assert seconds(at) > before


def test_more_data_parallel_replicas_at_fixed_batch_are_faster():
    # dp is derived: doubling the nodes doubles dp and halves the micro-batches per pipeline.
    at = run_app(scenario="teaching-8gpu")
    before = change(at, "cluster.nodes", 2)
    assert seconds(at) < before
    assert any("dp = 4" in m.value for m in at.markdown)


def test_less_wan_bandwidth_is_slower():
    at = run_app(scenario="two-datacenters")
    before = change(at, "cluster.scale_across.bandwidth_Gbps", 200.0)
    assert seconds(at) > before


def test_more_nvlink_bandwidth_is_never_slower():
    at = run_app(scenario="llama3-405b-16k")
    before = change(at, "cluster.scale_up.bandwidth_GBps", 900.0)
    assert seconds(at) < before


def test_invalid_combination_shows_an_error_not_an_exception():
    at = run_app(scenario="teaching-8gpu")
    at.number_input(key="parallelism.tp").set_value(3).run()
    assert not at.exception
    messages = [e.value for e in at.error]
    assert any(r"tp\*pp\*cp = 12" in m for m in messages), messages    # Markdown for tp*pp*cp (ui/plain.py)
    # The last valid scenario stays on screen.
    assert seconds(at) > 0


def test_share_link_sets_the_widgets_and_round_trips():
    at = run_app(scenario="llama3-405b-16k",
                 **{"parallelism.pp": "8", "cluster.scale_out.oversubscription": "4"})
    assert at.number_input(key="parallelism.pp").value == 8
    assert at.number_input(key="cluster.scale_out.oversubscription").value == 4
    assert qp(at, "parallelism.pp") == "8"
    assert qp(at, "cluster.scale_out.oversubscription") == "4"


@pytest.mark.parametrize("query,expect", [
    ({"scenario": "../../etc/passwd"}, "not a shipped scenario"),
    ({"scenario": "teaching-8gpu", "parallelism.tp": "abc"}, "parallelism.tp"),
    ({"scenario": "teaching-8gpu", "foo": "1"}, "foo: not a scenario field"),
    ({"scenario": "teaching-8gpu", "cluster.nodes": "9" * 100_000}, "characters"),
    ({"scenario": "teaching-8gpu", "view": "nope"}, "valid views"),
])
def test_hostile_links_warn_and_fall_back(query, expect):
    at = run_app(**query)
    warnings = [w.value for w in at.warning if w.value.startswith("Link:")]
    assert any(expect in w for w in warnings), warnings
    assert seconds(at) > 0


def test_presentation_mode_keeps_metrics_and_chart():
    at = run_app(scenario="teaching-8gpu", present="1")
    assert [m.label for m in at.metric][0] == "Iteration time"
    assert qp(at, "present") == "1"


def test_changing_the_preset_resets_the_controls():
    at = run_app(scenario="teaching-8gpu", **{"parallelism.pp": "2"})
    at.selectbox(key="_scenario").set_value("megatron-gpt3-175b").run()
    assert not at.exception
    assert at.number_input(key="parallelism.pp").value == 8
    assert qp(at, "scenario") == "megatron-gpt3-175b"
    assert qp(at, "parallelism.pp") is None


def test_a_rerun_reads_no_scenario_file(monkeypatch):
    """The scenario chooser labels all shipped presets on every rerun; their files are read once
    per session, not again on each change (a cache smaller than the preset list re-parsed all of
    them on every rerun, a fifth of its time)."""
    import explorer.ui.state as state

    at = run_app(scenario="teaching-8gpu")
    reads = []
    original = state.preset_raw
    monkeypatch.setattr(state, "preset_raw", lambda name: reads.append(name) or original(name))
    for pp in (2, 4, 1):
        at.number_input(key="parallelism.pp").set_value(pp).run()
        assert not at.exception
    assert reads == [], f"{len(reads)} scenario files read again over 3 reruns"


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b", "zb-h1", "zb-h2", "dualpipe", "pipedream-async",
                                      "chimera", "2bw"])
def test_every_pipeline_schedule_renders(schedule):
    at = run_app(scenario="zero-bubble-8gpu")
    at.selectbox(key="parallelism.schedule").set_value(schedule).run()
    assert not at.exception
    assert not at.error, [e.value for e in at.error]
    assert qp(at, "parallelism.schedule") == (None if schedule == "zb-h1" else schedule)
    assert seconds(at) > 0


def test_p3_toggle_shortens_the_iteration_across_datacenters():
    at = run_app(scenario="two-datacenters")
    before = seconds(at)
    at.toggle(key="communication.dp_priority").set_value(True).run()
    assert not at.exception and not at.error
    assert seconds(at) < before


def test_a_split_moved_for_memory_is_a_note_not_a_warning():
    """llama3-405b-16k at ZeRO-1 fits only with layers moved off its first stages
    (taskgraph/memory_split.py): the Timeline says so in an info box quoting the split, and shows
    no warning (the layout fits)."""
    at = run_app(scenario="llama3-405b-16k", **{"parallelism.zero": "1"})
    assert not at.exception
    notes = [i.value for i in at.info if i.value.startswith("split:")]
    assert len(notes) == 1 and "the fastest split found that fits" in notes[0]
    assert not [w.value for w in at.warning if w.value.startswith(("split:", "memory:"))]


def test_a_link_keeps_a_preset_value_another_field_derives_anew():
    """A fabric and the shipped scenario's own NIC speed: the RoCE preset would derive 100 Gb/s, the
    link says 400.  The sidebar showed 400 and the page simulated 100 (8.775 s, not 7.347 s), and the
    address bar was rewritten to 100.  Now the page, the sidebar and the link all keep 400."""
    from explorer.scenario import apply_overrides, from_dict
    from explorer.share import preset_raw
    from explorer.simulate import simulate
    query = {"cluster.scale_out.fabric": "roce-100", "cluster.scale_out.nic_Gbps": "400"}
    at = run_app(scenario="llama3-405b-16k", **query)
    want = simulate(from_dict(apply_overrides(preset_raw("llama3-405b-16k"),
                                              {"cluster.scale_out.fabric": "roce-100",
                                               "cluster.scale_out.nic_Gbps": 400}))).iteration_time_s
    assert want == pytest.approx(7.347, abs=0.001)
    assert seconds(at) == pytest.approx(want, abs=1e-3)
    assert at.number_input(key="cluster.scale_out.nic_Gbps").value == 400
    assert qp(at, "cluster.scale_out.nic_Gbps") == "400"


@pytest.mark.parametrize("scenario,view,needs", [
    ("dlrm-dcnv2", "serving", "a serving scenario"),
    ("serve-deepseek-v3-disaggregated", "run", "a scenario with a run plan")])
def test_a_link_to_a_tab_the_scenario_has_not_says_so(scenario, view, needs):
    """Found by a hunt: view=run on a scenario without a run plan (or view=serving on a training one)
    opened the Timeline in silence and the link kept the view; view=bogus was already warned about."""
    at = run_app(scenario=scenario, view=view)
    said = [w.value for w in at.warning if f"ignored view={view}" in w.value]
    assert len(said) == 1 and needs in said[0] and "\n" not in said[0]
    assert qp(at, "view") is None


@pytest.mark.parametrize("gpu,field,value", [("gb200", "power_W", "1000"), ("h200", "memory_GB", "100")])
def test_a_link_setting_a_gpu_preset_and_one_of_its_fields_runs_both(gpu, field, value):
    """Found by a hunt: ?hardware.gpu=gb200&hardware.gpu.power_W=1000 stopped on "mxfp8 needs MX tensor
    cores ... on H100 SXM" (the preset dropped, the field applied to the base's H100), and
    h200 + memory_GB ran the H100 in silence.  The app now runs the CLI's scenario, the GPU box shows
    the preset, and the link it writes reopens the same figures."""
    from explorer.scenario import load
    from explorer.simulate import simulate
    cli = simulate(load(ROOT / "scenarios" / "teaching-8gpu.yaml",
                        {"hardware.gpu": gpu, f"hardware.gpu.{field}": float(value)})).iteration_time_s
    at = run_app(scenario="teaching-8gpu", **{"hardware.gpu": gpu, f"hardware.gpu.{field}": value})
    assert not at.error, [e.value for e in at.error]
    assert seconds(at) == pytest.approx(cli, rel=2e-3)
    assert at.session_state["hardware.gpu"] == gpu
    again = run_app(**{k: qp(at, k) for k in at.query_params})
    assert not again.error and seconds(again) == seconds(at)


def test_a_compare_link_changing_the_depth_drops_as_layer_split_for_b():
    """Found by a hunt: with A's split [8,6,6,4], ?...&b.parallelism.pp=2 was "ignored ... has 4
    entries; need pp*vpp = 2" and B showed A.  A new depth now drops the split written for the old
    one (as the sidebar does), and B runs the CLI's balanced two-stage pipeline."""
    from explorer.scenario import load
    from explorer.simulate import simulate
    at = run_app(scenario="teaching-8gpu", view="compare",
                 **{"parallelism.stage_layers": "[8,6,6,4]", "b.parallelism.pp": "2"})
    assert not at.warning and not at.error, [w.value for w in at.warning]
    times = [m.value for m in at.metric if m.label == "Iteration time"]
    b = simulate(load(ROOT / "scenarios" / "teaching-8gpu.yaml", {"parallelism.pp": 2, "parallelism.dp": 4}))
    assert len(times) == 2 and times[1] == f"{b.iteration_time_s * 1e3:.1f} ms"
    assert qp(at, "b.parallelism.stage_layers") == "null"


def test_a_link_changing_pipedreams_depth_drops_its_split_and_replicas():
    """The same for scenario A: ?scenario=pipedream-vgg16&parallelism.pp=4 was ignored for its 15-1
    replicas and 13-3 split; it now opens the four-stage pipeline."""
    at = run_app(scenario="pipedream-vgg16", **{"parallelism.pp": "4", "training.global_batch": "1024"})
    assert not at.warning and not at.error, [w.value for w in at.warning]
    assert at.session_state["parallelism.pp"] == 4 and at.session_state["parallelism.stage_replicas"] is None
