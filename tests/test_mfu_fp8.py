"""MFU is model FLOPs over the bf16 dense peak (PaLM App. B, Llama 3; docs/command-line.md), so an FP8
run may pass 100 %: a GB300 FP8 run read "MFU 100.4%" with nothing beside it.  Every view that shows
an FP8 run's MFU says its share of the FP8 peak too; a bf16 run's says nothing more."""
from __future__ import annotations

import pytest

from explorer.cli import main
from explorer.scenario import load
from explorer.simulate import simulate

from app_support import run_app
from conftest import ROOT

FP8 = {"training.dtype": "fp8", "hardware.gpu": "h100-sxm"}


def test_the_fp8_share_is_the_bf16_share_over_the_peaks_ratio():
    sc = load(ROOT / "scenarios" / "teaching-8gpu.yaml", FP8)
    r = simulate(sc)
    gpu = sc.hardware.gpu
    assert r.mfu_fp8_peak == pytest.approx(r.mfu * gpu.peak_tflops / gpu.fp8_tflops, rel=1e-12)


def test_run_prints_the_fp8_share_beside_the_mfu(capsys):
    sets = [a for k, v in FP8.items() for a in ("--set", f"{k}={v}")]
    assert main(["run", str(ROOT / "scenarios" / "teaching-8gpu.yaml"), *sets]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.strip().startswith("MFU"))
    r = simulate(load(ROOT / "scenarios" / "teaching-8gpu.yaml", FP8))
    assert line.endswith(f"{r.mfu:.1%}  (of the bf16 peak; {r.mfu_fp8_peak:.1%} of the FP8 peak)")
    assert main(["run", str(ROOT / "scenarios" / "teaching-8gpu.yaml")]) == 0
    plain = next(x for x in capsys.readouterr().out.splitlines() if x.strip().startswith("MFU"))
    assert "FP8" not in plain


def test_the_app_card_says_the_fp8_share_under_the_mfu():
    at = run_app(scenario="teaching-8gpu", **FP8)
    card = next(m for m in at.metric if m.label == "MFU")
    r = simulate(load(ROOT / "scenarios" / "teaching-8gpu.yaml", FP8))
    assert card.value == f"{r.mfu:.1%}" and card.delta == f"FP8 {r.mfu_fp8_peak:.1%}"
    bf16 = next(m for m in run_app(scenario="teaching-8gpu").metric if m.label == "MFU")
    assert not bf16.delta


@pytest.mark.parametrize("name,layouts", [
    # MoE with latent attention: MLA's down-projections and the router run whole on every TP rank.
    ("deepseek-v3", [{"parallelism.tp": 1, "parallelism.ep": 32}, {"parallelism.tp": 2, "parallelism.ep": 32},
                     {"parallelism.tp": 4, "parallelism.ep": 16}]),
    ("teaching-8gpu", [{"parallelism.tp": 1}, {"parallelism.tp": 2},
                       {"parallelism.tp": 4, "parallelism.pp": 2}]),
])
def test_the_model_flops_are_the_models_whatever_the_layout(name, layouts):
    """MFU x time x GPUs is the model's FLOPs per iteration, one number per model and batch (PaLM
    App. B).  A hunt found DeepSeek-V3's 8,290 at tp 1 and 8,490 at tp 2 (PFLOP): the GEMMs every
    tensor-parallel rank repeats were counted once per rank, and search showed a slower tp 2 layout
    at a higher MFU (49.0 % beside 48.0 %).  Now a repeated GEMM counts once (physics/work.Gemm.shared)."""
    base = {"cluster.nodes": 128, "training.global_batch": 7680, "parallelism.schedule": "1f1b",
            "parallelism.zero": 1} if name == "deepseek-v3" else {}
    totals = []
    for lay in layouts:
        sc = load(ROOT / "scenarios" / f"{name}.yaml", {**base, "parallelism.dp": None, **lay})
        r = simulate(sc)
        totals.append(r.mfu * r.iteration_time_s * sc.gpus * sc.hardware.gpu.peak_tflops * 1e12)
    assert totals == pytest.approx([totals[0]] * len(totals), rel=1e-12)
