"""What a serving pass pays per kernel beside its GEMMs, its attention core and its collectives: the
gap between one kernel and the next, and the small kernels of every layer (norms, rotary embedding,
KV-cache writes, the MLP's activation, routing), as vLLM runs a decoder layer.  At batch 1 they are
6 % of a decode step (Llama 3 70B, FP8, TP 2 on H100s: 0.94 of 15.7 ms, and the gaps another 0.5);
a large batch's GEMMs and all-reduces dwarf them.

- The gap (:data:`KERNEL_GAP_S`): a kernel cannot start before the one it depends on has finished,
  and between them the GPU does no work.  Hazy Research report that even with CUDA graphs a launch
  costs about 1.3 us on an H100 with the GPU idle (Spector, Juravsky et al., "Look Ma, No Bubbles!
  Designing a Low-Latency Megakernel for Llama-1B", hazyresearch.stanford.edu/blog/
  2025-05-27-no-bubbles, May 2025: vLLM and SGLang reach at most 50 % of an H100's bandwidth
  decoding Llama-1B one sequence at a time, one fused kernel 78 %).  Every GEMM, grouped GEMM and
  attention kernel pays it once (step.py).  Checked on a GEMV: vLLM's FP8 GEMM benchmark on an
  H100 (benchmarks/kernels/bench_fp8_gemm.py, timed with triton's do_bench_cudagraph;
  vllm-project/vllm pull request #49363, 2026: N 12,288 x K 5,376, batch 1,
  "fp8-tensor-w-tensor-a-noquant") runs at 5.163 TFLOP/s, 25.59 us for its 66.1 MB of FP8
  weights; 0.8 x 3.35 TB/s (physics/hardware.hbm_efficiency) plus the gap gives 25.96 us (+1.4 %).
  So the bandwidth a GEMV reaches falls with its size without a curve of its own: 0.76 of the
  peak at 66 MB, 0.56 at 8.4 MB (a TP-8 share of an 8,192 x 8,192 FP8 projection).
- A small kernel (:data:`SMALL_KERNEL_S`): one whose bytes take less than its launch.  The same
  benchmark with the activation's per-token FP8 quantisation kernel captured in front of that GEMM
  ("fp8-tensor-w-token-a": 4.733 TFLOP/s, 27.91 us) takes 2.32 us more.  A small kernel of ``b``
  bytes costs max(SMALL_KERNEL_S, KERNEL_GAP_S + b / HBM): its floor at decode, its traffic (at
  hbm_efficiency) in a long prompt's pass.
- The small kernels of one layer, as vLLM's decoder layer runs them (vllm/model_executor/models/
  llama.py, LlamaDecoderLayer.forward): two fused residual-add RMSNorms (each reads and writes the
  hidden vector and the residual), the rotary embedding of q and k, the KV-cache write
  (reshape_and_cache) and SiluAndMul — five small kernels beside five GEMM and attention kernels
  for a dense layer.  An FP8 linear's input quantisation is not a kernel of its own: both engines
  fuse it into the kernel that writes that input (vLLM's compilation passes RMSNorm + quant and
  SiluAndMul + quant, vllm/compilation/fusion.py and activation_quant_fusion.py; TensorRT-LLM's
  fused norm-quantise and FP8-output attention).  MLA adds its two latent RMSNorms; a routed MoE
  layer adds the top-k selection over the router's scores and the weighted sum of each token's
  expert outputs (vLLM's fused_moe: topk_softmax, moe_sum), the routed tokens' activation, and the
  shared experts'.  Per step: the embedding gather on the first stage; the final norm and
  :data:`SAMPLING_KERNELS` passes over the logits on the last.

vLLM captures its decode steps in CUDA graphs unless run eager (``enforce_eager``), and these figures
assume graphs; launched one by one from the host, a kernel costs several microseconds more, not
modelled.  Engines that fuse more (TensorRT-LLM's RMSNorm + quantisation and all-reduce + norm
fusions) run fewer small kernels than the vLLM layer priced here.
"""
from __future__ import annotations

KERNEL_GAP_S = 1.3e-6         # idle time between dependent kernels in a CUDA graph, H100 (Hazy Research)
SMALL_KERNEL_S = 2.32e-6      # a small kernel in a CUDA graph, H100: 27.91 - 25.59 us (vLLM #49363)
ACT_BYTES = 2                 # activations between kernels are 16-bit
SCORE_BYTES = 4               # router scores and logits in fp32
# vLLM's sampler over each sequence's logits (vllm/v1/sample/sampler.py, Sampler.forward): the cast to
# fp32, the division by the temperature, the softmax and the argmax of greedy sampling, four passes
# over rows x vocab scores (random sampling adds the exponential noise and a division: six).
SAMPLING_KERNELS = 4


def small_kernel_s(nbytes: float, hbm_bytes_per_s: float) -> float:
    """Seconds of one small kernel moving ``nbytes`` (module docstring)."""
    return max(SMALL_KERNEL_S, KERNEL_GAP_S + nbytes / hbm_bytes_per_s)


def norm_bytes(rows: float, width: float, residual: bool = True) -> float:
    """An RMSNorm of ``rows`` vectors of ``width``: vLLM's fused_add_rms_norm reads the input and the
    residual and writes both back; a plain one reads and writes the input."""
    return rows * width * ACT_BYTES * (4 if residual else 2)


def rotary_bytes(rows: float, elements: float) -> float:
    """The rotary embedding of ``elements`` query and key elements per row: read and written in place."""
    return rows * elements * ACT_BYTES * 2


def kv_write_bytes(rows: float, kv_bytes: float, kv_element_bytes: float) -> float:
    """The KV-cache write of ``rows`` tokens of ``kv_bytes`` each on this GPU: the 16-bit K and V read,
    the cache written in its own precision."""
    return rows * kv_bytes * (1.0 + ACT_BYTES / kv_element_bytes)


def activation_bytes(rows: float, width: float, gated: bool) -> float:
    """The MLP's activation over ``width`` columns: SiluAndMul reads the gate and the up halves and
    writes their product; a plain activation reads and writes ``width``."""
    return rows * width * ACT_BYTES * (3 if gated else 2)


def routing_bytes(tokens: float, experts: float, pairs: float, hidden: float) -> list[float]:
    """A routed MoE layer's own small kernels on one GPU: the top-k over ``tokens`` x ``experts`` fp32
    scores, the routing table's alignment (a few bytes), and the weighted sum of the ``pairs`` expert
    outputs into ``tokens`` hidden vectors."""
    return [tokens * experts * SCORE_BYTES, 0.0, (pairs + tokens) * hidden * ACT_BYTES]


def sampling_bytes(rows: float, vocab: float) -> list[float]:
    """The sampler's passes over ``rows`` sequences' logits (SAMPLING_KERNELS)."""
    return [rows * vocab * SCORE_BYTES] * SAMPLING_KERNELS
