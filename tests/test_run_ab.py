"""Two run plans side by side (issue 38, "compare two run plans (A/B) by days and GPU-hours"):
``diff`` carries each side's run_total exactly as run --json prints it, and their difference."""
from __future__ import annotations

import json

import pytest

from explorer.cli import main

MTBF = ["--set", "reliability.mtbf_gpu_hours=50000"]
SETS = ["--set", "training.total_tokens=1e9", *MTBF]


def _json(capsys, *args: str) -> dict:
    assert main(list(args)) == 0
    return json.loads(capsys.readouterr().out)


def test_diff_carries_each_run_total_as_run_prints_it(capsys):
    d = _json(capsys, "diff", "teaching-8gpu", *SETS, "--set-b", "training.total_tokens=2e9", "--json")
    a = _json(capsys, "run", "teaching-8gpu", *SETS, "--json")["run_total"]
    b = _json(capsys, "run", "teaching-8gpu", *MTBF, "--set", "training.total_tokens=2e9",
              "--json")["run_total"]
    assert d["a"]["run_total"] == a and d["b"]["run_total"] == b
    # Twice the tokens on the same step: twice the days and GPU-hours, the same goodput.
    assert d["delta_run"]["days"] == pytest.approx(a["days"], rel=1e-9)
    assert d["delta_run"]["gpu_hours"] == pytest.approx(b["gpu_hours"] - a["gpu_hours"], rel=1e-12)
    assert d["delta_run"]["goodput"] == pytest.approx(0.0, abs=1e-12)


def test_a_slower_restart_costs_days_in_the_text(capsys):
    assert main(["diff", "teaching-8gpu", *SETS, "--set-b", "reliability.restart_s=3600"]) == 0
    out = capsys.readouterr().out
    block = out[out.index("whole run"):].splitlines()
    rows = {line.split()[0]: line.split() for line in block[1:]}
    assert set(rows) == {"Days", "GPU-hours", "Goodput", "Energy"}
    assert rows["Days"][3].startswith("+") and rows["Goodput"][3].startswith("-")


def test_no_run_plan_no_run_block(capsys):
    d = _json(capsys, "diff", "teaching-8gpu", "--set-b", "communication.bucket_MB=50", "--json")
    assert "delta_run" not in d and "run_total" not in d["a"]
    assert main(["diff", "teaching-8gpu", "--set-b", "training.total_tokens=1e9"]) == 0
    assert "whole run: only B has a run plan" in capsys.readouterr().out


def test_the_compare_view_shows_both_runs(capsys):
    """The app's Compare view: the same whole-run figures as diff, B being A plus its overrides."""
    from app_support import run_app
    at = run_app(scenario="teaching-8gpu", view="compare", **{"training.total_tokens": "1e9",
                 "reliability.mtbf_gpu_hours": "50000", "b.reliability.restart_s": "3600"})
    assert not at.exception
    table = next(d.value for d in at.dataframe if "B − A" in d.value.columns)
    d = _json(capsys, "diff", "teaching-8gpu", *SETS, "--set-b", "reliability.restart_s=3600", "--json")
    a, b = d["a"]["run_total"], d["b"]["run_total"]
    days = table.set_index("").loc["Days"]
    assert (days["A"], days["B"]) == (f"{a['days']:,.2f}", f"{b['days']:,.2f}")
    assert table.set_index("").loc["Goodput"]["B − A"] == f"{(b['goodput'] - a['goodput']) * 100:+.2f} pt"
