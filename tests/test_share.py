"""Share links: a link reproduces its scenario; the address bar lists exactly the changed fields."""
from __future__ import annotations

import pytest

from explorer.scenario import apply_overrides, from_dict
from explorer.share import changed_fields, parse_query, preset_raw, to_query


@pytest.mark.parametrize("scenario,overrides", [
    ("llama3-405b-16k", {"parallelism.pp": "8", "cluster.scale_out.oversubscription": "4"}),
    ("teaching-8gpu", {"model.moe.experts": "8", "model.moe.top_k": "2",
                       "model.moe.expert_ffn_hidden": "4096", "parallelism.ep": "2"}),
    ("two-datacenters", {"cluster.scale_across.bandwidth_Gbps": "200", "communication.algorithm": "ring"}),
    ("deepseek-v3", {"parallelism.schedule": "1f1b", "model.moe.imbalance": "1.5"}),
    ("teaching-8gpu", {"hardware.gpu": "b200", "parallelism.stage_layers": "[5,7,7,5]"}),
])
def test_link_round_trips_to_the_same_scenario_and_the_same_link(scenario, overrides):
    view = parse_query({"scenario": scenario, **overrides, "view": "memory"})
    assert view.warnings == []
    base = from_dict(preset_raw(scenario))
    sc = from_dict(apply_overrides(preset_raw(scenario), view.overrides))
    query = to_query(view, base, sc)
    assert query == {"scenario": scenario, **overrides, "view": "memory"}
    again = parse_query(query)
    assert from_dict(apply_overrides(preset_raw(scenario), again.overrides)) == sc


@pytest.mark.parametrize("name", ["Korthikanti Table 5: 1T (full)", "true", "12", "[x]", "# x", "- a",
                                  "null", "plain name"])
def test_a_scenario_name_that_yaml_would_read_otherwise_round_trips(name):
    """A name with ': ' (bench/korthikanti.py's) or one YAML reads as a boolean, number, list,
    comment or null is written quoted; the link opens without a warning, the name intact."""
    base = from_dict(preset_raw("teaching-8gpu"))
    sc = from_dict(apply_overrides(preset_raw("teaching-8gpu"), {"name": name}))
    view = parse_query({"scenario": "teaching-8gpu"})
    query = to_query(view, base, sc)
    again = parse_query(query)
    assert again.warnings == []
    assert from_dict(apply_overrides(preset_raw("teaching-8gpu"), again.overrides)).name == name
    assert (query["name"] == name) == (name == "plain name")


def test_dp_follows_the_other_degrees_unless_the_link_sets_it():
    view = parse_query({"scenario": "megatron-gpt3-175b", "parallelism.pp": "4"})
    sc = from_dict(apply_overrides(preset_raw("megatron-gpt3-175b"), view.overrides))
    assert sc.dp == 32
    assert "parallelism.dp" not in changed_fields(from_dict(preset_raw("megatron-gpt3-175b")), sc)


def test_combination_that_only_works_together_is_kept():
    # nodes and global batch must change together: accepted as a set, not one by one.
    view = parse_query({"scenario": "teaching-8gpu", "cluster.nodes": "3", "training.global_batch": "24"})
    assert view.warnings == [] and view.overrides == {"cluster.nodes": 3, "training.global_batch": 24}


def _reopened(scenario: str, overrides: dict):
    """The link the address bar writes for ``overrides`` on ``scenario``, and the scenario it reopens."""
    base = from_dict(preset_raw(scenario))
    sc = from_dict(apply_overrides(preset_raw(scenario), overrides))
    query = {"scenario": scenario, **changed_fields(base, sc)}
    view = parse_query(query)
    assert view.warnings == []
    return sc, query, from_dict(apply_overrides(preset_raw(scenario), view.overrides))


@pytest.mark.parametrize("scenario,overrides", [
    ("gnn-sage-papers100m", {"model.gnn.local_share": None}),
    ("deepseek-v3", {"training.fp8_recipe": None}),
    ("pipedream-vgg16", {"parallelism.stage_replicas": None, "parallelism.stage_layers": None,
                         "parallelism.pp": 1, "parallelism.schedule": "1f1b", "training.global_batch": 1024}),
])
def test_a_field_cleared_to_null_stays_cleared_in_the_link(scenario, overrides):
    """to_dict leaves out fields set to None, so a cleared field had no link parameter and the link
    reopened with the preset's value: gnn-sage-papers100m without its local_share (0.0986 s) reopened
    at 0.0129 s, and the beyond-transformers tour's data-parallel VGG step reopened as 15-1 (found by
    a link round-trip hunt).  The link now says null."""
    sc, query, back = _reopened(scenario, overrides)
    assert back == sc
    assert all(query[k] == "null" for k, v in overrides.items() if v is None)


