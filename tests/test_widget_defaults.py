"""Every widget whose value the page sets carries it as its default too (explorer/ui/widget_defaults.py),
and a derived control typed back to its preset's value is simulated (explorer/ui/state.py).

Seen in Chromium: presentation mode opens with the sidebar collapsed; a click within a second of
opening reran the page before the browser had mounted the sidebar's widgets, which then mounted
with that run's defaults and sent them back as changes — the scenario became the first preset, or
the link's toggles switched off (1 in 5 fresh sessions).  A widget whose default equals its value
shows the value however late it mounts; this checks the defaults the browser receives."""
from __future__ import annotations

import functools

import pytest
from streamlit.testing.v1 import AppTest

from app_support import run_app
from conftest import ROOT


def _mismatches(at: AppTest) -> list[str]:
    """Sidebar widgets whose default (what a late-mounted widget shows) is not their value."""
    bad = []
    for w in at.sidebar.selectbox:
        shown = w.options[w.proto.default] if w.proto.HasField("default") else None
        if shown != w.format_func(w.value):
            bad.append(f"{w.key}: default {shown!r}, value {w.value!r}")
    for group in (at.sidebar.toggle, at.sidebar.number_input, at.sidebar.text_input):
        for w in group:
            if w.disabled:                      # a list shown read-only: no value to send back
                continue
            try:
                default = w.proto.default if w.proto.HasField("default") else None
            except ValueError:                  # a field without presence (a toggle's bool)
                default = w.proto.default
            if default != w.value:
                bad.append(f"{w.key}: default {default!r}, value {w.value!r}")
    return bad


@pytest.mark.parametrize("query", [
    # The session that lost its state: V-Half in presentation mode, toggles the preset turns on.
    {"scenario": "zero-bubble-8gpu", "parallelism.schedule": "v-half", "present": "1"},
    # Numbers, choices and a list field a link sets away from the preset's.
    {"scenario": "megatron-gpt3-175b", "parallelism.tp": "4", "communication.dp_overlap": "false",
     "cluster.scale_out.nic_Gbps": "100", "training.recompute": "selective"},
])
def test_a_link_gives_every_sidebar_widget_its_value_as_default(query):
    at = run_app(**query)
    assert not _mismatches(at)
    # A toggle the preset sets on: its default must say so too.
    assert any(w.value is True for w in at.sidebar.toggle)


def test_a_preset_chosen_in_the_sidebar_is_every_widget_default_too():
    at = run_app(scenario="teaching-8gpu")
    at.sidebar.selectbox(key="_scenario").set_value("megatron-gpt3-175b").run()
    assert not at.exception
    assert at.sidebar.selectbox(key="_scenario").value == "megatron-gpt3-175b"
    assert not _mismatches(at)


def _defaults_by_key(at: AppTest, keys: set[str]) -> dict[str, tuple]:
    """(default the browser would mount, value) of the main area's widgets named in ``keys``."""
    out = {}
    for w in [*at.selectbox, *at.text_input]:
        if w.key in keys:
            if hasattr(w, "options"):
                default = w.options[w.proto.default] if w.proto.HasField("default") else None
                out[w.key] = (default, w.format_func(w.value))
            else:
                out[w.key] = (w.proto.default if w.proto.HasField("default") else None, w.value)
    return out


def test_presentations_design_axes_popover_mounts_with_the_heatmaps_axes():
    """A hunt: in presentation mode the Design space's *Axes* popover, opened after any rerun, showed
    x = y = tp, empty values and Iteration time, and the next edit sent them back (the heatmap then
    said tp was on both axes).  The popover's widgets carry the link's axes as their defaults."""
    at = run_app(scenario="teaching-8gpu", view="design", present="1", **{
        "d.x": "training.micro_batch", "d.xv": "1,2,4", "d.m": "mfu"})
    got = _defaults_by_key(at, {"_d_x", "_d_y", "_d_xv", "_d_yv", "_d_m"})
    assert set(got) == {"_d_x", "_d_y", "_d_xv", "_d_yv", "_d_m"}
    assert all(default == value for default, value in got.values()), got
    assert got["_d_x"][1] == "training.micro_batch" and got["_d_xv"][1] == "1,2,4"


