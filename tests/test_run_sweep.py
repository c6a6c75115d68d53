"""Sweeping a run plan (issue 38, "sweep the checkpoint interval or the batch ramp"): each
combination's run_total equals what run --json prints for it, the phases are simulated once per
distinct iteration, and Young/Daly's interval is where the goodput peaks."""
from __future__ import annotations

import csv
import json
import math

import pytest

from explorer.cli import main
from explorer.design import run_sweep
from explorer.run import checkpoint
from explorer.run.goodput import job_mtbf_s, young_daly_interval
from explorer.scenario import load_raw

from conftest import ROOT

TEACH = ROOT / "scenarios" / "teaching-8gpu.yaml"
SETS = ["--set", "training.total_tokens=1e10", "--set", "reliability.mtbf_gpu_hours=5000"]
INTERVALS = [10, 60, 300, 1200, 3600]


def _out(capsys, *args: str) -> str:
    assert main(list(args)) == 0
    return capsys.readouterr().out


def test_each_row_is_the_run_of_its_combination(capsys):
    rows = json.loads(_out(capsys, "sweep", "teaching-8gpu", *SETS, "--vary",
                           f"reliability.checkpoint_interval_s={','.join(map(str, INTERVALS))}", "--json"))
    for row, t in zip(rows, INTERVALS, strict=True):
        rt = json.loads(_out(capsys, "run", "teaching-8gpu", *SETS, "--set",
                             f"reliability.checkpoint_interval_s={t}", "--json"))["run_total"]
        assert row["run_total"] == {k: rt[k] for k in run_sweep.RUN_FIGURES}
    # Too often pays the write too often, too rarely loses more work to each failure: the goodput
    # rises, then falls (Young 1974), with the same iterations throughout.
    good = [r["run_total"]["goodput"] for r in rows]
    peak = good.index(max(good))
    assert 0 < peak < len(good) - 1 and len({r["iteration_time_s"] for r in rows}) == 1


def test_the_peak_is_near_young_daly(capsys):
    from explorer.scenario import load
    sc = load(TEACH, {"training.total_tokens": 1e10, "reliability.mtbf_gpu_hours": 5000})
    tau = young_daly_interval(checkpoint.stall_s(sc), job_mtbf_s(sc))
    assert tau == math.sqrt(2 * checkpoint.stall_s(sc) * 5000 * 3600 / 8)
    lo, hi = round(tau / 2), round(tau * 2)
    rows = json.loads(_out(capsys, "sweep", "teaching-8gpu", *SETS, "--vary",
                           f"reliability.checkpoint_interval_s={lo},{round(tau)},{hi}", "--json"))
    good = [r["run_total"]["goodput"] for r in rows]
    assert good[1] >= max(good[0], good[2])


def test_phases_are_simulated_once_per_distinct_iteration(monkeypatch, capsys):
    calls = []
    import explorer.simulate as sim
    real = sim.simulate
    monkeypatch.setattr(sim, "simulate", lambda sc, *a, **k: calls.append(1) or real(sc, *a, **k))
    _out(capsys, "sweep", "llama3-405b-pretraining", "--vary", "reliability.restart_s=0,300,600,1200")
    # Five phases, four distinct iterations (the anneal runs the 128K phase's): 4 simulations, not 20.
    assert len(calls) == 4


