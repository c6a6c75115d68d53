"""A layout named best or fastest leaves the verdict's 1 GB headroom free, in every command that
names one (analysis/verdict.DEFAULT_HEADROOM_GB; search already did): sweep's "fastest that fits"
and advise's best.  A hunt found sweep naming a layout with 0.11 GB free and advise one with
0.26 GB; and advise wrote "0.92x faster, -8% less time" when its best was slower than a naive
placement that does not fit."""
from __future__ import annotations

import json

import pytest

from explorer.analysis.verdict import DEFAULT_HEADROOM_GB
from explorer.cli import main
from explorer.commands.advise import gain_line
from explorer.design.advise import Advice, AdviceResult


def test_sweep_names_the_fastest_layout_with_headroom(capsys):
    """teaching-8gpu on 31.6 GB GPUs (31.6 x 2^30 = 33.93 GB): micro-batch 2 on pp 1 needs 33.8 GB
    (0.11 GB free), the fastest row that fits; micro-batch 1 on pp 2 is the fastest with 1 GB."""
    args = ["sweep", "teaching-8gpu", "--vary", "training.micro_batch=1,2", "--vary", "parallelism.pp=1,2",
            "--set", "hardware.gpu.memory_GB=31.6"]
    cap = 31.6 * 2**30 / 1e9
    assert main([*args, "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    free = {(r["overrides"]["training.micro_batch"], r["overrides"]["parallelism.pp"]):
            cap - r["memory_GB_total"] for r in rows}
    assert 0 < free[(2, 1)] < DEFAULT_HEADROOM_GB and all(r["fits"] for r in rows)
    fastest = min(rows, key=lambda r: r["iteration_time_s"])
    assert fastest["overrides"] == {"training.micro_batch": 2, "parallelism.pp": 1}
    roomy = min((r for r in rows if cap - r["memory_GB_total"] >= DEFAULT_HEADROOM_GB),
                key=lambda r: r["iteration_time_s"])
    assert main(args) == 0
    text = capsys.readouterr().out
    want = ", ".join(f"{k}={v}" for k, v in roomy["overrides"].items())
    assert "fastest that fits with 1 GB to spare: " in text and f" at {want}" in text
    assert f"(faster but with {free[(2, 1)]:.2f} GB free" in text


def _advice(t: float, fits: bool, free: float, naive: bool = False) -> Advice:
    return Advice(None, "x", {}, {"iteration_time_s": t, "fits": fits, "free_GB": free}, {}, None, None,
                  naive=naive)


def test_advise_ranks_placements_with_headroom_first_and_words_a_slower_best():
    assert _advice(1.0, True, 0.26).roomy is False and _advice(1.0, True, 1.5).roomy is True
    slower = AdviceResult(datacenters=2, gpus=16, enumerated=1, valid=1, fit=1, reasons=(),
                          top=(_advice(3.35, True, 5.0),), naive=_advice(3.083, False, -10.0, naive=True),
                          own=None, seconds={})
    line = gain_line(slower)
    assert line.endswith("1.09x slower, 9% more time per iteration; the naive placement cannot run as set")
    assert "faster" not in line


@pytest.mark.slow
def test_advise_best_leaves_the_headroom(capsys):
    assert main(["advise", "two-datacenters", "--top", "3", "--set", "hardware.gpu.memory_GB=54",
                 "--json"]) == 0
    top = json.loads(capsys.readouterr().out)
    assert top[0]["fits"] and top[0]["free_GB"] >= DEFAULT_HEADROOM_GB
