"""A failed node that is not back at once (issue 38, "an elastic option that continues on fewer
nodes after a failure instead of waiting for a replacement"): the closed forms of run/goodput.py —
waiting loses the repair time W per failure, an elastic job loses (1 - r) W plus one more restart,
r being the survivors' simulated share of the throughput — and a layout that cannot lose a node."""
from __future__ import annotations

import pytest

from explorer.run.goodput import goodput_of, job_mtbf_s
from explorer.run.total import run_total
from explorer.scenario import ScenarioError, load
from explorer.simulate import simulate

from conftest import ROOT

TEACH = ROOT / "scenarios" / "teaching-8gpu.yaml"
BASE = {"reliability.mtbf_gpu_hours": 10_000.0, "reliability.checkpoint_write_GBps": 2.0,
        "training.total_tokens": 1e9, "cluster.nodes": 2, "parallelism.dp": 4,
        "parallelism.order": "tp-cp-ep-pp-dp"}


def _sc(**kw):
    return load(TEACH, {**BASE, **kw})


def test_waiting_loses_the_repair_time_per_failure():
    spare, wait = goodput_of(_sc()), goodput_of(_sc(**{"reliability.repair_h": 1.5}))
    M = job_mtbf_s(_sc())
    assert wait.repair_share == pytest.approx(1.5 * 3600 / M, rel=1e-12)
    assert wait.goodput == pytest.approx(spare.goodput - 1.5 * 3600 / M, rel=1e-12)


def test_an_elastic_job_loses_the_throughput_it_runs_without_and_one_restart():
    sc = _sc(**{"reliability.repair_h": 1.5, "reliability.elastic": True})
    full = simulate(sc)
    survivors = simulate(load(TEACH, {**BASE, "cluster.faults.failed_nodes": 1}))
    r = survivors.tokens_per_s / full.tokens_per_s
    # Half the replicas carry the global batch (twice the micro-batches each, a smaller bubble share,
    # and their gradient all-reduce no longer crosses the fabric): less, not half, the throughput.
    assert 0.5 < r < 0.95
    g = goodput_of(sc, r)
    M = job_mtbf_s(sc)
    assert g.repair_share == pytest.approx(((1 - r) * 1.5 * 3600 + g.restart_s) / M, rel=1e-12)
    total = run_total(sc, simulate)
    assert total is not None and total.phases[0].goodput.goodput == pytest.approx(g.goodput, rel=1e-12)


def test_no_repair_time_no_difference():
    a = run_total(_sc(), simulate)
    b = run_total(_sc(**{"reliability.elastic": True}), simulate)
    assert a is not None and b is not None and a.goodput == b.goodput


def test_a_job_that_cannot_lose_a_node_is_a_one_line_error():
    one = load(TEACH, {**BASE, "cluster.nodes": 1, "parallelism.dp": 2, "reliability.repair_h": 1.0,
                       "reliability.elastic": True})
    with pytest.raises(ScenarioError, match=r"^reliability\.elastic: the job cannot continue without a node"):
        run_total(one, simulate)
