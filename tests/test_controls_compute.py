"""Direction tests for the compute-side fields of issue 10: MLA dimensions, multi-token
prediction, routing skew, SM counts, the FP8 GEMM measurement and communication SMs.

Each test changes one field and asserts the direction physics demands, strictly (collected by
tests/test_controls.py through ``COVERED``)."""
from __future__ import annotations

from functools import cache

import pytest

from explorer.scenario import apply_overrides, from_dict
from explorer.simulate import Result, simulate
from explorer.workloads.transformer.layer import model_params

COVERED = {
    "model.mla.q_lora_rank": "test_mla_dimensions_add_time_and_parameters",
    "model.mla.kv_lora_rank": "test_mla_dimensions_add_time_and_parameters",
    "model.mla.qk_nope_head_dim": "test_mla_dimensions_add_time_and_parameters",
    "model.mla.qk_rope_head_dim": "test_mla_dimensions_add_time_and_parameters",
    "model.mla.v_head_dim": "test_mla_dimensions_add_time_and_parameters",
    "model.mtp_depth": "test_multi_token_prediction_adds_a_layer_and_an_output_head",
    "model.moe.skew": "test_routing_skew_loads_the_busiest_expert_rank",
    "hardware.gpu.sms": "test_more_sms_dilute_the_communication_kernels",
    "hardware.gpu.measured_fp8_matmul_tflops": "test_fp8_gemm_measurement_sets_the_fp8_rate",
    "communication.comm_sms": "test_communication_sms_slow_the_compute_they_overlap",
    "training.recompute_modules": "test_recompute_modules_trade_memory_for_time",
    "training.fp8_storage": "test_deepseek_fp8_storage_keeps_less_than_transformer_engine",
}


def _mla_raw() -> dict:
    """Two MLA layers (DeepSeek-V2-Lite-like proportions) on one H100."""
    return {"model": {"layers": 2, "hidden": 2048, "heads": 16, "vocab": 1024, "seq_len": 2048,
                      "ffn_kind": "swiglu", "ffn_hidden": 5632, "dropout": False,
                      "mla": {"q_lora_rank": 512, "kv_lora_rank": 256, "qk_nope_head_dim": 128,
                              "qk_rope_head_dim": 64, "v_head_dim": 128}},
            "training": {"global_batch": 2, "micro_batch": 1},
            "hardware": {"gpu": "h100-sxm"},
            "cluster": {"gpus_per_node": 1, "nodes": 1}}


def _moe_raw() -> dict:
    """4 MoE layers (64 experts, top-8) with EP 16 on 2 H800 nodes, DualPipe-free 1F1B."""
    return {"model": {"layers": 4, "hidden": 2048, "heads": 16, "vocab": 8, "seq_len": 1024,
                      "moe": {"experts": 64, "top_k": 8, "expert_ffn_hidden": 1024, "shared_experts": 1}},
            "training": {"global_batch": 16, "micro_batch": 1},
            "hardware": {"gpu": "h800"},
            "cluster": {"gpus_per_node": 8, "nodes": 2},
            "parallelism": {"ep": 16, "zero": 1}}


@cache
def _sim(kind: str, items: tuple = ()) -> Result:
    """Simulate the named small scenario with dotted overrides (hashable pairs)."""
    raw = _mla_raw() if kind == "mla" else _moe_raw()
    over = {k: dict(v) if isinstance(v, tuple) else v for k, v in items}   # a GPU mapping as pairs
    return simulate(from_dict(apply_overrides(raw, over)))


@pytest.mark.parametrize("key,values", [("model.mla.q_lora_rank", (256, 512, 1024)),
                                        ("model.mla.kv_lora_rank", (128, 256, 512)),
                                        ("model.mla.qk_nope_head_dim", (64, 128, 192)),
                                        ("model.mla.qk_rope_head_dim", (32, 64, 128)),
                                        ("model.mla.v_head_dim", (64, 128, 256))])
def test_mla_dimensions_add_time_and_parameters(key, values):
    """Every MLA width is a GEMM dimension (and the head dims also widen the attention core):
    wider -> more parameters and a longer iteration."""
    runs = [_sim("mla", ((key, v),)) for v in values]
    times = [r.iteration_time_s for r in runs]
    params = [model_params(r.scenario) for r in runs]
    assert times == sorted(times) and len(set(times)) == len(times)
    assert params == sorted(params) and len(set(params)) == len(params)


