"""Scenario validation: every rule gives a one-line ScenarioError naming the field, the bad value
and what would be valid; derived defaults, round-trips and dotted-key overrides."""
from __future__ import annotations

import copy
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from explorer.config.loading import fill_defaults, resolve_presets
from explorer.config.rules import RULES, validate
from explorer.config.schema import build, field_paths
from explorer.runnable import rule_frozen_within_layers, rule_work_budget
from explorer.scenario import (
    MAX_GPUS,
    Scenario,
    ScenarioError,
    apply_overrides,
    from_dict,
    load,
    load_raw,
    model_presets,
    parse_assignment,
    to_dict,
)

ROOT = Path(__file__).resolve().parents[1]

SCENARIO_FILES = sorted((ROOT / "scenarios").glob("*.yaml"))

# 2 nodes x 8 GPUs = 16 = tp 2 * pp 2 * dp 4; 32 sequences -> 8 micro-batches of 1 per pipeline.
BASE: dict[str, Any] = {
    "name": "validation base",
    "model": {"preset": "llama3-8b", "seq_len": 1024},
    "training": {"global_batch": 32, "micro_batch": 1},
    "hardware": {"gpu": "h100-sxm"},
    "cluster": {"gpus_per_node": 8, "nodes": 2},
    "parallelism": {"tp": 2, "pp": 2, "dp": 4},
}

_DELETE = object()


def mutate(changes: dict[str, Any], base: dict[str, Any] | None = None) -> dict[str, Any]:
    """A deep copy of ``base`` (default BASE) with dotted keys set (or removed with _DELETE)."""
    raw = copy.deepcopy(BASE if base is None else base)
    for key, value in changes.items():
        *parents, leaf = key.split(".")
        node = raw
        for part in parents:
            node = node.setdefault(part, {})
        if value is _DELETE:
            node.pop(leaf, None)
        else:
            node[leaf] = value
    return raw


def expect_error(raw: dict[str, Any], field: str, bad: str | None, *valid: str) -> str:
    """Assert from_dict(raw) fails on ``field`` with a one-line message; return the message.

    ``bad``: text of the bad value that must appear in the message body (after "field: ").
    ``valid``: fragments saying what would be valid, each must appear in the message.
    """
    with pytest.raises(ScenarioError) as info:
        from_dict(raw)
    err = info.value
    msg = str(err)
    assert isinstance(err, ScenarioError)
    assert err.field == field, msg
    assert msg.startswith(f"{field}: "), msg
    assert "\n" not in msg and "\r" not in msg, msg
    body = msg[len(field) + 2:]
    assert body.strip(), msg
    if bad is not None:
        assert bad in body, f"bad value {bad!r} not in {msg!r}"
    for fragment in valid:
        assert fragment in msg, f"{fragment!r} not in {msg!r}"
    return msg


def test_base_is_valid():
    sc = from_dict(BASE)
    assert sc.gpus == 16
    assert (sc.parallelism.tp, sc.parallelism.pp, sc.dp) == (2, 2, 4)
    assert sc.micro_batches == 8
    assert sc.model.heads == 32 and sc.model.kv_heads == 8 and sc.model.seq_len == 1024


# --------------------------------------------------------------------------------------------
# Unknown keys
# --------------------------------------------------------------------------------------------
def test_unknown_top_level_key():
    raw = mutate({"paralelism": {"tp": 2}})
    msg = expect_error(raw, "paralelism", None, "unknown key", "valid keys", "parallelism", "model",
                       "did you mean 'parallelism'")
    assert "paralelism" in msg


def test_unknown_top_level_key_without_close_match_has_no_suggestion():
    msg = expect_error(mutate({"zzzz": 1}), "zzzz", None, "unknown key", "valid keys", "training", "cluster")
    assert "did you mean" not in msg


def test_unknown_nested_key_suggests_closest():
    expect_error(mutate({"parallelism.tpp": 2}), "parallelism.tpp", None,
                 "unknown key", "valid keys", "schedule", "did you mean 'tp'?")


def test_unknown_deeply_nested_key_suggests_closest():
    expect_error(mutate({"cluster.scale_up.bandwith_GBps": 100}), "cluster.scale_up.bandwith_GBps", None,
                 "unknown key", "latency_us", "did you mean 'bandwidth_GBps'?")


def test_unknown_model_key_suggests_closest():
    expect_error(mutate({"model.hiden": 1024}), "model.hiden", None, "did you mean 'hidden'?")


# --------------------------------------------------------------------------------------------
# Types
# --------------------------------------------------------------------------------------------
def test_string_for_an_int():
    expect_error(mutate({"parallelism.tp": "2"}), "parallelism.tp", "'2'", "integer")


def test_bool_for_an_int():
    expect_error(mutate({"parallelism.tp": True}), "parallelism.tp", "True", "integer")


def test_non_integral_float_for_an_int():
    expect_error(mutate({"training.micro_batch": 2.5}), "training.micro_batch", "2.5", "integer")


def test_integral_float_for_an_int_is_accepted():
    assert from_dict(mutate({"parallelism.tp": 2.0})).parallelism.tp == 2


def test_string_for_a_number():
    expect_error(mutate({"cluster.scale_out.nic_Gbps": "400"}), "cluster.scale_out.nic_Gbps", "'400'",
                 "number")


def test_string_for_a_bool():
    expect_error(mutate({"model.tied_embeddings": "yes"}), "model.tied_embeddings", "'yes'", "true or false")


def test_nan_for_a_number():
    expect_error(mutate({"cluster.scale_up.latency_us": float("nan")}), "cluster.scale_up.latency_us", "nan",
                 "finite")


@pytest.mark.parametrize("section", ["cluster", "training", "parallelism"])
def test_list_for_a_mapping(section):
    expect_error(mutate({section: [1, 2]}), section, "[1, 2]", "mapping")


