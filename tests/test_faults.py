"""cluster.faults (explorer/faults.py, network.py): failed nodes drop the replicas they hold and the
survivors carry on; a degraded node's NICs limit the data-parallel groups through it."""
from __future__ import annotations

import pytest

from explorer.faults import dropped_replicas, surviving_scenario
from explorer.scenario import ScenarioError, load
from explorer.simulate import simulate

from conftest import ROOT

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
