"""The whole run (issue 38): closed forms of its days, goodput and energy, the phases' simulation
reuse, run --json's ``run_total`` and the one-line errors of the run plan.

Closed forms: a one-phase run lasts iterations x iteration time (Done-when 1); the goodput is Young's
first-order formula 1 - delta/tau - (tau/2 + R)/M at tau = sqrt(2 delta M) (Young 1974; Daly 2006)
for a given MTBF, checkpoint and restart; the energy is W (S + (1 - S) u) x GPUs x time x PUE.
"""
from __future__ import annotations

import json
import math

import pytest

from explorer.cli import main
from explorer.config.loading import to_dict
from explorer.physics.power import STATIC_POWER_SHARE
from explorer.run import checkpoint, energy
from explorer.run.goodput import goodput_of, young_daly_interval
from explorer.run.phases import plan
from explorer.run.total import run_total
from explorer.scenario import ScenarioError, apply_overrides, from_dict, load, load_raw
from explorer.simulate import simulate

from conftest import ROOT

TEACH = ROOT / "scenarios" / "teaching-8gpu.yaml"     # 1.3B model, 8 H100s, 16 x 2,048 tokens a step


def _sc(**overrides):
    return load(TEACH, overrides)


def test_one_phase_is_iterations_times_iteration_time():
    """total_tokens T: ceil(T / (global_batch x seq_len)) iterations of the simulated step, no failures."""
    sc = _sc(**{"training.total_tokens": 1e9})
    res = simulate(sc)
    total = run_total(sc, simulate, res)
    n = math.ceil(1e9 / (16 * 2048))
    assert total.phases[0].iterations == n == 30518
    assert total.days == pytest.approx(n * res.iteration_time_s / 86400, rel=1e-12)
    assert total.gpu_hours == pytest.approx(8 * n * res.iteration_time_s / 3600, rel=1e-12)
    assert total.goodput == 1.0


def test_steps_phase_and_sum_of_phases():
    """Two phases: 10 steps of the base, 20 of a doubled batch; the run is their sum and the batch
    override doubles the tokens of a step."""
    sc = _sc(**{"training.phases": [{"name": "a", "steps": 10},
                                    {"name": "b", "steps": 20, "overrides": {"training.global_batch": 32}}]})
    total = run_total(sc, simulate)
    a, b = total.phases
    ra, rb = simulate(sc), simulate(_sc(**{"training.global_batch": 32}))
    assert (a.iterations, b.iterations) == (10, 20)
    assert a.tokens == 10 * 16 * 2048 and b.tokens == 20 * 32 * 2048
    assert a.compute_s == pytest.approx(10 * ra.iteration_time_s, rel=1e-12)
    assert b.compute_s == pytest.approx(20 * rb.iteration_time_s, rel=1e-12)
    assert total.days == pytest.approx((a.compute_s + b.compute_s) / 86400, rel=1e-12)


def test_phases_with_the_same_scenario_are_simulated_once():
    """Three phases, two of them the same effective scenario: two simulations, not three."""
    sc = _sc(**{"training.phases": [
        {"name": "a", "tokens": 1e8, "overrides": {"training.global_batch": 32}},
        {"name": "b", "tokens": 1e8},
        {"name": "c", "tokens": 1e8, "overrides": {"training.global_batch": 32}}]})
    calls = []

    def counting(s):
        calls.append(s)
        return simulate(s)
    total = run_total(sc, counting)
    assert len(calls) == 2
    assert total.phases[0].iteration_s == total.phases[2].iteration_s


def test_checkpoint_is_weights_and_adam_state():
    """Llama 3 8B (8.03B parameters, Meta's model card): 14 bytes each with Adam = 112 GB."""
    sc = from_dict({"model": {"preset": "llama3-8b"}, "training": {"global_batch": 8}})
    assert checkpoint.checkpoint_bytes(sc) == pytest.approx(14 * 8.03e9, rel=0.005)


REL = {"reliability.mtbf_gpu_hours": 10_000, "reliability.checkpoint_write_GBps": 1.0,
       "reliability.checkpoint_read_GBps": 2.0, "reliability.restart_s": 300}