def test_list_for_nested_mapping():
    expect_error(mutate({"cluster.scale_out": ["rail-optimized"]}), "cluster.scale_out", "['rail-optimized']",
                 "mapping")


def test_whole_file_not_a_mapping():
    with pytest.raises(ScenarioError) as info:
        from_dict([1, 2])  # type: ignore[arg-type]
    assert "mapping" in str(info.value) and "\n" not in str(info.value)


# --------------------------------------------------------------------------------------------
# Cross-field rules
# --------------------------------------------------------------------------------------------
def test_parallel_product_must_equal_gpus():
    expect_error(mutate({"parallelism.dp": 3}), "parallelism.dp", "2*2*3*1 = 12",
                 "16 GPUs", "set dp = 4")


def test_parallel_product_too_large():
    expect_error(mutate({"parallelism.dp": 8}), "parallelism.dp", "2*2*8*1 = 32", "16 GPUs", "set dp = 4")


def test_derived_dp_needs_divisible_product():
    # dp omitted: tp*pp*cp = 3 cannot divide 16 GPUs.
    expect_error(mutate({"parallelism": {"tp": 3, "pp": 1}}), "parallelism", "tp*pp*cp = 3",
                 "16 GPUs", "divides 16")


def test_parallel_product_suggestion_is_an_integer_dp():
    msg = expect_error(mutate({"parallelism.tp": 3}), "parallelism.dp", "3*2*4*1 = 24", "16 GPUs")
    assert "2.66667" not in msg
    assert "divide" in msg


def test_heads_not_divisible_by_tp():
    raw = mutate({"model": {"layers": 4, "hidden": 768, "heads": 12},
                  "parallelism": {"tp": 8, "pp": 1, "dp": 2}})
    expect_error(raw, "parallelism.tp", "8 does not divide", "model.heads=12", "valid tp: 1, 2, 3, 4, 6, 12")


def test_kv_heads_must_divide_heads():
    expect_error(mutate({"model.kv_heads": 5}), "model.kv_heads", "5", "heads=32",
                 "valid: 1, 2, 4, 8, 16, 32")


def test_kv_heads_larger_than_heads():
    expect_error(mutate({"model.kv_heads": 64}), "model.kv_heads", "64", "heads=32",
                 "valid: 1, 2, 4, 8, 16, 32")


def test_tp_and_kv_heads_must_divide_one_another():
    raw = mutate({"model": {"layers": 4, "hidden": 768, "heads": 24, "kv_heads": 8},
                  "cluster": {"gpus_per_node": 6, "nodes": 2},
                  "parallelism": {"tp": 6, "pp": 2, "dp": 1}})
    expect_error(raw, "parallelism.tp", "6", "kv_heads=8", "valid tp: 1, 2, 4, 8")


def test_fewer_layers_than_pipeline_chunks():
    """Two fewer layers than chunks are placed with an embedding-only and a loss-only chunk
    (taskgraph/split.choose_split); three fewer cannot be."""
    raw = mutate({"model.layers": 1, "parallelism.vpp": 2, "parallelism.schedule": "interleaved"})
    expect_error(raw, "model.layers", "1 layers", "pp*vpp = 2*2 = 4", "at least 2 layers")
    ok = from_dict(mutate({"model.layers": 2, "parallelism.vpp": 2, "parallelism.schedule": "interleaved"}))
    assert ok.model.layers == 2


def test_fewer_layers_than_stages():
    expect_error(mutate({"model.layers": 1}), "model.layers", "1 layers", "at least 2 layers")


def test_global_batch_not_divisible_by_micro_batch_times_dp():
    expect_error(mutate({"training.global_batch": 30}), "training.global_batch", "30",
                 "micro_batch*dp = 1*4 = 4", "multiple of 4")


def test_global_batch_not_divisible_with_larger_micro_batch():
    expect_error(mutate({"training.micro_batch": 3}), "training.global_batch", "32",
                 "micro_batch*dp = 3*4 = 12", "multiple of 12")


def test_ep_must_divide_dp_times_cp():
    raw = mutate({"model.preset": "mixtral-8x7b", "parallelism.ep": 3})
    expect_error(raw, "parallelism.ep", "3 does not divide", "dp*cp = 4", "valid: 1, 2, 4")


def test_ep_must_divide_experts():
    raw = mutate({"model.preset": "mixtral-8x7b", "model.moe": {"experts": 6, "top_k": 2},
                  "parallelism.ep": 4})
    expect_error(raw, "parallelism.ep", "4 does not divide", "experts=6", "valid: 1, 2, 3, 6")


def test_ep_on_moe_model_is_accepted():
    sc = from_dict(mutate({"model.preset": "mixtral-8x7b", "parallelism.ep": 4}))
    assert sc.parallelism.ep == 4 and sc.model.is_moe and sc.model.moe.experts == 8


def test_ep_on_dense_model():
    expect_error(mutate({"parallelism.ep": 2}), "parallelism.ep", "2", "mixture-of-experts", "use ep: 1")


def test_moe_top_k_above_experts():
    raw = mutate({"model.preset": "mixtral-8x7b", "model.moe": {"top_k": 9}})
    expect_error(raw, "model.moe.top_k", "9", "experts=8")


@pytest.mark.parametrize("key,valid", [("cluster.scale_up.bandwidth_GBps", "valid: 0.01..1000000"),
                                       ("cluster.scale_out.nic_Gbps", "valid: 1..100000"),
                                       ("cluster.scale_across.bandwidth_Gbps", "valid: 0.001..1000000")])
@pytest.mark.parametrize("value,shown", [(0, "0.0"), (-1, "-1.0"), (-2.5, "-2.5"), (5e-324, "5e-324")])
def test_bandwidth_must_be_positive(key, valid, value, shown):
    expect_error(mutate({key: value}), key, shown, "below the minimum", valid)


def test_unknown_gpu_preset():
    expect_error(mutate({"hardware.gpu": "h900"}), "hardware.gpu", "'h900'",
                 "unknown preset", "a100-80gb", "h100-sxm", "b200")


