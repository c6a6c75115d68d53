"""`collective` reads the scenario's communication.algorithm unless --algorithm names one, and says
when the algorithm asked for cannot run and ring ran instead (a hunt found --set
communication.algorithm=ring printing the auto table, and --algorithm nvls-tree on A100s printing
ring rows unsaid)."""
from __future__ import annotations

import json

from explorer.cli import main

BASE = ["collective", "megatron-gpt3-175b", "--op", "all-reduce", "--ranks", "16", "--sizes", "1M"]


def _row(capsys, *extra) -> dict:
    assert main([*BASE, "--json", *extra]) == 0
    return json.loads(capsys.readouterr().out)[0]


def test_the_scenarios_algorithm_applies_unless_the_flag_names_one(capsys):
    auto = _row(capsys)
    assert (auto["algorithm"], auto["protocol"]) == ("tree", "LL128")
    ring = _row(capsys, "--set", "communication.algorithm=ring")
    assert ring["algorithm"] == "ring" and ring["time_s"] > auto["time_s"]
    assert _row(capsys, "--set", "communication.algorithm=ring", "--algorithm", "auto") == auto


def test_an_algorithm_that_cannot_run_is_said(capsys):
    row = _row(capsys, "--algorithm", "nvls-tree")       # A100s: no NVLink SHARP
    assert row["algorithm"] == "ring" and row["requested"] == "nvls-tree"
    assert _row(capsys)["requested"] == ""
    assert main([*BASE, "--algorithm", "nvls-tree"]) == 0
    said = "ring/LL128 (scale-out latency) (nvls-tree cannot run here)"
    assert capsys.readouterr().out.rstrip().endswith(said)
