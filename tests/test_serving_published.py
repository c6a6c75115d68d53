"""Serving against published measurements (issue 37, validation), and the claims the shipped serving
scenarios' descriptions make (each figure they quote is the simulator's, to the digits quoted).

Tolerance: 25 % for a published figure (the brief's: beyond it the test is an xfail with the
measured figure).  Sources:
- NVIDIA TensorRT-LLM, docs/source/performance/perf-overview.md (v1.0): Llama 3.3 70B FP8 on H100 SXM
  80GB, TP 2, ISL/OSL 1,000/1,000, maximum-throughput run: 4,205 output tokens/s on 2 GPUs.
- DeepSeek, "Day 6: DeepSeek-V3/R1 Inference System Overview" (Feb 2025; H800; 24-hour average):
  14.8k output tokens/s per decode node; 73.7k input tokens/s per prefill node with a 56.3 % KV-cache
  hit rate.
- NVIDIA NIM for LLMs benchmarking, "Performance" (docs.nvidia.com/nim/benchmarking/llm, version 1.0.0
  of the guide): Llama-3.3-70b-instruct NIM 1.8.0, 2 x H100 80G, fp8 TP2, measured with AIPerf;
  concurrency 1: 5,000 input / 500 output tokens TTFT 406.77 ms, ITL 18.58 ms; 500 / 2,000 TTFT
  47.77 ms, ITL 18.91 ms; concurrency 25 and 50 of 5,000 / 500: ITL 38.75 and 59.73 ms.
"""
from __future__ import annotations

from functools import cache

import pytest

from explorer.config import shipped_scenarios
from explorer.scenario import load
from explorer.serving.overhead import KERNEL_GAP_S, SMALL_KERNEL_S
from explorer.simulate import simulate

TOLERANCE = 0.25


@cache
def figures(name: str, ov: tuple = ()) -> dict:
    return simulate(load(shipped_scenarios()[name], dict(ov))).inference


def within(ours: float, published: float) -> bool:
    return abs(ours / published - 1) <= TOLERANCE


# --- published measurements ----------------------------------------------------------------------

TRTLLM_TP2_PER_GPU = 4205 / 2           # output tokens/s per GPU


def test_llama3_70b_fp8_tp2_matches_tensorrt_llm_max_throughput():
    f = figures("serve-llama3-70b-tp8", (("parallelism.tp", 2),))
    assert f["batch"] <= f["max_batch"]                   # the max-throughput run fills the KV cache
    assert within(f["output_tokens_per_s_per_gpu"], TRTLLM_TP2_PER_GPU), f["output_tokens_per_s_per_gpu"]


DEEPSEEK_DECODE_PER_GPU = 14_800 / 8                     # output tokens/s per H800 of a decode node
DEEPSEEK_PREFILL_PER_NODE = 73_700 * (1 - 0.563)         # computed (not cache-hit) input tokens/s


def test_deepseek_v3_decode_matches_deepseeks_inference_system():
    f = figures("serve-deepseek-v3-disaggregated")
    assert within(f["decode_tokens_per_s_per_gpu"], DEEPSEEK_DECODE_PER_GPU), f["decode_tokens_per_s_per_gpu"]


def test_deepseek_v3_prefill_matches_deepseeks_inference_system():
    sc = load(shipped_scenarios()["serve-deepseek-v3-disaggregated"])
    f = figures("serve-deepseek-v3-disaggregated")
    pool = sc.inference.disaggregated.prefill
    nodes = pool.gpus / sc.cluster.gpus_per_node
    per_node = pool.replicas / f["ttft_s"] * sc.inference.prompt_tokens / nodes
    assert within(per_node, DEEPSEEK_PREFILL_PER_NODE), per_node
    assert per_node == pytest.approx(32_900, rel=0.002)     # the description's "32.9k"


# --- the descriptions' claims ----------------------------------------------------------------------

