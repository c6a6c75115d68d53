"""cluster.faults (explorer/variants/faults.py, network.py): failed nodes drop the replicas they hold and the
survivors carry on; a degraded node's NICs limit the data-parallel groups through it."""
from __future__ import annotations

from dataclasses import replace

import pytest

from explorer.scenario import ScenarioError, load
from explorer.simulate import simulate
from explorer.variants.faults import dropped_replicas, max_failed_nodes, surviving_scenario

from conftest import ROOT

GPT3 = ROOT / "scenarios" / "megatron-gpt3-175b.yaml"    # TP 8 · PP 8 · DP 16 on 128 nodes, PP outermost

L16K = ROOT / "scenarios" / "llama3-405b-16k.yaml"        # TP 8 · PP 16 · DP 128, DP outermost
TD1 = {"cluster.datacenters": 1}
TD = ROOT / "scenarios" / "two-datacenters.yaml"


def test_a_failed_node_drops_the_replica_that_holds_it():
    sc = load(L16K, {"cluster.faults.failed_nodes": 1})
    assert dropped_replicas(sc) == 1
    surv, dropped, per = surviving_scenario(sc)
    assert surv.dp == 127 and surv.gpus == 127 * 128 and per == 16
    # Interleaved needs multiples of pp = 16 micro-batches: each keeps 16, the batch shrinks.
    assert surv.training.global_batch == 127 * 16
    res = simulate(sc)
    assert res.scenario.cluster.faults.failed_nodes == 1 and "faults" in res.warning_kinds
    base = simulate(load(L16K))
    assert res.tokens_per_s == pytest.approx(base.tokens_per_s * 127 / 128, rel=0.01)


def test_a_whole_replica_of_failed_nodes_leaves_no_gpu_idle():
    res = simulate(load(L16K, {"cluster.faults.failed_nodes": 16}))
    assert "dropped 1 of 128" in res.warnings[-1] and "(0 surviving GPUs idle)" in res.warnings[-1]


def test_survivors_carry_the_batch_when_they_can_split_it():
    """Two-datacenters in one building (TP 8 · PP 4 · DP 32, 512 sequences): one failed node out of
    128 drops one replica; 31 replicas cannot split 16 micro-batches x 32 evenly, so each keeps 16."""
    sc = load(TD, {**TD1, "cluster.faults.failed_nodes": 1})
    surv, dropped, per = surviving_scenario(sc)
    assert dropped == 1 and surv.dp == 31 and per == 16 and surv.training.global_batch == 31 * 16


def test_more_failed_nodes_never_raise_throughput():
    rates = [simulate(load(TD, {**TD1, "cluster.faults.failed_nodes": k})).tokens_per_s
             for k in (0, 1, 8, 32)]
    assert rates == sorted(rates, reverse=True) and rates[0] > rates[-1]


def test_a_degraded_nic_slows_the_gradient_reduction_of_its_stages():
    """A ring runs at its slowest link: a node at 1/4 NIC speed slows its stage's DP collectives."""
    base = simulate(load(TD, TD1))
    slow = simulate(load(TD, {**TD1, "cluster.faults.degraded_nodes": 1, "cluster.faults.nic_factor": 0.25}))
    assert slow.iteration_time_s > base.iteration_time_s
    assert slow.breakdown_s["dp"] > base.breakdown_s["dp"]
    same = simulate(load(TD, {**TD1, "cluster.faults.degraded_nodes": 1, "cluster.faults.nic_factor": 1.0}))
    assert same.iteration_time_s == base.iteration_time_s


@pytest.mark.parametrize("over, field", [
    ({"cluster.faults.failed_nodes": 128}, "cluster.faults.failed_nodes"),
    ({"cluster.faults.failed_nodes": 1, "cluster.datacenters": 2}, "cluster.faults.failed_nodes"),
    ({"cluster.faults.nic_factor": 0}, "cluster.faults.nic_factor"),
])
def test_bad_faults_name_their_field(over, field):
    with pytest.raises(ScenarioError) as e:
        load(TD, {**TD1, **over} if "cluster.datacenters" not in over else over)
    assert e.value.field == field


def test_failures_that_leave_no_replica_are_refused_when_loaded():
    """GPT-3 175B: a pipeline stage is 16 nodes holding one tp group of each of the 16 replicas, so
    the last 15 nodes leave one replica and the last 16 none.  Validation refuses the scenario (the
    CLI's validate, the app's sidebar, a sweep's row), naming the field and the most that work,
    instead of the simulation failing after it was called valid."""
    assert max_failed_nodes(load(GPT3)) == 15
    assert dropped_replicas(load(GPT3, {"cluster.faults.failed_nodes": 15})) == 15
    with pytest.raises(ScenarioError) as e:
        load(GPT3, {"cluster.faults.failed_nodes": 44})
    assert e.value.field == "cluster.faults.failed_nodes" and "at most 15 leave a replica" in str(e.value)


@pytest.mark.parametrize("order", ["tp-cp-ep-dp-pp", "tp-cp-ep-pp-dp", "dp-tp-cp-ep-pp", "pp-tp-cp-ep-dp"])
def test_max_failed_nodes_is_where_the_last_replica_goes(order):
    """max_failed_nodes against counting: one more failed node drops every replica, it does not."""
    sc = load(GPT3, {"parallelism.order": order})
    k = max_failed_nodes(sc)
    assert 0 <= k < sc.cluster.nodes

    def dropped(n: int) -> int:
        return dropped_replicas(replace(sc, cluster=replace(sc.cluster, faults=replace(sc.cluster.faults,
                                                                                       failed_nodes=n))))
    assert dropped(k) < sc.dp and dropped(k + 1) == sc.dp