def test_unknown_model_preset():
    expect_error(mutate({"model.preset": "llama9"}), "model.preset", "'llama9'",
                 "unknown preset", "llama3-8b", "gpt3-175b")


def test_more_than_ten_million_gpus():
    nodes = MAX_GPUS // 8 + 1
    expect_error(mutate({"cluster.nodes": nodes}), "cluster.nodes", str(nodes), f"{nodes * 8} GPUs",
                 "10,000,000")


def test_exactly_ten_million_gpus_is_accepted():
    raw = mutate({"cluster.nodes": MAX_GPUS // 8, "training.global_batch": MAX_GPUS,
                  "parallelism": {"tp": 1, "pp": 1}})
    sc = from_dict(raw)
    assert sc.gpus == MAX_GPUS and sc.dp == MAX_GPUS and sc.micro_batches == 1


@pytest.mark.parametrize("key,bad,valid", [
    ("parallelism.schedule", "zigzag", "gpipe, 1f1b, interleaved"),
    ("training.dtype", "int4", "bf16, fp16, fp8, fp32"),
    ("training.recompute", "some", "none, selective, full"),
    ("communication.algorithm", "magic",
     "auto, ring, tree, nvls, nvls-tree, collnet, pat, halving-doubling, hierarchical"),
    ("model.ffn_kind", "relu", "gelu, swiglu"),
    ("cluster.scale_up.kind", "infinity-fabric", "nvswitch, nvlink-ring, pcie"),
])
def test_bad_choice_string(key, bad, valid):
    expect_error(mutate({key: bad}), key, repr(bad), "not one of", valid)


def test_vpp_without_interleaved_schedule():
    expect_error(mutate({"parallelism.vpp": 2}), "parallelism.vpp", "2 virtual stages",
                 "(got 1f1b)", "schedule: interleaved", "vpp: 1")


def test_interleaved_needs_micro_batches_multiple_of_pp():
    # 20 / (1 * 4) = 5 micro-batches per pipeline, not a multiple of pp = 2.
    raw = mutate({"training.global_batch": 20, "parallelism.vpp": 2, "parallelism.schedule": "interleaved"})
    expect_error(raw, "training.global_batch", "(5)", "multiple of pp=2")


def test_interleaved_message_names_global_batch_and_valid_multiple():
    raw = mutate({"training.global_batch": 20, "parallelism.vpp": 2, "parallelism.schedule": "interleaved"})
    expect_error(raw, "training.global_batch", "20", "multiple of 8")


def test_interleaved_with_valid_micro_batches_is_accepted():
    sc = from_dict(mutate({"parallelism.vpp": 2, "parallelism.schedule": "interleaved"}))
    assert sc.micro_batches == 8 and sc.parallelism.vpp == 2


def test_interleaved_needs_pipeline():
    raw = mutate({"parallelism": {"tp": 2, "pp": 1, "dp": 8, "schedule": "interleaved"}})
    expect_error(raw, "parallelism.schedule", "interleaved", "got pp=1", "use 1f1b")


def test_stage_layers_wrong_length():
    expect_error(mutate({"parallelism.stage_layers": [16, 8, 8]}), "parallelism.stage_layers",
                 "3 entries", "pp*vpp = 2")


def test_stage_layers_wrong_sum():
    expect_error(mutate({"parallelism.stage_layers": [16, 15]}), "parallelism.stage_layers",
                 "sums to 31", "model.layers = 32")


def test_stage_layers_empty_chunk():
    expect_error(mutate({"parallelism.stage_layers": [32, 0]}), "parallelism.stage_layers", None,
                 "at least one layer")


def test_stage_layers_valid_list_and_comma_string():
    assert from_dict(mutate({"parallelism.stage_layers": [20, 12]})).parallelism.stage_layers == (20, 12)
    assert from_dict(mutate({"parallelism.stage_layers": "10, 22"})).parallelism.stage_layers == (10, 22)


def test_stage_layers_bad_item_names_index():
    expect_error(mutate({"parallelism.stage_layers": [16, "x"]}), "parallelism.stage_layers[1]", "'x'",
                 "integer")


@pytest.mark.parametrize("order", ["tp-dp-pp", "tp-cp-dp-pp-tp", "tp-cp-ep-ep-dp-pp", "tp,cp,dp,pp",
                                   "tp-cp-dp-xx"])
def test_bad_order(order):
    expect_error(mutate({"parallelism.order": order}), "parallelism.order", repr(order),
                 "tp, cp, dp and pp once each", "e.g. tp-cp-ep-dp-pp")


@pytest.mark.parametrize("order", ["pp-dp-cp-tp", "tp-cp-dp-pp", "dp-ep-tp-cp-pp"])
def test_good_order(order):
    assert from_dict(mutate({"parallelism.order": order})).parallelism.order == order


def test_datacenters_must_divide_nodes():
    expect_error(mutate({"cluster.datacenters": 3}), "cluster.datacenters", "3 does not divide",
                 "nodes=2", "valid: 1, 2")


@pytest.mark.parametrize("zero,word", [(4, "above the maximum 3"), (-1, "below the minimum 0")])
def test_zero_stage_out_of_range(zero, word):
    expect_error(mutate({"parallelism.zero": zero}), "parallelism.zero", str(zero), word, "valid: 0..3")


@pytest.mark.parametrize("zero", [0, 1, 2, 3])
def test_zero_stage_in_range(zero):
    assert from_dict(mutate({"parallelism.zero": zero})).parallelism.zero == zero


def test_context_parallel_needs_divisible_sequence():
    raw = mutate({"model.seq_len": 1022, "parallelism": {"tp": 2, "pp": 2, "cp": 2, "dp": 2}})
    expect_error(raw, "parallelism.cp", "2", "seq_len=1022", "2*cp")


