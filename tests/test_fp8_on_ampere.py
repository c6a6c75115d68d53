"""An fp8 run on a GPU without FP8 tensor cores (an A100: Transformer Engine needs compute
capability 8.9+) is priced in bf16 (config/generations.runs_fp8).  A hunt found it silent, with an
MFU line quoting "46.5 % of the FP8 peak"; it is now named as such (config/dormant.py) and
quotes no FP8 peak."""
from __future__ import annotations

from explorer.cli import main
from explorer.scenario import load
from explorer.simulate import simulate

from conftest import ROOT

ZB = ROOT / "scenarios" / "zero-bubble-8gpu.yaml"


def test_an_a100_fp8_run_is_the_bf16_run_and_says_so(capsys):
    fp8 = simulate(load(ZB, {"hardware.gpu": "a100-80gb", "training.dtype": "fp8"}))
    bf16 = simulate(load(ZB, {"hardware.gpu": "a100-80gb", "training.dtype": "bf16"}))
    assert fp8.iteration_time_s == bf16.iteration_time_s and fp8.mfu == bf16.mfu
    assert fp8.mfu_fp8_peak is None
    assert main(["run", str(ZB), "--set", "hardware.gpu=a100-80gb", "--set", "training.dtype=fp8"]) == 0
    out = capsys.readouterr().out
    assert "FP8 peak" not in out
    assert "note: training.dtype is not read: hardware.gpu A100 80GB SXM has no FP8 tensor cores" in out


def test_an_h100_fp8_run_quotes_its_fp8_peak(capsys):
    r = simulate(load(ZB, {"hardware.gpu": "h100-sxm", "training.dtype": "fp8"}))
    # The H100 SXM's dense FP8 peak is twice its bf16 one (989 -> 1,979 TFLOPS, NVIDIA's datasheet).
    assert r.mfu_fp8_peak is not None and abs(r.mfu_fp8_peak - r.mfu / 2) < 1e-3
    assert main(["run", str(ZB), "--set", "training.dtype=fp8"]) == 0
    assert "of the FP8 peak" in capsys.readouterr().out


def test_datacenters_of_fp8_gpus_under_an_a100_hardware_gpu_are_not_named_bf16(capsys):
    """A re-check: mixed-generations' H100 and B200 datacenters with hardware.gpu a100-80gb run fp8
    (6,815.6 ms, against 7,837.6 ms in bf16) but were named "priced in bf16"."""
    mixed = ROOT / "scenarios" / "mixed-generations.yaml"
    over = {"hardware.gpu": "a100-80gb"}
    fp8 = simulate(load(mixed, {**over, "training.dtype": "fp8"}))
    bf16 = simulate(load(mixed, {**over, "training.dtype": "bf16"}))
    assert fp8.iteration_time_s < bf16.iteration_time_s
    assert main(["run", str(mixed), "--set", "hardware.gpu=a100-80gb", "--set", "training.dtype=fp8"]) == 0
    assert "no FP8 tensor cores" not in capsys.readouterr().out