def test_a_custom_gpu_replacing_a_preset_reopens_without_the_presets_fields():
    """A GPU given in full on teaching-8gpu (an H100 preset) used to reopen with the H100's measured GEMM
    rate, NVLink SHARP, PCIe and power, 0.1924 -> 0.1705 s.  Its empty fields are now written as null;
    a single field edited on the preset GPU, or a preset switch, still takes one parameter."""
    gpu = {"name": "x", "peak_tflops": 500, "memory_GB": 60, "hbm_GBps": 2000}
    sc, query, back = _reopened("teaching-8gpu", {"hardware.gpu": gpu})
    assert back == sc and back.hardware.gpu.measured_matmul_tflops is None
    assert not back.hardware.gpu.nvlink_sharp
    assert query["hardware.gpu.measured_matmul_tflops"] == "null" and "hardware.gpu.preset" not in query
    sc, query, back = _reopened("teaching-8gpu", {"hardware.gpu.peak_tflops": 900})
    assert back == sc and query == {"scenario": "teaching-8gpu", "hardware.gpu.peak_tflops": "900"}
    sc, query, back = _reopened("teaching-8gpu", {"hardware.gpu": "b200"})
    assert back == sc and query == {"scenario": "teaching-8gpu", "hardware.gpu": "b200"}


def test_clearing_the_model_preset_stays_cleared_in_the_link():
    """``model.preset: null`` keeps the model's fields but drops the preset they came from; the link
    writes it (a GPU's preset, the name its base expands, never)."""
    sc, query, back = _reopened("gnn-sage-papers100m", {"model.preset": None})
    assert back == sc and query["model.preset"] == "null"


def test_pipedreams_auto_replicas_travel_as_the_word():
    """Found walking the app: typing ``auto`` in "GPUs per stage" put ``[0,0]`` (the loader's form of
    auto) in the link, and the reopened box read "0,0".  The link writes ``auto``; the box shows it."""
    from explorer.ui.field_text import to_text

    sc, query, back = _reopened("pipedream-vgg16", {"parallelism.stage_replicas": "auto"})
    assert query["parallelism.stage_replicas"] == "auto"
    assert back.parallelism.stage_replicas == sc.parallelism.stage_replicas == (0, 0)
    assert to_text((0, 0), "parallelism.stage_replicas") == "auto"
    assert to_text((15, 1), "parallelism.stage_replicas") == "15,1"
    assert to_text((0, 0)) == "0,0"


def test_a_derived_gradient_bucket_stays_out_of_the_link():
    """Found walking the app: fsdp-llama3-8b at 16 nodes wrote ``communication.bucket_MB=512`` (FSDP's
    bucket follows dp) while the sidebar showed 256, and the pinned 512 outlived later changes."""
    sc, query, back = _reopened("fsdp-llama3-8b", {"cluster.nodes": 16})
    assert "communication.bucket_MB" not in query
    assert back.communication.bucket_MB == sc.communication.bucket_MB == 512
    # A bucket the user sets stays in the link.
    sc, query, back = _reopened("fsdp-llama3-8b", {"communication.bucket_MB": 100})
    assert query["communication.bucket_MB"] == "100" and back.communication.bucket_MB == 100


@pytest.mark.parametrize("name", ["llama3-405b-16k", "two-datacenters", "deepseek-v3"])
def test_a_link_reopens_a_fabric_change_with_the_shipped_scenarios_own_values(name):
    """A value equal to the shipped scenario's was left out of a link, but a new fabric derives its
    own: the heatmap cell roce-100 x NIC 400 Gb/s (7.347 s) opened at the RoCE preset's 100 (8.775 s;
    deepseek-v3 19.3 -> 66.6 s).  Every link now reopens the scenario it was written from."""
    from urllib.parse import parse_qsl

    from explorer.config.loading import to_dict
    from explorer.design.base import open_base, share_query

    base = open_base(name)
    sc0 = base.scenario()
    so = sc0.cluster.scale_out
    cells = [{"cluster.scale_out.fabric": f, key: value}
             for f in ("roce-100", "ib-hdr", "eth-100")
             for key, value in (("cluster.scale_out.nic_Gbps", so.nic_Gbps),
                                ("cluster.scale_out.latency_us", so.latency_us),
                                ("cluster.scale_out.efficiency", so.efficiency))]
    for ov in cells:
        sc = base.scenario(ov)
        view = parse_query(dict(parse_qsl(share_query(base, sc))))
        assert not view.warnings
        reopened = from_dict(apply_overrides(preset_raw(view.scenario), view.overrides))
        assert to_dict(reopened) == to_dict(sc), ov