def test_sequence_parallel_needs_sequence_divisible_by_tp():
    raw = mutate({"model.seq_len": 1023, "parallelism.sequence_parallel": True})
    expect_error(raw, "parallelism.sequence_parallel", "1023", "tp=2")


def test_missing_required_section_and_fields():
    raw = mutate({"training": _DELETE})
    expect_error(raw, "training", None, "required")
    raw = mutate({"model": {"layers": 4, "hidden": 512}})
    expect_error(raw, "model.heads", None, "required", "model.preset")
    expect_error(mutate({"training": {"micro_batch": 1}}), "training.global_batch", None, "required")


def test_bounds_name_valid_range():
    expect_error(mutate({"training.micro_batch": 0}), "training.micro_batch", "0", "valid: 1..1000000")


# --------------------------------------------------------------------------------------------
# GPU given as a mapping
# --------------------------------------------------------------------------------------------
CUSTOM_GPU = {"name": "Custom X", "peak_tflops": 500, "memory_GB": 96, "hbm_GBps": 4000}


def test_gpu_as_mapping():
    sc = from_dict(mutate({"hardware.gpu": dict(CUSTOM_GPU)}))
    gpu = sc.hardware.gpu
    assert gpu.name == "Custom X" and gpu.peak_tflops == 500.0
    assert gpu.memory_GB == 96.0 and gpu.hbm_GBps == 4000.0
    assert gpu.fp8_tflops == 500.0          # defaults to peak_tflops
    assert gpu.preset is None and gpu.nvlink_sharp is False
    assert sc.cluster.scale_up.bandwidth_GBps == 300.0  # no scale_up_GBps in the mapping: fallback
    assert from_dict(to_dict(sc)) == sc


def test_gpu_mapping_scale_up_default_comes_from_gpu():
    sc = from_dict(mutate({"hardware.gpu": {**CUSTOM_GPU, "scale_up_GBps": 123, "nvlink_sharp": True}}))
    assert sc.cluster.scale_up.bandwidth_GBps == 123.0 and sc.hardware.gpu.nvlink_sharp is True


def test_gpu_preset_fills_scale_up_bandwidth():
    assert from_dict(BASE).cluster.scale_up.bandwidth_GBps == 450.0
    assert from_dict(mutate({"hardware.gpu": "a100-80gb"})).cluster.scale_up.bandwidth_GBps == 300.0


def test_gpu_mapping_bad_value():
    expect_error(mutate({"hardware.gpu": {**CUSTOM_GPU, "memory_GB": 0}}), "hardware.gpu.memory_GB", "0.0",
                 "below the minimum 0.1", "valid: 0.1..100000", "192 GB")


def test_gpu_mapping_unknown_key_suggests():
    expect_error(mutate({"hardware.gpu": {**CUSTOM_GPU, "peak_tflop": 1}}), "hardware.gpu.peak_tflop", None,
                 "did you mean 'peak_tflops'?")


def test_gpu_mapping_missing_required_number():
    gpu = {k: v for k, v in CUSTOM_GPU.items() if k != "hbm_GBps"}
    expect_error(mutate({"hardware.gpu": gpu}), "hardware.gpu.hbm_GBps", None, "required")


def test_gpu_mapping_valid_keys_are_consistent():
    msg = expect_error(mutate({"hardware.gpu": {**CUSTOM_GPU, "peak_tflop": 1}}), "hardware.gpu.peak_tflop",
                       None)
    assert "preset" not in msg.split("valid keys:")[1]
    msg = expect_error(mutate({"hardware.gpu": {**CUSTOM_GPU, "preset": "h100-sxm"}}), "hardware.gpu.preset",
                       None)
    assert "nvlink_sharp" in msg


# --------------------------------------------------------------------------------------------
# Derived defaults
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("par,dp", [({"tp": 2, "pp": 2}, 4), ({"tp": 1, "pp": 2}, 8),
                                    ({"tp": 2, "pp": 1, "cp": 2}, 4), ({"tp": 8, "pp": 2}, 1)])
def test_dp_omitted_is_derived(par, dp):
    sc = from_dict(mutate({"parallelism": par}))
    assert sc.parallelism.dp == dp == sc.dp
    assert sc.parallelism.tp * sc.parallelism.pp * sc.parallelism.cp * sc.dp == sc.gpus == 16


def test_dp_null_is_derived():
    assert from_dict(mutate({"parallelism.dp": None})).dp == 4


def test_kv_heads_and_ffn_hidden_defaults():
    sc = from_dict(mutate({"model": {"layers": 4, "hidden": 768, "heads": 12}}))
    assert sc.model.kv_heads == 12
    assert sc.model.ffn_hidden == 4 * 768
    assert sc.model.preset is None


def test_preset_values_can_be_overridden_and_are_kept():
    sc = from_dict(BASE)
    preset = model_presets()["llama3-8b"]
    assert sc.model.kv_heads == preset["kv_heads"] == 8
    assert sc.model.ffn_hidden == preset["ffn_hidden"] == 14336
    assert sc.model.seq_len == 1024 != preset["seq_len"]


# --------------------------------------------------------------------------------------------
# Round trips and overrides
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("path", SCENARIO_FILES, ids=[p.stem for p in SCENARIO_FILES])
def test_to_dict_round_trips_shipped_scenarios(path):
    sc = load(path)
    d = to_dict(sc)
    again = from_dict(d)
    assert again == sc
    assert to_dict(again) == d


def test_shipped_scenarios_exist():
    assert {p.stem for p in SCENARIO_FILES} >= {"teaching-8gpu", "megatron-gpt3-175b", "llama3-405b-16k",
                                               "two-datacenters"}


def test_to_dict_round_trips_base_with_everything_derived():
    sc = from_dict(mutate({"parallelism.dp": _DELETE, "model": {"layers": 4, "hidden": 768, "heads": 12}}))
    assert from_dict(to_dict(sc)) == sc