def test_llama_description_claims():
    f = figures("serve-llama3-70b-tp8")
    assert f["decode_step_s"] == pytest.approx(0.0201, abs=0.00005)
    assert f["weights_GB"] == pytest.approx(8.8, abs=0.05)
    assert "47 % in TP all-reduce" in f["bottleneck"] and "28 % in the GEMMs" in f["bottleneck"]
    assert f["kv_cache_GB"] == pytest.approx(10.5, abs=0.05)
    assert f["max_batch"] == 1775
    assert f["output_tokens_per_s_per_gpu"] == pytest.approx(1049, abs=0.5)
    small = figures("serve-llama3-70b-tp8", (("inference.batch", 8),))
    assert small["decode_step_s"] == pytest.approx(0.0081, abs=0.00005)
    assert small["bottleneck"].endswith("51 % in the GEMMs, 35 % in TP all-reduce latency within one node")
    across = (("cluster.nodes", 2), ("inference.batch", 8), ("parallelism.tp", 16))
    two = figures("serve-llama3-70b-tp8", across)
    assert two["decode_step_s"] == pytest.approx(0.0102, abs=0.00005)
    assert "61 % in TP all-reduce latency across 2 nodes" in two["bottleneck"]
    tp2 = figures("serve-llama3-70b-tp8", (("parallelism.tp", 2),))
    assert tp2["max_batch"] == 281
    assert tp2["output_tokens_per_s_per_gpu"] == pytest.approx(2315, abs=0.5)
    assert round(100 * (tp2["output_tokens_per_s_per_gpu"] / TRTLLM_TP2_PER_GPU - 1)) == 10
    # "1.5 ms of the 15.7 ms": the small kernels and every GEMM's and attention kernel's gap.
    one = figures("serve-llama3-70b-tp8", NIM_500_2000)
    kernels = 80 * 5 + 1                      # 4 GEMMs and the attention kernel a layer, the logits
    per_kernel = one["decode_step_breakdown_s"]["small_kernels"] + kernels * KERNEL_GAP_S
    assert (round(per_kernel * 1e3, 1), round(one["decode_step_s"] * 1e3, 1)) == (1.5, 15.7)


def test_deepseek_description_claims():
    f = figures("serve-deepseek-v3-disaggregated")
    assert f["decode_step_s"] == pytest.approx(0.0549, abs=0.00005)
    assert "55 % in EP all-to-all latency across 16 nodes" in f["bottleneck"]
    assert f["kv_transfer_bytes"] == pytest.approx(144e6, rel=0.005)
    assert f["kv_transfer_s"] == pytest.approx(0.003, abs=0.0001)
    assert f["kv_cache_GB"] == pytest.approx(25, abs=0.5) and f["weights_GB"] == pytest.approx(22, abs=0.5)
    assert f["max_batch"] == 191     # the decode pool runs no prompt pass: its workspace is the batch's
    assert f["decode_tokens_per_s_per_gpu"] == pytest.approx(1602, abs=0.5)
    assert round(100 * (f["decode_tokens_per_s_per_gpu"] / DEEPSEEK_DECODE_PER_GPU - 1)) == -13


def test_3d_dram_description_claims():
    """serve-3d-dram: Stratum's 30.34 TB/s with an H100's logic; decode turns compute- and
    all-reduce-bound, and TP 2 then beats the H100 by the figures quoted."""
    sc = load(shipped_scenarios()["serve-3d-dram"])
    assert sc.hardware.gpu.hbm_GBps == 30_340
    f = figures("serve-3d-dram")
    h100 = figures("serve-llama3-70b-tp8", (("inference.batch", 64),))
    assert f["weights_GB"] / (30_340 * 0.8) == pytest.approx(0.36e-3, abs=0.005e-3)    # seconds per step
    assert f["decode_step_s"] == pytest.approx(0.0099, abs=0.00005)
    assert f["decode_step_breakdown_s"]["gemm"] == pytest.approx(0.0036, abs=0.00005)
    assert h100["decode_step_s"] == pytest.approx(0.0114, abs=0.00005)
    assert h100["decode_step_breakdown_s"]["gemm"] == pytest.approx(0.0043, abs=0.00005)
    # "the small kernels of the 80 layers take 0.9 ms against 1.1 on H100s"
    assert f["decode_step_breakdown_s"]["small_kernels"] == pytest.approx(0.0009, abs=0.00005)
    assert h100["decode_step_breakdown_s"]["small_kernels"] == pytest.approx(0.0011, abs=0.00005)
    assert "52 % in TP all-reduce" in f["bottleneck"]
    tp2, h100_tp2 = figures("serve-3d-dram", (("parallelism.tp", 2),)), \
        figures("serve-llama3-70b-tp8", (("inference.batch", 64), ("parallelism.tp", 2)))
    assert tp2["decode_step_s"] == pytest.approx(0.0129, abs=0.00005)
    assert h100_tp2["decode_step_s"] == pytest.approx(0.0204, abs=0.00005)
    assert round(tp2["output_tokens_per_s_per_gpu"]) == 1836
    assert round(h100_tp2["output_tokens_per_s_per_gpu"]) == 1265
    # Heads or layers over the chips (tests/test_sweep_serving.py checks the sweep's rows and pick).
    tp1 = figures("serve-3d-dram", (("parallelism.tp", 1),))
    assert tp1["max_batch"] == 33 < tp1["batch"] == 64
    tp2pp2 = figures("serve-3d-dram", (("parallelism.tp", 2), ("parallelism.pp", 2)))
    assert (tp2["max_batch"], tp2pp2["max_batch"]) == (282, 779)
    # A prefill stops each stage for its own share while the other decodes (serving/deploy._prefill):
    # Less when each prefill was charged the pipeline's whole latency (1,054/s against 1,231 then).
    assert round(tp2pp2["output_tokens_per_s_per_gpu"]) == 1101
    assert round(tp2["output_tokens_per_s_per_gpu"]) > round(figures(
        "serve-3d-dram", (("parallelism.tp", 4),))["output_tokens_per_s_per_gpu"])


