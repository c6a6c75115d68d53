"""Framework profiles (explorer/config/frameworks.py): each mechanism, with the numbers of its source."""
from __future__ import annotations

import pytest

from explorer.config.frameworks import (
    EAGER_CHAIN_BANDWIDTH,
    EAGER_ELEMENTWISE_FACTOR,
    EAGER_LLAMA_ELEMENTWISE_FACTOR,
    FRAMEWORKS,
    elementwise_factor,
    profile,
)
from explorer.network.groups import Network
from explorer.scenario import from_dict
from explorer.simulate import simulate
from explorer.taskgraph.techniques.fsdp import fsdp_cost


def _two_stage(framework: str, micro_batches: int) -> dict:
    """A 4-layer model on 2 H100s, one per pipeline stage (dp 1: no gradient reduction), whose
    400 Gb/s activation transfer (~28 us) is shorter than a stage's forward (~120 us)."""
    return {"model": {"layers": 4, "hidden": 1024, "heads": 8, "vocab": 8, "seq_len": 1024},
            # one attention kernel for every framework (their defaults differ: test_attention_kernels.py)
            "training": {"global_batch": micro_batches, "framework": framework, "attention_kernel": "flash2"},
            "hardware": {"gpu": "h100-sxm"},
            "cluster": {"gpus_per_node": 1, "nodes": 2, "scale_out": {"nic_Gbps": 400, "nics_per_node": 1}},
            "parallelism": {"pp": 2, "zero": 0}}


def _dp8(framework: str, dtype: str = "bf16", zero: int = 0) -> dict:
    """Llama 3 8B data-parallel over 8 H100s of one node."""
    return {"model": {"preset": "llama3-8b"}, "training": {"global_batch": 8, "framework": framework,
                                                           "dtype": dtype, "attention_kernel": "flash2"},
            "hardware": {"gpu": "h100-sxm"}, "cluster": {"gpus_per_node": 8, "nodes": 1},
            "parallelism": {"zero": zero}}


def test_every_declared_framework_has_a_profile():
    # sections.Training.framework's choices and the profiles must not drift apart.
    from dataclasses import fields

    from explorer.config.sections import Training
    choices = next(f for f in fields(Training) if f.name == "framework").metadata["choices"]
    assert tuple(choices) == FRAMEWORKS
    assert all(profile(n).name == n for n in FRAMEWORKS)
    with pytest.raises(KeyError, match="megatron"):
        profile("jax")


def test_eager_elementwise_factor_follows_the_pass_counts():
    # Llama 3 8B widths (h 4096, kv 1024, ffn 14336): fused 12h + 2kv + 3f = 94,208 element passes
    # per token and layer; eager (HF modeling_llama) 41h + 13kv + 5f = 252,928; ratio 2.68.
    assert EAGER_ELEMENTWISE_FACTOR == pytest.approx(252_928 / 94_208, abs=0.005)
    # A Llama layer's chains (all but the two residual adds, 6h = 24,576 passes either way) stream
    # at 0.619 of a fused kernel's bandwidth: Liger-Kernel's A100 RMSNorm and rotary benchmarks
    # (10.04x and 9.30x eager over fused, against 5.5x and 6.5x by the passes).
    assert EAGER_CHAIN_BANDWIDTH == pytest.approx(1 / ((10.04 / 5.5) * (9.30 / 6.5)) ** 0.5, abs=5e-4)
    chains_eager, chains_fused, residual = 252_928 - 24_576, 94_208 - 24_576, 24_576
    want = (chains_eager / EAGER_CHAIN_BANDWIDTH + residual) / (chains_fused + residual)
    assert EAGER_LLAMA_ELEMENTWISE_FACTOR == pytest.approx(want, abs=0.005) == pytest.approx(4.18, abs=0.005)
    # What a layer is charged: the Llama factor for SwiGLU layers of eager frameworks only.
    assert elementwise_factor("fsdp", "swiglu") == elementwise_factor("fsdp2", "swiglu") == \
        EAGER_LLAMA_ELEMENTWISE_FACTOR
    assert elementwise_factor("deepspeed", "gelu") == EAGER_ELEMENTWISE_FACTOR
    assert elementwise_factor("torchtitan", "swiglu") == pytest.approx(1.34)
    assert elementwise_factor("megatron", "swiglu") == 1.0
    assert profile("megatron").elementwise_factor == 1.0
    assert profile("megatron-deepspeed").elementwise_factor == 1.0   # Megatron's fused kernels
    assert profile("fsdp").elementwise_factor == EAGER_ELEMENTWISE_FACTOR


