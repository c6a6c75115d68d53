"""Direction tests for the run plan and reliability controls (issue 38): more tokens take longer, a
phase on more GPUs finishes sooner, failures and slower checkpoints cost goodput, the PUE costs
energy and the price scales the cost.  tests/test_controls.py collects ``COVERED``; the closed forms
are in tests/test_run_plan.py."""
from __future__ import annotations

from explorer.run.goodput import goodput_of
from explorer.run.total import RunTotal, run_total
from explorer.scenario import load
from explorer.simulate import simulate

from conftest import ROOT

TEACH = ROOT / "scenarios" / "teaching-8gpu.yaml"
FAIL = {"reliability.mtbf_gpu_hours": 10_000.0, "reliability.checkpoint_write_GBps": 2.0}


def _sc(**kw):
    return load(TEACH, {k.replace("__", "."): v for k, v in kw.items()})



def _run(**kw) -> RunTotal:
    sc = _sc(**kw)
    total = run_total(sc, simulate)
    assert total is not None
    return total


def _goodput(**kw) -> float:
    return goodput_of(_sc(**{**FAIL, **kw})).goodput


def test_more_tokens_take_more_days():
    days = [_run(training__total_tokens=t).days for t in (1e8, 1e9, 1e10)]
    assert days[0] < days[1] < days[2]


def test_a_phase_on_more_nodes_finishes_sooner():
    """The same tokens as one phase on 1 node and on 2 nodes (dp 2 -> 4): fewer days, same GPU-hours
    within the scaling loss (more, not fewer)."""
    one = _run(training__phases=[{"name": "a", "tokens": 1e9}])
    two = _run(training__phases=[{"name": "a", "tokens": 1e9, "overrides": {"cluster.nodes": 2}}])
    assert two.days < one.days
    assert two.gpu_hours >= one.gpu_hours * 0.999


def test_more_reliable_gpus_keep_more_goodput():
    g = [_goodput(reliability__mtbf_gpu_hours=m) for m in (1_000.0, 10_000.0, 100_000.0)]
    assert g[0] < g[1] < g[2] < 1.0


def test_faster_checkpoint_writes_keep_more_goodput():
    g = [_goodput(reliability__checkpoint_write_GBps=w) for w in (0.5, 2.0, 20.0)]
    assert g[0] < g[1] < g[2]


def test_faster_checkpoint_reads_restart_sooner():
    g = [_goodput(reliability__checkpoint_read_GBps=r) for r in (0.5, 2.0, 20.0)]
    assert g[0] < g[1] < g[2]


def test_longer_restarts_cost_goodput():
    g = [_goodput(reliability__restart_s=r) for r in (0.0, 300.0, 3000.0)]
    assert g[0] > g[1] > g[2]


def test_async_checkpointing_keeps_more_goodput():
    assert _goodput(reliability__async_checkpoint=True) > _goodput(reliability__async_checkpoint=False)


def test_checkpoint_intervals_beyond_the_optimum_cost_goodput():
    """Young/Daly's interval tau; 2 tau and 8 tau each lose more goodput (first-order optimum)."""
    tau = goodput_of(_sc(**FAIL)).interval_s
    g = [_goodput(reliability__checkpoint_interval_s=k * tau) for k in (1.0, 2.0, 8.0)]
    assert g[0] > g[1] > g[2]


def test_a_higher_pue_costs_energy_not_time():
    a = _run(training__total_tokens=1e9, reliability__pue=1.1)
    b = _run(training__total_tokens=1e9, reliability__pue=1.5)
    assert b.days == a.days and b.energy_MWh > a.energy_MWh


def test_the_price_scales_the_cost():
    assert _run(training__total_tokens=1e9).price is None
    p = [_run(training__total_tokens=1e9, reliability__price_per_gpu_hour=x).price for x in (1.0, 3.0)]
    assert 0 < p[0] < p[1]


COVERED = {
    "training.total_tokens": "test_more_tokens_take_more_days",
    "training.phases": "test_a_phase_on_more_nodes_finishes_sooner",
    "reliability.mtbf_gpu_hours": "test_more_reliable_gpus_keep_more_goodput",
    "reliability.checkpoint_write_GBps": "test_faster_checkpoint_writes_keep_more_goodput",
    "reliability.checkpoint_read_GBps": "test_faster_checkpoint_reads_restart_sooner",
    "reliability.restart_s": "test_longer_restarts_cost_goodput",
    "reliability.async_checkpoint": "test_async_checkpointing_keeps_more_goodput",
    "reliability.checkpoint_interval_s": "test_checkpoint_intervals_beyond_the_optimum_cost_goodput",
    "reliability.pue": "test_a_higher_pue_costs_energy_not_time",
    "reliability.price_per_gpu_hour": "test_the_price_scales_the_cost",
    "reliability.repair_h": "test_a_longer_repair_costs_goodput_waiting_or_elastic",
    "reliability.elastic": "test_going_on_without_the_node_beats_waiting_for_it",
    "training.critical_batch_tokens": "test_a_larger_critical_batch_wastes_fewer_tokens",
}


def test_a_larger_critical_batch_wastes_fewer_tokens():
    """McCandlish et al. 2018: the closer the batch to the critical batch, the less each token
    buys; a larger critical batch raises the data efficiency (1 / (1 + B / B_crit))."""
    assert _run(training__total_tokens=1e9).loss is None
    small, large = (_run(training__total_tokens=1e9, training__critical_batch_tokens=c).loss
                    for c in (1e5, 1e7))
    assert small is not None and large is not None
    assert small.data_efficiency < large.data_efficiency < 1.0


# Two nodes of teaching-8gpu: dp 4, two pipelines per node, so a node lost drops half the replicas.
TWO = {**FAIL, "training.total_tokens": 1e9, "cluster.nodes": 2, "parallelism.dp": 4,
        "parallelism.order": "tp-cp-ep-pp-dp"}


def _run_goodput(**kw) -> float:
    return _run(**{k.replace(".", "__"): v for k, v in {**TWO, **kw}.items()}).goodput


def test_a_longer_repair_costs_goodput_waiting_or_elastic():
    for elastic in (False, True):
        g = [_run_goodput(**{"reliability.repair_h": h, "reliability.elastic": elastic})
             for h in (0.0, 0.5, 2.0)]
        assert g[0] > g[1] > g[2], (elastic, g)


def test_going_on_without_the_node_beats_waiting_for_it():
    wait = _run_goodput(**{"reliability.repair_h": 2.0})
    go_on = _run_goodput(**{"reliability.repair_h": 2.0, "reliability.elastic": True})
    assert go_on > wait
