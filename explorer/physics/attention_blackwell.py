"""Measured fused-attention rates on Blackwell (B200), by sequence length: the curves
physics/attention.py prices Blackwell GPUs (B200, GB200, GB300) with, as fractions of B200's dense
bf16 peak.

Source: NVIDIA's cuDNN frontend repository, benchmark/sdpa_benchmark_training/artifacts at commit
0b1577c (2025-10-10, "Updated results with cuDNN 9.13.1 for B200 and GB300"): one B200, bf16,
batch 1, 128 query heads, 8 key/value heads (Llama 3.1 405B's attention), head dim 128, causal;
TFLOP/s counted as 4*b*s*s*h*d/2 forward and 2.5x that backward (the counts
workloads/transformer/layer.attention_core charges); median of 10 calls, each timed with CUDA events
around the call, with a sleep between calls against throttling (a burst rate: the sustained clock of
a training step is applied on top, physics/power.py, as for every other generation).
- cuDNN: sdpa_fp8_benchmark_results_NVIDIA_B200.csv, its bf16 rows (cudnn.backend_version 91301,
  the graph executed through the cuDNN frontend, as Transformer Engine's FusedAttention does).  The
  FlashAttention-4 paper (Zadouri et al., arXiv 2603.05451) compares against this release, cuDNN
  9.13, on B200; its figures' bars are not transcribed here (not readable as text in any stored
  copy).  Its text is consistent with them: FlashAttention-4 reaches up to 1,613 TFLOP/s "(71%
  utilization)", i.e. of 2,250, the peak used here, and is up to 1.3x faster than cuDNN 9.13;
  1.3x the rates below would pass 1,613 from 8k on, so that largest gain is not at 8k-131k.
- FlashAttention-2: sdpa_bf16_benchmark_results_NVIDIA_B200.csv, backend ``flash_attention``
  (flash-attn 2.7.4.post1's ``flash_attn_func``, what DeepSpeed and Megatron-DeepSpeed call).
  FlashAttention-2 issues Ampere's mma.sync, which Blackwell did not speed up: 425 TFLOP/s at 16k
  on B200 (0.19 of peak) against 335 on H100 (0.34).  Its rate is not a fraction of the peak:
  a GB200 (peak 2,500) measured the same rate, 430 / 352 TFLOP/s forward / backward at 16k
  (commit d48a60e, 2025-12-18, sdpa_bf16_benchmark_results_NVIDIA_GB200.csv, PyTorch's
  FlashAttention-2), so B200's fraction prices GB200 11 % fast (2,500 / 2,250).

The sequence lengths are the measured ones from 2k.  At 2k the benchmark's launch (1 x 128 heads of
2,048 queries) is the FA3 paper's 2k point behind the Hopper curves (8 x 16 heads of 2,048 queries:
its benchmark keeps 16k tokens at hidden size 2,048, flash-attn benchmarks/benchmark_flash_attention.py
``bs_seqlen_vals``); beyond 2k it holds more heads than those points, enough to fill the GPU either
way.  Its 512 and 1k points hold a quarter and a half of that launch, in calls of 35 and 61 us (244
and 561 TFLOP/s forward) where launch time weighs, so they are left out: below 2k the 2k rate is held
(an upper bound for shorter sequences).  Beyond 131k the 131k rate is held.
"""
from __future__ import annotations

B200_BF16_PEAK = 2250.0        # TFLOP/s, dense bf16, B200 (DGX B200 data sheet; gpus.yaml b200)
BLACKWELL_SEQ_POINTS = (2048, 4096, 8192, 16384, 32768, 65536, 131072)

# TFLOP/s on B200 at BLACKWELL_SEQ_POINTS, head dim 128, causal (sources above).
BLACKWELL_FWD_128 = {
    "cudnn": (908, 1141, 1384, 1475, 1515, 1494, 1422),
    "flash2": (254, 343, 400, 425, 436, 441, 444),
}
BLACKWELL_BWD_128 = {
    "cudnn": (545, 833, 995, 1152, 1180, 1236, 1128),
    "flash2": (199, 273, 318, 337, 346, 349, 348),
}