def test_gradient_wire_dtype_per_framework():
    # Megatron-LM arguments.py: bf16 reduces in fp32, fp16 in fp16; DeepSpeed engine.py
    # communication_data_type follows the training dtype; torchtitan reduces in fp32.
    assert [profile("megatron").grad_reduce_bytes(d) for d in ("bf16", "fp16", "fp8")] == [4, 2, 4]
    assert [profile("deepspeed").grad_reduce_bytes(d) for d in ("bf16", "fp16", "fp32")] == [2, 2, 4]
    assert profile("fsdp").grad_reduce_bytes("bf16") == 4


def test_fp32_reduction_doubles_the_dp_bytes_of_bf16():
    # Same model, GPUs and ZeRO stage: Megatron's fp32 all-reduce moves exactly twice DeepSpeed's bf16
    # bytes (the bucket sizes differ, the bus bytes of the whole gradient do not).
    fp32 = simulate(from_dict(_dp8("megatron"))).comm_bytes_per_gpu["dp"]
    bf16 = simulate(from_dict(_dp8("deepspeed"))).comm_bytes_per_gpu["dp"]
    assert bf16 > 0
    assert fp32 == pytest.approx(2 * bf16, rel=1e-9)
    # Megatron in fp16 reduces in fp16: half of its bf16 run's bytes.
    fp16 = simulate(from_dict(_dp8("megatron", "fp16"))).comm_bytes_per_gpu["dp"]
    assert fp32 == pytest.approx(2 * fp16, rel=1e-9)


@pytest.mark.parametrize(("framework", "dp", "bucket_MB"), [
    ("megatron", 8, 160.0),            # max(40M, 8M) elements x 4 bytes (fp32 reduction)
    ("megatron", 64, 256.0),           # max(40M, 64M) elements x 4 bytes
    ("deepspeed", 8, 1000.0),          # reduce_bucket_size 5e8 elements x 2 bytes (bf16)
    ("megatron-deepspeed", 64, 1000.0),
    ("fsdp", 8, 25.0),                 # PyTorch DDP bucket_cap_mb
])
def test_default_bucket_is_the_frameworks(framework, dp, bucket_MB):
    raw = _dp8(framework)
    raw["cluster"]["nodes"] = dp // 8
    raw["training"]["global_batch"] = dp
    assert from_dict(raw).communication.bucket_MB == pytest.approx(bucket_MB)
    raw["communication"] = {"bucket_MB": 7.0}      # a stated bucket wins
    assert from_dict(raw).communication.bucket_MB == 7.0


def test_blocking_p2p_exposes_exactly_one_transfer_in_two_stage_1f1b():
    # 2 stages, 2 micro-batches, 1F1B, transfer t < F, B.  Non-blocking (Megatron): makespan
    # 3F + 3B + 2t (+ optimizer).  Blocking (DeepSpeed's PipelineEngine): stage 1 sends the gradient
    # of micro-batch 0 before it may start F(1), so F(1), B(1) and the last backward of stage 0
    # each start t later: 3F + 3B + 3t — one transfer more.  Megatron-DeepSpeed keeps the fused
    # kernels, and with dp 1 nothing else differs.
    a = simulate(from_dict(_two_stage("megatron", 2)))
    b = simulate(from_dict(_two_stage("megatron-deepspeed", 2)))
    t = next(x.duration for x in b.tasks if x.kind == "pp")
    f = next(x.duration for x in a.tasks if x.kind == "forward")
    assert 0 < t < f
    assert b.iteration_time_s - a.iteration_time_s == pytest.approx(t, rel=1e-9)
    # The transfer sits on the sender's compute stream right after the pass that produced it.
    sends = [x for x in b.tasks if x.kind == "pp"]
    assert all(x.stream == "compute" for x in sends)
    assert all(x.stream == "pp" for x in a.tasks if x.kind == "pp")
    # One micro-batch: nothing follows a send on its stage, so blocking costs nothing.
    assert simulate(from_dict(_two_stage("megatron-deepspeed", 1))).iteration_time_s == \
        pytest.approx(simulate(from_dict(_two_stage("megatron", 1))).iteration_time_s, rel=1e-12)