def test_goodput_is_young_daly_first_order():
    """MTBF 10,000 GPU-hours on 8 GPUs (M = 4.5e6 s), writes at 1 GB/s, reads at 2 GB/s, restart 300 s."""
    sc = _sc(**REL)
    ck = checkpoint.checkpoint_bytes(sc)
    M = 10_000 * 3600 / 8
    delta = ck / 1e9
    tau = math.sqrt(2 * delta * M)
    R = 300 + ck / 2e9
    g = goodput_of(sc)
    assert g.interval_s == pytest.approx(tau, rel=1e-12)
    assert g.goodput == pytest.approx(1 - delta / tau - (tau / 2 + R) / M, rel=1e-12)
    # Young's interval is the optimum of the first-order goodput: half or twice as often is worse.
    for k in (0.5, 2.0):
        other = goodput_of(_sc(**REL, **{"reliability.checkpoint_interval_s": k * tau}))
        assert other.goodput < g.goodput
    assert young_daly_interval(50.0, 4000.0) == pytest.approx(632.4555, rel=1e-6)


def test_async_checkpoint_stalls_only_for_the_snapshot():
    """Async: delta = the per-GPU share over the host link (the H100 preset's PCIe 5: 52.8 GB/s); the
    write (at 1 GB/s)
    delays the checkpoint's use, so a failure loses tau/2 + write and tau >= write."""
    base = {"reliability.mtbf_gpu_hours": 10_000, "reliability.checkpoint_write_GBps": 1.0}
    sc = _sc(**base, **{"reliability.async_checkpoint": True})
    ck = checkpoint.checkpoint_bytes(sc)
    g = goodput_of(sc)
    assert g.stall_s == pytest.approx(ck / 8 / 52.8e9, rel=1e-12)
    write = ck / 1e9
    assert g.interval_s == pytest.approx(max(math.sqrt(2 * g.stall_s * g.job_mtbf_s), write), rel=1e-12)
    assert g.lost_s == pytest.approx(g.interval_s / 2 + write, rel=1e-12)
    assert g.goodput > goodput_of(_sc(**base)).goodput


def test_energy_closed_form():
    """Energy = 700 W x (0.4 + 0.6 u) x 8 GPUs x wall seconds x PUE 1.3 / 3.6e9 MWh, u the compute share."""
    sc = _sc(**{"training.total_tokens": 1e9, "reliability.pue": 1.3})
    res = simulate(sc)
    total = run_total(sc, simulate, res)
    b = res.breakdown_s
    u = (b["compute"] + b["recompute"] + b["optimizer"]) / res.iteration_time_s
    watts = 700 * (STATIC_POWER_SHARE + (1 - STATIC_POWER_SHARE) * u)
    assert energy.average_W(sc, u) == pytest.approx(watts)
    assert total.energy_MWh == pytest.approx(watts * 8 * total.phases[0].wall_s * 1.3 / 3.6e9, rel=1e-12)
    # Under a 350 W cap the static share stays 0.4 x the 700 W board (the clock model's assumption,
    # physics/power.py); the GPU draws the cap while computing: 280 + (350 - 280) u.  It read
    # 350 x (0.4 + 0.6 u), the idle draw capped too.
    capped = _sc(**{"training.total_tokens": 1e9, "hardware.power_cap_W": 350})
    assert energy.average_W(capped, u) == pytest.approx(280 + 70 * u, rel=1e-12)


def test_run_json_has_run_total_only_with_a_run_plan(capsys):
    assert main(["run", "teaching-8gpu", "--json", "--set", "training.total_tokens=1e9",
                 "--set", "reliability.price_per_gpu_hour=2"]) == 0
    rt = json.loads(capsys.readouterr().out)["run_total"]
    assert {"days", "gpu_hours", "energy_MWh", "goodput", "phases"} <= set(rt)
    assert set(rt["phases"][0]) >= {"name", "days", "tokens_per_s", "mfu"}
    assert rt["price"] == pytest.approx(2 * rt["gpu_hours"])
    assert main(["run", "teaching-8gpu", "--json"]) == 0
    assert "run_total" not in json.loads(capsys.readouterr().out)


def test_phases_round_trip_through_to_dict():
    sc = load(ROOT / "scenarios" / "llama3-405b-pretraining.yaml")
    again = from_dict(to_dict(sc))
    assert again.training.phases == sc.training.phases and again.reliability == sc.reliability
    names = ["4M @ 4K", "8M @ 8K", "16M @ 8K", "128K long context", "anneal @ 128K"]
    assert [p.name for p in plan(sc)] == names
    assert sum(p.tokens for p in plan(sc)) == pytest.approx(15.6e12, rel=1e-3)


