"""Replicas that synchronise every few steps (training.sync): sweeps and sensitivity compare the time
per step, not the inner step alone (a hunt found `sweep streaming-diloco-1gbps` over the WAN
bandwidth print 1.576 s on every row and call 0.1 Gb/s the fastest, and `sensitivity` read 1.000x
for a WAN that carries two thirds of the step)."""
from __future__ import annotations

import pytest

from explorer.cli import main
from explorer.design import open_base
from explorer.design.sensitivity import sensitivity
from explorer.design.sweep import sweep
from explorer.scenario import load
from explorer.simulate import simulate

from conftest import ROOT

NAME = "streaming-diloco-1gbps"
WAN = "cluster.scale_across.bandwidth_Gbps"


def test_a_sweep_ranks_the_amortised_step_and_each_row_is_run_s():
    res = sweep(open_base(NAME), {WAN: [0.1, 1, 100]})
    steps = {p.overrides[WAN]: p.figures["time_per_step_s"] for p in res.valid}
    for bw, step in steps.items():
        r = simulate(load(ROOT / "scenarios" / f"{NAME}.yaml", {WAN: bw}))
        assert step == pytest.approx(r.time_per_step_s, rel=1e-9)
        assert r.time_per_step_s > r.iteration_time_s            # the sync is not free here
    assert steps[0.1] > steps[1] > steps[100]


def test_the_sweep_text_calls_the_fastest_wan_the_fastest(capsys):
    assert main(["sweep", NAME, "--vary", f"{WAN}=0.1,1,100"]) == 0
    out = capsys.readouterr().out
    assert "fastest that fits: 1.576 s per step at cluster.scale_across.bandwidth_Gbps=100" in out
    assert "  step " in out.splitlines()[1] + " "


def test_sensitivity_speeds_up_the_step_the_wan_paces():
    s = sensitivity(open_base(NAME, {WAN: 0.1}))
    assert s.per_step
    row = next(r for r in s.rows if r.change == "2x scale-across bandwidth")
    assert row.speedup > 1.5 and row.step_s < s.base_time_s
    assert s.rows[0] is row


def test_diff_compares_the_step_when_replicas_synchronise_apart():
    """Found by a hunt: diff read "Iteration time +0.0%" beside "Tokens/s -66.5%" for a slower WAN."""
    from explorer.analysis.compare import compare
    a = simulate(load(ROOT / "scenarios" / f"{NAME}.yaml"))
    b = simulate(load(ROOT / "scenarios" / f"{NAME}.yaml", {WAN: 0.1}))
    first = compare(a, b).metrics[0]
    assert (first.key, first.label) == ("time_per_step_s", "Time per step")
    assert first.b / first.a == pytest.approx(b.time_per_step_s / a.time_per_step_s, rel=1e-12)
    assert first.b / first.a > 2.9
    plain = compare(a, a).metrics[0]
    assert plain.a == a.time_per_step_s
    ordinary = simulate(load(ROOT / "scenarios" / "teaching-8gpu.yaml"))
    assert compare(ordinary, ordinary).metrics[0].key == "iteration_time_s"


def test_the_compare_waterfall_says_its_categories_are_an_inner_steps():
    """The Compare view's cards read the time per step (+3.212 s) and its waterfall the iteration's
    categories (+0.0 ms): the waterfall's title says they are an inner step's."""
    from explorer.analysis.compare import compare
    from explorer.figures.compare import waterfall
    a = simulate(load(ROOT / "scenarios" / f"{NAME}.yaml"))
    b = simulate(load(ROOT / "scenarios" / f"{NAME}.yaml", {WAN: 0.1}))
    assert waterfall(compare(a, b)).layout.title.text.endswith("by category of an inner step")