def test_deepspeed_reduces_gradients_after_the_backward():
    # ZeRO-1/2 overlap_comm defaults to false (DeepSpeed config docs): no bucket starts before the
    # last backward pass ends; Megatron's first bucket leaves during it.
    def first_bucket_vs_backward(framework: str) -> float:
        r = simulate(from_dict(_dp8(framework, zero=1)))
        last_b = max(x.end for x in r.tasks if x.kind == "backward")
        return min(x.start for x in r.tasks if x.kind == "dp") - last_b
    assert first_bucket_vs_backward("deepspeed") >= 0
    assert first_bucket_vs_backward("megatron") < 0


def test_deepspeed_zero3_prefetch_budget_exposes_the_rest_of_a_large_layer():
    # stage3_prefetch_bucket_size = 5e7 parameters: of a 218M-parameter Llama 3 8B layer only
    # 5e7/218e6 of the next gather hides under a long compute; the rest waits in front of the layer.
    # FSDP prefetches the whole layer (BACKWARD_PRE / limit_all_gathers).
    params = 218e6
    long = 1.0                          # seconds of compute: more than any gather
    ds = fsdp_cost(params, 0.0, Network(from_dict(_dp8("deepspeed", zero=3))), 0, long, long, 1, True)
    fs = fsdp_cost(params, 0.0, Network(from_dict(_dp8("fsdp", zero=3))), 0, long, long, 1, True)
    gather = ds.exposed_f + ds.hidden_f
    assert fs.exposed_f == 0.0
    assert ds.exposed_f == pytest.approx(gather * (1 - 5e7 / params), rel=1e-9)


def test_fp32_gradient_accumulation_adds_six_bytes_per_weight_to_the_wgrad_epilogue():
    # Megatron's gradient_accumulation_fusion (wgrad_gemm_accum_fp32 into main_grad): the weight-
    # gradient GEMM reads and writes its fp32 output (8 B per weight) instead of writing bf16 (2 B).
    # DeepSpeed's HF models write bf16 .grad; Megatron-DeepSpeed keeps Megatron's fused kernel.
    from explorer.physics.hardware import HBM_EFFICIENCY
    from explorer.physics.kernels import gemm_seconds
    from explorer.workloads.transformer.layer import layer_cost
    assert [profile(n).wgrad_accumulate_fp32 for n in FRAMEWORKS] == [True, False, True, False, False, False]
    gpu = from_dict(_dp8("megatron")).hardware.gpu
    hbm = gpu.hbm_GBps * 1e9 * HBM_EFFICIENCY
    # A compute-bound GEMM: the epilogue is serial (EPILOGUE_EXPOSED = 1), so exactly 6 B x m x n more.
    extra = gemm_seconds(8192, 8192, 8192, "bf16", gpu, 0.8, 1, True) - \
        gemm_seconds(8192, 8192, 8192, "bf16", gpu, 0.8, 1, False)
    assert extra == pytest.approx(8192 * 8192 * 6 / hbm, rel=1e-9)
    # In a layer: megatron's wgrad is slower than deepspeed's by about 6 B per weight of the layer.
    meg, ds = (layer_cost(from_dict(_dp8(f)), False) for f in ("megatron", "deepspeed"))
    assert meg.bwd_weight.gemm_s - ds.bwd_weight.gemm_s == pytest.approx(6 * meg.params / hbm, rel=0.02)
    assert meg.fwd.gemm_s == ds.fwd.gemm_s


