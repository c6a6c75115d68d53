"""Direction tests for issue 34's attention fields: ``training.attention_kernel`` (the kernel and its
measured rate, explorer/physics/attention.py) and ``model.head_dim`` (attention width decoupled from
hidden), plus the long-context regression (Llama 3 8B at 131k with CP 8 under fsdp runs SDPA's
FlashAttention-2, not FlashAttention-3).  Collected by tests/test_controls.py through ``COVERED``."""
from __future__ import annotations

from functools import cache

import pytest

from explorer.physics import attention as A
from explorer.physics.hardware import default_gemm_efficiency, measured_over_peak
from explorer.scenario import apply_overrides, from_dict, load_raw
from explorer.simulate import Result, simulate
from explorer.workloads.registry import workload_spec
from explorer.workloads.transformer.layer import model_params

from conftest import ROOT

COVERED = {
    "training.attention_kernel": "test_attention_kernel_sets_the_core_rate",
    "model.head_dim": "test_head_dim_widens_attention_not_hidden",
}


def _raw() -> dict:
    """Four Llama-like layers at 16k tokens on one H100: the attention core is most of the work."""
    return {"model": {"layers": 4, "hidden": 2048, "heads": 16, "kv_heads": 4, "vocab": 1024,
                      "seq_len": 16384, "ffn_kind": "swiglu", "ffn_hidden": 5632, "dropout": False},
            "training": {"global_batch": 1, "micro_batch": 1, "recompute": "full"},
            "hardware": {"gpu": "h100-sxm"},
            "cluster": {"gpus_per_node": 1, "nodes": 1}}


@cache
def _sim(items: tuple = ()) -> Result:
    return simulate(from_dict(apply_overrides(_raw(), dict(items))))


def _t(**kv) -> float:
    return _sim(tuple(sorted((k.replace("__", "."), v) for k, v in kv.items()))).iteration_time_s


def test_attention_kernel_sets_the_core_rate():
    """H100, 16k causal, head dim 128: FA3 616 > cuDNN 539 > FA2 335 TFLOP/s forward (FA3 paper
    Fig. 5), so flash3 < cudnn < flash2 in time; sdpa is FA2 exactly; flex (0.90/0.85 of FA2) is
    slower than FA2; auto is the framework's default (megatron: cuDNN; fsdp: SDPA = FA2); none is
    the unfused core, as flash_attention false."""
    k = "training__attention_kernel"
    t = {name: _t(**{k: name}) for name in ("flash3", "cudnn", "flash2", "sdpa", "flex", "none")}
    assert t["flash3"] < t["cudnn"] < t["flash2"] < t["flex"] < t["none"]
    assert t["sdpa"] == t["flash2"]
    assert _t() == t["cudnn"]                                              # megatron auto
    assert _t(training__framework="fsdp") == _t(training__framework="fsdp", **{k: "flash2"})
    assert t["none"] == _t(training__flash_attention=False)


def test_triton_kernel_slows_the_core_against_flash2():
    """``training.attention_kernel: triton`` (the 2022-23 Triton FlashAttention kernel) runs the
    same work as FlashAttention-2, slower: forward 1.4x (FA2 paper Sec. 4.1), backward 2.69x at 16k
    and head dim 128 (what the paper's Fig. 4 bars leave for it).  With full recompute the core runs
    forward twice, so the time it adds over flash2 is, against what flex adds (0.90 / 0.85 of FA2),
    (2 x 0.4 + B/F x 1.69) / (2 x (1/0.9 - 1) + B/F x (1/0.85 - 1)), B/F = 2.5 x 335 / 322 the
    backward-over-forward core time of FA2 on H100 (FA3 paper Figs. 5-6)."""
    k = "training__attention_kernel"
    flash2, flex, triton, unfused = (_t(**{k: n}) for n in ("flash2", "flex", "triton", "none"))
    assert flash2 < flex < triton < unfused
    b_over_f = 2.5 * 335 / 322
    expected = (2 * 0.4 + b_over_f * (A.triton_slowdown(True, 128, 16384) - 1)) \
        / (2 * (1 / 0.9 - 1) + b_over_f * (1 / 0.85 - 1))
    assert (triton - flash2) / (flex - flash2) == pytest.approx(expected, rel=1e-6)


