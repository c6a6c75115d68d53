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


def test_a_send_recv_across_nodes_has_a_nics_worth(capsys):
    """sendrecv_perf on 2 x 8 GPUs: only GPU 7 -> 8 (and the wrap-around 15 -> 0) leave a node, each
    the only stream through its node's NICs, so one 200 Gb/s NIC carries it (about 24 GB/s at the
    fabric's efficiency) whether the node has one NIC or eight; 1/8 of the one NIC gave 3.00 GB/s."""
    base = ["collective", "megatron-gpt3-175b", "--op", "send-recv", "--ranks", "16", "--sizes", "1G",
            "--json"]
    got = {}
    for nics in (1, 8):
        assert main([*base, "--set", f"cluster.scale_out.nics_per_node={nics}"]) == 0
        got[nics] = json.loads(capsys.readouterr().out)[0]["busbw_GBps"]
    assert got[1] == got[8]
    assert round(got[1], 2) == 23.98
