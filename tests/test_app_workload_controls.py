"""The sidebar of the non-transformer families (issue 36): every model.dlrm / model.gnn field a
user changes has a widget (lists typed as ``15,10,5``, optional numbers as a toggle + number),
PipeDream's stage replicas are typed as ``15,1`` or ``auto``, the model preset selector switches
families and back; each control moves the number the way the model says."""
from __future__ import annotations

import dataclasses
import json

import pytest

from explorer.config.dlrm import Dlrm
from explorer.config.gnn import Gnn
from explorer.ui.controls import CONTROLS
from explorer.ui.field_text import parse_list, to_text
from explorer.ui.state import CUSTOM

from app_support import qp, run_app, seconds
from cli_support import cli

KEYS = {c.key for c in CONTROLS}


@pytest.mark.parametrize("section,cls,skip", [("dlrm", Dlrm, set()), ("gnn", Gnn, {"partitions"})])
def test_every_model_field_has_a_widget(section, cls, skip):
    fields = {f.name for f in dataclasses.fields(cls)} - skip
    assert {f"model.{section}.{f}" for f in fields} <= KEYS


def test_list_text_reads_back_and_refuses_in_one_line():
    assert parse_list(" 15, 10,5 ", "model.gnn.fanouts") == [15, 10, 5]
    assert parse_list("AUTO", "parallelism.stage_replicas") == "auto"
    assert parse_list("", "parallelism.stage_replicas") is None
    assert to_text((15, 10, 5)) == "15,10,5"
    with pytest.raises(Exception) as exc:
        parse_list("15,x", "model.gnn.fanouts")
    assert str(exc.value).startswith("model.gnn.fanouts: 'x'") and "\n" not in str(exc.value)
    with pytest.raises(Exception, match="or auto"):
        parse_list("15;1", "parallelism.stage_replicas")


def _text(at, key):
    return at.text_input(key=f"_text.{key}")


def test_gnn_fanouts_typed_as_text_move_the_step():
    at = run_app(scenario="gnn-sage-papers100m")
    box = _text(at, "model.gnn.fanouts")
    assert box.value == "15,10,5"
    before = seconds(at)
    box.set_value("25,10,5").run()            # more neighbours of each seed: more work per step
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert seconds(at) > before
    assert qp(at, "model.gnn.fanouts") == "[25,10,5]"
    _text(at, "model.gnn.fanouts").set_value("25,ten").run()
    assert [e.value for e in at.error if e.value.startswith("model.gnn.fanouts: 'ten'")]
    assert qp(at, "model.gnn.fanouts") == "[25,10,5]"            # the last valid value stays


def test_gnn_local_share_toggle_off_partitions_the_features():
    # Shipped with every feature local (SALIENT); off = 1/16 local, 15/16 fetched over 50 Gb/s.
    at = run_app(scenario="gnn-sage-papers100m")
    toggle = at.toggle(key="_on.model.gnn.local_share")
    assert toggle.value is True and at.number_input(key="model.gnn.local_share").value == 1.0
    before = seconds(at)
    toggle.set_value(False).run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert seconds(at) > 5 * before                # the scenario's description: 86 ms of fetch vs 14.0 ms
    assert qp(at, "model.gnn.local_share") is None or qp(at, "model.gnn.local_share") == "null"


def test_dlrm_list_and_choice_controls():
    at = run_app(scenario="dlrm-dcnv2")
    assert _text(at, "model.dlrm.bottom_mlp").value == "512,256,128"
    before = seconds(at)
    at.selectbox(key="model.dlrm.interaction").set_value("dot").run()   # no cross layers: faster
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert seconds(at) < before
    _text(at, "model.dlrm.bottom_mlp").set_value("512,256,64").run()    # != dim 128: refused by name
    assert [e.value for e in at.error if "model.dlrm.bottom_mlp" in e.value]


def test_stage_replicas_text_and_auto():
    at = run_app(scenario="pipedream-vgg16")
    box = _text(at, "parallelism.stage_replicas")
    assert box.value == "15,1"
    assert any("dp = 1" in m.value for m in at.markdown)
    before = seconds(at)
    box.set_value("auto").run()               # PipeDream's partitioner chooses 15-1 itself
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert seconds(at) == pytest.approx(before, rel=1e-6)
    _text(at, "parallelism.stage_replicas").set_value("14,2").run()
    assert not at.error, [e.value for e in at.error]
    assert seconds(at) != pytest.approx(before, rel=1e-3)
    assert qp(at, "parallelism.stage_replicas") == "[14,2]"


