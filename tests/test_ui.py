"""The app as a new user meets it (issue 7): presets, model presets and uploads never crash, every
view renders, the share link round-trips, and results the page shows agree with the CLI."""
from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from explorer.scenario import apply_overrides, from_dict, load, model_presets
from explorer.share import parse_query, preset_raw
from explorer.simulate import simulate

from app_support import qp, run_app, seconds
from conftest import ROOT, SCENARIO_FILES


def shows_result_or_one_line_reason(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]
    errors = [e.value for e in at.error]
    assert all("\n" not in e for e in errors), errors
    assert any(m.label == "Iteration time" for m in at.metric) or errors


@pytest.mark.parametrize("scenario,model", [("teaching-8gpu", "llama3-8b"),
                                            ("two-datacenters", "llama3-405b"),
                                            ("fsdp-llama3-8b", "mixtral-8x7b")])
def test_choosing_a_model_preset_loads_its_dimensions(scenario, model):
    """Issue 7.1: the three reproductions — the model controls take the preset's dimensions and
    the page shows a result or a one-line reason (e.g. tp does not divide the heads)."""
    at = run_app(scenario=scenario)
    at.selectbox(key="model.preset").set_value(model).run()
    shows_result_or_one_line_reason(at)
    preset = model_presets()[model]
    assert at.number_input(key="model.layers").value == preset["layers"]
    assert at.number_input(key="model.hidden").value == preset["hidden"]
    experts = (preset.get("moe") or {}).get("experts", 0)
    assert at.number_input(key="model.moe.experts").value == experts


def link_result(at: AppTest) -> float:
    """The iteration time of the scenario the address bar describes, simulated outside the app."""
    query = {k: (v[-1] if isinstance(v, list) else v) for k, v in at.query_params.items()}
    view = parse_query(query)
    assert not view.warnings, view.warnings
    return simulate(from_dict(apply_overrides(preset_raw(view.scenario), view.overrides))).time_per_step_s


def test_model_preset_result_equals_its_share_link():
    """The preset replaces the model's dimensions; the address bar carries them, and the link
    simulated outside the app gives the card's value."""
    at = run_app(scenario="teaching-8gpu")
    at.selectbox(key="model.preset").set_value("llama3-8b").run()
    shows_result_or_one_line_reason(at)
    assert not at.error, [e.value for e in at.error]
    assert at.query_params["model.preset"] in ("llama3-8b", ["llama3-8b"])
    assert seconds(at) == pytest.approx(link_result(at), rel=2e-3)


@pytest.mark.parametrize("path", SCENARIO_FILES, ids=lambda p: p.stem)
@pytest.mark.slow
def test_uploading_a_downloaded_scenario_reproduces_it(path):
    """Issue 7.2: the YAML the app offers for download loads back (from another preset) and gives
    the same iteration time as the CLI on the original file."""
    source = run_app(scenario=path.stem, view="scenario")
    yaml_text = next(c.value for c in source.code if c.language == "yaml")
    other = "teaching-8gpu" if path.stem != "teaching-8gpu" else "zero-bubble-8gpu"
    if "serve-" in path.stem:
        # A serving file loads onto a serving preset (ui/state.on_upload); onto its own, since the controls
        # cannot remove a section (inference.disaggregated) that another serving preset has.
        other = path.stem
    at = run_app(scenario=other, view="scenario")
    upload = ("scenario.yaml", yaml_text.encode(), "application/x-yaml")
    at.file_uploader(key="_upload").set_value(upload).run()
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    res = simulate(load(path))
    expected = res.inference["tpot_s"] if res.inference is not None else res.time_per_step_s
    # The card shows milliseconds to one decimal (a 3.6 ms DLRM step, gnn-sage-papers100m's 12.87 ms
    # as 12.9 ms): half a shown digit of slack.
    assert seconds(at) == pytest.approx(expected, rel=2e-3, abs=0.05e-3)


def test_a_bad_upload_shows_one_line_and_keeps_the_scenario():
    at = run_app(scenario="teaching-8gpu", view="scenario")
    before = seconds(at)
    at.file_uploader(key="_upload").set_value(("bad.yaml", b"model: [unclosed", "application/x-yaml")).run()
    assert not at.exception
    errors = [e.value for e in at.error]
    assert len(errors) == 1 and errors[0].startswith("Upload not loaded") and "\n" not in errors[0]
    assert seconds(at) == before


@pytest.mark.parametrize("view", ["timeline", "memory", "traffic", "topology", "scenario"])
@pytest.mark.parametrize("present", ["0", "1"])
def test_every_view_renders_without_error(view, present):
    at = run_app(scenario="two-datacenters", view=view, present=present)
    assert not at.error, [e.value for e in at.error]
    assert [m.label for m in at.metric][:1] == ["Iteration time"]