def test_apply_overrides_changes_only_that_field():
    before = from_dict(BASE)
    raw = apply_overrides(BASE, {"parallelism.zero": 3})
    after = from_dict(raw)
    assert after.parallelism.zero == 3 and before.parallelism.zero == 1
    assert after == replace(before, parallelism=replace(before.parallelism, zero=3))
    assert "zero" not in BASE["parallelism"]  # input not mutated


def test_apply_overrides_nested_and_in_order():
    raw = apply_overrides(BASE, {"cluster.scale_out.nic_Gbps": 800, "parallelism.tp": 4, "parallelism.dp": 2})
    sc = from_dict(raw)
    base = from_dict(BASE)
    assert sc.cluster.scale_out.nic_Gbps == 800.0
    assert (sc.parallelism.tp, sc.dp) == (4, 2)
    assert sc.model == base.model and sc.training == base.training
    assert replace(sc.cluster, scale_out=base.cluster.scale_out) == base.cluster


def test_apply_overrides_on_gpu_preset_field():
    sc = from_dict(apply_overrides(BASE, {"hardware.gpu.peak_tflops": 1200}))
    assert sc.hardware.gpu.peak_tflops == 1200.0
    assert sc.hardware.gpu.memory_GB == 80.0 and sc.hardware.gpu.name == "H100 SXM"


def test_apply_overrides_on_loaded_file():
    path = ROOT / "scenarios" / "teaching-8gpu.yaml"
    sc = load(path, {"parallelism.pp": 2, "parallelism.dp": 4})
    orig = load(path)
    assert (sc.parallelism.pp, sc.dp) == (2, 4) and (orig.parallelism.pp, orig.dp) == (4, 2)
    assert sc.model == orig.model and sc.micro_batches == 4
    assert load_raw(path)["parallelism"]["pp"] == 4


@pytest.mark.parametrize("key,hint", [("parallelism.tpp", "did you mean 'tp'?"),
                                      ("cluster.scale_up.bandwith_GBps", "did you mean 'bandwidth_GBps'?"),
                                      ("modle", "did you mean 'model'?")])
def test_override_unknown_dotted_key(key, hint):
    with pytest.raises(ScenarioError) as info:
        apply_overrides(BASE, {key: 1})
    err = info.value
    assert err.field == key
    assert str(err).startswith(f"{key}: unknown key")
    assert hint in str(err) and "\n" not in str(err)


def test_override_unknown_section_names_it():
    with pytest.raises(ScenarioError) as info:
        apply_overrides(BASE, {"nonsense.key": 1})
    assert "nonsense" in info.value.field and "nonsense" in str(info.value)
    assert "unknown key" in str(info.value) and "\n" not in str(info.value)


def test_override_unknown_section_lists_valid_sections():
    with pytest.raises(ScenarioError) as info:
        apply_overrides(BASE, {"nonsense.key": 1})
    assert "parallelism" in str(info.value) and "training" in str(info.value)


def test_override_of_section_does_not_suggest_itself():
    with pytest.raises(ScenarioError) as info:
        apply_overrides(BASE, {"parallelism": {"tp": 4}})
    assert "did you mean 'parallelism'" not in str(info.value)


def test_override_to_invalid_value_fails_on_load():
    raw = apply_overrides(BASE, {"parallelism.schedule": "zigzag"})
    expect_error(raw, "parallelism.schedule", "'zigzag'", "gpipe, 1f1b, interleaved")


@pytest.mark.parametrize("text,expected", [
    ("parallelism.tp=4", ("parallelism.tp", 4)),
    ("communication.dp_overlap=true", ("communication.dp_overlap", True)),
    ("communication.tp_overlap=false", ("communication.tp_overlap", False)),
    ("cluster.scale_out.oversubscription=1.5", ("cluster.scale_out.oversubscription", 1.5)),
    ("parallelism.stage_layers=[1,2]", ("parallelism.stage_layers", [1, 2])),
    ("parallelism.order=tp-cp-dp-pp", ("parallelism.order", "tp-cp-dp-pp")),
    (" parallelism.pp = 8 ", ("parallelism.pp", 8)),
    ("name=a=b", ("name", "a=b")),
    ("parallelism.dp=", ("parallelism.dp", None)),
    ("hardware.gpu={name: X, peak_tflops: 1}", ("hardware.gpu", {"name": "X", "peak_tflops": 1})),
])
def test_parse_assignment(text, expected):
    key, value = parse_assignment(text)
    assert (key, value) == expected
    assert type(value) is type(expected[1])


def test_parse_assignment_without_equals():
    with pytest.raises(ScenarioError) as info:
        parse_assignment("parallelism.tp")
    assert info.value.field == "--set"
    assert "'parallelism.tp'" in str(info.value) and "dotted.key=value" in str(info.value)
    assert "\n" not in str(info.value)


def test_parse_assignment_bad_yaml():
    with pytest.raises(ScenarioError) as info:
        parse_assignment("parallelism.stage_layers=[1,")
    assert info.value.field == "parallelism.stage_layers"
    assert "'[1,'" in str(info.value) and "YAML" in str(info.value) and "\n" not in str(info.value)


