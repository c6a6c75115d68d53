"""Direction tests for cluster.faults: more failed nodes never raise throughput, a degraded NIC
never speeds an iteration, and a slower one slows it.  tests/test_controls.py collects ``COVERED``;
the closed forms are in tests/test_faults.py."""
from __future__ import annotations

from explorer.scenario import load
from explorer.simulate import simulate

from conftest import ROOT

TD = ROOT / "scenarios" / "two-datacenters.yaml"
ONE = {"cluster.datacenters": 1}


def _run(**faults):
    return simulate(load(TD, {**ONE, **{f"cluster.faults.{k}": v for k, v in faults.items()}}))


def test_failed_nodes_drop_replicas_and_throughput():
    """failed_nodes: tokens/s falls from 0 to 4 to 16 failed nodes (each drops the replica it holds)."""
    rates = [_run(failed_nodes=k).tokens_per_s for k in (0, 4, 16)]
    assert rates[0] > rates[1] > rates[2]


def test_more_degraded_nodes_never_speed_up():
    """degraded_nodes at nic_factor 0.25: 0 <= 1 <= 64 nodes, the last strictly slower than none."""
    times = [_run(degraded_nodes=k, nic_factor=0.25).iteration_time_s for k in (0, 1, 64)]
    assert times == sorted(times) and times[-1] > times[0]


def test_a_slower_nic_is_slower():
    """nic_factor on one degraded node: 1.0 <= 0.5 <= 0.1 in iteration time, 0.1 strictly slower
    (at half speed the slowed stage's reductions still hide behind its backward)."""
    times = [_run(degraded_nodes=1, nic_factor=f).iteration_time_s for f in (1.0, 0.5, 0.1)]
    assert times[0] <= times[1] <= times[2] and times[0] < times[2]


COVERED = {
    "cluster.faults.failed_nodes": "test_failed_nodes_drop_replicas_and_throughput",
    "cluster.faults.degraded_nodes": "test_more_degraded_nodes_never_speed_up",
    "cluster.faults.nic_factor": "test_a_slower_nic_is_slower",
}