def test_the_text_and_csv_carry_the_run(capsys, tmp_path):
    out = _out(capsys, "sweep", "teaching-8gpu", *SETS, "--vary", "reliability.checkpoint_interval_s=60,600",
               "--csv", str(tmp_path / "s.csv"))
    assert "run days" in out and "shortest run that fits:" in out
    with open(tmp_path / "s.csv", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert {"run_days", "run_gpu_hours", "run_goodput", "run_energy_MWh"} <= set(rows[0])


def test_no_run_plan_no_run_columns(capsys):
    out = _out(capsys, "sweep", "teaching-8gpu", "--vary", "communication.bucket_MB=25,50")
    assert "run days" not in out


def test_too_many_runs_are_left_out_in_one_line(monkeypatch):
    raw = load_raw(TEACH)
    raw = {**raw, "training": {**raw["training"], "total_tokens": 1e9}}
    monkeypatch.setattr(run_sweep, "MAX_RUNS", 1)
    from explorer.design.sweep import Point
    pts = [Point({"a": 1}, True, figures={"x": 1}), Point({"a": 2}, True, figures={"x": 2})]
    out, note = run_sweep.with_runs(raw, pts, lambda sc: pytest.fail("simulated"))
    assert out == tuple(pts) and note and note.startswith("whole-run columns left out: 2 valid")


# --- A batch ramp: a phase's fields by index (training.phases[i].tokens / .overrides.KEY) ---
RAMP = [{"name": "ramp", "tokens": 2e9, "overrides": {"training.global_batch": 8}},
        {"name": "full batch", "tokens": 8e9}]
PHASED = ["--set", f"training.phases={json.dumps(RAMP)}"]


def test_a_batch_ramp_sweeps_by_phase_index(capsys):
    """Each row of a sweep over the ramp phase's batch and length is the run of that plan written
    out (the same run_total as run --json on the edited phases list); a shorter ramp at the small
    batch, where the step time per token is higher, makes the run shorter."""
    rows = json.loads(_out(capsys, "sweep", "teaching-8gpu", *PHASED, "--vary",
                           "training.phases[0].overrides.training.global_batch=8,16", "--vary",
                           "training.phases[0].tokens=1e9,2e9", "--json"))
    assert [r["valid"] for r in rows] == [True] * 4
    for row in rows:
        ov = row["overrides"]
        batch = ov["training.phases[0].overrides.training.global_batch"]
        plan = [{**RAMP[0], "tokens": ov["training.phases[0].tokens"],
                 "overrides": {"training.global_batch": batch}}, RAMP[1]]
        rt = json.loads(_out(capsys, "run", "teaching-8gpu", "--set", f"training.phases={json.dumps(plan)}",
                             "--json"))["run_total"]
        assert row["run_total"] == {k: rt[k] for k in run_sweep.RUN_FIGURES}
    days = {(r["overrides"]["training.phases[0].overrides.training.global_batch"],
             r["overrides"]["training.phases[0].tokens"]): r["run_total"]["days"] for r in rows}
    # The default batch (16) runs faster per token than 8 (fewer, fuller steps), so the ramp costs days.
    assert days[(8, 2e9)] > days[(8, 1e9)] > days[(16, 1e9)]
    # At the default batch both phases run the same step: the days follow the tokens, 10e9 / 9e9 (to
    # within a step: a phase runs whole iterations).
    assert days[(16, 2e9)] / days[(16, 1e9)] == pytest.approx(10 / 9, rel=1e-5)


def test_the_sweep_names_a_phase_column_by_its_index(capsys):
    out = _out(capsys, "sweep", "teaching-8gpu", *PHASED, "--vary", "training.phases[1].tokens=4e9,8e9")
    assert "phases[1].tokens" in out.splitlines()[1]


@pytest.mark.parametrize(("key", "says"), [
    ("training.phases[5].tokens=1e9", "training.phases[5].tokens: the scenario has 2 phases: index 0 .. 1"),
    ("training.phases[0].overrides.training.bogus=1", "'training.bogus' is not a key of --set"),
    ("training.phases[0].overrides.reliability.restart_s=5", "cannot change within a run"),
])
def test_a_bad_phase_path_is_a_one_line_error(capsys, key, says):
    assert main(["run", "teaching-8gpu", *PHASED, "--set", key]) == 2
    err = capsys.readouterr().err.strip()
    assert says in err and "\n" not in err


def test_a_phase_path_without_phases_says_so(capsys):
    assert main(["run", "teaching-8gpu", "--set", "training.phases[0].tokens=1e9"]) == 2
    assert "has no training.phases to index" in capsys.readouterr().err


def test_a_phase_length_replaces_the_other_length():
    from explorer.scenario import apply_overrides
    raw = apply_overrides({"training": {"phases": [{"name": "a", "steps": 10}]}},
                          {"training.phases[0].tokens": 5e8})
    assert raw["training"]["phases"] == [{"name": "a", "tokens": 5e8}]
