"""Issue 39 item 2: ``import-trace --fit`` fits the scenario's compute efficiency and each tier's
rate to a measured iteration.  The measured iterations here are traces written from simulations
with known constants (tests/trace_synth.py, in the layout PyTorch's profiler writes): imported,
they must give back the simulation's own breakdown, and the fit must find the constants they were
made with.  The real CPU fixture (tests/fixtures/traces/ddp) checks the bounds."""
from __future__ import annotations

import json

import pytest
from trace_synth import write_trace

from explorer.cli import load_scenario, main
from explorer.traces.run_fit import simulated

from conftest import ROOT

TRACES = ROOT / "tests" / "fixtures" / "traces"
TWO_NODES = ["cluster.gpus_per_node=4", "cluster.nodes=2"]


def _sets(sets):
    return [x for s in sets for x in ("--set", s)]


def _import(capsys, path, scenario, layout=(), *extra):
    code = main(["import-trace", str(path), "--scenario", scenario, "--json", *_sets(layout), *extra])
    assert code == 0
    return json.loads(capsys.readouterr().out)


def test_a_simulated_iteration_imports_as_its_own_compute_and_collectives(capsys, tmp_path):
    """What the fit compares must agree on a trace of the simulation itself: compute, optimizer and
    iteration exactly, and per dimension the time a collective is in flight (the fit's network
    targets: the class's own calls and the transfers it waits for)."""
    path = tmp_path / "rank0.json.gz"
    sc = load_scenario("teaching-8gpu")
    T = write_trace(path, sc, steps=3)
    out = _import(capsys, path, "teaching-8gpu")
    assert out["iterations"] == 3
    assert out["iteration_time_s"]["measured"] == pytest.approx(T, rel=1e-9)
    assert out["iteration_time_s"]["simulated"] == pytest.approx(T, rel=1e-12)
    cats = out["categories"]
    for name in ("compute", "recompute", "optimizer"):
        assert cats[name]["measured_s"] == pytest.approx(cats[name]["simulated_s"], rel=1e-6, abs=1e-9), name
    # Idle time is split by different rules on the two sides (a trace: whatever collective is in
    # flight; the simulation: what ended the wait, analysis/breakdown.py), so only its sum agrees.
    idle = ("tp", "cp", "ep", "pp", "dp", "emb", "gnn", "bubble")
    idle_sim = sum(cats[k]["simulated_s"] for k in idle)
    assert sum(cats[k]["measured_s"] for k in idle) == pytest.approx(idle_sim, rel=1e-6)
    sim = simulated(sc)
    assert sim.comm_total_s["dp"] > 0 and sim.comm_total_s["pp"] > 0
    assert out["comm_total_s"]["measured"] == pytest.approx(sim.comm_total_s, rel=1e-6, abs=1e-12)


@pytest.mark.parametrize(("layout", "truth"), [
    ([], {"hardware.compute_efficiency": 0.5, "cluster.scale_up.bandwidth_GBps": 200.0}),
    (TWO_NODES, {"hardware.compute_efficiency": 0.6, "cluster.scale_up.bandwidth_GBps": 300.0,
                 "cluster.scale_out.efficiency": 0.4}),
])
def test_the_fit_finds_the_constants_the_trace_was_made_with(capsys, tmp_path, layout, truth):
    path = tmp_path / "rank0.json.gz"
    write_trace(path, load_scenario("teaching-8gpu", layout + [f"{k}={v}" for k, v in truth.items()]))
    fit = _import(capsys, path, "teaching-8gpu", layout, "--fit")["fit"]
    assert set(fit["fields"]) == set(truth)
    assert fit["fields"] == pytest.approx(truth, rel=0.01)
    assert fit["residual"] < 0.002 < 0.1 < fit["residual_before"]
    assert fit["at_bound"] == []
    assert fit["iteration_time_s"]["after"] == pytest.approx(fit["iteration_time_s"]["measured"], rel=0.005)
    for t in fit["targets"]:
        assert t["simulated_s"] == pytest.approx(t["measured_s"], rel=0.002), t["name"]
    # Two nodes: the pipeline's sends cross the scale-out fabric, the DP pairs stay on NVLink.
    assert [t["name"] for t in fit["targets"]] == ["compute", "scale-up", "scale-out"][:len(truth)]