def test_torchtitan_selective_op_ac_recomputes_every_other_matmul():
    # torchtitan op-level SAC saves matmul and SDPA outputs except every second matmul of the layer:
    # wk, wo and w3 of a Llama layer (order wq, wk, wv, wo, w1, w3, w2), plus the element-wise ops.
    from explorer.workloads.transformer.layer import layer_cost
    raw = _dp8("fsdp", zero=3)
    raw["training"]["recompute"] = "selective"
    lc = layer_cost(from_dict(raw), False)
    tokens, h, kv, f = 8192, 4096, 1024, 14336          # Llama 3 8B, seq 8192, micro-batch 1
    assert lc.recompute.gemm_flops == pytest.approx(2 * tokens * (h * kv + h * h + h * f), rel=1e-12)
    # ... which is 36.5% of the layer's linear forward FLOPs (wq wk wv wo w1 w3 w2), no attention core.
    linear = 2 * tokens * (h * (h + 2 * kv) + h * h + 3 * h * f)
    assert lc.recompute.gemm_flops / linear == pytest.approx(0.365, abs=0.001)
    assert lc.recompute.stream_bytes > 0
    # Megatron's selective recomputes its recompute_modules (default: the attention core) instead.
    raw["training"]["framework"] = "megatron"
    meg = layer_cost(from_dict(raw), False)
    assert meg.recompute.gemm_flops == pytest.approx(meg.attn_core_fwd.gemm_flops, rel=1e-12)


def test_deepspeed_pipeline_sends_the_whole_activation_from_every_tp_rank():
    # Megatron: scatter/gather (SC21 Sec. 4.1), each TP rank sends 1/tp of b*s*h; DeepSpeed's
    # PipelineEngine sends the stage output as it is (replicated over TP) unless it is already
    # sequence-parallel sharded.
    from explorer.taskgraph.layer import pp_message_bytes
    raw = {"model": {"layers": 8, "hidden": 4096, "heads": 32, "vocab": 32000, "seq_len": 2048},
           "training": {"global_batch": 8, "micro_batch": 2},
           "hardware": {"gpu": "a100-80gb"}, "cluster": {"gpus_per_node": 8, "nodes": 2},
           "parallelism": {"tp": 4, "pp": 4, "zero": 1}}
    full = 2 * 2048 * 4096 * 2
    for framework, expect in (("megatron", full / 4), ("megatron-deepspeed", full), ("deepspeed", full)):
        raw["training"]["framework"] = framework
        assert pp_message_bytes(from_dict(raw)) == expect, framework
    raw["parallelism"]["sequence_parallel"] = True
    assert pp_message_bytes(from_dict(raw)) == full / 4


def _tp4(framework: str, overlap: bool) -> dict:
    """Llama 3 8B on 4 H100s of one node, TP 4 with sequence parallelism."""
    return {"model": {"preset": "llama3-8b"}, "training": {"global_batch": 4, "framework": framework},
            "hardware": {"gpu": "h100-sxm"}, "cluster": {"gpus_per_node": 4, "nodes": 1},
            "parallelism": {"tp": 4, "sequence_parallel": True, "zero": 0},
            "communication": {"tp_overlap": overlap}}


