"""DiLoCo's loss against data-parallel training from its published scaling laws
(explorer/variants/lowcomm/loss_law.py; Charles et al. 2025, arXiv 2503.09799), shown beside the
simulated speed-up per step: the fitted laws against the paper's measured Table 4 (in sample) and
its 4B / 10B runs of Table 5 (out of sample), the closed form of the compute ratio, and the
figures as the CLI, run --json and the whole run's loss estimate carry them."""
from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from explorer.cli import main
from explorer.run.convergence import equivalent_tokens
from explorer.scenario import load
from explorer.variants.lowcomm.loss_law import DATA_PARALLEL, DilocoLoss, diloco_loss, fitted_loss

# Charles et al. 2025, Table 4: the best final C4 evaluation loss of each model size, data-parallel
# and DiLoCo with M = 1, 2, 4, 8 replicas (H = 30, D = 20 N).
TABLE4 = {35e6: (3.485, (3.482, 3.508, 3.554, 3.621)), 90e6: (3.167, (3.162, 3.182, 3.213, 3.265)),
          180e6: (2.950, (2.943, 2.957, 2.981, 3.019)), 335e6: (2.784, (2.777, 2.788, 2.808, 2.841)),
          550e6: (2.653, (2.645, 2.657, 2.673, 2.698)), 1.3e9: (2.460, (2.451, 2.464, 2.472, 2.493)),
          2.4e9: (2.326, (2.317, 2.323, 2.332, 2.351))}
# Table 5: 4B and 10B trained with the laws' hyperparameters (data-parallel, M = 1, 2, 4).
TABLE5 = {4e9: (2.224, (2.219, 2.220, 2.230)), 10e9: (2.090, (2.086, 2.086, 2.096))}


def test_the_fits_give_table_4s_losses_and_differences():
    """Every cell of Table 4 within 1.1 % in loss, and DiLoCo's difference to data-parallel within
    0.3 percentage points (the paper's own fit; measured worst 0.28 points: M = 2 at 180M)."""
    for n, (dp, diloco) in TABLE4.items():
        assert fitted_loss(n, None) == pytest.approx(dp, rel=0.011)
        for m, loss in zip((1, 2, 4, 8), diloco, strict=True):
            assert fitted_loss(n, m) == pytest.approx(loss, rel=0.011)
            assert diloco_loss(n, m, 30).relative_loss == pytest.approx(loss / dp - 1, abs=0.003), (n, m)


def test_out_of_sample_4b_and_10b_within_07_points():
    """Table 5's runs, which the fits did not see: within 0.6 points (worst M = 4 at 10B, predicted
    -0.22 % — M = 2's, as the fits cross there — measured +0.29 %); M = 1 and M = 2 come out below
    data-parallel, as measured."""
    for n, (dp, diloco) in TABLE5.items():
        for m, loss in zip((1, 2, 4), diloco, strict=True):
            est = diloco_loss(n, m, 30)
            assert est.relative_loss == pytest.approx(loss / dp - 1, abs=0.006), (n, m)
            assert est.caveats == ()
        assert diloco_loss(n, 1, 30).relative_loss < 0 and diloco_loss(n, 2, 30).relative_loss < 0


def test_the_compute_ratio_is_the_closed_form():
    """Along D = 20 N (C = 120 N^2) the loss L_M(N) is data-parallel's at N' = (L_M / A)^(1/alpha):
    the ratio is (N / N')^2.  1.3B, M = 8: L = 21.051 x 1.3e9^-0.1018, so about 1.31x the tokens."""
    n = 1.3e9
    a, alpha = DATA_PARALLEL
    loss = 21.051 * n ** -0.1018
    want = (n / (loss / a) ** (1 / alpha)) ** 2
    est = diloco_loss(n, 8, 30)
    assert est.compute_ratio == pytest.approx(want, rel=1e-12)
    assert est.compute_ratio == pytest.approx(1.314, abs=0.001)
    # Round trip through JSON, as the app and the CLI keep it.
    assert DilocoLoss.from_json(json.loads(json.dumps(est.to_json_dict()))) == est