def test_a_phase_that_changes_the_gpus_derives_its_own_dp():
    """cluster.nodes 1 -> 2 in a phase without parallelism.dp: dp 1 -> 2 (re-derived, not copied)."""
    sc = _sc(**{"training.phases": [{"name": "wide", "steps": 1, "overrides": {"cluster.nodes": 2}}]})
    assert plan(sc)[0].scenario.dp == 2 * sc.dp


BAD = [
    ({"training.phases": [{"name": "a", "steps": 1}, {"name": "b", "steps": 1},
                          {"name": "c", "steps": 1, "overrides": {"parallelism.tpp": 2}}]},
     "training.phases[2].overrides.parallelism.tpp: unknown key"),
    ({"training.phases": [{"name": "a", "steps": 1, "tokens": 5}]},
     "training.phases[0]: phase 'a' must give exactly one of tokens or steps"),
    ({"training.phases": [{"name": "a", "steps": 1}], "training.total_tokens": 1e9},
     "training.total_tokens: is given with training.phases"),
    ({"training.phases": [{"name": "a", "steps": 1}, {"name": "a", "steps": 2}]},
     "training.phases[1].name: 'a' names two phases"),
    ({"training.phases": [{"name": "a", "steps": 1, "overrides": {"training.phases": []}}]},
     "training.phases[0].overrides.training.phases: cannot change within a run"),
    ({"training.phases": [{"name": "a", "steps": 1, "overrides": "x"}]},
     "training.phases[0].overrides: 'x' is not a mapping"),
    ({"reliability.pue": 0.5}, "reliability.pue: 0.5 is below the minimum 1"),
    ({"reliability.mtbf_gpu_hours": -3}, "reliability.mtbf_gpu_hours: -3.0 is below the minimum 1"),
]


@pytest.mark.parametrize(("overrides", "message"), BAD, ids=[m.split(":")[0] for _, m in BAD])
def test_bad_run_plan_is_a_one_line_error(overrides, message):
    with pytest.raises(ScenarioError) as err:
        from_dict(apply_overrides(load_raw(TEACH), overrides))
    assert str(err.value).startswith(message) and "\n" not in str(err.value)