def test_presentations_edit_b_popover_mounts_with_bs_field_and_value():
    """A hunt: the Compare view's *Edit B* popover, opened after a rerun, showed parallelism.tp and an
    empty box while the state held parallelism.pp = 4, and *Set in B* then stored A's own tp."""
    at = run_app(scenario="teaching-8gpu", view="compare", present="1", **{"b.parallelism.schedule": "gpipe"})
    at.session_state["_b_field"] = "parallelism.pp"
    at.session_state["_b_value"] = "4"
    at.run()
    got = _defaults_by_key(at, {"_b_field", "_b_value"})
    assert got == {"_b_field": ("parallelism.pp", "parallelism.pp"), "_b_value": ("4", "4")}


@pytest.mark.parametrize("source,value,field", [
    ("cluster.scale_out.fabric", "roce-100", "cluster.scale_out.nic_Gbps"),
    ("cluster.scale_out.fabric", "roce-100", "cluster.scale_out.latency_us"),
    ("training.framework", "fsdp", "communication.comm_sms"),
])
def test_a_derived_control_typed_back_to_the_presets_value_is_simulated(source, value, field):
    """A hunt: on megatron-gpt3-175b, fabric roce-100 derives NIC 100 Gb/s; typing the preset's 200
    back left the run at 100 (the widget, equal to the preset's, was left out and the loader derived
    100 again) while the sidebar showed 200, and the link kept 100.  The run and the link now follow
    the number shown, as the CLI's --set does."""
    from explorer.scenario import load
    from explorer.simulate import simulate

    from app_support import qp, seconds

    at = run_app(scenario="megatron-gpt3-175b")
    preset = at.session_state[field]
    at.sidebar.selectbox(key=source).set_value(value).run()
    derived = at.session_state[field]
    assert derived != preset                       # the source derived another value
    box = at.sidebar.number_input(key=field)
    box.set_value(preset).run()
    assert not at.exception
    assert at.sidebar.number_input(key=field).value == preset
    want = simulate(load(ROOT / "scenarios" / "megatron-gpt3-175b.yaml", {source: value, field: preset}))
    assert seconds(at) == pytest.approx(want.iteration_time_s, rel=5e-4)
    assert float(qp(at, field)) == pytest.approx(float(preset))


