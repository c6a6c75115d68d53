"""Korthikanti et al. 2022 Table 5 on its published layouts (issue 33, point 8: honest benches).

bench/korthikanti.py times the eight Table 5 rows; it must run each on the layout the paper
published, which for 175B and 530B is Megatron-LM's interleaved schedule with 3 virtual stages (it
ran them as 1F1B with one chunk per GPU, and quoted their folded times).  The published layouts
below are Calculon's transcription of Table 3 for its own validation of Table 5
(calculon-ai/calculon validation/seqsel/tab5/*.json, commit caa4b11: pipeline_interleaving 3 for
gpt3-175B and turing-530B, 1 for megatron-22B and megatron-1T; microbatch_size 4 for 22B, else 1;
activation_recompute full or attn_only; tensor_par_comm_type rs_ag = sequence parallelism), and
the seconds are Table 5's (calculon/llm/validation.py seqsel_tab5).
"""
from __future__ import annotations

import sys

import pytest

from explorer.estimate.fast import fast_path
from explorer.fidelity.korthikanti import table5_raw, table5_rows
from explorer.fold.arrays.fold import ArrayFold, attempt_arrays
from explorer.fold.plan import NotFolded, planned
from explorer.fold.steady import attempt_folded
from explorer.pricing.profile import row_profile
from explorer.scenario import from_dict
from explorer.simulate import simulate

from conftest import ROOT

# label -> (tp, pp, dp, vpp, micro-batch, global batch, schedule, recompute, SP), Table 5 seconds.
PUBLISHED = {
    "22B full": ((8, 1, 1, 1, 4, 4, "1f1b", "full", False), 1.42),
    "22B sel+SP": ((8, 1, 1, 1, 4, 4, "1f1b", "selective", True), 1.10),
    "175B full": ((8, 8, 1, 3, 1, 64, "interleaved", "full", False), 18.13),
    "175B sel+SP": ((8, 8, 1, 3, 1, 64, "interleaved", "selective", True), 13.75),
    "530B full": ((8, 35, 1, 3, 1, 280, "interleaved", "full", False), 49.05),
    "530B sel+SP": ((8, 35, 1, 3, 1, 280, "interleaved", "selective", True), 37.83),
    "1T full": ((8, 64, 1, 1, 1, 512, "1f1b", "full", False), 94.42),
    "1T sel+SP": ((8, 64, 1, 1, 1, 512, "1f1b", "selective", True), 71.49),
}
KEYS = ("tp", "pp", "dp", "vpp", "mb", "gbs", "schedule", "recompute", "SP")


def bench():
    """bench/korthikanti.py as a module."""
    sys.path.insert(0, str(ROOT / "bench"))
    import korthikanti
    return korthikanti


def test_the_table_holds_the_published_rows():
    rows = table5_rows()
    assert [r.label for r in rows] == list(PUBLISHED)
    for r in rows:
        want, seconds = PUBLISHED[r.label]
        got = (r.tp, r.pp, r.dp, r.vpp, r.micro_batch, r.global_batch, r.schedule, r.recompute,
               r.sequence_parallel)
        assert got == want, r.label
        assert r.measured_s == seconds and r.gpus == r.tp * r.pp * r.dp


def test_every_bench_row_runs_its_published_layout():
    """The scenarios the bench times carry the published layout: interleaved with 3 virtual
    stages for 175B and 530B, one chunk per GPU (1F1B) for 22B and 1T."""
    b = bench()
    labels = []
    for row in b.rows():
        sc = b.scenario(row)
        got = b.layout_of(sc)
        assert tuple(got[k] for k in KEYS) == PUBLISHED[row.label][0], row.label
        assert sc.parallelism.vpp == (3 if row.model in ("175B", "530B") else 1)
        assert sc.parallelism.schedule == ("interleaved" if row.model in ("175B", "530B") else "1f1b")
        labels.append(row.label)
    assert labels == list(PUBLISHED)


def test_the_bench_refuses_a_scenario_that_is_not_the_published_layout(monkeypatch):
    b = bench()
    row = next(r for r in b.rows() if r.model == "175B")

    def one_f_one_b(r, gb=None):
        raw = table5_raw(r, gb)
        raw["parallelism"].update(schedule="1f1b", vpp=1)
        return raw
    monkeypatch.setattr(b, "table5_raw", one_f_one_b)
    with pytest.raises(AssertionError, match="published layout"):
        b.scenario(row)


def scenario(label: str):
    return from_dict(table5_raw(next(r for r in table5_rows() if r.label == label)))


def test_why_the_interleaved_rows_are_not_folded():
    """175B: m = 64 micro-batches; the fold's first reduced count is one fill of pp x vpp = 24
    units plus 2, in whole groups of pp = 8: 32, then 40 and 48 (120 in all), more than the 64 / 1.5
    = 42 the fold may simulate (explorer/fold/plan.py).  Both folds say so, and simulate() runs
    every task."""
    sc = scenario("175B full")
    for got in (planned(sc), attempt_arrays(sc), attempt_folded(sc)):
        assert isinstance(got, NotFolded)
        assert "64 micro-batches" in got.reason and "32/40/48" in got.reason and "120 in all" in got.reason
        assert "exceed the 42 " in got.reason
    assert simulate(sc).fold is None


def test_the_1t_row_folds_over_arrays_and_its_estimate_extrapolates():
    sc = scenario("1T full")
    assert isinstance(attempt_arrays(sc), ArrayFold)
    assert fast_path(row_profile(sc)) is None
    # 175B: 64 units, not more than twice the shorter count 48 (two depths of 24 units, rounded to
    # whole rounds of pp = 8): evaluated at its own count.
    why = fast_path(row_profile(scenario("175B full")))
    assert why is not None and why.startswith("exact at its own 64 units") and "count 48" in why


def test_a_schedule_that_grows_in_two_places_says_so():
    raw = table5_raw(next(r for r in table5_rows() if r.label == "1T full"))
    raw["parallelism"]["schedule"] = "gpipe"
    got = planned(from_dict(raw))
    assert isinstance(got, NotFolded) and "gpipe schedule does not insert one period" in got.reason


def test_table_5_iteration_times_mean_4_max_7_percent_on_the_published_layouts():
    """Predicted seconds per iteration against Table 5 (issue 34's target: mean |error| <= 4 %, max
    <= 10 %; Calculon 3.65 % / 8.9 %).  Now +2.1, -5.0, +2.4, -1.1, +2.3, -0.5, +5.6, +5.4 %: mean
    3.1 %, max 5.6 %.  Before the backward element-wise traffic was counted kernel by kernel
    (explorer/workloads/transformer/layer.py: softmax backward 3 passes + dropout 2.5 over the score
    tensor, not twice the forward's 4.5) the full-recomputation rows were +7.0, +5.2, +4.1, +7.1 %:
    mean 4.1 %, max 7.1 %.  As 1F1B with one chunk per GPU, 175B and 530B with full recomputation
    came out +12.5 % and +11.7 %: the layout is part of the reproduction."""
    errors = []
    for row in table5_rows():
        got = simulate(from_dict(table5_raw(row))).iteration_time_s
        errors.append(abs(got / row.measured_s - 1))
        assert errors[-1] < 0.07, (row.label, got, row.measured_s)
    assert sum(errors) / len(errors) < 0.04, errors