def test_a_bad_phase_value_names_its_override_and_exits_2(capsys):
    """global_batch 13 on dp 2 is not whole micro-batches: found when the phase is built, named as
    the phase's override; the CLI prints one line and exits 2."""
    phases = "[{name: a, steps: 1}, {name: b, steps: 1, overrides: {training.global_batch: 13}}]"
    code = main(["run", "teaching-8gpu", "--set", f"training.phases={phases}"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err
    assert err.startswith("error: training.phases[1].overrides.training.global_batch:")


def test_failures_that_outpace_progress_are_a_one_line_error(capsys):
    """MTBF 1 GPU-hour on 8 GPUs (job MTBF 450 s) with a 1e5 s restart: goodput 0 is refused, exit 2."""
    code = main(["run", "teaching-8gpu", "--json", "--set", "training.total_tokens=1e9",
                 "--set", "reliability.mtbf_gpu_hours=1", "--set", "reliability.restart_s=1e5"])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert err.startswith("error: reliability.mtbf_gpu_hours: phase 'run': failures every 450 s")


def test_an_empty_dlrm_mlp_is_a_one_line_error(capsys):
    """Found by tests/test_fuzz.py once the run plan's keys shifted its draws: model.dlrm.bottom_mlp []
    raised IndexError (an internal error, exit 1) before the check of its last width."""
    assert main(["run", "dlrm-dcnv2", "--set", "model.dlrm.bottom_mlp=[]"]) == 2
    assert capsys.readouterr().err.startswith("error: model.dlrm.bottom_mlp: is empty")


def test_validate_checks_each_phase(capsys):
    """validate builds every phase's scenario: a bad phase value fails there (exit 2), a good plan
    says how many phases the run has."""
    assert main(["validate", "llama3-405b-pretraining"]) == 0
    assert capsys.readouterr().out.rstrip().endswith("; a run of 5 phases")
    phases = "[{name: a, steps: 1, overrides: {parallelism.tp: 3}}]"
    assert main(["validate", "teaching-8gpu", "--set", f"training.phases={phases}"]) == 2
    assert capsys.readouterr().err.startswith("error: training.phases[0]: phase 'a': ")


@pytest.mark.parametrize("override", [{"cluster.scale_out.fabric": "roce-100"}, {"hardware.gpu": "b200"},
                                      {"hardware.gpu": "a100-80gb"}])
def test_a_phase_on_other_hardware_derives_its_own_network(override):
    """A phase's overrides apply as --set applies them: a phase on roce-100 kept ib-ndr's 400 Gb/s
    and 0.94 efficiency (0.999 s a step against --set's 1.673 s), one on b200 the H100's 450 GB/s
    NVLink (0.852 s against 0.696 s), because the base the phases start from froze the derived
    network fields."""
    from explorer.simulate import simulate
    raw = {"model": {"preset": "llama3-8b"}, "hardware": {"gpu": "h100-sxm"},
           "cluster": {"gpus_per_node": 8, "nodes": 8}, "parallelism": {"tp": 4, "pp": 1},
           "training": {"global_batch": 64, "micro_batch": 1}}
    planned = plan(from_dict({**raw, "training": {**raw["training"], "phases": [
        {"name": "base", "tokens": 1e10}, {"name": "other", "tokens": 1e10, "overrides": override}]}}))
    alone = from_dict(apply_overrides(raw, override))
    assert planned[1].scenario.cluster == alone.cluster
    assert simulate(planned[1].scenario).iteration_time_s == simulate(alone).iteration_time_s


def test_failed_nodes_never_shorten_the_run():
    """16 failed nodes shrink Llama 3 405B's batch to 2,032 sequences: the run read 93.905 days
    against 93.930 without faults (the steps counted for the whole batch, timed for the smaller
    one).  Each phase's steps are now counted for the batch its survivors run."""
    from explorer.simulate import simulate
    path = ROOT / "scenarios" / "llama3-405b-pretraining.yaml"
    whole = run_total(load(path), simulate)
    failed = load(path, {"cluster.faults.failed_nodes": 16})
    hurt = run_total(failed, simulate)
    assert whole is not None and hurt is not None and hurt.days > whole.days
    for p in plan(failed):
        assert p.tokens_per_iteration < float(p.scenario.training.global_batch * p.scenario.model.seq_len)


def test_failed_nodes_leave_the_runs_gpu_hours():
    """A hunt found 16 failed nodes' 128 GPUs still counted in the run's GPU-hours and energy: the
    job holds each phase's GPUs (8,192 or 16,384) less the failed ones (the idle survivors of dropped
    replicas are still held), so a phase's GPU-hours are (its GPUs - 128) x its wall-clock hours."""
    from explorer.simulate import simulate
    path = ROOT / "scenarios" / "llama3-405b-pretraining.yaml"
    failed = load(path, {"cluster.faults.failed_nodes": 16})
    hurt = run_total(failed, simulate)
    assert hurt is not None
    for p, ph in zip(hurt.phases, plan(failed), strict=True):
        assert p.gpus == ph.scenario.gpus - 16 * 8 and ph.scenario.gpus in (8_192, 16_384)
        assert p.gpu_hours == pytest.approx(p.gpus * p.wall_s / 3600, rel=1e-12)
    whole = run_total(load(path), simulate)
    assert whole is not None
    assert [p.gpus for p in whole.phases] == [ph.scenario.gpus for ph in plan(load(path))]


@pytest.mark.parametrize("interval", [1, 100_000_000])
def test_an_interval_that_leaves_no_training_is_named(interval, capsys):
    """A checkpoint every second (shorter than a write) or every 3 years (past the job's MTBF):
    both were blamed on reliability.mtbf_gpu_hours; the field at fault is the interval."""
    sets = {"training.total_tokens": "1e9", "reliability.checkpoint_interval_s": interval,
            "reliability.mtbf_gpu_hours": 50000, "reliability.checkpoint_write_GBps": 10}
    assert main(["run", "teaching-8gpu", *(a for k, v in sets.items() for a in ("--set", f"{k}={v}"))]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: reliability.checkpoint_interval_s:") and "\n" not in err


def test_checkpoints_are_at_least_one_step_apart():
    """Checkpoints are taken between steps: Llama 3 405B's 128K phase read one every 12.09 s with
    12.93 s steps (Young/Daly's optimum below a step); the interval is now the step's."""
    from explorer.simulate import simulate
    total = run_total(load(ROOT / "scenarios" / "llama3-405b-pretraining.yaml"), simulate)
    assert total is not None
    for p in total.phases:
        assert p.goodput.interval_s >= p.iteration_s