def test_traffic_view_shows_zero_stages_against_their_bytes():
    """Issue 7.8: the ZeRO chart puts ZeRO-3 at 3Ψ per micro-batch against ZeRO-1's 2Ψ per
    iteration (Rajbhandari et al. SC20 Sec. 7; FSDP re-gathers for every micro-batch): 1.5 m x."""
    at = run_app(scenario="fsdp-llama3-8b", view="traffic")
    assert not at.error, [e.value for e in at.error]
    from explorer.ui.views.traffic import zero_points
    points, _ = zero_points(preset_raw("fsdp-llama3-8b"))
    by_stage = {p["zero"]: p for p in points}
    sc = load(ROOT / "scenarios" / "fsdp-llama3-8b.yaml")
    m = sc.micro_batches
    # 1.5 when gradients travel in bf16; Megatron reduces bf16 gradients in fp32 (g = 4 bytes,
    # frameworks.py): ZeRO-3 (2 + 2 + g) / ZeRO-1 (g + 2) = 4/3 per micro-batch.
    from explorer.taskgraph.techniques.optimizer import grad_reduce_bytes
    g = grad_reduce_bytes(sc)
    assert by_stage[3]["dp_GB"] == pytest.approx((4 + g) / (g + 2) * m * by_stage[1]["dp_GB"], rel=0.01)
    assert (by_stage[3]["memory_GB"] < by_stage[2]["memory_GB"] < by_stage[1]["memory_GB"]
            < by_stage[0]["memory_GB"])


def test_a_cheap_link_cannot_order_an_expensive_download():
    """Issue 8.10: 100,000 layers x 8 micro-batches is ~2 M per-layer rows; the page offers the
    YAML but refuses the trace/CSV with the knobs that shrink them, instead of building them."""
    at = run_app(scenario="teaching-8gpu", view="scenario", **{"model.layers": "100000",
                                                              "training.global_batch": "16"})
    assert not at.error, [e.value for e in at.error]
    labels = [b.label for b in at.get("download_button")]
    assert labels == ["Download scenario (YAML)", "Download report (HTML)"], labels   # the report is bounded
    assert any("per-layer operations" in c.value and "training.global_batch" in c.value for c in at.caption)


def test_an_ordinary_scenario_offers_every_download():
    at = run_app(scenario="teaching-8gpu", view="scenario")
    labels = [b.label for b in at.get("download_button")]
    assert labels == ["Download Perfetto trace (JSON)", "Download timeline (CSV)", "Download scenario (YAML)",
                      "Download report (HTML)"]


def test_zero_chart_and_tier_bars_say_what_they_measure():
    """The tier bars are grouped, not stacked (tiers nest: a byte leaving the node also left the
    GPU), and the ZeRO chart puts memory and data-parallel bytes of each stage side by side."""
    from explorer import figures
    bars = figures.traffic_by_tier({"dp": {"scale-up": 2e9, "scale-out": 1e9}})
    assert bars.layout.barmode == "group"
    pts = [{"zero": z, "memory_GB": 40 - 10 * z, "dp_GB": 3.0 if z == 3 else 2.0, "iteration_s": 1.0}
           for z in range(4)]
    fig = figures.zero_tradeoff(pts, 80, current=1)
    memory, traffic = fig.data
    assert list(memory.y) == [40, 30, 20, 10] and list(traffic.y) == [2.0, 2.0, 2.0, 3.0]
    assert memory.marker.color[1] != memory.marker.color[0]          # the scenario's own stage stands out
    # The capacity in the panel's title (a label on its line covered bars above it); small
    # traffic keeps three digits (a GNN's 0.0016 GB read "0.0").
    assert "the GPU's 80.0" in fig.layout.annotations[0].text and len(fig.layout.annotations) == 2
    small = figures.zero_tradeoff([{**p, "dp_GB": 0.00163} for p in pts], 80, current=1)
    assert list(small.data[1].text) == ["0.00163"] * 4
    # Each bar's iteration time in the unit that reads best (a DLRM's "0.00363 s" labels ran into
    # one another under the bars).
    assert list(fig.data[0].x) == [f"ZeRO {z}<br>1<br>s" for z in range(4)]
    fast = figures.zero_tradeoff([{**p, "iteration_s": 0.0036266} for p in pts], 80, current=1)
    assert list(fast.data[0].x) == [f"ZeRO {z}<br>3.63<br>ms" for z in range(4)]