@settings(max_examples=200, deadline=None)
@given(st.floats(35e6, 10e9), st.integers(1, 64))
def test_more_replicas_never_lower_the_loss_and_the_ratio_follows_the_loss(n, m):
    """Within the fitted range, one more replica never lowers the estimated loss (as every measured
    row of Tables 4 and 5), and the compute ratio is above 1 exactly when the loss is."""
    a, b = diloco_loss(n, m, 30), diloco_loss(n, m + 1, 30)
    assert b.loss_ratio >= a.loss_ratio * (1 - 1e-12)
    assert fitted_loss(n, m + 1) >= fitted_loss(n, m)
    assert (a.compute_ratio > 1) == (a.loss_ratio > 1)
    assert math.isfinite(a.compute_ratio) and a.compute_ratio > 0


def test_what_lies_outside_the_fit_is_said():
    """405B with H = 500 trained 38 tokens per parameter: estimated at 10B, and each departure named."""
    est = diloco_loss(405e9, 8, 500, 15.6e12 / 405e9)
    at10 = diloco_loss(10e9, 8, 30)
    assert est == DilocoLoss(405e9, 8, 500, at10.loss_ratio, at10.compute_ratio, est.caveats)
    text = " ".join(est.caveats)
    assert "estimated at 10B" in text and "H = 500" in text and "tokens per parameter" in text
    assert diloco_loss(3e9, 3, 30).caveats == (
        "M = 3 is between or beyond the fitted 1, 2, 4, 8 (interpolated)",)


def _json(capsys, *args) -> dict:
    assert main([*args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_the_run_shows_the_speedup_and_the_loss_side_by_side(capsys):
    """diloco-cross-region (Llama 3 8B, 4 datacenters, H = 500): the window's time per step against
    the same scenario synchronising every step (simulated), and the law's loss for 8.03B and M = 4."""
    j = _json(capsys, "run", "scenarios/diloco-cross-region.yaml")
    w = j["sync"]
    every = _json(capsys, "run", "scenarios/diloco-cross-region.yaml", "--set",
                  "training.sync.kind=every-step")
    assert w["every_step_s"] == pytest.approx(every["time_per_step_s"], rel=1e-12)
    assert w["speedup_per_step"] == pytest.approx(w["every_step_s"] / w["time_per_step_s"], rel=1e-12)
    assert w["speedup_per_step"] > 1
    law = diloco_loss(w["loss"]["params"], 4, 500)
    assert w["loss"]["replicas"] == 4 and w["loss"]["compute_ratio"] == pytest.approx(law.compute_ratio)
    assert main(["run", "scenarios/diloco-cross-region.yaml"]) == 0
    text = capsys.readouterr().out
    assert "faster per step (simulated)" in text and "an estimate from Charles et al. 2025" in text
    # Local SGD has no published law: no loss figure, the speed-up still shown.
    j = _json(capsys, "run", "scenarios/diloco-cross-region.yaml", "--set", "training.sync.kind=local-sgd")
    assert j["sync"]["loss"] is None and j["sync"]["speedup_per_step"] > 1


def test_the_whole_runs_progress_divides_by_dilocos_compute_ratio(capsys):
    """With a critical batch and total tokens, the DiLoCo run's small-batch-equivalent tokens are
    McCandlish's divided by the law's compute ratio; the source names both."""
    j = _json(capsys, "run", "scenarios/diloco-cross-region.yaml", "--set", "training.total_tokens=1e11",
              "--set", "training.critical_batch_tokens=4e6")
    run, w = j["run_total"], j["sync"]
    ratio = w["loss"]["compute_ratio"]
    (phase,) = run["phases"]
    assert phase["loss_compute_ratio"] == pytest.approx(ratio, rel=1e-12)
    sc = load("scenarios/diloco-cross-region.yaml")
    batch = sc.training.global_batch * sc.model.seq_len
    want = equivalent_tokens(run["tokens"], batch, 4e6, ratio)
    assert run["loss_estimate"]["equivalent_tokens"] == pytest.approx(want, rel=1e-12)
    assert "Charles et al. 2025" in run["loss_estimate"]["source"]
