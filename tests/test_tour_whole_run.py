"""The whole-run tour (scenarios/tours/whole-run.yaml, issue 38: "What a 54-day pretraining run
spends its time on"): each narration's numbers against run --json's run_total and the iteration
they come from, one assertion per claim."""
from __future__ import annotations

import contextlib
import io
import json
from functools import cache

from explorer.cli import main
from explorer.share import check_tour
from explorer.teaching.tours import tours

TOUR = "whole-run"


def text(i: int) -> str:
    return " ".join(tours()[TOUR].steps[i - 1].text.split())


@cache
def run_json(i: int) -> dict:
    """run --json of step ``i``'s link."""
    params = tours()[TOUR].steps[i - 1].params
    args = ["run", params["scenario"], "--json"]
    for k, v in params.items():
        if k not in ("scenario", "view"):
            args += ["--set", f"{k}={v}"]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(args) == 0
    return json.loads(out.getvalue())


def test_the_tour_ships_as_the_issue_names_it():
    t = tours()[TOUR]
    assert t.title == "What a 54-day pretraining run spends its time on" and check_tour(t) == []


def test_the_run_phase_by_phase():
    rt = run_json(1)["run_total"]
    phases = {p["name"]: p for p in rt["phases"]}
    assert f"**{rt['days']:.1f} days**" in text(1)
    assert f"**{rt['gpu_hours'] / 1e6:.1f}M GPU-hours**" in text(1)
    assert f"{rt['tokens'] / 1e12:.1f}T tokens" in text(1)
    main_phase = phases["16M @ 8K"]
    assert main_phase["days"] == max(p["days"] for p in rt["phases"])
    assert f"**{main_phase['days']:.1f} days** of {main_phase['iterations']:,} steps of " \
           f"{main_phase['iteration_time_s']:.2f} s" in text(1)
    assert (phases["8M @ 8K"]["gpus"], main_phase["gpus"]) == (8192, 16384)


def test_one_step_of_the_main_phase():
    j, rt = run_json(2), run_json(1)["run_total"]
    main_phase = next(p for p in rt["phases"] if p["name"] == "16M @ 8K")
    assert j["iteration_time_s"] == main_phase["iteration_time_s"] and j["mfu"] == main_phase["mfu"]
    assert f"**{j['bubble_fraction']:.0%}**".replace("%", " %") in text(2)
    assert f"**{main_phase['exposed_comm_share']:.0%}**".replace("%", " %") in text(2)
    assert f"MFU of **{j['mfu']:.1%}**".replace("%", " %") in text(2)


def test_failures_if_restarts_were_free():
    p = next(p for p in run_json(3)["run_total"]["phases"] if p["name"] == "16M @ 8K")
    assert f"**{p['job_mtbf_h']:.1f} hours**" in text(3)
    assert f"**{p['checkpoint_interval_s']:.0f} s**" in text(3)
    assert f"goodput **{run_json(3)['run_total']['goodput']:.2%}**".replace("%", " %") in text(3)


def test_what_restarts_cost():
    a, b = run_json(1)["run_total"], run_json(4)["run_total"]
    assert f"**{b['goodput']:.2%}**".replace("%", " %") in text(4)
    assert f"**{b['days'] - a['days']:.1f} days** to **{b['days']:.1f}**" in text(4)
    assert f"**{(b['gpu_hours'] - a['gpu_hours']) / 1e6:.1f}M GPU-hours** more" in text(4)


def test_synchronous_checkpoints():
    a, b = run_json(1)["run_total"], run_json(5)["run_total"]
    assert b["goodput"] < a["goodput"]
    assert f"Goodput **{b['goodput']:.2%}**, **{b['days']:.1f} days**".replace("%", " %") in text(5)
