"""Activation offload in the estimator's rows (estimate/result.py: ``offload`` stays in compute).

Found by an invariant hunt: a sweep row the estimator hands to the simulation (a latency-timed
schedule) dropped the simulation's ``offload`` category, so its breakdown summed to 0.125 s of an
iteration of 0.200 s; priced rows kept the stall in compute.
"""
from __future__ import annotations

import pytest

from explorer.estimate import estimate_many, estimate_overrides
from explorer.estimate.many import simulated
from explorer.scenario import load, load_raw, shipped_scenarios
from explorer.simulate import simulate

OFFLOAD = {"training.offload_activations_layers": 2}


def _sums(row: dict) -> None:
    assert sum(row["breakdown_s"].values()) == pytest.approx(row["iteration_time_s"], rel=1e-12)


def test_priced_and_simulated_rows_keep_the_offload_stall_in_compute():
    sc = load(shipped_scenarios()["teaching-8gpu"], OFFLOAD)
    full = simulate(sc)
    assert full.breakdown_s["offload"] > 0.05           # the stall is there to keep
    compute = full.breakdown_s["compute"] + full.breakdown_s["offload"]
    priced = estimate_many([sc]).row(0)
    via_sim = simulated(sc)[0].row(0)
    for row in (priced, via_sim):
        _sums(row)
        assert "offload" not in row["breakdown_s"]
        assert row["breakdown_s"]["compute"] == pytest.approx(compute, rel=1e-9)


def test_a_sweep_over_timed_and_priced_schedules_sums_on_every_row():
    raw = load_raw(shipped_scenarios()["teaching-8gpu"])
    rows = [{**OFFLOAD, "parallelism.schedule": s} for s in ("1f1b", "1f1b-latency")]
    est, why = estimate_overrides(raw, rows)
    assert why == [None, None]
    for i in range(2):
        _sums(est.row(i))
