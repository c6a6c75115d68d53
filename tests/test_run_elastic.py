"""A failed node that is not back at once (issue 38, "an elastic option that continues on fewer
nodes after a failure instead of waiting for a replacement"; "concurrent failures"): the closed forms
of run/goodput.py -- the nodes under repair are an M/G/infinity queue, K ~ Poisson(W / M) at a
random instant; waiting trains while K = 0 (goodput G exp(-W / M)), an elastic job keeps
max(0, 1 - K (1 - r)) of its throughput and restarts once more per failure, r being the survivors'
simulated share -- checked against a simulation of failures and repairs, and a layout that cannot
lose a node."""
from __future__ import annotations

import math

import numpy as np
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


def test_waiting_trains_only_while_no_node_is_under_repair():
    spare, wait = goodput_of(_sc()), goodput_of(_sc(**{"reliability.repair_h": 1.5}))
    M = job_mtbf_s(_sc())
    W = 1.5 * 3600
    assert wait.nodes_down == pytest.approx(W / M, rel=1e-12)
    assert wait.goodput == pytest.approx(spare.goodput * math.exp(-W / M), rel=1e-12)
    # To first order a repair time is lost per failure (what the model said before concurrent failures);
    # the difference is second order: (W / M)^2 and (1 - G) W / M.
    second = (W / M) ** 2 + (1 - spare.goodput) * W / M
    assert wait.goodput == pytest.approx(spare.goodput - W / M, abs=second)
    assert wait.goodput == pytest.approx(1 - wait.checkpoint_share - wait.lost_work_share
                                         - wait.restart_share - wait.repair_share, rel=1e-12)


def test_repairs_longer_than_the_mtbf_still_train_a_share_of_the_time():
    # 1,000 GPU-hours on 16 GPUs: a failure every 62.5 h; repairs of 200 h (3.2 MTBFs): the first-order
    # form gave W / M = 3.2 > 1, goodput 0 and a refusal; the job still trains while all nodes are up,
    # exp(-3.2) = 4.1 % of the time.
    sc = _sc(**{"reliability.repair_h": 200.0, "reliability.mtbf_gpu_hours": 1000.0})
    g, spare = goodput_of(sc), goodput_of(_sc(**{"reliability.mtbf_gpu_hours": 1000.0}))
    assert g.nodes_down == pytest.approx(3.2, rel=1e-12)
    assert g.goodput == pytest.approx(spare.goodput * math.exp(-3.2), rel=1e-12)
    assert 0.035 < g.goodput < 0.041
    total = run_total(sc, simulate)
    assert total is not None and total.goodput == pytest.approx(g.goodput, rel=1e-12)
    # The goodput waterfall shows the time under repair as its own step and still adds up to the run.
    from explorer.figures.run import waterfall_steps
    steps = dict(waterfall_steps(total))
    assert steps["nodes under repair"] == pytest.approx(g.repair_share * total.days, rel=1e-9)
    assert sum(steps.values()) == pytest.approx(total.days, rel=1e-12)


@pytest.mark.parametrize("mtbfs", [10.0, 13.0])
def test_long_repairs_keep_the_goodput_exact(mtbfs):
    """The goodput is G x exp(-W / M) multiplied, not 1 - (...) subtracted: at 13 MTBFs of repair the
    subtraction's rounding was ~1e-16 against 2.3e-6 x G (a hunt read 7e15 days for 100-hour repairs
    on 16,384 GPUs, all rounding)."""
    M_h = 10_000.0 / 16
    sc = _sc(**{"reliability.repair_h": mtbfs * M_h})
    g, spare = goodput_of(sc), goodput_of(_sc())
    assert g.goodput == pytest.approx(spare.goodput * math.exp(-mtbfs), rel=1e-12)
    assert g.repair_share == pytest.approx(spare.goodput - g.goodput, rel=1e-12)
    total = run_total(sc, simulate)
    assert total is not None and total.goodput == pytest.approx(g.goodput, rel=1e-12)


@pytest.mark.parametrize("elastic", [False, True])
def test_repairs_that_leave_the_job_almost_never_whole_are_a_one_line_error(elastic):
    """18 MTBFs of repair: waiting trains exp(-18) = 1.5e-8 of the time, under run/total.MIN_WHOLE_SHARE
    (1e-6): its days would be a million times its training, so the run is refused naming repair_h
    (at 1,000 h on 16,384 GPUs the goodput underflowed to 0 and the error blamed the MTBF).  An
    elastic job whose one node keeps half its replicas (r = 1/2) keeps (1 + 18 / 2) exp(-18) = 1.5e-7."""
    sc = _sc(**{"reliability.repair_h": 18 * 10_000.0 / 16, "reliability.elastic": elastic})
    with pytest.raises(ScenarioError) as e:
        run_total(sc, simulate)
    assert e.value.field == "reliability.repair_h" and "\n" not in str(e.value)
    assert ("elastic: true" in str(e.value)) is not elastic


