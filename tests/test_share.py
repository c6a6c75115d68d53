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