def _cli_seconds(scenario: str, **sets) -> float:
    args = [a for k, v in sets.items() for a in ("--set", f"{k}={v}")]
    return _run_json(scenario, *args)["iteration_time_s"]


def test_a_new_depth_drops_the_split_and_replicas_written_for_the_old_one():
    """pipedream-vgg16 sets 13,3 layers on 15,1 GPUs for its two stages: at pp 4 neither fits, so
    the depth takes the balanced split and dp replicas per stage; its 960 images are then no
    multiple of 4 replicas x 64, which the message names (a control the sidebar shows); at 1,024
    the run equals the CLI's with both lists unset.  Back at pp 2 the scenario's own return."""
    at = run_app(scenario="pipedream-vgg16")
    assert _text(at, "parallelism.stage_layers").value == "13,3"
    own = seconds(at)
    at.number_input(key="parallelism.pp").set_value(4).run()
    assert not at.exception
    assert _text(at, "parallelism.stage_layers").value == ""
    assert at.session_state["parallelism.stage_replicas"] is None
    assert [e.value for e in at.error] and all("training.global_batch" in e.value for e in at.error)
    at.number_input(key="training.global_batch").set_value(1024).run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    want = _cli_seconds("pipedream-vgg16", **{"parallelism.pp": 4, "parallelism.stage_layers": "null",
                                               "parallelism.stage_replicas": "null",
                                               "training.global_batch": 1024, "parallelism.dp": 4})
    assert seconds(at) == pytest.approx(want, rel=2e-3)      # the card's 3-4 digits
    at.number_input(key="training.global_batch").set_value(960).run()
    at.number_input(key="parallelism.pp").set_value(2).run()
    assert not at.error, [e.value for e in at.error]
    assert _text(at, "parallelism.stage_layers").value == "13,3"
    assert _text(at, "parallelism.stage_replicas").value == "15,1"
    assert seconds(at) == pytest.approx(own, rel=1e-9)


def test_stage_layers_typed_move_the_iteration_and_the_link():
    """teaching-8gpu (4 stages, 24 layers): 9,5,5,5 loads stage 0 with 9 layers, slower than the
    balanced split the empty box gives; the link carries the split and clearing it drops it."""
    at = run_app(scenario="teaching-8gpu")
    box = _text(at, "parallelism.stage_layers")
    assert box.value == ""
    balanced = seconds(at)
    box.set_value("9,5,5,5").run()
    assert not at.error, [e.value for e in at.error]
    assert seconds(at) > balanced
    want = _cli_seconds("teaching-8gpu", **{"parallelism.stage_layers": "[9,5,5,5]"})
    assert seconds(at) == pytest.approx(want, rel=2e-3)
    assert qp(at, "parallelism.stage_layers") == "[9,5,5,5]"
    _text(at, "parallelism.stage_layers").set_value("9,5,5").run()      # 19 layers of 24: by name
    assert [e.value for e in at.error if "parallelism.stage_layers" in e.value]
    _text(at, "parallelism.stage_layers").set_value("").run()
    assert not at.error, [e.value for e in at.error]
    assert seconds(at) == pytest.approx(balanced, rel=1e-9)
    assert qp(at, "parallelism.stage_layers") is None


def test_no_stage_layers_box_without_a_pipeline():
    at = run_app(scenario="resnet50-cloud-dp")
    assert not [t for t in at.text_input if t.key == "_text.parallelism.stage_layers"]


def test_no_stage_replicas_box_without_a_pipeline():
    at = run_app(scenario="resnet50-cloud-dp")
    assert not [t for t in at.text_input if t.key == "_text.parallelism.stage_replicas"]


@pytest.mark.parametrize("preset,key", [("dlrm-dcnv2", "model.dlrm.tables"),
                                        ("graphsage-products", "model.gnn.hidden")])
