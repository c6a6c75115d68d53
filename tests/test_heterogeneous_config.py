"""Datacenters that differ, as configuration: the list form's resolution, its round trip, and one
case per rule of explorer/config/hetero_rules.py (each a one-line error naming the field)."""
from __future__ import annotations

import copy

import pytest
from hetero_support import raw

from explorer.config.hetero_rules import HETERO_RULES
from explorer.config.loading import to_dict
from explorer.runnable import rule_speed_split_whole
from explorer.scenario import ScenarioError, from_dict
from explorer.schedules import registry

H100, A100, B200 = "h100-sxm", "a100-80gb", "b200"
TWO_GPUS = [{"name": "a", "nodes": 1, "gpu": H100}, {"name": "b", "nodes": 1, "gpu": A100}]
TWO_WAY = next(n for n in registry.names() if registry.get(n).two_directions)
UNEQUAL = [{"name": "a", "nodes": 2}, {"name": "b", "nodes": 1}]


def _with(r: dict, **cluster) -> dict:
    r = copy.deepcopy(r)
    r["cluster"].update(cluster)
    return r


def _batch(r: dict, global_batch: int) -> dict:
    r["training"]["global_batch"] = global_batch
    return r


# rule name -> (raw scenario, field the error names, words it says)
HETERO_RULE_CASES = {
    "rule_unequal_sizes_dp_across": (raw(UNEQUAL, pp=2, span="pp"), "parallelism.span",
                                     "datacenters of different sizes"),
    "rule_gpu_types_dp_or_pp": (raw([*TWO_GPUS, {"name": "c", "nodes": 1, "gpu": H100},
                                     {"name": "d", "nodes": 1, "gpu": A100}], pp=2, span="dp+pp"),
                                "parallelism.span", "a stage's group must be of one GPU type"),
    "rule_no_stragglers_when_heterogeneous": (_with(raw(TWO_GPUS), stragglers={"count": 1, "slowdown": 2.0}),
                                              "cluster.stragglers", "not modelled"),
    "rule_speed_split_whole": (None, "parallelism.batch_split", "cannot split"),
    "rule_pp_across_one_direction": (_batch(raw(TWO_GPUS, pp=2, span="pp", schedule=TWO_WAY), 32),
                                     "parallelism.schedule", "runs each stage on two ranks"),
}


def _speed_case() -> dict:
    """Five GPU kinds (2, 2, 2, 2 and 3 replicas of tp 8, 5 micro-batches each): the speed split
    searches no neighbourhood for five kinds and its greedy fill cannot make 55 exactly."""
    kinds = [H100, A100, B200, "h200", "h800"]
    dc = [{"name": f"d{i}", "nodes": n, "gpu": g} for i, (g, n) in enumerate(zip(kinds, [2, 2, 2, 2, 3],
                                                                                  strict=True))]
    r = raw(dc, tp=8, batch_split="speed")
    r["training"]["global_batch"] = 55
    return r


@pytest.mark.parametrize("name", sorted(HETERO_RULE_CASES))
def test_each_rule_has_a_one_line_error(name):
    r, field, words = HETERO_RULE_CASES[name]
    r = _speed_case() if r is None else r
    with pytest.raises(ScenarioError) as e:
        from_dict(r)
    assert str(e.value).startswith(field) and words in str(e.value) and "\n" not in str(e.value)


def test_every_hetero_rule_has_a_case():
    rules = (*HETERO_RULES, rule_speed_split_whole)       # the last runs in explorer/runnable.py
    assert sorted(f.__name__ for f in rules) == sorted(HETERO_RULE_CASES)


@pytest.mark.parametrize("dcs, field, words", [
    ([{"name": "a", "nodes": 1, "gpu": "h100"}], "cluster.datacenters[0].gpu", "is not a GPU preset (valid:"),
    ([{"name": "a", "nodes": 3}, {"name": "b", "nodes": 1}], "parallelism.span", None),
])
def test_list_form_errors_name_the_field(dcs, field, words):
    r = raw([{"name": "x", "nodes": 1}, {"name": "y", "nodes": 1}])
    r["cluster"]["datacenters"] = dcs
    if words is None:       # unequal sizes whose replicas (tp 8 x pp 2 = 16 GPUs) do not fit 8-GPU b
        r["parallelism"].update(tp=8, pp=2)
        r["training"]["global_batch"] = 4
        words = "inside datacenter a of 24 GPUs, which it does not divide; use fewer tp*cp*pp"
    with pytest.raises(ScenarioError) as e:
        from_dict(r)
    assert str(e.value).startswith(field) and words in str(e.value)


def test_unequal_sizes_and_gpus_resolve_and_round_trip():
    r = raw([{"name": "a", "nodes": 2, "gpu": H100}, {"name": "b", "nodes": 1, "gpu": B200}])
    sc = from_dict(r)
    c = sc.cluster
    assert (c.nodes, c.datacenters, c.datacenter_nodes, c.datacenter_gpus) == (3, 2, (2, 1), (H100, B200))
    assert c.heterogeneous and sc.dp == 24 and sc.hardware.gpu.preset == H100
    assert from_dict(to_dict(sc)) == sc


def test_alike_list_stays_the_uniform_form():
    """Equal sizes and the scenario's own GPU everywhere: nothing heterogeneous is derived."""
    sc = from_dict(raw([{"name": "a", "nodes": 1, "gpu": H100}, {"name": "b", "nodes": 1}]))
    assert not sc.cluster.heterogeneous and sc.cluster.datacenter_gpus == ()


def test_cluster_nodes_must_agree_with_the_sizes():
    r = raw(UNEQUAL)
    r["cluster"]["nodes"] = 4
    with pytest.raises(ScenarioError, match=r"^cluster.nodes: 4 but cluster.datacenters holds 2 \+ 1 = 3"):
        from_dict(r)


def test_a_speed_split_the_schedule_cannot_run_is_refused_at_load():
    """A fuzz helper: a speed split giving each replica 1 micro-batch validated under Chimera (whole
    units of pp = 2) and then failed every simulation route with a ValueError.  It is refused at
    load, naming the field; the even split of the same batch runs."""
    r = {"model": {"layers": 8, "hidden": 1024, "heads": 16, "vocab": 1000, "seq_len": 512},
         "training": {"global_batch": 16, "micro_batch": 1}, "hardware": {"gpu": "h100-sxm"},
         "cluster": {"gpus_per_node": 4, "nodes": 2,
                     "datacenters": [{"name": "x", "nodes": 1, "gpu": "a100-80gb"},
                                     {"name": "y", "nodes": 1, "gpu": "b200"}]},
         "parallelism": {"tp": 1, "pp": 2, "schedule": "chimera", "span": "dp", "batch_split": "speed"}}
    with pytest.raises(ScenarioError) as e:
        from_dict(r)
    assert str(e.value) == ("parallelism.batch_split: speed gives the replicas of x 1 micro-batch each, "
                            "which the chimera schedule cannot run; use even, or a global batch whose "
                            "split it runs")
    r["parallelism"]["batch_split"] = "even"
    from explorer.simulate import simulate
    assert simulate(from_dict(r)).iteration_time_s > 0