def test_choosing_a_fabric_or_framework_shows_and_simulates_its_defaults():
    """A fabric preset sets the NIC speed and latency widgets to its values and a framework its
    gradient bucket, and the page simulates exactly what the widgets show (the CLI agrees)."""
    from explorer.config.frameworks import profile
    from explorer.config.presets import fabric_presets
    at = run_app()
    at.selectbox(key="cluster.scale_out.fabric").set_value("eth-100").run()
    fab = fabric_presets()["eth-100"]
    assert at.number_input(key="cluster.scale_out.nic_Gbps").value == fab["nic_Gbps"]
    assert at.number_input(key="cluster.scale_out.latency_us").value == fab["latency_us"]
    at.selectbox(key="training.framework").set_value("deepspeed").run()
    shows_result_or_one_line_reason(at)
    view = parse_query(dict(at.query_params))
    sc = from_dict(apply_overrides(preset_raw(view.scenario), view.overrides))
    assert sc.cluster.scale_out.fabric == "eth-100" and sc.training.framework == "deepspeed"
    assert sc.cluster.scale_out.nic_Gbps == fab["nic_Gbps"]
    bucket = profile("deepspeed").default_bucket_MB(sc.dp, sc.training.dtype)
    assert at.number_input(key="communication.bucket_MB").value == pytest.approx(bucket)
    assert sc.communication.bucket_MB == pytest.approx(bucket)
    assert seconds(at) == pytest.approx(simulate(sc).time_per_step_s, rel=5e-3)   # card rounding


def test_named_datacenters_open_and_stay_named():
    """A link giving cluster.datacenters as a list of named datacenters (issue 12's list form) opens
    without an error: the sidebar shows the count and the names (no number box for a list) and the
    simulated scenario keeps the names, so nothing is coerced or lost."""
    at = run_app(scenario="two-datacenters",
                 **{"cluster.datacenters": "[{name: east, nodes: 64}, {name: west, nodes: 64}]"})
    assert not at.error, [e.value for e in at.error]
    box = next(t for t in at.sidebar.text_input if t.label == "Datacenters")
    assert box.value == "2: east, west" and box.disabled
    # The same iteration as the integer form (names change nothing physical).
    assert seconds(at) == pytest.approx(simulate(load(ROOT / "scenarios" / "two-datacenters.yaml"))
                                        .iteration_time_s, rel=1e-3)
    assert "east" in (qp(at, "cluster.datacenters") or "")


def test_a_resnet_scenario_shows_its_own_controls_and_its_link_reproduces_it():
    """A convolutional network (model.conv): the sidebar offers its depth, image size, frames and
    classes instead of the transformer's fields (derived, summarised in a caption); the card
    counts images; a deeper ResNet takes longer and the address bar reproduces it."""
    at = run_app(scenario="resnet50-cloud-dp")
    shows_result_or_one_line_reason(at)
    assert not at.error, [e.value for e in at.error]
    keys = {w.key for w in at.sidebar.number_input} | {w.key for w in at.sidebar.selectbox}
    assert {"model.conv.depth", "model.conv.image_size", "model.conv.frames", "model.conv.classes"} <= keys
    assert not keys & {"model.layers", "model.hidden", "model.heads", "model.seq_len", "model.vocab"}
    assert any("16 residual blocks" in c.value for c in at.sidebar.caption)
    assert any(m.label == "Images/s" for m in at.metric)
    before = seconds(at)
    at.sidebar.selectbox(key="model.conv.depth").set_value(101).run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert seconds(at) > before
    assert at.query_params["model.conv.depth"] in ("101", ["101"])
    assert seconds(at) == pytest.approx(link_result(at), rel=2e-3)
    # Back to a transformer preset: its controls return and the conv section is gone.
    at.sidebar.selectbox(key="model.preset").set_value("llama3-8b").run()
    assert not at.exception
    assert "model.layers" in {w.key for w in at.sidebar.number_input}


def test_the_bottleneck_sentence_opens_the_bar_it_names():
    """Issue 14.3: the bottleneck sentence links to its bar — on cloud-25g-dp it names DP, and its
    toggle opens the derivation of the longest dp bar, with the step-through of that call."""
    at = run_app(scenario="cloud-25g-dp")
    assert at.info[0].value.startswith("DP takes")
    at.toggle(key="explain_bottleneck").set_value(True).run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    texts = " ".join(m.value for m in at.markdown)
    assert "Explain this bar" in texts and "**dp**" in texts and "22.544 ms" in texts
    assert any(e.label == "Step through this call" for e in at.expander)
    # A bubble-bound page has no single bar to name: the toggle is disabled.
    bubble = run_app(scenario="teaching-8gpu")
    assert bubble.info[0].value.startswith("Bubble") and bubble.toggle(key="explain_bottleneck").disabled


def test_the_breakdowns_shares_stand_upright():
    """A narrow bar's share stood rotated sideways on a projector (Plotly turns a label that does
    not fit inside a bar); labels are horizontal, beside a bar too narrow to hold them."""
    from explorer import figures
    fig = figures.breakdown({"compute": 0.08, "bubble": 0.002}, 0.082, font_size=18)
    assert fig.data[0].textangle == 0 and list(fig.data[0].textposition) == ["inside", "outside"]
    assert list(fig.data[0].text) == ["97.6%", "2.4%"]
