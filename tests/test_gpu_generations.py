"""What a GPU can run follows its architecture, read from its model number (explorer/config/
generations.py), not from the figures it is given: fp32 below its fp32 peak, no fused attention
kernel in fp32 or before Ampere, bf16 only from Ampere, FlashAttention at the fractions measured on
its own generation, NCCL's tuning tables however the name is spelled.  A hardware hunt found each
of these printing impossible or misleading figures for GPUs defined inline."""
from __future__ import annotations

import pytest

from explorer.config import GPU
from explorer.config.dormant import dormant_settings
from explorer.config.generations import architecture
from explorer.physics.attention import generation, resolve_kernel
from explorer.physics.kernels import dtype_peak_tflops
from explorer.scenario import ScenarioError, load
from explorer.simulate import simulate

from conftest import ROOT

TEACHING = ROOT / "scenarios" / "teaching-8gpu.yaml"
V100 = {"name": "Tesla V100-SXM2-32GB", "peak_tflops": 125, "fp8_tflops": 125, "memory_GB": 32,
        "hbm_GBps": 900, "scale_up_GBps": 150, "sms": 80}
# A long-context layer on 8 GPUs in data parallelism: the attention core is most of the work.
LONG = {"model.seq_len": 32768, "model.hidden": 1024, "model.heads": 8, "model.layers": 8,
        "parallelism.pp": 1, "parallelism.dp": 8, "training.global_batch": 8}


def test_fp32_never_runs_above_the_fp32_peak():
    """fp32 attention had run at the bf16 tensor cores' rate: 23.2 TFLOP/s a GPU on a V100 whose
    fp32 peak is 15.7, and above TF32's peak on an A100 too.  No fused kernel takes fp32, so the
    core is priced as batched GEMMs at the fp32 peak."""
    v100 = load(TEACHING, {**LONG, "hardware.gpu": V100, "training.dtype": "fp32"})
    assert dtype_peak_tflops(v100.hardware.gpu, "fp32") == pytest.approx(125 / 8)
    assert simulate(v100).tflops_per_gpu < 125 / 8
    a100 = load(TEACHING, {**LONG, "hardware.gpu": "a100-80gb", "training.dtype": "fp32"})
    assert simulate(a100).tflops_per_gpu < dtype_peak_tflops(a100.hardware.gpu, "fp32")
    assert resolve_kernel("auto", "megatron", a100.hardware.gpu, "fp32") == "none"
    assert resolve_kernel("auto", "megatron", a100.hardware.gpu, "bf16") == "flash2"


def test_a_v100_has_no_flashattention_and_no_bf16():
    gpu = GPU(**V100)
    assert architecture(gpu) == "volta" and generation(gpu) == "volta"
    kernels = ("auto", "flash2", "flash3", "cudnn", "sdpa")
    assert all(resolve_kernel(k, "fsdp", gpu) == "none" for k in kernels)
    with pytest.raises(ScenarioError) as e:
        load(TEACHING, {"hardware.gpu": V100, "training.dtype": "bf16"})
    assert e.value.field == "training.dtype" and "fp16" in str(e.value)
    fp16 = simulate(load(TEACHING, {**LONG, "hardware.gpu": V100, "training.dtype": "fp16"}))
    assert fp16.tflops_per_gpu < 125
    # A fused kernel asked for on it changes nothing, and is named as not read (config/dormant.py).
    asked = load(TEACHING, {**LONG, "hardware.gpu": V100, "training.dtype": "fp16",
                            "training.attention_kernel": "flash3"})
    assert simulate(asked).iteration_time_s == fp16.iteration_time_s
    assert "Volta" in dict(dormant_settings(asked))["training.attention_kernel"]


def test_a_name_that_only_looks_like_a_model_number_is_no_nvidia_gpu():
    """A hunt found "TPU v5p" read as Volta (a V and a digit) and its bf16 run refused."""
    tpu = {"name": "TPU v5p", "peak_tflops": 459, "memory_GB": 95, "hbm_GBps": 2765}
    sc = load(TEACHING, {"hardware.gpu": tpu})
    assert architecture(sc.hardware.gpu) is None and sc.training.dtype == "bf16"


def test_a_custom_h100_without_its_fp8_rate_is_priced_as_the_preset():
    """By its figures alone (no fp8 rate) a custom H100 read as an A100, its FlashAttention at the
    A100's fractions of peak: the step came out 34 % faster than the preset's (74.7 against
    100.2 ms)."""
    over = {**LONG, "model.seq_len": 16384, "training.framework": "fsdp"}
    custom = {"name": "H100 SXM", "peak_tflops": 989, "memory_GB": 80, "hbm_GBps": 3350,
              "scale_up_GBps": 450, "measured_matmul_tflops": 795, "sms": 132}
    preset = simulate(load(TEACHING, {**over, "hardware.gpu": "h100-sxm"}))
    mine = simulate(load(TEACHING, {**over, "hardware.gpu": custom}))
    assert mine.iteration_time_s == pytest.approx(preset.iteration_time_s, rel=1e-9)


def test_an_ada_gpu_runs_flashattention_2_not_3():
    l40s = GPU(name="L40S", peak_tflops=362, fp8_tflops=733, memory_GB=48, hbm_GBps=864)
    assert architecture(l40s) == "ada" and generation(l40s) == "ampere"
    assert resolve_kernel("flash3", "fsdp", l40s) == "flash2"


@pytest.mark.parametrize("plain, spelled", [("B200", "NVIDIA B200"),
                                            ("V100 SXM2 32GB", "Tesla V100-SXM2-32GB")])
def test_nccl_reads_the_model_number_wherever_the_name_puts_it(plain, spelled):
    """NCCL's tuning generation had been matched at the start of the name only: "Tesla V100..." and
    "NVIDIA B200" fell to the fp8 rule (a V100 read as Ampere: 309 against 343 ms)."""
    gpu = (V100 if "V100" in plain else
           {"name": plain, "peak_tflops": 2250, "fp8_tflops": 4500, "memory_GB": 180, "hbm_GBps": 8000,
            "scale_up_GBps": 900, "sms": 148})
    dtype = "fp16" if "V100" in plain else "bf16"
    base = {"parallelism.pp": 1, "parallelism.dp": 8, "training.global_batch": 8, "training.dtype": dtype,
            "communication.bucket_MB": 1}
    a = simulate(load(TEACHING, {**base, "hardware.gpu": {**gpu, "name": plain}}))
    b = simulate(load(TEACHING, {**base, "hardware.gpu": {**gpu, "name": spelled}}))
    assert a.iteration_time_s == pytest.approx(b.iteration_time_s, rel=1e-12)