@pytest.mark.slow
def test_tensor_parallel_groups_fit_nvlink_and_data_parallel_ones_the_fabric(capsys, tmp_path):
    """GPT-3 175B (TP 8 in a node, DP and PP across nodes): the trace's process groups place the
    all-reduces, so TP time fits NVLink and DP time the InfiniBand efficiency."""
    truth = {"hardware.compute_efficiency": 0.6, "cluster.scale_up.bandwidth_GBps": 200.0,
             "cluster.scale_out.efficiency": 0.5}
    path = tmp_path / "rank0.json.gz"
    write_trace(path, load_scenario("megatron-gpt3-175b", [f"{k}={v}" for k, v in truth.items()]), steps=1)
    out = _import(capsys, path, "megatron-gpt3-175b", (), "--fit")
    assert out["categories"]["tp"]["measured_s"] > 0
    assert out["fit"]["fields"] == pytest.approx(truth, rel=0.01)


def test_a_target_beyond_its_bounds_stays_at_the_bound_and_is_named(capsys):
    """The real 2-rank CPU trace computes 5x faster than the H100 scenario can at 100 % of peak:
    compute efficiency stops at 1 and says so; the NVLink time it can reach, it reaches."""
    out = _import(capsys, TRACES / "ddp", "teaching-8gpu", (), "--fit")
    fit = out["fit"]
    assert fit["fields"]["hardware.compute_efficiency"] == 1.0
    assert fit["at_bound"] == ["hardware.compute_efficiency"]
    compute, up = fit["targets"]
    assert compute["simulated_s"] > 2 * compute["measured_s"]
    assert up["simulated_s"] == pytest.approx(up["measured_s"], rel=0.01)
    assert up["measured_s"] == pytest.approx(sum(out["comm_total_s"]["measured"].values()), rel=1e-9)
    assert main(["import-trace", str(TRACES / "ddp"), "--scenario", "teaching-8gpu", "--fit"]) == 0
    text = capsys.readouterr().out
    assert "hardware.compute_efficiency" in text and "(at its bound)" in text


def test_out_writes_a_scenario_that_reproduces_the_fitted_iteration(capsys, tmp_path):
    path = tmp_path / "rank0.json.gz"
    write_trace(path, load_scenario("teaching-8gpu", ["hardware.compute_efficiency=0.45"]))
    out_file = tmp_path / "calibrated.yaml"
    fit = _import(capsys, path, "teaching-8gpu", (), "--fit", "--out", str(out_file))["fit"]
    text = out_file.read_text(encoding="utf-8")
    assert text.startswith("# Calibrated by `import-trace rank0.json.gz --fit`: "
                           "hardware.compute_efficiency 0.45")
    assert main(["run", str(out_file), "--json"]) == 0
    run = json.loads(capsys.readouterr().out)
    assert run["iteration_time_s"] == pytest.approx(fit["iteration_time_s"]["after"], rel=1e-12)
    assert "calibrated to rank0.json.gz" in run["name"]


def test_out_without_fit_and_a_trace_without_compute_are_one_line(capsys, tmp_path):
    path = tmp_path / "rank0.json.gz"
    write_trace(path, load_scenario("teaching-8gpu"), drop_lanes=("compute",))
    base = ["import-trace", str(path), "--scenario", "teaching-8gpu"]
    assert main([*base, "--out", str(tmp_path / "x.yaml")]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "--out" in err and "--fit" in err
    assert main([*base, "--fit"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "no compute" in err
    assert not (tmp_path / "x.yaml").exists()