def test_deepseek_description_suggestions():
    ep64 = figures("serve-deepseek-v3-disaggregated", (("inference.disaggregated.decode.ep", 64),))
    assert ep64["weights_GB"] == pytest.approx(27.3, abs=0.05) and ep64["max_batch"] == 173
    assert ep64["decode_step_s"] == pytest.approx(0.0502, abs=0.00005)
    assert "across 8 nodes" in ep64["bottleneck"]
    slow = figures("serve-deepseek-v3-disaggregated", (("inference.disaggregated.kv_transfer_GBps", 1),))
    assert slow["kv_transfer_s"] == pytest.approx(0.144, abs=0.0005)
    assert slow["requests_per_s"] == figures("serve-deepseek-v3-disaggregated")["requests_per_s"]


# --- one request at a time, and the same model under load (NVIDIA NIM 1.8.0, module docstring) -----

NIM_5000_500 = (("parallelism.tp", 2), ("inference.batch", 1), ("inference.prompt_tokens", 5000),
                ("inference.output_tokens", 500))
NIM_500_2000 = (("parallelism.tp", 2), ("inference.batch", 1), ("inference.prompt_tokens", 500),
                ("inference.output_tokens", 2000))
# A hunt found these rows 24 % and 19 % fast (TPOT 14.30 and 15.10 ms; TTFT -25 %, -14 %): nothing
# per kernel was charged.  At concurrency 1 no other prompt interrupts the decode, so the measured ITL
# is the decode step alone.  Pricing vLLM's small kernels and the gaps brought them within 15 %
# (-11 %, -13 %: 16.61 and 16.49 ms), but that priced each FP8 linear's input quantisation as a
# kernel of its own, which both vLLM and TensorRT-LLM fuse into the kernel before it (overhead.py):
# without those 320 kernels (0.74 ms) the steps are 15.86 and 15.75 ms, -14.6 % and -16.7 %.  The
# tolerance is 17 % for that reason, within the module's 25 %; the rest is not modelled (tests/ and
# the descriptions name it: TensorRT-LLM's kernels, host time per step).
NIM_ITL_TOLERANCE = 0.17


@pytest.mark.parametrize(("ov", "ttft_ms", "itl_ms", "ours_ttft", "ours_step"),
                         [(NIM_5000_500, 406.77, 18.58, 386.06, 15.86),
                          (NIM_500_2000, 47.77, 18.91, 40.49, 15.75)], ids=["5000-500", "500-2000"])
def test_llama_70b_fp8_tp2_one_request_at_a_time_matches_nim(ov, ttft_ms, itl_ms, ours_ttft, ours_step):
    f = figures("serve-llama3-70b-tp8", ov)
    assert f["decode_step_s"] * 1e3 == pytest.approx(ours_step, abs=0.005)
    assert f["ttft_s"] * 1e3 == pytest.approx(ours_ttft, abs=0.005)
    assert abs(f["decode_step_s"] * 1e3 / itl_ms - 1) <= NIM_ITL_TOLERANCE
    assert within(f["ttft_s"] * 1e3, ttft_ms)
    # One token's small kernels all sit at their 2.32 us floor: 5 a layer (2 norms, rotary, KV write,
    # SiluAndMul; the FP8 quantisations are fused) and 6 a step (embedding, final norm, 4 sampling passes).
    assert f["decode_step_breakdown_s"]["small_kernels"] == pytest.approx((80 * 5 + 6) * SMALL_KERNEL_S,
                                                                          rel=1e-9)


@pytest.mark.parametrize(("batch", "itl_ms", "ours_tpot"), [(25, 38.75, 39.66), (50, 59.73, 63.66)])
def test_the_same_model_under_load_stays_within_the_hunts_12_percent(batch, itl_ms, ours_tpot):
    """Concurrency 25 and 50 of 5,000 + 500 tokens: every sequence's tokens wait for the others'
    prefills, so the measured ITL is TPOT (serving/deploy.py).  The hunt had them at -6 % and -2 %;
    the per-kernel costs and the prefill's small-kernel traffic move them to +2 % and +7 % (+6 % and
    +10 % while each FP8 linear's input quantisation was priced as a kernel of its own)."""
    f = figures("serve-llama3-70b-tp8", NIM_5000_500[:1] + (("inference.batch", batch),) + NIM_5000_500[2:])
    assert f["tpot_s"] * 1e3 == pytest.approx(ours_tpot, abs=0.005)
    assert abs(f["tpot_s"] * 1e3 / itl_ms - 1) <= 0.12