def test_model_preset_switches_family_and_back(preset, key):
    at = run_app(scenario="teaching-8gpu")
    at.number_input(key="parallelism.pp").set_value(1).run()
    at.number_input(key="parallelism.tp").set_value(1).run()
    at.selectbox(key="model.preset").set_value(preset).run()
    assert not at.exception
    assert key in {w.key for w in at.number_input}              # the family's own controls
    assert "model.hidden" not in {w.key for w in at.number_input}
    at.selectbox(key="model.preset").set_value("llama3-8b").run()
    assert not at.exception
    assert "model.hidden" in {w.key for w in at.number_input}
    assert key not in {w.key for w in at.number_input}
    assert at.selectbox(key="model.preset").value != CUSTOM


def _card(at, label):
    return next(m for m in at.metric if m.label == label)


def test_gnn_epoch_card_is_training_nodes_over_seed_nodes_per_second():
    # ogbn-papers100M: 1,207,179 training nodes at 1,168,641 seed nodes/s (the scenario's 1.03 s).
    at = run_app(scenario="gnn-sage-papers100m")
    rate = float(_card(at, "Seed nodes/s").value.replace(",", ""))
    epoch = 1_207_179 / rate
    assert _card(at, "Epoch").value == f"{epoch:.3f} s" == "1.033 s"
    assert _card(at, "Epoch").delta == f"{3600 / epoch:,.0f} /h" == "3,485 /h"       # epochs per hour
    assert "Bubble" not in [m.label for m in at.metric]


def test_dlrm_card_is_the_exposed_embedding_all_to_all():
    j = _run_json("dlrm-dcnv2")
    at = run_app(scenario="dlrm-dcnv2")
    card = _card(at, "Exposed emb")
    assert card.value == f"{j['breakdown_s']['emb'] / j['iteration_time_s']:.1%}"
    # The scenario's closed form: (8 x 11.8 MB of ids, each to every column shard, + 2 x 46 MB of
    # pooled embeddings and gradients) x 7/8.
    assert card.delta == f"{j['comm_bytes_per_gpu']['emb'] / 1e6:,.0f} MB/GPU"
    assert 160 < j["comm_bytes_per_gpu"]["emb"] / 1e6 < 166
    # 15,226,053 samples/s in millions (ten digits do not fit a 1280-px card beside the sidebar).
    assert _card(at, "Samples/s").value == f"{j['samples_per_s'] / 1e6:.1f} M" == "15.2 M"


def test_pipedream_bubble_card_counts_gpus_not_stages():
    at = run_app(scenario="pipedream-vgg16")
    assert _card(at, "Bubble").value == "4.5%"