# --------------------------------------------------------------------------------------------
# One case per named rule (explorer/config/rules.py): the rule itself catches it, and from_dict
# reports it on the field the rule names.
# --------------------------------------------------------------------------------------------
_MIXTRAL = {"model.preset": "mixtral-8x7b"}
RULE_CASES: dict[str, list[tuple[dict[str, Any], str]]] = {
    "rule_gpu_count": [({"cluster.nodes": MAX_GPUS // 8 + 1}, "cluster.nodes"),
                       ({"cluster.stragglers.count": 17, "cluster.stragglers.slowdown": 2},
                        "cluster.stragglers.count")],
    "rule_degrees_fill_cluster": [({"parallelism.dp": 3}, "parallelism.dp")],
    "rule_conv_trains_data_parallel": [
        ({"model": {"preset": "resnet-50"}}, "parallelism.tp"),
        ({"model": {"preset": "resnet-50"}, "parallelism": {"tp": 1, "pp": 1, "dp": 16},
          "training.recompute": "full"}, "training.recompute"),
        ({"model": {"preset": "resnet-50"}, "parallelism": {"tp": 1, "pp": 1, "dp": 16},
          "training.dtype": "fp8"}, "training.dtype"),
        ({"model": {"preset": "resnet-50", "mtp_depth": 1}, "parallelism": {"tp": 1, "pp": 1, "dp": 16}},
         "model.mtp_depth"),
    ],
    "rule_gnn": [
        ({"model": {"kind": "gnn"}, "parallelism": {"tp": 2, "pp": 1, "dp": 8}}, "parallelism.tp"),
        ({"model": {"kind": "gnn", "gnn": {"fanouts": [10, 5]}}, "parallelism": {"tp": 1, "pp": 1, "dp": 16}},
         "model.gnn.fanouts"),
        ({"model": {"kind": "gnn", "gnn": {"train_nodes": 10_000_000}},
          "parallelism": {"tp": 1, "pp": 1, "dp": 16}}, "model.gnn.train_nodes"),
        ({"model": {"kind": "gnn", "gnn": {"mode": "fullgraph"}},
          "parallelism": {"tp": 1, "pp": 1, "dp": 16}}, "training.global_batch"),
        ({"model": {"kind": "gnn"}, "parallelism": {"tp": 1, "pp": 1, "dp": 16}, "training.dtype": "fp8"},
         "training.dtype"),
        # Accepted and ignored (a mini-batch step exchanges no halo), or more than the graph holds.
        ({"model": {"kind": "gnn", "gnn": {"halo_nodes": 5}}, "parallelism": {"tp": 1, "pp": 1, "dp": 16}},
         "model.gnn.halo_nodes"),
        ({"model": {"kind": "gnn", "gnn": {"mode": "fullgraph", "halo_nodes": 2_449_029}},
          "parallelism": {"tp": 1, "pp": 1, "dp": 16}, "training.global_batch": 16,
          "training.micro_batch": 1},
         "model.gnn.halo_nodes"),
    ],
    "rule_rnn": [
        ({"model": {"kind": "rnn"}, "parallelism": {"tp": 2, "pp": 1, "dp": 8}}, "parallelism.tp"),
        ({"model": {"kind": "rnn"}, "parallelism": {"tp": 1, "pp": 2, "dp": 8}, "training.recompute": "full"},
         "training.recompute"),
        ({"model": {"kind": "rnn"}, "parallelism": {"tp": 1, "pp": 2, "dp": 8}, "training.dtype": "fp8"},
         "training.dtype"),
        ({"model": {"kind": "rnn", "mtp_depth": 1}, "parallelism": {"tp": 1, "pp": 2, "dp": 8}},
         "model.mtp_depth"),
    ],
    # Accepted and ignored before (found clicking through a DLRM's sidebar): the time did not move.
    "rule_dlrm": [
        # A transformer's refusal ("does not divide model.heads=1") named a field a DLRM lacks.
        ({"model": {"kind": "dlrm"}, "parallelism": {"tp": 2, "pp": 1, "dp": 8}}, "parallelism.tp"),
        ({"model": {"kind": "dlrm"}, "parallelism": {"tp": 1, "pp": 1, "dp": 16, "token_slices": 2}},
         "parallelism.token_slices"),
        ({"model": {"kind": "dlrm"}, "parallelism": {"tp": 1, "pp": 1, "dp": 16},
          "training.recompute": "full"}, "training.recompute"),
        ({"model": {"kind": "dlrm"}, "parallelism": {"tp": 1, "pp": 1, "dp": 16}, "training.dtype": "fp8"},
         "training.dtype"),
        ({"model": {"kind": "dlrm", "mtp_depth": 1}, "parallelism": {"tp": 1, "pp": 1, "dp": 16}},
         "model.mtp_depth"),
        # Half a column per GPU was accepted.
        ({"model": {"kind": "dlrm", "dlrm": {"dim": 8, "bottom_mlp": [512, 256, 8],
                                             "sharding": "column_wise"}},
          "parallelism": {"tp": 1, "pp": 1, "dp": 16}}, "model.dlrm.sharding"),
    ],
    "rule_layer_recipes_need_a_transformer": [
        ({"model": {"kind": "dlrm"}, "parallelism": {"tp": 1, "pp": 1, "dp": 16},
          "training.recompute_layers": 2}, "training.recompute_layers"),
        ({"model": {"kind": "gnn"}, "parallelism": {"tp": 1, "pp": 1, "dp": 16},
          "training.offload_activations_layers": 1}, "training.offload_activations_layers"),
        ({"model": {"kind": "rnn"}, "parallelism": {"tp": 1, "pp": 2, "dp": 8},
          "training.offload_activations_layers": 1}, "training.offload_activations_layers"),
        ({"model": {"kind": "cnn"}, "parallelism": {"tp": 1, "pp": 1, "dp": 16},
          "training.lora_rank": 16}, "training.lora_rank"),
    ],
    "rule_heads_divide_hidden": [({"model.heads": 7}, "model.heads"), ({"model.heads": 3000}, "model.heads")],
    "rule_tp_divides_heads": [({"model": {"layers": 4, "hidden": 768, "heads": 12},
                               "parallelism": {"tp": 8, "pp": 1, "dp": 2}}, "parallelism.tp")],
    "rule_kv_heads_divide_heads": [({"model.kv_heads": 5}, "model.kv_heads")],
    "rule_tp_and_kv_heads_divide": [({"model": {"layers": 4, "hidden": 768, "heads": 24, "kv_heads": 8},
                                     "cluster": {"gpus_per_node": 6, "nodes": 2},
                                     "parallelism": {"tp": 6, "pp": 2, "dp": 1}}, "parallelism.tp")],
    "rule_layers_fill_chunks": [({"model.layers": 1}, "model.layers")],
    "rule_dp_priority_needs_flushing_schedule": [({"communication.dp_priority": True,
                                                  "communication.dp_overlap": False},
                                                 "communication.dp_priority")],
    "rule_batch_divides": [({"training.global_batch": 30}, "training.global_batch")],
    "rule_schedule": [
        ({"parallelism.vpp": 2}, "parallelism.vpp"),
        ({"parallelism": {"tp": 2, "pp": 1, "dp": 8, "schedule": "dualpipe"}}, "parallelism.pp"),
        ({"parallelism": {"tp": 2, "pp": 1, "dp": 8, "schedule": "interleaved"}}, "parallelism.schedule"),
        ({"training.global_batch": 20, "parallelism.vpp": 2, "parallelism.schedule": "interleaved"},
         "training.global_batch"),
        ({"training.global_batch": 8, "parallelism.schedule": "dualpipe"}, "training.global_batch"),
        # Asynchronous 1F1B with fewer micro-batches than stages: all warm-up and drain, half its
        # compute read as bubble (2bw at m 7 on 8 stages); and 2bw's two versions need m >= pp.
        ({"parallelism": {"tp": 1, "pp": 8, "dp": 2}, "training.global_batch": 8,
          "parallelism.schedule": "2bw"}, "training.global_batch"),
        ({"parallelism": {"tp": 1, "pp": 8, "dp": 2}, "training.global_batch": 8,
          "parallelism.schedule": "pipedream-async"}, "training.global_batch"),
    ],
    "rule_ep_divides_dp_cp": [({**_MIXTRAL, "parallelism.ep": 3}, "parallelism.ep")],
    # Half an MoE section was accepted as a dense model and changed nothing (a sidebar walk).
    "rule_moe_section_routes": [({"model.moe.experts": 8}, "model.moe.top_k"),
                                ({"model.moe.top_k": 2}, "model.moe.experts"),
                                ({"model.moe.skew": 0.5}, "model.moe.skew")],
    "rule_ep_needs_moe": [({"parallelism.ep": 2}, "parallelism.ep")],
    "rule_ep_divides_experts": [({**_MIXTRAL, "model.moe": {"experts": 6, "top_k": 2}, "parallelism.ep": 4},
                                "parallelism.ep")],
    "rule_top_k_within_experts": [({**_MIXTRAL, "model.moe": {"top_k": 9}}, "model.moe.top_k")],
    "rule_expert_ffn_hidden": [({**_MIXTRAL, "model.moe": {"expert_ffn_hidden": 0}},
                               "model.moe.expert_ffn_hidden")],
    "rule_dense_layers_within_layers": [({**_MIXTRAL, "model.moe": {"dense_layers": 1000}},
                                        "model.moe.dense_layers")],
    "rule_cp_divides_sequence": [({"model.seq_len": 1022,
                                   "parallelism": {"tp": 2, "pp": 2, "cp": 2, "dp": 2}}, "parallelism.cp")],
    "rule_token_slices_divide_sequence": [({"parallelism.token_slices": 3}, "parallelism.token_slices")],
    "rule_sequence_parallel_divides": [({"model.seq_len": 1023, "parallelism.sequence_parallel": True},
                                       "parallelism.sequence_parallel")],
    "rule_order_lists_each_dim": [({"parallelism.order": "tp-dp-pp"}, "parallelism.order")],
    "rule_datacenters_divide_nodes": [({"cluster.datacenters": 3}, "cluster.datacenters")],
    "rule_stage_layers_count": [({"parallelism.stage_layers": [16, 8, 8]}, "parallelism.stage_layers")],
    "rule_stage_layers_sum": [({"parallelism.stage_layers": [16, 15]}, "parallelism.stage_layers")],
    "rule_stage_layers_not_empty": [({"parallelism.stage_layers": [32, 0]}, "parallelism.stage_layers")],
    "rule_pipeline_layout": [
        ({"parallelism.pipeline_layout": [16, 16], "parallelism.stage_layers": [16, 16]},
         "parallelism.pipeline_layout"),
        ({"parallelism.pipeline_layout": [16, 8, 8]}, "parallelism.pipeline_layout"),
        ({"parallelism.pipeline_layout": [0, 31]}, "parallelism.pipeline_layout"),
        ({"parallelism.vpp": 2, "parallelism.schedule": "interleaved",
          "parallelism.pipeline_layout": [0, 16, 0, 16]}, "parallelism.pipeline_layout")],
    "rule_recompute_layers_are_full": [({"training.recompute_layers": 2, "training.recompute": "selective"},
                                        "training.recompute_layers")],
    "rule_fp8_recipe_on_gpu": [({"training.dtype": "fp8", "training.fp8_recipe": "mxfp8"},
                                "training.fp8_recipe")],
    "rule_fp8_peak_at_least_bf16": [({"hardware.gpu": {"name": "X", "peak_tflops": 500, "fp8_tflops": 0.1,
                                                       "memory_GB": 96, "hbm_GBps": 4000}},
                                     "hardware.gpu.fp8_tflops")],
    "rule_measured_within_peak": [({"hardware.gpu": {"name": "X", "peak_tflops": 500, "memory_GB": 96,
                                                     "hbm_GBps": 4000, "measured_matmul_tflops": 600}},
                                   "hardware.gpu.peak_tflops")],
    "rule_fp32_within_peak": [({"hardware.gpu": {"name": "X", "peak_tflops": 112, "memory_GB": 16,
                                                 "hbm_GBps": 900, "fp32_tflops": 140}},
                               "hardware.gpu.fp32_tflops")],
    "rule_bf16_needs_ampere": [({"hardware.gpu": {"name": "Tesla V100-SXM2-32GB", "peak_tflops": 125,
                                                  "memory_GB": 32, "hbm_GBps": 900},
                                 "training.dtype": "bf16"}, "training.dtype"),
                               # fp8 falls back to bf16 on a GPU without FP8: not on a V100 either
                               ({"hardware.gpu": {"name": "T4", "peak_tflops": 65, "memory_GB": 16,
                                                  "hbm_GBps": 320},
                                 "training.dtype": "fp8"}, "training.dtype")],
    # flash_attn_triton.py runs head dims up to 128; DeepSeek-V3's MLA has 128 + 64 = 192
    "rule_triton_head_dim": [({"training.attention_kernel": "triton", "model.head_dim": 256},
                              "training.attention_kernel"),
                             ({"training.attention_kernel": "triton", "model.preset": "deepseek-v3"},
                              "training.attention_kernel")],
    # Accepted and ignored before (megatron-gpt3-175b: every kernel gave the same time).
    "rule_kernel_needs_fused_attention": [
        ({"training.flash_attention": False, "training.attention_kernel": "flash2"},
         "training.attention_kernel")],
    # GPipe does not fold (explorer/fold/plan.py), so its 100,000 micro-batches are simulated in full.
    "rule_frozen_layers": [({"training.frozen_layers": 2, "parallelism.zero": 3}, "training.frozen_layers"),
                           ({"training.lora_rank": 16, "parallelism.zero": 3}, "training.lora_rank")],
    "rule_work_budget": [({"training.global_batch": 400_000, "parallelism.schedule": "gpipe"},
                          "training.global_batch")],
    # Only the workload's spec knows its layer count (found by bench/fuzz.py on a gossip scenario).
    "rule_frozen_within_layers": [({"training.frozen_layers": 1000}, "training.frozen_layers")],
}


# config's rules, and the work budget and the frozen layers' count on top of them (explorer/runnable.py).
CHECKED = (*RULES, rule_work_budget, rule_frozen_within_layers)


def test_every_rule_has_a_case():
    assert [r.__name__ for r in CHECKED] == list(RULE_CASES)


@pytest.mark.parametrize("name, over, kinds", [
    ("mixed-generations", {"parallelism.token_slices": 1024}, 2),   # H100 and B200 datacenters
    ("straggler-16k", {"training.global_batch": 204_800}, 2),       # 1 slow replica, 127 at speed
])
def test_replicas_that_differ_share_one_work_budget(name, over, kinds):
    """Every kind of replica is simulated and their tasks are joined (explorer/variants/replicas.py), so the
    kinds' work adds: refused when together beyond MAX_WORK although each kind alone fits, admitted
    at half the size (mixed-generations: 512 slices took 3.4 s for 231,625 units; 1,024 slices,
    admitted before, took 8 s)."""
    from explorer.fold.budget import MAX_WORK, estimate
    from explorer.runnable import replicas_estimate
    from explorer.variants.replicas import variants

    path = ROOT / "scenarios" / f"{name}.yaml"
    half = load(path, {k: v // 2 for k, v in over.items()})
    total, n = replicas_estimate(half)
    assert n == kinds and total.work <= MAX_WORK
    with pytest.raises(ScenarioError) as e:
        load(path, over)
    assert e.value.field == "training.global_batch" and f"its {kinds} kinds of replica" in str(e.value)
    # The full size, unvalidated: each kind alone is within the budget, their sum is not.
    (key, value), = over.items()
    section, field = key.split(".")
    full = replace(half, **{section: replace(getattr(half, section), **{field: value})})
    alone = [estimate(v.sc).work for v in variants(full)]
    assert max(alone) <= MAX_WORK < sum(alone)
    assert abs(replicas_estimate(full)[0].work - sum(alone)) <= len(alone)     # each work rounds down


RULE_PARAMS = [pytest.param(rule, changes, field, id=f"{rule.__name__}-{i}")
               for rule in CHECKED for i, (changes, field) in enumerate(RULE_CASES[rule.__name__])]


@pytest.mark.parametrize("rule,changes,field", RULE_PARAMS)
def test_rule_catches_its_case(rule, changes, field):
    raw = mutate(changes)
    expect_error(raw, field, None)
    unchecked = fill_defaults(build(Scenario, resolve_presets(raw)))
    with pytest.raises(ScenarioError) as info:
        rule(unchecked)
    assert info.value.field == field and "\n" not in str(info.value)


DERIVED = sorted(p for p, f in field_paths(Scenario).items() if f.metadata.get("derived"))


@pytest.mark.parametrize("path", DERIVED)
def test_a_field_the_loader_derives_is_not_the_users(path):
    """Every derived field (a GPU's preset name, the datacenters' sizes and GPUs, a straggler
    replica's per-stage slowdown) given in a file, --set or a link is an unknown key naming itself —
    cluster.stragglers.stage_slowdown of two stages on mixed-generations' four was accepted and
    crashed the simulation (IndexError)."""
    raw = load_raw(ROOT / "scenarios" / "mixed-generations.yaml")
    with pytest.raises(ScenarioError) as e:
        from_dict(apply_overrides(raw, {path: [3.0, 3.0] if path.endswith("s") else "b200"}))
    assert e.value.field == path and "unknown key" in str(e.value)
    assert len(DERIVED) == 6         # model.gnn.partitions: parallelism.dp (config/gnn.py)


def test_the_valid_base_passes_every_rule():
    assert validate(from_dict(BASE)) is None


def test_build_resolves_annotations_once_per_class(monkeypatch):
    """schema.build reads each section's field plan from a per-class cache: a sweep validates
    thousands of scenarios, and resolving string annotations (typing.get_type_hints) took half of
    every from_dict.  After one load, loading again never resolves them, and gives an equal scenario."""
    import typing

    first = from_dict(copy.deepcopy(BASE))

    def fail(*_a, **_k):
        raise AssertionError("get_type_hints called again")

    monkeypatch.setattr(typing, "get_type_hints", fail)
    assert from_dict(copy.deepcopy(BASE)) == first
