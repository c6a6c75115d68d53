"""A run plan's phases are judged against the GPU's memory, not only the base scenario
(run/total.PhaseTotal.fits; run/report.run_json; design/run_sweep.with_runs; design/search._simulate).

A hunt's case: teaching-8gpu with a second phase at seq_len 131,072 on the layout pp 1 · dp 8 · mb 2 ·
ZeRO 1.  The base needs 19.0 GB of the H100's 85.9 and the long phase 502.5 GB; run had printed the
19.0 GB, no warning and memory_over_capacity false, sweep called a plan whose long phase needs 227.8
GB "the shortest run that fits", and search ranked the 502.5 GB plan first."""
from __future__ import annotations

import json

import pytest

from explorer.cli import main
from explorer.scenario import apply_overrides, from_dict, load
from explorer.share import preset_raw
from explorer.simulate import simulate

PLAN = ("training.phases=[{name: short, tokens: 1e9}, "
        "{name: long, tokens: 1e9, overrides: {model.seq_len: 131072}}]")
LAYOUT = ["parallelism.pp=1", "parallelism.dp=8", "training.micro_batch=2", "parallelism.zero=1"]


def _sets(*xs: str) -> list[str]:
    return [a for x in xs for a in ("--set", x)]


def test_run_reports_a_phase_over_memory(capsys):
    assert main(["run", "teaching-8gpu", *_sets(PLAN, *LAYOUT), "--json"]) == 0
    j = json.loads(capsys.readouterr().out)
    short, long_ = j["run_total"]["phases"]
    assert short["fits"] and short["memory_GB"] == pytest.approx(j["memory_GB"]["total"], rel=1e-9)
    assert not long_["fits"] and long_["memory_GB"] == pytest.approx(502.5, abs=0.1)
    assert long_["memory_capacity_GB"] == pytest.approx(85.9, abs=0.05)
    assert j["run_total"]["fits"] is False and j["memory_over_capacity"] is True
    assert j["warning_kinds"][-1] == "memory" and "phase 'long' needs 502.5 GB" in j["warnings"][-1]
    assert main(["run", "teaching-8gpu", *_sets(PLAN, *LAYOUT)]) == 0
    assert "warning: memory: phase 'long' needs 502.5 GB per GPU of the 85.9 GB" in capsys.readouterr().out
    # Without the long phase the same layout fits and says nothing.
    assert main(["run", "teaching-8gpu", *_sets(*LAYOUT), "--json"]) == 0
    j = json.loads(capsys.readouterr().out)
    assert not j["memory_over_capacity"] and "run_total" not in j


def test_sweep_calls_a_plan_with_a_phase_over_memory_unfit(capsys):
    assert main(["sweep", "teaching-8gpu", *_sets(PLAN), "--vary", "training.recompute=none,full",
                 "--json"]) == 0
    rows = {r["overrides"]["training.recompute"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows["none"]["fits"] is False and rows["full"]["fits"] is True
    long_none = simulate(load("teaching-8gpu", {"model.seq_len": 131072}))
    assert long_none.memory_over_capacity           # the reason: its long phase does not fit


@pytest.mark.slow
def test_search_ranks_only_plans_whose_every_phase_fits(capsys):
    assert main(["search", "teaching-8gpu", *_sets(PLAN), "--schedules", "1f1b", "--zero", "0,1",
                 "--recompute", "none,full", "--top", "3", "--json"]) == 0
    top = json.loads(capsys.readouterr().out)
    assert len(top) == 3
    raw = apply_overrides(preset_raw("teaching-8gpu"), {})
    for row in top:
        ov = {k: v for k, v in row["overrides"].items() if k != "training.phases"}
        long_ = simulate(from_dict(apply_overrides(raw, {**ov, "model.seq_len": 131072})))
        mem, cap = long_.binding_memory
        # The row's free memory is the long phase's (the tightest), with the 1 GB headroom.
        assert not long_.memory_over_capacity and row["fits"]
        assert row["free_GB"] == pytest.approx((cap - mem.total) / 1e9, abs=1e-6) and row["free_GB"] >= 1.0
    # The counts line says its memory counts are the base scenario's.
    assert main(["search", "teaching-8gpu", *_sets(PLAN), "--schedules", "1f1b", "--top", "1"]) == 0
    assert "the 2 run-plan phases' is judged on the layouts priced exactly" in capsys.readouterr().out


def test_the_run_view_says_which_phase_does_not_fit():
    """The app's Run view: an error above the cards names the phase, and its row says over memory."""
    from app_support import run_app
    at = run_app(scenario="teaching-8gpu", view="run", **{"training.phases": json.dumps(
        [{"name": "short", "tokens": 1e9}, {"name": "long", "tokens": 1e9,
                                             "overrides": {"model.seq_len": 131072}}]),
        "parallelism.pp": "1", "parallelism.dp": "8", "training.micro_batch": "2", "parallelism.zero": "1"})
    assert not at.exception
    assert any("phase 'long' needs 502.5 GB per GPU" in e.value for e in at.error)
    table = next(d.value for d in at.dataframe)
    assert list(table["memory (GB)"]) == [table["memory (GB)"][0], "502.5 (over)"]
