"""Scenario variants behind one registry and the checks that need the simulator (issue 33): the
simulation, the estimator's hand-off, the search's proxy and the work budget all read
explorer/variants/registry.py; explorer/config validates without the simulator and
explorer/runnable.py adds the rest, so every caller of explorer.scenario still gets them."""
from __future__ import annotations

import dataclasses

import pytest

from explorer import config, runnable
from explorer.config.hetero_rules import HETERO_RULES
from explorer.config.sync_rules import SYNC_RULES
from explorer.design.proxy import ranking_proxy
from explorer.pricing.scope import UNPRICED, prices
from explorer.result.record import Result
from explorer.scenario import ScenarioError, from_dict, load, to_dict
from explorer.simulate import simulate
from explorer.variants import registry
from explorer.variants.registry import VARIANTS, needs_simulation, wrapping

from conftest import ROOT

SCEN = ROOT / "scenarios"
# One shipped scenario per variant, and the variant that wraps it first.
SHIPPED = {"diloco-cross-region": "replicas train apart", "parameter-server": "gossip or parameter servers",
           "gossip-exponential": "gossip or parameter servers",
           "mixed-generations": "datacenters that differ", "straggler-16k": "stragglers",
           "teaching-8gpu": None, "megatron-gpt3-175b": None}


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_each_shipped_scenario_has_the_variant_it_names(name):
    v = wrapping(load(SCEN / f"{name}.yaml"))
    assert (v.name if v else None) == SHIPPED[name]


def test_failed_nodes_wrap_before_gossip_and_stragglers():
    sc = load(SCEN / "megatron-gpt3-175b.yaml", {"cluster.faults.failed_nodes": 1})
    assert wrapping(sc).name == "failed nodes"
    assert needs_simulation(sc)


def test_the_simulation_dispatches_through_the_registry(monkeypatch):
    """A registered variant is what simulate runs: its run gets the scenario and the inner
    simulate function, and its Result is returned."""
    sc = load(SCEN / "teaching-8gpu.yaml")
    seen = []

    def run(outer, inner_simulate):
        inner = inner_simulate(dataclasses.replace(outer, name="inner"))
        seen.append((outer.name, inner.scenario.name))
        return dataclasses.replace(inner, iteration_time_s=2 * inner.iteration_time_s)

    toy = registry.ScenarioVariant("toy", lambda s: s.name != "inner", run, lambda raw, s: "toy left out")
    base = simulate(sc).iteration_time_s
    monkeypatch.setattr(registry, "VARIANTS", (toy,))
    r = simulate(sc)
    assert seen == [(sc.name, "inner")] and isinstance(r, Result)
    assert r.iteration_time_s == pytest.approx(2 * base, rel=1e-12)
    assert needs_simulation(sc)            # a wrapping variant is never estimated


def test_unpriced_features_are_simulated_in_one_graph_but_not_estimated():
    sc = load(SCEN / "teaching-8gpu.yaml", {"communication.compression.kind": "fp8",
                                            "communication.contention": True})
    assert wrapping(sc) is None and not prices(sc) and needs_simulation(sc)
    assert [f.name for f in UNPRICED if f.applies(sc)] == ["compressed gradients",
                                                            "link sharing between dimensions"]


def test_the_proxy_leaves_out_each_feature_once_in_registry_order():
    sc = load(SCEN / "straggler-16k.yaml", {"communication.compression.kind": "fp8",
                                            "communication.contention": True})
    proxy = ranking_proxy(sc)
    no_contention = "no contention between pipeline sends and gradient buckets"
    assert proxy is not None and proxy.left_out == ("no stragglers", "uncompressed gradients", no_contention)
    assert not needs_simulation(from_dict(proxy.raw))


def test_config_validates_without_the_simulator_and_the_facade_adds_its_checks():
    """An over-budget scenario passes explorer.config (no simulator imported) but not
    explorer.scenario, runnable.check, or simulate itself."""
    raw = to_dict(load(SCEN / "teaching-8gpu.yaml"))
    raw["parallelism"].update(schedule="gpipe", pp=2, dp=None)
    raw["parallelism"].pop("dp")
    raw["training"]["global_batch"] = 400_000
    sc = config.from_dict(raw)                               # config alone: valid
    for refuse in (from_dict, lambda r: runnable.check(config.from_dict(r)),
                   lambda r: simulate(config.from_dict(r))):
        with pytest.raises(ScenarioError) as e:
            refuse(raw)
        assert e.value.field == "training.global_batch" and "simulation budget" in str(e.value)
    assert sc.training.global_batch == 400_000


def test_every_runnable_rule_has_a_case_in_some_rule_table():
    """The checks that moved out of config keep their cases (test_validation, test_lowcomm,
    test_heterogeneous_config), and config's own rule tables no longer hold them."""
    moved = {r.__name__ for r in runnable.RUNNABLE_RULES}
    # rule_serving_layouts' cases: tests/test_serving.py test_bad_serving_input_is_one_line_naming_the_field.
    # rule_frozen_within_layers' case: tests/test_validation.py RULE_CASES; rule_pair_split_layers':
    # tests/test_hardening.py test_what_the_simulation_would_refuse_is_refused_at_load, which holds
    # rule_family_models_it's too.
    assert moved == {"rule_sync_whole_replicas", "rule_failures_leave_survivors", "rule_speed_split_whole",
                     "rule_work_budget", "rule_serving_layouts", "rule_frozen_within_layers",
                     "rule_pair_split_layers", "rule_family_models_it"}
    assert not moved & {r.__name__ for r in (*config.rules.RULES, *HETERO_RULES, *SYNC_RULES)}


def test_every_variant_names_a_proxy_and_applies_to_some_shipped_scenario():
    names = {v.name for v in VARIANTS}
    assert names == {n for n in SHIPPED.values() if n} | {"failed nodes"}
