"""The app on serving scenarios (issue 37, "the sidebar switches between training and inference"):
the Workload switch, the Serving section of the sidebar (and what it hides), the Serving curve tab
with its knee and TPOT target, and links that carry fields whose control is hidden."""
from __future__ import annotations

import json

import pytest

from explorer.scenario import apply_overrides, from_dict
from explorer.share import preset_raw
from explorer.simulate import simulate

from app_support import qp, run_app


def cards(at) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def test_a_serving_preset_shows_its_controls_and_hides_the_training_ones():
    at = run_app(scenario="serve-llama3-70b-tp8")
    numbers = {w.key for w in at.sidebar.number_input}
    assert {"inference.prompt_tokens", "inference.output_tokens", "inference.batch"} <= numbers
    assert "parallelism.tp" in numbers
    # A training step's fields are not drawn: they would change nothing (or be refused).
    assert not {"training.global_batch", "training.micro_batch", "parallelism.vpp", "parallelism.zero",
                "communication.bucket_MB"} & numbers
    # Nor are the pools of a disaggregated deployment on a co-located one.
    assert not any(k.startswith("inference.disaggregated.") for k in numbers)
    assert [e.label for e in at.sidebar.expander][0] == "Serving"
    assert "Batch & precision" not in [e.label for e in at.sidebar.expander]


def test_the_batch_control_moves_the_cards_and_the_link():
    at = run_app(scenario="serve-llama3-70b-tp8")
    before = cards(at)
    at.sidebar.number_input(key="inference.batch").set_value(8).run()
    after = cards(at)
    assert float(after["TPOT"].split()[0]) < float(before["TPOT"].split()[0])        # 30.50 -> 8.46 ms
    assert qp(at, "inference.batch") == "8"


def test_a_disaggregated_preset_offers_its_pools_not_the_scenario_degrees():
    at = run_app(scenario="serve-deepseek-v3-disaggregated")
    numbers = {w.key for w in at.sidebar.number_input}
    assert "inference.disaggregated.decode.ep" in numbers and "parallelism.tp" not in numbers
    step = cards(at)["TPOT"]
    at.sidebar.number_input(key="inference.disaggregated.decode.ep").set_value(64).run()
    assert cards(at)["TPOT"] != step and qp(at, "inference.disaggregated.decode.ep") == "64"


def test_a_link_with_a_hidden_field_still_reproduces_it():
    """A pool on a co-located preset has no control there; the link's value rides along."""
    at = run_app(scenario="serve-llama3-70b-tp8", **{"cluster.nodes": "2",
                 "inference.disaggregated.prefill.tp": "8", "inference.disaggregated.decode.tp": "8"})
    assert not at.exception and not at.error
    assert qp(at, "inference.disaggregated.prefill.tp") == "8"
    over = {"cluster.nodes": 2, "inference.disaggregated.prefill.tp": 8,
            "inference.disaggregated.decode.tp": 8}
    f = simulate(from_dict(apply_overrides(preset_raw("serve-llama3-70b-tp8"), over))).inference
    assert f["prefill_gpus"] == 8 and cards(at)["TPOT"] == f"{f['tpot_s'] * 1e3:.2f} ms"


def test_the_workload_switch_serves_the_model_on_screen_and_back():
    at = run_app(scenario="llama3-405b-16k")
    assert "inference.batch" not in {w.key for w in at.sidebar.number_input}
    at.sidebar.button_group(key="_kind").set_value("serving").run()
    assert not at.exception
    assert at.session_state["_scenario"] == "serve-llama3-70b-tp8"
    # The model and GPU came along: the link says so.
    assert (qp(at, "model.preset"), at.session_state["hardware.gpu"]) == ("llama3-405b", "h100-sxm")
    assert "TTFT" in cards(at)
    options = at.sidebar.selectbox(key="_scenario").options
    assert options and all(o.startswith("serve-") for o in options)
    at.sidebar.button_group(key="_kind").set_value("training").run()
    assert at.session_state["_scenario"] == "teaching-8gpu" and "Iteration time" in cards(at)
    assert not any(o.startswith("serve-") for o in at.sidebar.selectbox(key="_scenario").options)


def test_a_model_that_cannot_be_served_there_loads_the_preset_and_says_why():
    at = run_app(scenario="dlrm-dcnv2")
    at.sidebar.button_group(key="_kind").set_value("serving").run()
    assert at.session_state["_scenario"] == "serve-llama3-70b-tp8" and not at.exception
    assert qp(at, "model.preset") is None                  # the preset's own model
    assert any("as shipped" in i.value for i in at.info)


@pytest.mark.slow
@pytest.mark.parametrize("scenario,kind,home,model", [
    ("deepseek-v3", "serving", "serve-llama3-70b-tp8", "deepseek-v3"),       # 671B: 84 GB per GPU in FP8
    ("serve-llama3-70b-tp8", "training", "teaching-8gpu", "llama3-70b"),     # 508 GB per GPU there
])
def test_a_model_over_the_home_presets_memory_is_not_carried(scenario, kind, home, model):
    """A hunt: the switch carried llama3-70b onto the 8-GPU teaching node (508.2 of 85.9 GB per GPU)
    and DeepSeek-V3 onto an 8-GPU server whose weights alone overflow, its TPOT card shown as if it
    ran; its own docstring said a model that does not fit is left behind.  Now it is, and the page
    says how much it would need."""
    at = run_app(scenario=scenario)
    assert at.session_state["model.preset"] == model
    at.sidebar.button_group(key="_kind").set_value(kind).run()
    assert not at.exception
    assert at.session_state["_scenario"] == home
    assert qp(at, "model.preset") is None                  # the home preset's own model
    notes = [i.value for i in at.info if "as shipped" in i.value]
    assert notes and "over its memory" in notes[0] and model in notes[0]