def test_head_dim_widens_attention_not_hidden():
    """Qwen3-style head_dim (heads x head_dim != hidden; Qwen3-32B: 64 x 128 = 8192 vs hidden
    5120): Q/O are hidden x heads*head_dim, K/V hidden x kv_heads*head_dim, the core scales with
    heads*head_dim.  hidden 2048 / 16 heads = 128, so head_dim 128 is the default itself; 256
    doubles the attention parameters and slows the layer and raises memory."""
    assert _t(model__head_dim=128) == _t()
    base, wide = _sim(), _sim((("model.head_dim", 256),))
    assert wide.iteration_time_s > base.iteration_time_s
    assert wide.memory.activations > base.memory.activations
    sc = from_dict(apply_overrides(_raw(), {"model.head_dim": 256}))
    sc0 = from_dict(_raw())
    h, a, kv = 2048, 16, 4
    # parameters: (a + 2kv) * d * h (QKV) + a * d * h (O), per layer
    extra = 4 * ((a + 2 * kv) * 128 * h + a * 128 * h)
    assert model_params(sc) - model_params(sc0) == pytest.approx(extra)
    # core FLOPs per layer: 4 * tokens * s * a * d (full square), twice as many at d = 256
    core = workload_spec(sc).kinds[0].attn_core_fwd.gemm_flops
    assert core == pytest.approx(2 * workload_spec(sc0).kinds[0].attn_core_fwd.gemm_flops)


def test_long_context_cp_under_fsdp_runs_flash_attention_2():
    """Llama 3 8B, 131,072 tokens, CP 8 on H100 (scenarios/long-context-cp.yaml) under fsdp: each
    ring step is an SDPA (FlashAttention-2) kernel on 131072/8 = 16k queries, at FA2's 16k plateau
    (335 TFLOP/s forward, FA3 paper Fig. 5), not FA3's 616.  The old code priced FA3 at the full
    131k for every framework, so fsdp ran 1.05x megatron; now the attention core dominates and
    fsdp's FA2 runs 1.5x megatron's cuDNN."""
    raw = load_raw(ROOT / "scenarios" / "long-context-cp.yaml")
    fsdp = from_dict(apply_overrides(raw, {"training.framework": "fsdp"}))
    layer = workload_spec(fsdp).kinds[0]
    gpu = fsdp.hardware.gpu
    in_training = default_gemm_efficiency(gpu) / measured_over_peak(gpu)
    expected = layer.attn_core_fwd.gemm_flops / (989e12 * 335 / 989 * in_training)
    assert layer.attn_core_fwd.gemm_s == pytest.approx(expected, rel=1e-9)
    t_fsdp = simulate(fsdp).iteration_time_s
    t_meg = simulate(from_dict(raw)).iteration_time_s
    assert t_fsdp / t_meg > 1.4


def test_qwen3_32b_preset_counts_its_published_parameters():
    """Qwen/Qwen3-32B's model card: 32.8B parameters.  With head_dim 128 (64 x 128 = 8192 against
    hidden 5120) the count matches; at hidden/heads = 80 each layer's Q/K/V/O lose
    (64 + 2*8 + 64) x 48 x 5120 weights, 2.26B over 64 layers (30.5B)."""
    raw = {"model": {"preset": "qwen3-32b"}, "training": {"global_batch": 8},
           "hardware": {"gpu": "h100-sxm"}, "cluster": {"gpus_per_node": 8, "nodes": 1},
           "parallelism": {"tp": 8}}
    assert model_params(from_dict(raw)) == pytest.approx(32.8e9, rel=0.005)
    narrow = from_dict(apply_overrides(raw, {"model.head_dim": 80}))
    lost = 64 * (64 + 16 + 64) * 48 * 5120               # layers x (a + 2kv + a) x (128 - 80) x h
    assert model_params(from_dict(raw)) - model_params(narrow) == pytest.approx(lost)