def _simulated_up_and_kept(M: float, W: float, r: float, horizon: float, seed: int) -> tuple[float, float]:
    """A simulation of the failures and repairs: Poisson failures of rate 1/M, each node out for W; the
    share of time with no node down, and the time-average of max(0, 1 - K (1 - r))."""
    rng = np.random.default_rng(seed)
    fails = np.cumsum(rng.exponential(M, size=int(horizon / M * 1.2) + 100))
    fails = fails[fails < horizon]
    # K changes at each failure (+1) and each repair (-1): integrate over the sorted events.
    t = np.concatenate([fails, fails + W])
    step = np.concatenate([np.ones_like(fails), -np.ones_like(fails)])
    order = np.argsort(t, kind="stable")
    t, k = t[order], np.cumsum(step[order])
    t = np.append(t, max(horizon, t[-1]))
    dt = np.diff(np.concatenate([[0.0], t]))
    k = np.concatenate([[0.0], k])
    up = dt[k == 0].sum() / t[-1]
    kept = (dt * np.maximum(0.0, 1.0 - k * (1.0 - r))).sum() / t[-1]
    return up, kept


@pytest.mark.parametrize("W_over_M", [0.2, 1.0, 3.0])
def test_the_poisson_occupancy_matches_a_simulation_of_failures_and_repairs(W_over_M):
    """P(K = 0) = exp(-W / M) and E[max(0, 1 - K (1 - r))] (survivors_mean) against 200,000 simulated
    failures with fixed repairs; the standard error of a share is under 0.5 % at this length."""
    from explorer.run.goodput import survivors_mean
    M = 1.0
    up, kept = _simulated_up_and_kept(M, W_over_M * M, 0.75, 200_000.0, seed=7)
    assert up == pytest.approx(math.exp(-W_over_M), abs=0.006)
    assert kept == pytest.approx(survivors_mean(0.75, W_over_M), abs=0.006)


def test_an_elastic_job_keeps_the_survivors_throughput_of_the_nodes_up():
    sc = _sc(**{"reliability.repair_h": 1.5, "reliability.elastic": True})
    full = simulate(sc)
    survivors = simulate(load(TEACH, {**BASE, "cluster.faults.failed_nodes": 1}))
    r = survivors.tokens_per_s / full.tokens_per_s
    # Half the replicas carry the global batch (twice the micro-batches each, a smaller bubble share,
    # and their gradient all-reduce no longer crosses the fabric): less, not half, the throughput.
    assert 0.5 < r < 0.95
    g = goodput_of(sc, r)
    spare = goodput_of(_sc())
    M = job_mtbf_s(sc)
    W = 1.5 * 3600
    # The sum over K ~ Poisson(W / M), written out: terms vanish once K (1 - r) >= 1, and from K = 2
    # on (the job has two nodes: the second failure leaves no replica; it had counted r = 0.9 down
    # to K = 9).
    kept = sum(math.exp(-W / M) * (W / M) ** k / math.factorial(k) * max(0.0, 1 - k * (1 - r))
               for k in range(2))
    assert g.goodput == pytest.approx((spare.goodput - g.restart_s / M) * kept, rel=1e-12)
    # First order: (1 - r) W and one more restart lost per failure.
    assert g.goodput == pytest.approx(spare.goodput - ((1 - r) * W + g.restart_s) / M,
                                      abs=(W / M) ** 2 + (1 - spare.goodput) * W / M)
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


def test_a_job_that_lost_nodes_fails_and_shrinks_on_the_nodes_it_runs_on():
    """A regression hunt: with one of 4 nodes failed, the job's MTBF still counted the failed
    node's GPUs and the next failure hit the cluster's last node, already idle (survivors' share
    1.0): an elastic job's goodput rose (0.783 -> 0.808).  Now the MTBF counts the surviving
    replicas' GPUs (3 of 4 replicas of one node each) and the next failure one of their nodes."""
    base = {**BASE, "training.total_tokens": 1e9, "reliability.mtbf_gpu_hours": 100.0,
            "cluster.nodes": 4, "cluster.gpus_per_node": 2, "parallelism.pp": 2, "parallelism.dp": 4,
            "parallelism.order": "tp-cp-pp-dp", "reliability.repair_h": 10.0, "reliability.elastic": True}
    whole = load(TEACH, base)
    hurt = load(TEACH, {**base, "cluster.faults.failed_nodes": 1})
    from explorer.run.goodput import running
    assert running(hurt).gpus < hurt.gpus
    assert job_mtbf_s(hurt) == pytest.approx(job_mtbf_s(whole) * whole.gpus / running(hurt).gpus)
    from explorer.run.total import _survivors_share
    share = _survivors_share(hurt, simulate(hurt), simulate)
    assert share is not None and 0.5 < share < 0.95        # was 1.0: the idle node's loss cost nothing
    # Fewer GPUs fail less often: the degraded job's goodput is its own, not the whole job's.
    g_hurt = run_total(hurt, simulate)
    assert g_hurt is not None and 0 < g_hurt.goodput < 1
    assert g_hurt.phases[0].goodput.job_mtbf_s == pytest.approx(100 * 3600 / 6)