def test_userbuffers_tp_overlap_runs_the_overlapped_gemms_on_116_of_132_sms():
    """Transformer Engine's userbuffers (initialize_ub default_cfg: "pipeline" and "bulk" take
    num_sm 16 with set_sm_margin; "pipeline" cuts its GEMM into num_splits 4, "ring_exchange" into
    tp_size chunks): with tp_overlap the row-parallel forward GEMMs run 132/116 as long, in 4
    chunks; the column-parallel forward in tp chunks on every SM; the column-parallel wgrad whole,
    132/116 as long.  PyTorch's async TP (torchtitan) moves chunks by copy engine: no SM margin."""
    from explorer.physics.hardware import default_gemm_efficiency
    from explorer.physics.kernels import gemm_seconds
    from explorer.workloads.transformer.layer import layer_cost
    assert profile("megatron").tp_overlap_sms == 16 and profile("torchtitan").tp_overlap_sms == 0
    off, on = (layer_cost(from_dict(_tp4("megatron", o)), False) for o in (False, True))
    gpu = from_dict(_tp4("megatron", True)).hardware.gpu
    eff = default_gemm_efficiency(gpu, "bf16")

    def t(m, n, k, acc=False):
        return gemm_seconds(m, n, k, "bf16", gpu, eff, 1, acc)
    # Llama 3 8B on one of 4 TP ranks, 8192 tokens: qkv (4096 -> 1536), gate+up (4096 -> 7168)
    # column-parallel; out (1024 -> 4096), down (3584 -> 4096) row-parallel.
    col, row = ((1536, 4096), (7168, 4096)), ((4096, 1024), (4096, 3584))
    margin = 132 / 116
    want_fwd = sum(4 * t(2048, n, k) for n, k in col) + margin * sum(4 * t(2048, n, k) for n, k in row)
    attn = on.attn_core_fwd.gemm_s
    assert on.fwd.gemm_s - attn == pytest.approx(want_fwd, rel=1e-9)
    assert off.fwd.gemm_s - attn == pytest.approx(sum(t(8192, n, k) for n, k in col + row), rel=1e-9)
    # wgrad dW = X^T dY (k x n over the 8192 tokens, into Megatron's fp32 main_grad): bulk overlap
    # keeps it whole, on 116 SMs.
    want_w = margin * sum(t(k, n, 8192, True) for n, k in col) + sum(t(k, n, 8192, True) for n, k in row)
    assert on.bwd_weight.gemm_s == pytest.approx(want_w, rel=1e-9)
    assert off.bwd_weight.gemm_s == pytest.approx(sum(t(k, n, 8192, True) for n, k in col + row), rel=1e-9)
    titan_off, titan_on = (layer_cost(from_dict(_tp4("torchtitan", o)), False) for o in (False, True))
    assert titan_on.bwd_weight.gemm_s == titan_off.bwd_weight.gemm_s      # no SMs taken


def test_torch_compile_fuses_the_element_wise_chains_of_eager_fsdp():
    """torchtitan compiles each block (Inductor fuses RMSNorm, rotary, SiLU x up): the fused pass
    counts, at Inductor's measured 2.0 TB/s on H100 against the 2.68 the simulator gives hand-fused
    kernels (QuACK blog, softmax): 1.34x Megatron's element-wise time; eager FSDP/FSDP2's on a Llama
    layer is 4.18x (its op chains' passes at their measured bandwidth, config/frameworks.py);
    everything else is the FSDP profile, so the step is faster by the element-wise time alone."""
    from explorer.workloads.transformer.layer import layer_cost
    assert profile("fsdp2").elementwise_factor == EAGER_ELEMENTWISE_FACTOR
    assert profile("torchtitan").elementwise_factor == pytest.approx(1.34)
    eager, fsdp2, titan = (layer_cost(from_dict(_dp8(n, zero=3)), False)
                           for n in ("fsdp", "fsdp2", "torchtitan"))
    assert fsdp2 == eager
    ratio = EAGER_LLAMA_ELEMENTWISE_FACTOR / 1.34
    assert eager.fwd.stream_bytes == pytest.approx(ratio * titan.fwd.stream_bytes)
    mega = layer_cost(from_dict(_dp8("megatron", zero=3)), False)
    assert titan.fwd.stream_bytes == pytest.approx(1.34 * mega.fwd.stream_bytes)
    assert eager.fwd.gemm_s == titan.fwd.gemm_s
    t_eager, t_titan = (simulate(from_dict(_dp8(n, zero=3))).iteration_time_s for n in ("fsdp", "torchtitan"))
    assert t_titan < t_eager


def test_tp_overlap_without_sequence_parallelism_keeps_every_sm():
    """Megatron-LM refuses tp_comm_overlap without sequence parallelism (arguments.py: "Tensor
    parallel communication/GEMM overlap can happen only when sequence parallelism is enabled"), so
    the userbuffers SM margin and chunking apply only with SP; without it the GEMMs are unchanged."""
    from explorer.workloads.transformer.layer import layer_cost
    raw_off, raw_on = _tp4("megatron", False), _tp4("megatron", True)
    for raw in (raw_off, raw_on):
        raw["parallelism"]["sequence_parallel"] = False
    off, on = (layer_cost(from_dict(r), False) for r in (raw_off, raw_on))
    assert on == off
    with_sp = layer_cost(from_dict(_tp4("megatron", True)), False)
    assert with_sp.fwd.gemm_s > on.fwd.gemm_s