@pytest.mark.slow
def test_the_serving_curve_tab_marks_the_knee_and_the_target():
    at = run_app(scenario="serve-llama3-70b-tp8", view="serving", **{"inference.tpot_target_ms": "20"})
    assert not at.exception
    text = " ".join(m.value for m in at.markdown)
    assert "Knee at batch **128**" in text
    assert "batch **128** per replica serves the most within it, **6.62 requests/s**" in text
    assert [t.label for t in at.tabs][:2] == ["Timeline", "Serving curve"]
    at.sidebar.number_input(key="inference.tpot_target_ms").set_value(12.0).run()
    assert "batch **32** per replica" in " ".join(m.value for m in at.markdown)
    at.sidebar.toggle(key="_on.inference.ttft_target_ms").set_value(True).run()
    at.sidebar.number_input(key="inference.ttft_target_ms").set_value(50.0).run()
    text = " ".join(m.value for m in at.markdown)
    assert "Target TPOT 12 ms and mean TTFT 50 ms" in text and "M/D/1" in text
    assert qp(at, "inference.ttft_target_ms") == "50"


def test_a_training_scenario_has_no_serving_tab():
    at = run_app(scenario="teaching-8gpu", view="serving")
    assert "Serving curve" not in [t.label for t in at.tabs] and not at.exception


def test_the_preset_file_and_the_shown_batch_agree():
    at = run_app(scenario="serve-3d-dram")
    shown = at.sidebar.number_input(key="inference.batch").value
    assert shown == preset_raw("serve-3d-dram")["inference"]["batch"]


def test_the_arrival_rate_toggle_serves_a_rate_instead_of_a_full_batch():
    at = run_app(scenario="serve-llama3-70b-tp8")
    at.sidebar.toggle(key="_on.inference.arrival_rate").set_value(True).run()
    assert at.sidebar.number_input(key="inference.arrival_rate").value == 1.0      # its starting value
    at.sidebar.number_input(key="inference.arrival_rate").set_value(5.0).run()
    c = {m.label: m for m in at.metric}
    assert c["Requests/s"].value == "5.00" and qp(at, "inference.arrival_rate") == "5"
    f = simulate(from_dict(apply_overrides(preset_raw("serve-llama3-70b-tp8"),
                                           {"inference.arrival_rate": 5.0}))).inference
    assert c["TTFT"].value == f"{f['ttft_s'] * 1e3:.1f} ms"
    assert c["TPOT"].value == f"{f['tpot_s'] * 1e3:.2f} ms"
    # Beyond the capacity: the one-line reason, the last valid figures kept.
    at.sidebar.number_input(key="inference.arrival_rate").set_value(50.0).run()
    assert any(e.value.startswith("inference.arrival_rate: 50 requests/s exceed") for e in at.error)
    assert not at.exception


def test_a_link_with_a_request_mix_shows_the_clis_figures_and_hides_the_lengths_it_replaces(capsys):
    from explorer.cli import main
    mix = '[{"prompt_tokens":200,"output_tokens":100,"share":3},{"prompt_tokens":4000,"output_tokens":1000}]'
    assert main(["run", "serve-llama3-70b-tp8", "--json", "--set", f"inference.mix={mix}"]) == 0
    cli = json.loads(capsys.readouterr().out)["inference"]
    at = run_app(scenario="serve-llama3-70b-tp8", **{"inference.mix": mix})
    assert not at.exception and not [w.value for w in at.warning if w.value.startswith("Link:")]
    cards = {m.label: m.value for m in at.metric}
    assert cards["TTFT"] == f"{cli['ttft_s'] * 1e3:.1f} ms"
    assert cards["TPOT"] == f"{cli['tpot_s'] * 1e3:.2f} ms"
    keys = {n.key for n in at.sidebar.number_input}
    assert "inference.batch" in keys and not {"inference.prompt_tokens", "inference.output_tokens"} & keys
    assert any("a mix of 2 kinds" in c.value and "75% 200 + 100" in c.value for c in at.sidebar.caption)
    assert json.loads(qp(at, "inference.mix"))[1]["prompt_tokens"] == 4000      # the link carries it
    at = run_app(scenario="serve-llama3-70b-tp8", view="serving", **{"inference.mix": mix,
                                                                     "inference.ttft_target_ms": "60"})
    assert any("M/G/1" in m.value for m in at.markdown)


def test_a_tpot_of_seconds_is_said_in_seconds():
    """Found by a hunt: a 10M-token prompt read "TPOT 9627002.91 ms", cut at the card's edge."""
    from explorer.ui.views.metrics import tpot_text
    assert (tpot_text(0.01199), tpot_text(1.5), tpot_text(9627.00291)) == ("11.99 ms", "1.5 s", "9,627 s")


def test_the_serving_timeline_says_which_bar_is_the_prefill():
    """Prefill and decode are both forwards, one colour: a lecturer read the whole axis as a step."""
    from explorer.serving.result import WINDOW_STEPS
    at = run_app(scenario="serve-llama3-70b-tp8")
    said = [c.value for c in at.caption if "serving timeline" in c.value]
    assert len(said) == 1 and "prefill" in said[0] and f"then {WINDOW_STEPS} decode steps" in said[0]
    assert not [c.value for c in run_app(scenario="teaching-8gpu").caption if "serving timeline" in c.value]
