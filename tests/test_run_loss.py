"""Time to a target loss from the critical batch size (explorer/run/convergence.py, McCandlish et
al. 2018: E = E_min (1 + B / B_crit)), and the whole-run shapes that change the job over time:
frozen prefixes re-packed into fewer stages (PipeTransformer) and depth grown between phases.
Closed forms against run --json and diff --json."""
from __future__ import annotations

import json

import pytest

from explorer.cli import main
from explorer.run.convergence import days_to_reach, equivalent_tokens

SEQ = 2048                    # teaching-8gpu's sequence length; its global batch is 16


def _json(capsys, *args) -> dict:
    assert main([*args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def _sets(*sets) -> list[str]:
    return [x for s in sets for x in ("--set", s)]


def test_the_equivalent_tokens_follow_mccandlish(capsys):
    assert equivalent_tokens(1e9, 1e6, 1e6) == pytest.approx(5e8)          # B = B_crit: half
    run = _json(capsys, "run", "teaching-8gpu", *_sets("training.total_tokens=1e10",
                                                       "training.critical_batch_tokens=2e5"))["run_total"]
    loss = run["loss_estimate"]
    batch = 16 * SEQ
    assert loss["data_efficiency"] == pytest.approx(1 / (1 + batch / 2e5), rel=1e-12)
    assert loss["equivalent_tokens"] == pytest.approx(run["tokens"] / (1 + batch / 2e5), rel=1e-12)
    assert "McCandlish" in loss["source"]


def test_a_batch_ramp_sums_its_phases_progress(capsys):
    phases = json.dumps([{"name": "ramp", "tokens": 1e9, "overrides": {"training.global_batch": 8}},
                         {"name": "main", "tokens": 3e9}])
    run = _json(capsys, "run", "teaching-8gpu", *_sets(f"training.phases={phases}",
                                                       "training.critical_batch_tokens=1e5"))["run_total"]
    tokens = [ph["tokens"] for ph in run["phases"]]          # whole steps of each phase's batch
    assert tokens == pytest.approx([1e9, 3e9], rel=1e-4)
    want = equivalent_tokens(tokens[0], 8 * SEQ, 1e5) + equivalent_tokens(tokens[1], 16 * SEQ, 1e5)
    assert run["loss_estimate"]["equivalent_tokens"] == pytest.approx(want, rel=1e-12)


def test_a_faster_larger_batch_reaches_the_same_loss_later(capsys):
    """4x the batch: 21 % fewer days for the tokens, but each token buys less progress, so B
    reaches A's loss later — the two figures side by side in diff."""
    both = _sets("training.total_tokens=1e10", "training.critical_batch_tokens=1e5")
    out = _json(capsys, "diff", "teaching-8gpu", *both, "--set-b", "training.global_batch=64")
    a, b, d = out["a"]["run_total"], out["b"]["run_total"], out["delta_run"]
    assert b["days"] < a["days"]
    la, lb = a["loss_estimate"], b["loss_estimate"]
    want = days_to_reach(b["days"], lb["equivalent_tokens"], la["equivalent_tokens"])
    assert d["b_days_to_a_loss"] == pytest.approx(want, rel=1e-12) and d["b_days_to_a_loss"] > a["days"]
    assert d["b_days_to_a_loss_vs_a"] == pytest.approx(want / a["days"] - 1, rel=1e-12)
    assert main(["diff", "teaching-8gpu", *both, "--set-b", "training.global_batch=64"]) == 0
    text = capsys.readouterr().out
    assert f"B reaches A's loss in {want:,.2f} days ({want / a['days'] - 1:+.1%} vs A)" in text
    assert "estimate from the literature" in text


def test_pipetransformer_repacks_a_frozen_prefix_into_fewer_stages(capsys):
    """PipeTransformer (He et al., ICML 2021): as the prefix freezes, the pipeline shrinks and the
    data parallelism widens.  Each phase's step is the step of its own scenario, exactly."""
    phases = [{"name": "all train", "tokens": 2e9},
              {"name": "freeze 12, pp 2", "tokens": 2e9,
               "overrides": {"training.frozen_layers": 12, "parallelism.pp": 2, "parallelism.dp": 4}},
              {"name": "freeze 20, pp 1", "tokens": 2e9,
               "overrides": {"training.frozen_layers": 20, "parallelism.pp": 1, "parallelism.dp": 8}}]
    run = _json(capsys, "run", "teaching-8gpu", *_sets(f"training.phases={json.dumps(phases)}"))["run_total"]
    steps = [p["iteration_time_s"] for p in run["phases"]]
    for ph, step in zip(phases, steps, strict=True):
        alone = _json(capsys, "run", "teaching-8gpu", *_sets(*(f"{k}={v}" for k, v in
                                                              ph.get("overrides", {}).items())))
        assert step == pytest.approx(alone["iteration_time_s"], rel=1e-12), ph["name"]
    assert steps[0] > steps[1] > steps[2]
    assert steps[0] / steps[2] > 2


def test_depth_grows_between_phases(capsys):
    """Progressive depth growth as phases: the half-depth phase steps at the half-depth model's time."""
    phases = [{"name": "12 layers", "tokens": 2e9, "overrides": {"model.layers": 12}},
              {"name": "24", "tokens": 2e9}]
    run = _json(capsys, "run", "teaching-8gpu", *_sets(f"training.phases={json.dumps(phases)}"))["run_total"]
    half = _json(capsys, "run", "teaching-8gpu", *_sets("model.layers=12"))
    assert run["phases"][0]["iteration_time_s"] == pytest.approx(half["iteration_time_s"], rel=1e-12)
    assert run["phases"][0]["days"] < run["phases"][1]["days"]


def test_the_figures_docs_whole_run_quotes(capsys):
    from conftest import ROOT
    text = (ROOT / "docs" / "whole-run.md").read_text(encoding="utf-8")
    steps = [_json(capsys, "run", "teaching-8gpu", *_sets(*s))["iteration_time_s"] for s in (
        (), ("training.frozen_layers=12", "parallelism.pp=2", "parallelism.dp=4"),
        ("training.frozen_layers=20", "parallelism.pp=1", "parallelism.dp=8"))]
    assert "from {:.0f} ms to {:.0f} ms to {:.0f} ms".format(*(t * 1e3 for t in steps)) in text
    out = _json(capsys, "diff", "teaching-8gpu", *_sets("training.total_tokens=1e10",
                                                        "training.critical_batch_tokens=1e5"),
                "--set-b", "training.global_batch=64")
    a, d = out["a"]["run_total"], out["delta_run"]
    assert f"{-d['days'] / a['days']:.1%} fewer days" in text
    assert f"reaches the same loss {d['b_days_to_a_loss_vs_a']:.1%} later" in text


def test_the_app_says_when_b_reaches_a_loss_and_the_run_tab_the_progress(capsys):
    from app_support import run_app
    both = {"training.total_tokens": "1e10", "training.critical_batch_tokens": "1e5"}
    out = _json(capsys, "diff", "teaching-8gpu", *_sets(*(f"{k}={v}" for k, v in both.items())),
                "--set-b", "training.global_batch=64")
    want = out["delta_run"]["b_days_to_a_loss"]
    at = run_app(scenario="teaching-8gpu", view="compare", **both, **{"b.training.global_batch": "64"})
    assert not at.exception
    assert any(f"B reaches A's loss in {want:,.2f} days" in c.value for c in at.caption)
    at = run_app(scenario="teaching-8gpu", view="run", **both)
    eq = out["a"]["run_total"]["loss_estimate"]["equivalent_tokens"]
    assert any("estimate from the literature" in c.value and f"{eq / 1e9:,.4g}B tokens" in c.value
               for c in at.caption)


def test_data_efficiency_stays_a_fraction_with_diloco_credit(capsys):
    """diloco-cross-region with B_crit 1e9 tokens: its batch is far below the critical batch, so the
    batch sizes alone give E_min / E = 1 / (1 + B / B_crit) = 0.996, and DiLoCo's loss law credits
    it with 1.04x data-parallel's progress.  Their product had been printed as the data efficiency,
    103.5 %; the efficiency is now the batch part (<= 1) and the credit its own factor."""
    from explorer.scenario import load
    assert main(["run", "diloco-cross-region", "--set", "training.critical_batch_tokens=1e9",
                 "--set", "training.total_tokens=1e12", "--json"]) == 0
    total = json.loads(capsys.readouterr().out)["run_total"]
    loss = total["loss_estimate"]
    sc = load("diloco-cross-region")
    batch = sc.training.global_batch * sc.model.seq_len
    assert loss["data_efficiency"] == pytest.approx(1 / (1 + batch / 1e9), rel=1e-9)
    assert loss["data_efficiency"] < 1
    assert loss["diloco_factor"] > 1
    assert loss["equivalent_tokens"] == pytest.approx(
        total["tokens"] * loss["data_efficiency"] * loss["diloco_factor"], rel=1e-9)