def _run_json(*args):
    proc = cli("run", *args, "--json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_run_json_epoch_s_for_gnn_only():
    j = _run_json("gnn-sage-papers100m")
    assert j["epoch_s"] == pytest.approx(1_207_179 / j["samples_per_s"], rel=1e-12)
    assert j["epoch_s"] == pytest.approx(1.033, abs=0.001)          # the scenario's 1.03 s
    # Full graph: a step is one pass over the graph, one partition per GPU: the epoch is the step.
    f = _run_json("gnn-sage-papers100m", "--set", "model.gnn.mode=fullgraph", "--set",
                  "training.global_batch=16", "--set", "training.micro_batch=1")
    assert f["epoch_s"] == pytest.approx(f["iteration_time_s"], rel=1e-12)
    assert "epoch_s" not in _run_json("dlrm-dcnv2")


@pytest.mark.parametrize("scenario, compression, layers", [
    ("dlrm-dcnv2", False, False), ("gnn-sage-papers100m", False, False), ("resnet50-cloud-dp", True, False),
    ("pipedream-gnmt16", True, False), ("cloud-25g-dp", True, True)])
def test_the_sidebar_offers_only_what_the_family_reads(scenario, compression, layers):
    """A DLRM or a GNN has no compression factor (any compressor is refused at load,
    runnable.rule_family_models_it): the sidebar offers none.  Only a transformer has attention
    kernels, FP8 recipes, layer recompute/offload recipes and a tensor-parallel dimension (its
    sequence parallelism, its TP overlap): the other families' sidebars leave them out, as they
    were refused or changed nothing there."""
    at = run_app(scenario=scenario)
    assert not at.exception
    keys = {w.key for w in at.selectbox} | {w.key for w in at.number_input} | {w.key for w in at.toggle}
    assert ("communication.compression.kind" in keys) is compression
    assert ("communication.compression.rank" in keys) is compression
    for key in ("training.attention_kernel", "training.recompute", "training.recompute_layers",
                "training.offload_activations_layers", "parallelism.sequence_parallel"):
        assert (key in keys) is layers, key


@pytest.mark.parametrize("scenario, sample", [("teaching-8gpu", "sequences"), ("dlrm-dcnv2", "samples"),
                                              ("gnn-sage-papers100m", "seed nodes"),
                                              ("resnet50-cloud-dp", "images"),
                                              ("pipedream-gnmt16", "sentences")])
def test_the_batch_control_counts_the_familys_samples(scenario, sample):
    """The global batch is labelled in what the cards count (it read "sequences" on a DLRM)."""
    at = run_app(scenario=scenario)
    labels = [w.label for w in at.number_input if w.key == "training.global_batch"]
    assert labels == [f"Global batch ({sample})"]


def test_the_topology_table_prints_a_small_transfer_in_megabytes():
    """The GNN's 2.14 MB all-reduce read "0.00 GB" in the Topology view's table."""
    at = run_app(scenario="gnn-sage-papers100m", view="topology")
    table = next(d.value for d in at.dataframe if "sent per GPU per iteration" in d.value.columns)
    row = table[table["dimension"] == "dp"].iloc[0]
    assert row["sent per GPU per iteration"] == "2.1 MB"


def test_the_traffic_table_prints_a_small_transfer_with_its_digits():
    """The GNN's 2.14 MB all-reduce read "0.00" in the Traffic view's GB table."""
    at = run_app(scenario="gnn-sage-papers100m", view="traffic")
    table = next(d.value for d in at.dataframe if "bus GB (nccl-tests)" in d.value.columns)
    row = table[table["dimension"] == "dp"].iloc[0]
    assert row["bus GB (nccl-tests)"] == "0.00214"


def test_the_timeline_says_when_the_host_sets_the_pace():
    """The GNN's pipelined sampler (14.02 ms) outlasts the GPUs' 12.90 ms step: the caption names the
    1.1 ms wait the breakdown counts in compute; a run the host does not pace has no such caption."""
    at = run_app(scenario="gnn-sage-papers100m")
    said = [c.value for c in at.caption if c.value.startswith("The host sets the pace")]
    assert said == ["The host sets the pace: the GPUs finish their step and wait 1.1 ms for the next input "
                    "(shaded); the breakdown counts that wait in compute."]
    at = run_app(scenario="gnn-sage-papers100m", **{"model.gnn.cpu_workers": "400"})
    assert not [c.value for c in at.caption if c.value.startswith("The host sets the pace")]


def _link_of(at) -> dict[str, str]:
    """The address bar as a link's query parameters (one string each)."""
    return {k: qp(at, k) for k in at.query_params}


@pytest.mark.slow
@pytest.mark.parametrize("scenario,steps,preset", [
    ("teaching-8gpu", {}, "resnet-50"),
    ("teaching-8gpu", {"parallelism.pp": 1}, "dlrm-dcnv2"),
    ("dlrm-dcnv2", {}, "llama3-8b"),
])
def test_a_model_of_another_family_gives_a_link_that_reopens_it(scenario, steps, preset):
    """A hunt: teaching-8gpu switched to resnet-50 showed 1.8 ms, and its link
    (?scenario=teaching-8gpu&model.kind=cnn&model.preset=resnet-50) reopened the 1.3B transformer at
    106.3 ms with "ignored model.kind=cnn"; dlrm-dcnv2 switched to llama3-8b reopened the DLRM.  The
    link is now written against a preset of the new family (share_reference.link_scenario) and
    reopens the numbers shown, without a warning."""
    at = run_app(scenario=scenario)
    for key, value in steps.items():
        at.number_input(key=key).set_value(value).run()
    at.selectbox(key="model.preset").set_value(preset).run()
    assert not at.exception
    shown = seconds(at)
    link = _link_of(at)
    assert link["scenario"] != scenario                      # a preset of the new family
    again = run_app(**link)
    assert not [w.value for w in again.warning if "Link:" in str(w.value)]
    assert seconds(again) == shown
    assert again.selectbox(key="model.preset").value == preset
