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
