"""Published throughput: Megatron-LM SC21 Table 1 with one global set of fitted defaults, and the
sourced training runs of explorer/data/reference/training_runs.csv (the fidelity report)."""
from __future__ import annotations

from functools import cache

import pytest

from explorer.fidelity.calibration import megatron_rows, megatron_scenario, read_csv
from explorer.fidelity.report import ReferenceRow, summary
from explorer.fidelity.training import sourced_rows
from explorer.simulate import simulate


@cache
def _sourced() -> tuple[ReferenceRow, ...]:
    return tuple(sourced_rows())


@pytest.mark.parametrize("row", megatron_rows(), ids=lambda r: f"{r.params_billion:g}B-{r.gpus}gpus")
def test_megatron_sc21_table1_tflops_within_15_percent(row):
    # Narayanan et al. SC21 Table 1 (calibration/megatron_sc21_table1.csv): achieved TFLOP/s per
    # A100, counted with Eq. 3 (recompute included) — the convention of tflops_per_gpu.
    r = simulate(megatron_scenario(row))
    assert r.tflops_per_gpu == pytest.approx(row.achieved_tflops_per_gpu, rel=0.15)


def test_megatron_fit_is_good_on_average():
    # The global constants were fitted to this table (bench/calibrate.py): mean error below 5%.
    errors = [abs(simulate(megatron_scenario(r)).tflops_per_gpu / r.achieved_tflops_per_gpu - 1)
              for r in megatron_rows()]
    assert sum(errors) / len(errors) < 0.05


HELD_OUT = ("GPT3-175B", "GPT-3 175B", "DeepSeek", "MT-NLG", "BLOOM", "OPT-")


def test_sourced_rows_keep_a_third_for_validation_and_none_of_the_held_out_set():
    # Issue 10 "Data": at least a third of what is sourced is validation, never fitted to; GPT-3 175B
    # FP8 and Llama 3 70B FP8 rows of NVIDIA's tables, DeepSeek-V3, MT-NLG, BLOOM and OPT are held out.
    rows = read_csv("training_runs.csv")
    assert len(rows) >= 15
    assert 3 * sum(r["role"] == "validation" for r in rows) >= len(rows)
    assert all(r["role"] in ("calibration", "validation") and r["source"] for r in rows)
    for r in rows:
        assert not any(h.lower() in (r["label"] + r["model_preset"]).lower() for h in HELD_OUT), r["label"]
        assert not (r["dtype"] == "fp8" and r["model_preset"] == "llama3-70b"), r["label"]


# The sources of issue 10 (NeMo 24.07, Megatron-Bridge 26.02, Llama 3 Table 4, torchtitan's docs).
# Issue 34 holds NeMo/Megatron-Bridge and torchtitan's tables out (validation only) and adds rows of
# other sources (MosaicML's llm-foundry benchmarks, Nemotron-4 340B) whose errors the fidelity report
# prints by regime (tests/test_error_band.py); the bounds below are issue 10's, on issue 10's rows.
ISSUE_10_GROUPS = ("NeMo 24.07", "Megatron-Bridge 26.02", "Llama 3 Table 4", "torchtitan")


def _issue_10() -> list[ReferenceRow]:
    return [r for r in _sourced() if r.group.startswith(ISSUE_10_GROUPS)]


def test_every_issue_10_run_is_predicted_within_21_percent():
    # Every row, calibration or validation, within 21% (the issue's starting point was 81% off at
    # worst, its target 25%; today's worst is NeMo's Llama 3 8B with CP 2 at +20.5%, +19% before the
    # in-node pipeline fill and the GEMM refit that came with it).
    worst = max(_issue_10(), key=lambda r: abs(r.error))
    assert abs(worst.error) < 0.21, f"{worst.group}: {worst.label} {worst.error:+.1%}"


def test_issue_10_runs_stay_near_the_issue_10_target():
    # Issue 10 "Targets": mean |error| <= 10%, max <= 25% on its 8 validation rows (9.8%, 11.9%).
    # Issue 34 made its 8 calibration rows validation too (held out): 16 validation rows, 17 in all,
    # today mean 10.8%, max 20.5%; kept within issue 34's training-run target mean (12%).
    mean, worst, n = summary(_issue_10())
    assert n == 17
    assert mean <= 0.12 and worst <= 0.25