def test_a_value_a_source_left_behind_is_not_taken_for_one_typed():
    """A regression hunt: on megatron-gpt3-175b, GPU gb200 (NVL72 racks: the loader derives a domain
    of 64 for its 8-GPU nodes), then nodes 64 and back to 128: setting the nodes back restored the
    preset's A100 domain of 8, and the pin of typed-back values then simulated it (8.108 s, not
    7.887) and put it in the link.  The domain follows the GPU; nothing the user did not type is
    pinned."""
    from explorer.scenario import load
    from explorer.simulate import simulate

    from app_support import qp, seconds

    at = run_app(scenario="megatron-gpt3-175b")
    at.sidebar.selectbox(key="hardware.gpu").set_value("gb200").run()
    nodes = at.session_state["cluster.nodes"]
    at.sidebar.number_input(key="cluster.nodes").set_value(nodes // 2).run()
    at.sidebar.number_input(key="cluster.nodes").set_value(nodes).run()
    assert not at.exception
    gb200 = load(ROOT / "scenarios" / "megatron-gpt3-175b.yaml", {"hardware.gpu": "gb200"})
    want = simulate(gb200)
    assert at.session_state["cluster.scale_up.domain_gpus"] == gb200.cluster.scale_up.domain_gpus == 64
    assert seconds(at) == pytest.approx(want.iteration_time_s, rel=5e-4)
    assert qp(at, "cluster.scale_up.domain_gpus") is None


def test_a_value_left_stale_by_an_invalid_step_is_not_pinned():
    """A regression hunt: tp 3 (invalid), then 4 GPUs per node (the domain could not be derived while
    invalid), then tp 4 simulated the old 8-GPU domain across two nodes; the domain is the node's."""
    from explorer.scenario import load
    from explorer.simulate import simulate

    from app_support import seconds

    at = run_app(scenario="megatron-gpt3-175b")
    at.sidebar.number_input(key="parallelism.tp").set_value(3).run()
    at.sidebar.number_input(key="cluster.gpus_per_node").set_value(4).run()
    at.sidebar.number_input(key="parallelism.tp").set_value(4).run()
    assert not at.exception
    want = simulate(load(ROOT / "scenarios" / "megatron-gpt3-175b.yaml",
                         {"cluster.gpus_per_node": 4, "parallelism.tp": 4}))
    assert seconds(at) == pytest.approx(want.iteration_time_s, rel=5e-4)


def test_a_kept_textbook_position_beyond_a_shorter_schedule_starts_at_its_end():
    """A regression hunt: the textbook slider's position, now kept across runs that do not draw it,
    stood at 30 when a smaller global batch shortened the diagram to 15 units:
    StreamlitValueAboveMaxError, and an internal error on every later draw."""
    at = run_app(scenario="teaching-8gpu", **{"parallelism.ideal_pipeline": "true",
                                              "parallelism.schedule": "gpipe"})
    at.session_state["_open.textbook"] = True
    at.session_state["step_mode"] = "textbook diagram (unit time)"
    at.run()
    end = at.slider(key="textbook_t").max
    at.slider(key="textbook_t").set_value(end - 3).run()
    at.sidebar.number_input(key="training.global_batch").set_value(4).run()
    assert not at.exception
    assert not [e for e in at.error if "Internal error" in str(e.value)]
    shorter = at.slider(key="textbook_t")
    assert shorter.max < end - 3 and shorter.value == shorter.max


# The Iteration card's digits: 51.4 ms, 7.2 ms (two or three significant figures).
CARD = 7e-3


@pytest.mark.slow
@pytest.mark.parametrize("scenario,gpu,field,typed", [
    # teaching-8gpu leaves its NICs to the loader: a GB200 tray has 4 (config/domains.py).
    ("teaching-8gpu", "gb200", "cluster.scale_out.nics_per_node", 8),
    # dlrm-dcnv2 leaves its NVLink bandwidth and NCCL's SMs to the GPU: an A100's 300 GB/s, 24 SMs.
    ("dlrm-dcnv2", "a100-80gb", "cluster.scale_up.bandwidth_GBps", 450.0),
    ("dlrm-dcnv2", "a100-80gb", "communication.comm_sms", 32),
])

def test_a_gpu_switch_shows_the_values_it_derives_and_keeps_one_typed_back(scenario, gpu, field, typed):
    """A hunt: on teaching-8gpu, GPU gb200 ran on the rack's 4 NICs per node while the sidebar still
    showed the H100's 8, and typing 8 back was ignored; on dlrm-dcnv2 an A100 ran at 300 GB/s and 24
    SMs beside a sidebar showing 450 and 32.  The GPU now re-derives those widgets where the
    scenario leaves them to the loader, and a value typed back is simulated and linked."""
    from explorer.scenario import load
    from explorer.simulate import simulate

    from app_support import qp, seconds

    path = ROOT / "scenarios" / f"{scenario}.yaml"
    at = run_app(scenario=scenario)
    assert at.session_state[field] == typed                  # the preset's own value
    at.sidebar.selectbox(key="hardware.gpu").set_value(gpu).run()
    assert not at.exception
    derived = load(path, {"hardware.gpu": gpu})
    shown = at.session_state[field]
    assert shown == pytest.approx(float(functools.reduce(getattr, field.split("."), derived)))
    assert shown != typed
    assert seconds(at) == pytest.approx(simulate(derived).iteration_time_s, rel=CARD)
    at.sidebar.number_input(key=field).set_value(typed).run()
    assert not at.exception
    assert at.sidebar.number_input(key=field).value == typed
    want = simulate(load(path, {"hardware.gpu": gpu, field: typed}))
    assert seconds(at) == pytest.approx(want.iteration_time_s, rel=CARD)
    assert float(qp(at, field)) == pytest.approx(float(typed))


@pytest.mark.slow
def test_a_gpu_switch_keeps_a_bandwidth_the_scenario_sets():
    """megatron-gpt3-175b sets its NVLink bandwidth (300 GB/s) and NICs (8): a GPU switch keeps them,
    in the sidebar and the run, as the CLI's --set hardware.gpu=... does."""
    from explorer.scenario import load
    from explorer.simulate import simulate

    from app_support import seconds

    at = run_app(scenario="megatron-gpt3-175b")
    at.sidebar.selectbox(key="hardware.gpu").set_value("h100-sxm").run()
    assert not at.exception
    assert at.session_state["cluster.scale_up.bandwidth_GBps"] == 300
    assert at.session_state["cluster.scale_out.nics_per_node"] == 8
    want = simulate(load(ROOT / "scenarios" / "megatron-gpt3-175b.yaml", {"hardware.gpu": "h100-sxm"}))
    assert want.scenario.cluster.scale_up.bandwidth_GBps == 300
    assert seconds(at) == pytest.approx(want.iteration_time_s, rel=CARD)


def test_choosing_a_pcie_scale_up_takes_the_gpus_pcie_rate():
    """A hunt: scale-up kind pcie kept the preset's NVLink 450 GB/s (an H100 "on PCIe" reduced at
    260 GB/s bus bandwidth).  Left to the loader, a PCIe scale-up takes the GPU's measured PCIe rate
    (H100: 52.8 GB/s, nvbandwidth); in the sidebar the kind re-derives the bandwidth, even over the
    preset's NVLink figure, and NCCL's SMs with it."""
    from explorer.scenario import load
    from explorer.simulate import simulate

    from app_support import qp, seconds

    path = ROOT / "scenarios" / "teaching-8gpu.yaml"
    derived = load(path, {"cluster.scale_up.kind": "pcie", "cluster.scale_up.bandwidth_GBps": None})
    assert derived.cluster.scale_up.bandwidth_GBps == derived.hardware.gpu.pcie_GBps == 52.8
    at = run_app(scenario="teaching-8gpu")
    assert at.session_state["cluster.scale_up.bandwidth_GBps"] == 450
    at.sidebar.selectbox(key="cluster.scale_up.kind").set_value("pcie").run()
    assert not at.exception
    assert at.session_state["cluster.scale_up.bandwidth_GBps"] == 52.8
    assert seconds(at) == pytest.approx(simulate(derived).iteration_time_s, rel=CARD)
    assert float(qp(at, "cluster.scale_up.bandwidth_GBps")) == 52.8


@pytest.mark.slow
@pytest.mark.parametrize("scenario,steps,want", [
    # megatron-gpt3-175b sets 300 GB/s: GPU alone keeps it; PCIe and back to NVSwitch keeps it too.
    ("megatron-gpt3-175b", [("hardware.gpu", "h100-sxm")], 300),
    ("megatron-gpt3-175b", [("hardware.gpu", "h100-sxm"), ("cluster.scale_up.kind", "pcie"),
                            ("cluster.scale_up.kind", "nvswitch")], 300),
    # PCIe on a GB200, then an H100: the H100's PCIe link (52.8), not the GB200's NVLink 900.
    ("teaching-8gpu", [("hardware.gpu", "gb200"), ("cluster.scale_up.kind", "pcie"),
                       ("hardware.gpu", "h100-sxm")], 52.8),
    ("teaching-8gpu", [("hardware.gpu", "h100-sxm"), ("cluster.scale_up.kind", "pcie")], 52.8),
])
def test_the_scale_up_bandwidth_does_not_depend_on_the_order_of_clicks(scenario, steps, want):
    """A regression hunt: the same sidebar state simulated 300 or 450 GB/s (megatron, GPU then PCIe
    then NVSwitch), and an H100 on PCIe ran at a GB200's 900 GB/s when the GB200 was chosen first.
    The value follows the choices on screen: the scenario's own where no source but the GPU
    changed, else what the loader derives."""
    at = run_app(scenario=scenario)
    for key, value in steps:
        at.sidebar.selectbox(key=key).set_value(value).run()
        assert not at.exception
    assert at.session_state["cluster.scale_up.bandwidth_GBps"] == want
    again = run_app(**{k: v[-1] if isinstance(v, list) else v for k, v in at.query_params.items()})
    assert again.session_state["cluster.scale_up.bandwidth_GBps"] == want


@pytest.mark.parametrize("gpu", ["b200", "gb200", "gb300"])
def test_a_pcie_scale_up_of_a_gpu_without_a_pcie_rate_is_never_its_nvlink(gpu):
    """A regression hunt: B200, GB200 and GB300 give no measured PCIe rate, and on PCIe they ran at
    their 900 GB/s NVLink figure, faster than on their NVSwitch (dlrm-dcnv2: 1.706 against 1.712 ms).
    A PCIe box takes PCIe 5.0 x16's measured 52.8 GB/s, and is slower than the NVSwitch."""
    from explorer.config.loading import FALLBACK_PCIE_GBPS
    from explorer.scenario import load
    from explorer.simulate import simulate

    path = ROOT / "scenarios" / "dlrm-dcnv2.yaml"
    pcie = load(path, {"hardware.gpu": gpu, "cluster.scale_up.kind": "pcie"})
    assert pcie.hardware.gpu.pcie_GBps is None
    assert pcie.cluster.scale_up.bandwidth_GBps == FALLBACK_PCIE_GBPS == 52.8
    nvswitch = load(path, {"hardware.gpu": gpu})
    assert simulate(pcie).iteration_time_s > simulate(nvswitch).iteration_time_s
