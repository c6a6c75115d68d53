"""``parallelism.stage_replicas: auto`` (PipeDream's partitioner choosing each stage's replicas,
taskgraph/replica_split.py) on every path beside ``run``: the estimator and the commands built on
it (sweep, scaling, sensitivity, search) price the plan ``run`` resolves, and validate, run's text
and run --json say which replicas ``auto`` chose."""
from __future__ import annotations

import json

import pytest

from explorer.design.space import Layout, LayoutBuilder, search_raw
from explorer.estimate.fast import estimate_many
from explorer.estimate.overrides import estimate_overrides
from explorer.scenario import apply_overrides, from_dict, load, load_raw
from explorer.simulate import simulate

from cli_support import cli
from conftest import ROOT

VGG = ROOT / "scenarios" / "pipedream-vgg16.yaml"
GNMT = ROOT / "scenarios" / "pipedream-gnmt16.yaml"
AUTO = {"parallelism.stage_replicas": "auto"}
# PipeDream's partitioner over 4 stages of VGG-16 on the shipped 4 x 4 V100 (10 GbE), its layers free.
VGG4 = {**AUTO, "parallelism.pp": 4, "parallelism.stage_layers": None}
# One server of 4 V100: a search small enough to run here (4 micro-batches of 64).
SMALL = {**AUTO, "cluster.nodes": 1, "training.global_batch": 256}


def _sets(changes: dict) -> list[str]:
    out = []
    for k, v in changes.items():
        out += ["--set", f"{k}={'null' if v is None else v}"]
    return out


def _run_json(path, changes: dict) -> dict:
    got = cli("run", str(path), *_sets(changes), "--json")
    assert got.returncode == 0, got.stderr
    return json.loads(got.stdout)


@pytest.mark.slow
def test_a_sweeps_auto_row_is_runs_iteration():
    """The sweep stopped with an internal error (IndexError in the estimator's stage classes: the
    replica groups of all-zero replicas are empty); its row is now run's iteration to the bit."""
    base = {**AUTO, "parallelism.pp": 4}
    got = cli("sweep", str(GNMT), "--set", "parallelism.pp=4", "--vary", "parallelism.stage_replicas=auto",
              "--json")
    assert got.returncode == 0, got.stderr
    (row,) = json.loads(got.stdout)
    run = _run_json(GNMT, base)
    assert run["stage_replicas"] == [3, 9, 3, 1] and run["stage_layers"] == [3, 6, 6, 1]
    assert row["iteration_time_s"] == run["iteration_time_s"] and 0.31 < row["iteration_time_s"] < 0.33


@pytest.mark.slow
def test_a_network_sweep_of_auto_rows_is_each_rows_run():
    """Eight network points (the estimator primes their calls together, estimate/prime.py: it
    stopped on the unresolved replicas with ZeroDivisionError): each row is its own run."""
    rates = (10, 25, 40, 50, 100, 200, 400, 800)
    got = cli("sweep", str(VGG), *_sets(VGG4), "--vary",
              "cluster.scale_out.nic_Gbps=" + ",".join(map(str, rates)), "--json")
    assert got.returncode == 0, got.stderr
    rows = json.loads(got.stdout)
    assert len(rows) == 8
    for rate in (25, 400):
        row = next(r for r in rows if r["overrides"]["cluster.scale_out.nic_Gbps"] == rate)
        want = simulate(load(VGG, {**VGG4, "cluster.scale_out.nic_Gbps": rate})).iteration_time_s
        assert row["iteration_time_s"] == want
    assert rows[0]["iteration_time_s"] > rows[-1]["iteration_time_s"]      # 168 ms at 10 Gb/s, 148 at 800


@pytest.mark.slow
def test_the_estimators_price_the_plan_run_resolves():
    """estimate_many (exact and fast) and estimate_overrides: the resolved plan's simulation."""
    sc = load(VGG, VGG4)
    want = simulate(sc).iteration_time_s
    assert 0.166 < want < 0.169                                    # 13-1-1-1 replicas, 13-1-1-1 layers
    for exact in (True, False):
        assert float(estimate_many([sc], exact=exact).iteration_time_s[0]) == want
    est, why = estimate_overrides(load_raw(VGG), [VGG4])
    assert why == [None] and float(est.iteration_time_s[0]) == want


@pytest.mark.slow
def test_scaling_and_sensitivity_take_auto():
    for command in ("scaling", "sensitivity"):
        got = cli(command, str(VGG), *_sets(AUTO))
        assert got.returncode == 0, got.stderr
        assert "145.3 ms" in got.stdout                            # 15-1 on 13 | 3 layers, as run


def test_search_keeps_auto_for_every_layout():
    """search refused ``auto`` ("'auto' is not an integer": its layouts were parsed without the
    loader's reading of auto); each layout now keeps auto for its own pp, as from_dict builds it."""
    raw = search_raw(apply_overrides(load_raw(VGG), {**AUTO, "parallelism.stage_layers": None}))
    layout = Layout(1, 4, 1, 1, 1, "pipedream-async", 0, 64, "none", False)
    sc = LayoutBuilder(raw).scenario(layout)
    assert sc.parallelism.stage_replicas == (0, 0, 0, 0)
    assert sc == from_dict(search_raw(apply_overrides(raw, layout.overrides())))
    got = cli("search", str(VGG), *_sets(SMALL), "--top", "2", "--json")
    assert got.returncode == 0, got.stderr
    rows = json.loads(got.stdout)
    # Every row keeps auto: the best (one stage, PipeDream's 4 replicas of it: plain data parallelism
    # at micro-batch 64 on one server) and the scenario's own 2-stage pipeline (3-1 on 8 | 8 layers,
    # which the simulation runs faster than 2-2), each equal to run.
    own = next(r for r in rows if r["baseline"])
    assert own["overrides"]["parallelism.schedule"] == "pipedream-async"
    for row in rows:
        # A search lets the simulator split the layers (space.search_raw): run without stage_layers.
        assert row["overrides"]["parallelism.stage_layers"] is None
        sets = {**SMALL, **row["overrides"]}
        run = _run_json(VGG, sets)
        assert row["iteration_time_s"] == run["iteration_time_s"]
        assert run["stage_replicas"] == ([3, 1] if row["overrides"]["parallelism.pp"] == 2 else [4])


@pytest.mark.slow
def test_validate_and_run_say_which_replicas_auto_chose():
    """validate printed ``replicas 0-0-0-0`` (auto as stored); run said nothing of the replicas."""
    got = cli("validate", str(VGG), *_sets(VGG4))
    assert got.returncode == 0, got.stderr
    assert "replicas auto (13-1-1-1, stage layers 13-1-1-1) on pp 4" in got.stdout
    assert "0-0-0-0" not in got.stdout
    given = cli("validate", str(VGG))
    assert "replicas 15-1 on pp 2" in given.stdout
    text = cli("run", str(VGG), *_sets(VGG4))
    assert text.returncode == 0, text.stderr
    assert "  stage layers: 13, 1, 1, 1" in text.stdout and "  stage replicas: 13, 1, 1, 1  " in text.stdout
    assert _run_json(VGG, VGG4)["stage_replicas"] == [13, 1, 1, 1]
    plain = _run_json(VGG, {"parallelism.pp": 1, "parallelism.dp": 16, "parallelism.stage_replicas": None,
                            "parallelism.stage_layers": None, "parallelism.schedule": "1f1b",
                            "training.global_batch": 1024})
    assert plain["stage_replicas"] is None