def test_mla_attention_core_is_about_three_times_mha_for_deepseek_v3():
    """DeepSeek-V3 MLA (a=128, d_qk=192, d_v=128) vs an MHA of hidden 7168: core FLOPs
    2*s*a*(d_qk+d_v) per token vs 4*s*h: 81920 / 28672 = 2.857."""
    from explorer.workloads.transformer.attention import attention_block
    sc = from_dict({"model": {"preset": "deepseek-v3"}, "training": {"global_batch": 16},
                    "hardware": {"gpu": "h800"}})
    mla = attention_block(sc.model, 4096, 4096, 1).core_flops
    assert mla / (4 * 4096 * 4096 * 7168) == pytest.approx(81920 / 28672, rel=1e-12)


def test_multi_token_prediction_adds_a_layer_and_an_output_head():
    """DeepSeek-V3 Sec. 2.2: each MTP module is one more transformer block, a 2h -> h projection
    and another pass through the shared output head: more parameters and time."""
    runs = [_sim("mla", (("model.mtp_depth", d),)) for d in (0, 1, 2)]
    times = [r.iteration_time_s for r in runs]
    assert times[0] < times[1] < times[2]
    p = [model_params(r.scenario) for r in runs]
    h = 2048
    # The block of a dense MLA layer + its projection, per module.
    assert p[1] - p[0] == pytest.approx(p[2] - p[1], rel=1e-12)
    assert p[1] - p[0] > 2 * h * h


def test_routing_skew_loads_the_busiest_expert_rank():
    """A Zipf skew of expert popularity makes the busiest EP rank's experts and all-to-all the
    pace-setter: more skew, longer iteration; skew 0 is balanced routing."""
    t = [_sim("moe", (("model.moe.skew", s),)).iteration_time_s for s in (0.0, 0.5, 1.0)]
    assert t[0] < t[1] < t[2]


def test_more_sms_dilute_the_communication_kernels():
    """With 20 SMs held by communication kernels, a GPU with more SMs loses a smaller share of its
    compute while the communication runs (DualPipe hides the all-to-alls): the cost of those 20
    SMs, iteration(20) - iteration(0), shrinks as the SM count grows.  (The SM count also sets
    the GEMMs' wave quantisation, so iterations are compared at the same count.)"""
    base = (("parallelism.schedule", "dualpipe"), ("parallelism.pp", 2), ("parallelism.ep", 8),
            ("training.global_batch", 32))
    gpu = {"name": "x", "peak_tflops": 989, "fp8_tflops": 1979, "memory_GB": 80, "hbm_GBps": 3350,
           "scale_up_GBps": 200, "measured_matmul_tflops": 795}

    def cost(n: int) -> float:
        g = (("hardware.gpu", tuple({**gpu, "sms": n}.items())),)
        return (_sim("moe", base + g + (("communication.comm_sms", 20),)).iteration_time_s
                - _sim("moe", base + g + (("communication.comm_sms", 0),)).iteration_time_s)
    c = [cost(n) for n in (66, 132, 264)]
    assert c[0] > c[1] > c[2] > 0
    # Fewer SMs than the communication kernels want: they take every SM while they run, so the
    # cost is the largest and the same at 20 SMs or fewer (the share was capped at all but one SM:
    # a 1-SM GPU lost nothing, a 2-SM GPU half; found by a hunt).
    few = [cost(n) for n in (1, 2, 20)]
    assert few[0] == pytest.approx(few[1], rel=1e-9) and few[1] == pytest.approx(few[2], rel=0.05)
    assert few[2] > c[0]


def test_communication_sms_slow_the_compute_they_overlap():
    """SMs that run communication kernels are taken from the compute they overlap (DeepSeek-V3
    Sec. 3.2.2): the extra compute time is hidden_seconds x comm_sms / sms, so 0 SMs costs nothing
    and more SMs cost more."""
    base = (("parallelism.schedule", "dualpipe"), ("parallelism.pp", 2), ("parallelism.ep", 8),
            ("training.global_batch", 32))
    runs = [_sim("moe", base + (("communication.comm_sms", c),)) for c in (0, 20, 40)]
    t = [r.iteration_time_s for r in runs]
    assert t[0] < t[1] < t[2]
    c = [r.breakdown_s["compute"] for r in runs]
    # Linear in comm_sms: the same hidden communication, a proportional slowdown.
    assert (c[2] - c[1]) == pytest.approx(c[1] - c[0], rel=0.05)


