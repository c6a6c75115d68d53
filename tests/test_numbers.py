"""Rates and throughputs in the text outputs keep their significant digits (explorer/numbers.py):
a full-graph GNN's 0.121 partition passes per second printed as "0", its label run into the value
("partition passes/s0"), and diff and the HTML report read "TFLOP/s per GPU 0"."""
from __future__ import annotations

import pytest

from explorer.cli import main
from explorer.numbers import figure
from explorer.report.cards import cards
from explorer.scenario import load
from explorer.simulate import simulate

from conftest import ROOT

GNN = ROOT / "scenarios" / "gnn-sage-papers100m.yaml"

FULLGRAPH = {"model.gnn.mode": "fullgraph", "training.global_batch": 16, "training.micro_batch": 1}


@pytest.mark.parametrize("x, places, small, want", [
    (0.1212, 0, 100.0, "0.121"), (7.8712, 0, 100.0, "7.87"), (12.94, 0, 100.0, "12.9"),
    (308313.4, 0, 100.0, "308,313"), (0.0, 0, 100.0, "0"), (326.44, 1, 1.0, "326.4"),
    (0.2591, 1, 1.0, "0.259"), (5.04, 1, 1.0, "5.0"), (-0.01423, 1, 1.0, "-0.0142"),
])
def test_figure_keeps_three_significant_digits_below_the_threshold(x, places, small, want):
    assert figure(x, places, small=small) == want


def test_a_signed_difference_keeps_its_sign_and_digits():
    assert figure(7.75, signed=True) == "+7.75" and figure(-130.2, signed=True) == "-130"
    assert figure(0.0142, 1, signed=True, small=1.0) == "+0.0142"


def test_run_prints_a_full_graph_gnns_rate_with_its_digits_and_a_space(capsys):
    args = ["run", "gnn-sage-papers100m"] + [f"--set={k}={v}" for k, v in FULLGRAPH.items()]
    assert main(args) == 0
    out = capsys.readouterr().out
    res = simulate(load(GNN, FULLGRAPH))
    assert res.tokens_per_s < 1          # the case: less than one pass per second
    assert f"partition passes/s {res.tokens_per_s:.3g}\n" in out
    assert f"TFLOP/s per GPU  {res.tflops_per_gpu:.3g}  " in out


def test_the_reports_cards_print_small_rates_with_their_digits():
    sc = load(GNN, FULLGRAPH)
    j = simulate(sc).to_json_dict()
    got = {c.label: c.text for c in cards(j, sc)}
    assert got["Partition passes/s"] == f"{j['tokens_per_s']:.3g}" != "0"
    assert got["TFLOP/s per GPU"] == f"{j['tflops_per_gpu']:.3g}" != "0"


@pytest.mark.parametrize("s, want", [(0.0036266, "3.63 ms"), (0.12, "120 ms"), (0.9999, "1 s"),
                                     (12.94, "12.9 s"), (1234.5, "1,234 s"), (0.0, "0 ms")])
def test_seconds_text_keeps_three_digits_in_the_unit_that_reads_best(s, want):
    from explorer.numbers import seconds_text
    assert seconds_text(s) == want


def test_time_scale_is_milliseconds_only_when_every_value_is_below_a_second():
    from explorer.numbers import time_scale
    assert time_scale([0.003, 0.9, float("nan")]) == (1e3, "ms")
    assert time_scale([0.003, 1.2]) == (1.0, "s") and time_scale([]) == (1.0, "s")