def _dp_raw(comm_sms: int, overlap: bool = True) -> dict:
    """Two Llama-3-8B layers, data parallel over 16 H100s in two nodes: the gradient buckets (25 MB
    each) are reduced across the NICs while the one backward produces them."""
    return {"model": {"preset": "llama3-8b", "layers": 2},
            "training": {"global_batch": 16, "micro_batch": 1},
            "hardware": {"gpu": "h100-sxm"}, "cluster": {"gpus_per_node": 8, "nodes": 2},
            "parallelism": {"zero": 0},
            "communication": {"dp_overlap": overlap, "comm_sms": comm_sms, "bucket_MB": 25}}


def test_gradient_buckets_take_their_sms_from_the_backward_they_overlap():
    """Buckets reduced under the backward hold comm_sms of the SMs while they run under it
    (techniques/dp_contention.py): the backward that produces them grows by exactly
    comm_sms/sms x the bucket seconds that run before it ends, served first come first served
    from their ready points -- recomputed here from the run without contention; reduced after
    the backward (dp_overlap off) they take nothing from it."""
    from explorer.engine.records import BucketInfo
    from explorer.taskgraph.techniques.dp_contention import hidden_seconds

    def run(c: int, overlap: bool = True) -> Result:
        return simulate(from_dict(_dp_raw(c, overlap)))
    free, held = run(0), run(20)
    (bwd0,) = [t for t in free.tasks if t.kind == "backward"]
    (bwd1,) = [t for t in held.tasks if t.kind == "backward"]
    tids = {id(t): i for i, t in enumerate(free.tasks)}
    jobs = [(f, t.duration) for t in free.tasks if isinstance(t.info, BucketInfo)
            for d, f in t.deps if d == tids[id(bwd0)]]
    assert len(jobs) >= 4                         # several buckets, ready along the backward
    hidden = hidden_seconds(bwd0.duration, jobs)
    assert 0 < hidden < sum(d for _, d in jobs)   # some run under the pass, the last ones after it
    assert bwd1.duration - bwd0.duration == pytest.approx(20 / 132 * hidden, rel=1e-12)
    assert held.iteration_time_s > free.iteration_time_s
    assert run(20, False).iteration_time_s == run(0, False).iteration_time_s


def test_fp8_gemm_measurement_sets_the_fp8_rate():
    """The measured largest FP8 GEMM sets the FP8 GEMM rate (hardware.py measured_over_peak):
    a faster measurement, a faster FP8 run; bf16 runs do not read it."""
    def run(dtype: str, tflops: float) -> float:
        gpu = {"name": "h", "peak_tflops": 989, "fp8_tflops": 1979, "memory_GB": 80, "hbm_GBps": 3350,
               "measured_matmul_tflops": 795, "measured_fp8_matmul_tflops": tflops}
        return _sim("mla", (("training.dtype", dtype), ("hardware.gpu", tuple(gpu.items())))).iteration_time_s
    assert run("fp8", 1000) > run("fp8", 1300) > run("fp8", 1600)
    assert run("bf16", 1000) == run("bf16", 1600)


def test_recompute_modules_trade_memory_for_time():
    """Each module that selective recompute repeats (Megatron-Core recompute_modules) drops its
    saved activations and adds its forward to the backward: adding modules lowers memory and
    raises the iteration time, strictly."""
    sets = ["core_attn", "core_attn,layernorm", "core_attn,layernorm,mla_up_proj"]   # YAML lists too
    runs = [_sim("mla", (("training.recompute", "selective"), ("training.recompute_modules", s)))
            for s in sets]
    mem = [r.memory.activations for r in runs]
    t = [r.iteration_time_s for r in runs]
    assert mem[0] > mem[1] > mem[2]
    assert t[0] < t[1] < t[2]


def test_deepseek_fp8_storage_keeps_less_than_transformer_engine():
    """DeepSeek-V3's FP8 recipe (report Sec. 3.3.3) caches the MoE SwiGLU inputs in FP8 and the
    attention output once: fewer activation bytes than Transformer Engine's default, same time."""
    fp8 = (("training.dtype", "fp8"), ("hardware.gpu", "h800"))
    te = _sim("moe", fp8 + (("training.fp8_storage", "te"),))
    ds = _sim("moe", fp8 + (("training.fp8_storage", "deepseek"),))
    assert ds.memory.activations < te.memory.activations
    assert ds.iteration_time_s == te.iteration_time_s
