"""Time of a fused attention core (QK^T, softmax, PV) by kernel, GPU generation, head dimension
and sequence length.

Each kernel's forward and backward rate is its measured TFLOP/s as a fraction of the dense bf16
peak, read from published kernel benchmarks at the sequence lengths they were measured at
(512 ... 16k) and interpolated in log2(s) between them.  Beyond 16k the rate stays at the 16k
value: every curve below has reached its plateau there (the 8k -> 16k step is 0-3 %), and nothing
measured says it grows further, so a 131k sequence runs at the 16k rate (no extrapolated growth).
Blackwell has its own measured curves, 2k ... 131k, held at both ends the same way
(physics/attention_blackwell.py: cuDNN and FlashAttention-2 on B200).

Kernels (``training.attention_kernel``):
- ``flash2``: FlashAttention-2 (Dao, arXiv 2307.08691), the mma.sync kernel of Ampere.
- ``flash3``: FlashAttention-3 (Shah et al., arXiv 2407.08608), Hopper's wgmma/TMA kernel.
- ``cudnn``: cuDNN's fused attention (what Transformer Engine's FusedAttention and PyTorch's
  CUDNN_ATTENTION backend call).
- ``flex``: PyTorch FlexAttention (Dong et al., arXiv 2412.05496), Triton-generated.
- ``triton``: the Triton FlashAttention kernel of 2022-23 (flash-attn's ``flash_attn_triton.py``,
  started from the Triton tutorial's fused attention; what MosaicML's llm-foundry runs for
  ``attn_impl: triton``), priced as FlashAttention-2 slowed by the ratios of the FA2 paper's
  A100 benchmark (:func:`triton_slowdown`).
- ``sdpa``: ``torch.nn.functional.scaled_dot_product_attention`` with its default backend
  priority, which on NVIDIA GPUs dispatches dense causal bf16 attention to its bundled
  FlashAttention-2 (PyTorch 2.2 release notes: "SDPA now supports FlashAttention-2"); cuDNN is
  not first by default on H100 (enabling it was reverted, pytorch/pytorch#128539; measured:
  pytorch/pytorch#142132, SDPA 329 TFLOP/s vs cuDNN 631 at b1 h24 s4608 d128 on H100).
- ``auto``: the framework's default (:func:`resolve_kernel`).

Which kernel ``auto`` means per framework lives here too (:data:`FRAMEWORK_DEFAULT`), as does
the context-parallel ring's per-step kernel shape (:func:`ring_step_seq`).
"""
from __future__ import annotations

from functools import cache
from math import log2

from ..config import GPU
from ..config.generations import architecture, family
from .attention_blackwell import B200_BF16_PEAK, BLACKWELL_BWD_128, BLACKWELL_FWD_128, BLACKWELL_SEQ_POINTS
from .hardware import measured_over_peak
from .kernels import gemm_seconds

KERNELS = ("auto", "sdpa", "flash2", "flash3", "cudnn", "flex", "triton")
SEQ_POINTS = (512, 1024, 2048, 4096, 8192, 16384)
H100_BF16_PEAK = 989.0          # TFLOP/s, dense bf16, H100 SXM5 (the GPU of the figures below)

# --- H100 SXM5 measurements, TFLOP/s at SEQ_POINTS (FA3 paper, arXiv 2407.08608) ---------------
# Forward, causal, head dim 128: Fig. 5 (FlashAttention-2, cuDNN and FlashAttention-3 bars).
FWD_128 = {
    "flash2": (191, 260, 298, 319, 333, 335),
    "cudnn": (315, 410, 484, 518, 529, 539),
    "flash3": (292, 423, 521, 579, 602, 616),
}
# Backward, head dim 128: Fig. 6.
BWD_128 = {
    "flash2": (214, 260, 291, 310, 318, 322),
    "cudnn": (305, 408, 465, 499, 518, 516),
    "flash3": (316, 424, 501, 542, 559, 561),
}
# Head-dimension factors, plateau (16k) rate at head dim d over head dim 128, per kernel.
# Forward: Fig. 5 non-causal head dim 64 (FA2 324, cuDNN 413, FA3 497) over non-causal head dim 128
# (FA2 370, cuDNN 595, FA3 648); causal head dim 256 (FA2 298, cuDNN 509, FA3 642) over causal
# head dim 128 (335, 539, 616).  Backward: Fig. 6 head dim 64 (FA2 291, cuDNN 433, FA3 474) over
# head dim 128 (322, 516, 561); head dim 256 backward is not in the figure: kept at 1.
FWD_DIM = {
    "flash2": {64: 324 / 370, 128: 1.0, 256: 298 / 335},
    "cudnn": {64: 413 / 595, 128: 1.0, 256: 509 / 539},
    "flash3": {64: 497 / 648, 128: 1.0, 256: 642 / 616},
}
BWD_DIM = {
    "flash2": {64: 291 / 322, 128: 1.0, 256: 1.0},
    "cudnn": {64: 433 / 516, 128: 1.0, 256: 1.0},
    "flash3": {64: 474 / 561, 128: 1.0, 256: 1.0},
}
# FlashAttention-2 on A100 (its own paper, Sec. 4.1 / abstract): forward up to 73 %, backward up
# to 63 % of the 312 TFLOP/s peak at head dim 128; its sequence-length curve and head-dim factors
# are taken from the same kernel's H100 curve above (Fig. 5/6 of the FA3 paper), normalised to 16k.
A100_FA2_FWD, A100_FA2_BWD = 0.73, 0.63
# cuDNN on A100: 0.82x FlashAttention-2 for training shapes (six-GPU benchmark table in
# huggingface/transformers PR #48163: "slower on Ampere (0.82x on A100)").
A100_CUDNN_OVER_FA2 = 0.82
# FlexAttention over FlashAttention-2, causal (PyTorch blog "FlexAttention: The Flexibility of
# PyTorch with the Performance of FlashAttention", Aug 2024, A100: 90 % forward, 85 % backward).
FLEX_OVER_FA2_FWD, FLEX_OVER_FA2_BWD = 0.90, 0.85

# --- the Triton FlashAttention kernel (flash-attn's flash_attn_triton.py, Dec 2022) -------------
# FlashAttention-2 paper (Dao, arXiv 2307.08691) Fig. 4 (c)/(d), A100 80GB SXM4, causal,
# forward + backward TFLOP/s at SEQ_POINTS (the figure is assets/flash2_a100_fwd_bwd_benchmark.png
# of Dao-AILab/flash-attention): the "FlashAttention Triton" bars and the FlashAttention-2 bars.
TRITON_FWDBWD = {64: (59, 75, 79, 76, 79, 80), 128: (50, 61, 68, 74, 78, 80)}
FA2_FWDBWD = {64: (88, 119, 140, 156, 165, 171), 128: (99, 133, 155, 173, 182, 189)}
# Forward alone: "FlashAttention-2 is around 1.3-1.5x faster than FlashAttention in Triton in the
# forward pass and around 2x faster in the backward pass" (same paper, Sec. 4.1; Figs. 5-6 are not
# transcribed here): the forward slowdown is the middle of 1.3-1.5; the backward slowdown is what
# the fwd+bwd bars of Fig. 4 leave for it at each point (:func:`triton_slowdown`).
TRITON_FWD_SLOWDOWN = 1.4
# Backward FLOPs over forward FLOPs in the benchmark: "we multiply the forward pass FLOPs by 2.5"
# (5 matmuls against 2, the backward recomputes the scores; FA2 paper Sec. 4.1).
BENCH_BWD_OVER_FWD = 2.5
# No H100 measurement of this kernel exists (the FA3 paper's "Triton" bars are the 2024 Triton
# tutorial kernel with Hopper wgmma, a different kernel).  The MPT runs compiled it with
# triton-pre-mlir (llm-foundry setup.py at 061f2c7: the triton_pre_mlir_sm90 branch), a Triton
# from before its Hopper (wgmma/TMA) support, so it issues Ampere mma.sync on H100 as
# FlashAttention-2 does (FA2 paper Sec. 4.1: on H100 "using no special instructions").  Assumed:
# the A100 ratios to FlashAttention-2 hold on every generation.

# --- what "auto" runs: the framework's default attention --------------------------------------
# megatron / NeMo: Transformer Engine's DotProductAttention, whose backend selection disables
# FlashAttention-2 "to give FusedAttention preference on Hopper+" (TransformerEngine,
# transformer_engine/pytorch/attention/dot_product_attention/utils.py, get_attention_backend), so
# cuDNN on Hopper and Blackwell, FlashAttention-2 on Ampere.  deepspeed / Megatron-DeepSpeed: the
# flash-attn package (FlashAttention-2).  fsdp (PyTorch-native, torchtitan): SDPA, i.e.
# FlashAttention-2, except on Blackwell where torchtitan puts SDPBackend.CUDNN_ATTENTION first for
# compute capability 10.0 (pytorch/torchtitan PR #1196, "Use cudnn backend on B200").
FRAMEWORK_DEFAULT = {
    "megatron": {"ampere": "flash2", "hopper": "cudnn", "blackwell": "cudnn"},
    "deepspeed": {"ampere": "flash2", "hopper": "flash2", "blackwell": "flash2"},
    "megatron-deepspeed": {"ampere": "flash2", "hopper": "flash2", "blackwell": "flash2"},
    "fsdp": {"ampere": "flash2", "hopper": "flash2", "blackwell": "cudnn"},
}
# FSDP2 and torchtitan are the same PyTorch-native stack: SDPA.  (Missing, they fell back to
# Megatron's row and priced cuDNN attention on Hopper: torchtitan's published H100 rows read
# 12-103 % too fast.)  Every framework has a row (tests/test_attention_kernels.py).
FRAMEWORK_DEFAULT["fsdp2"] = FRAMEWORK_DEFAULT["torchtitan"] = FRAMEWORK_DEFAULT["fsdp"]
# Widest head the fused training kernels take: FlashAttention-2 "all head dimensions up to 256"
# (Dao-AILab/flash-attention README), FlashAttention-3 64-256, and cuDNN's fused attention (what
# Transformer Engine's FusedAttention calls) at most 256 as well; wider heads run unfused
# (Transformer Engine's UnfusedDotProductAttention; PyTorch SDPA's memory-efficient or math backend).
MAX_FUSED_HEAD_DIM = 256
# A Blackwell GPU: bf16 dense peak above 1.5x H100's (B200 2,250, GB200 2,500 TFLOP/s against
# 989; NVIDIA data sheets); the presets carry no architecture field.
BLACKWELL_MIN_PEAK = 1.5 * H100_BF16_PEAK


def generation(gpu: GPU) -> str:
    """The attention kernels' generation: the GPU's architecture by its model number
    (config/generations.py) — 'volta' for Volta and Turing (no FlashAttention-2), 'ampere' for
    Ampere and Ada (FlashAttention-2, measured on A100; no FlashAttention-3), 'hopper',
    'blackwell' — else, for a name it does not know, by its figures: 'ampere' without FP8 tensor
    cores (fp8 peak = bf16 peak), 'blackwell' with a bf16 peak above BLACKWELL_MIN_PEAK, 'hopper'.
    (By the figures alone a custom H100 given without its fp8 rate read as an A100, its
    FlashAttention-2 at the A100's fractions of peak: 2.15x too fast.)"""
    arch = architecture(gpu)
    if arch is not None:
        return family(arch)
    if not gpu.fp8_tflops or gpu.fp8_tflops == gpu.peak_tflops:
        return "ampere"
    return "blackwell" if gpu.peak_tflops > BLACKWELL_MIN_PEAK else "hopper"


def resolve_kernel(kernel: str, framework: str, gpu: GPU, dtype: str = "bf16") -> str:
    """The kernel that runs: ``auto`` -> the framework's default on this GPU generation, ``sdpa``
    -> its FlashAttention-2 backend; ``flash3`` exists only for Hopper (wgmma/TMA), elsewhere the
    flash-attn package runs its FlashAttention-2 kernel.  No fused kernel here runs fp32
    (FlashAttention-2/3 and cuDNN's fused attention take fp16/bf16 only) or runs on Volta and
    Turing (flash-attn needs sm80; cuDNN's fused attention sm80+): there PyTorch's SDPA falls back
    to its memory-efficient kernel, priced as the unfused core's batched GEMMs in ``dtype``
    (``none``; its memory stays the fused kernel's: no s x s scores are kept).  Heads wider than
    :data:`MAX_FUSED_HEAD_DIM` run unfused altogether, as ``training.flash_attention`` false
    (workloads/transformer/attention.fused)."""
    gen = generation(gpu)
    if kernel == "none" or dtype == "fp32" or gen == "volta":
        return "none"
    if kernel == "auto":
        kernel = FRAMEWORK_DEFAULT[framework][gen]
    if kernel == "sdpa":
        return "flash2"
    if kernel == "flash3" and gen != "hopper":
        return "flash2"
    return kernel


def _interp_log2(x: float, xs: tuple[float, ...], ys: tuple[float, ...]) -> float:
    """Piecewise-linear in log2(x), held flat outside the measured range (the plateau)."""
    if x <= xs[0]:
        return ys[0]
    if x >= xs[-1]:
        return ys[-1]
    for i in range(1, len(xs)):
        if x <= xs[i]:
            t = (log2(x) - log2(xs[i - 1])) / (log2(xs[i]) - log2(xs[i - 1]))
            return ys[i - 1] + t * (ys[i] - ys[i - 1])
    return ys[-1]


def _h100_fraction(kernel: str, backward: bool, head_dim: float, seq_len: float | None) -> float:
    """A flash2/cudnn/flash3 kernel's fraction of H100's bf16 peak (the figures above)."""
    curve = (BWD_128 if backward else FWD_128)[kernel]
    rate = curve[-1] if seq_len is None else _interp_log2(seq_len, SEQ_POINTS, tuple(map(float, curve)))
    dims = (BWD_DIM if backward else FWD_DIM)[kernel]
    keys = tuple(sorted(dims))
    return rate / H100_BF16_PEAK * _interp_log2(head_dim, keys, tuple(dims[k] for k in keys))


def kernel_fraction(kernel: str, gpu: GPU, backward: bool, head_dim: float = 128,
                    seq_len: float | None = None) -> float:
    """Isolated fraction of the bf16 dense peak a resolved kernel (flash2, flash3, cudnn, flex,
    triton) reaches; ``seq_len`` None = long sequences (the 16k point).

    Hopper: the H100 figures.  Ampere: FlashAttention-2 at its A100 plateau with its H100 curve's
    shape; cuDNN 0.82x of it.  Blackwell (B200, GB200, GB300): cuDNN and FlashAttention-2 measured
    on B200 (:func:`_blackwell_fraction`; flash3, which does not run there, as FlashAttention-2).
    triton: FlashAttention-2's fraction on the same GPU over its measured slowdown (an mma.sync
    kernel like FlashAttention-2, so on Blackwell it follows FlashAttention-2's B200 rate).  flex:
    FlashAttention-2's fraction over its measured ratio to it; on Blackwell the Hopper
    FlashAttention-2 fraction (what it was before the B200 curves; no per-length Blackwell
    measurement of FlexAttention's Triton kernels is sourced, and Triton emits Blackwell's own MMA
    instructions, so FlashAttention-2's mma.sync slowdown there is not its)."""
    if kernel == "flex":
        ratio = FLEX_OVER_FA2_BWD if backward else FLEX_OVER_FA2_FWD
        if generation(gpu) == "blackwell":
            return ratio * _h100_fraction("flash2", backward, head_dim, seq_len)
        return ratio * kernel_fraction("flash2", gpu, backward, head_dim, seq_len)
    if kernel == "triton":
        return kernel_fraction("flash2", gpu, backward, head_dim, seq_len) \
            / triton_slowdown(backward, head_dim, seq_len)
    gen = generation(gpu)
    if gen == "ampere":
        return _ampere_fa2(backward, head_dim, seq_len) * (A100_CUDNN_OVER_FA2 if kernel == "cudnn" else 1.0)
    if gen == "blackwell":
        return _blackwell_fraction(kernel, backward, head_dim, seq_len)
    return _h100_fraction(kernel, backward, head_dim, seq_len)


def _blackwell_fraction(kernel: str, backward: bool, head_dim: float, seq_len: float | None) -> float:
    """A cudnn or flash2 kernel's fraction of B200's bf16 peak (physics/attention_blackwell.py),
    log2-interpolated over 2k ... 131k and held outside; ``seq_len`` None = the 16k point.  flash3
    is FlashAttention-2 here (resolve_kernel).  Head dims other than 128: the same kernel's Hopper
    head-dim factors (FWD_DIM / BWD_DIM; no Blackwell measurement at other head dims is sourced)."""
    kernel = "flash2" if kernel == "flash3" else kernel
    curve = tuple(map(float, (BLACKWELL_BWD_128 if backward else BLACKWELL_FWD_128)[kernel]))
    rate = (curve[BLACKWELL_SEQ_POINTS.index(16384)] if seq_len is None
            else _interp_log2(seq_len, BLACKWELL_SEQ_POINTS, curve))
    dims = (BWD_DIM if backward else FWD_DIM)[kernel]
    keys = tuple(sorted(dims))
    return rate / B200_BF16_PEAK * _interp_log2(head_dim, keys, tuple(dims[k] for k in keys))


def _ampere_fa2(backward: bool, head_dim: float, seq_len: float | None) -> float:
    """FlashAttention-2's fraction of A100's peak: its A100 plateau (73 % / 63 %) on the shape of
    its H100 curve by sequence length and head dim."""
    shape = _h100_fraction("flash2", backward, head_dim, seq_len) * H100_BF16_PEAK \
        / (BWD_128 if backward else FWD_128)["flash2"][-1]
    return shape * (A100_FA2_BWD if backward else A100_FA2_FWD)


@cache
def _triton_bwd_slowdowns(head_dim: int) -> tuple[float, ...]:
    """The Triton kernel's backward slowdown against FlashAttention-2 at SEQ_POINTS, head dim 64 or
    128: Fig. 4's fwd+bwd time ratio C (FA2 bar over Triton bar) is w * f + (1 - w) * b, where w is
    FA2's forward share of its fwd+bwd time (its A100 rates, backward 2.5x the forward FLOPs) and f
    the forward slowdown; so b = (C - w f) / (1 - w)."""
    out = []
    for s, tri, fa2 in zip(SEQ_POINTS, TRITON_FWDBWD[head_dim], FA2_FWDBWD[head_dim], strict=True):
        fwd_t = 1.0 / _ampere_fa2(False, head_dim, s)
        w = fwd_t / (fwd_t + BENCH_BWD_OVER_FWD / _ampere_fa2(True, head_dim, s))
        out.append((fa2 / tri - w * TRITON_FWD_SLOWDOWN) / (1.0 - w))
    return tuple(out)


def triton_slowdown(backward: bool, head_dim: float = 128, seq_len: float | None = None) -> float:
    """How many times slower the Triton FlashAttention kernel runs than FlashAttention-2 (causal):
    forward 1.4 everywhere; backward by sequence length (log2-interpolated, held at the 16k value
    beyond, like the rates) and head dim (interpolated between 64 and 128, held outside)."""
    if not backward:
        return TRITON_FWD_SLOWDOWN
    by_dim = []
    for d in (64, 128):
        curve = _triton_bwd_slowdowns(d)
        by_dim.append(curve[-1] if seq_len is None else _interp_log2(seq_len, SEQ_POINTS, curve))
    return _interp_log2(head_dim, (64, 128), tuple(by_dim))


def fused_attention_seconds(flops: float, gpu: GPU, kernel: str, in_training: float,
                            backward: bool = False, head_dim: float = 128,
                            seq_len: float | None = None) -> float:
    """Seconds of a fused attention kernel executing ``flops`` of matrix work at the resolved
    ``kernel``'s measured fraction of peak times ``in_training`` (the factor that separates GEMMs
    in a training step from their isolated benchmark; kernels.py)."""
    if flops <= 0:
        return 0.0
    return flops / (gpu.peak_tflops * 1e12 * kernel_fraction(kernel, gpu, backward, head_dim, seq_len)
                    * in_training)


UNFUSED_SEQ_LEN = 2048       # sequence length assumed for unfused attention when none is given


def attention_seconds(flops: float, gpu: GPU, large_efficiency: float, backward: bool = False,
                      kernel: str = "flash3", head_dim: float = 128, seq_len: float | None = None,
                      dtype: str = "bf16") -> float:
    """Seconds of an attention core executing ``flops`` of matrix work with a resolved ``kernel``
    (:func:`resolve_kernel`: fused kernels are bf16/fp16), or ``none`` for the unfused core,
    whose batched GEMMs run in ``dtype`` (fp32: at the GPU's fp32 GEMM peak).

    Fused: at the kernel's measured fraction of peak times the in-training factor
    ``large_efficiency`` / measured_over_peak (what separates GEMMs in a training step from the
    isolated benchmark applies to the attention kernel too).  Unfused: per-head batched GEMMs
    QK^T (s x s x d) and PV (s x d x s), backward as twice the forward's shapes."""
    if flops <= 0:
        return 0.0
    in_training = min(large_efficiency / measured_over_peak(gpu, "bf16"), 1.0)
    if kernel != "none":
        return fused_attention_seconds(flops, gpu, kernel, in_training, backward, head_dim, seq_len)
    s = seq_len or UNFUSED_SEQ_LEN
    per_head = 4.0 * s * s * head_dim                   # QK^T and PV FLOPs of one head, forward
    heads = max(int(flops / per_head), 1)               # the batched GEMMs' group size
    head_seconds = (gemm_seconds(s, s, head_dim, dtype, gpu, large_efficiency, heads)
                    + gemm_seconds(s, head_dim, s, dtype, gpu, large_efficiency, heads))
    return flops * head_seconds / per_head              # backward: the same shapes, twice the FLOPs


# --- context parallelism: the ring's per-step kernels --------------------------------------------
# Megatron-Core / Transformer Engine split each sequence into 2*cp chunks and give rank r chunks r
# and 2cp-1-r (TE attention.py, AttnFuncWithCPAndKVP2P; Megatron-Core get_batch_on_this_cp_rank):
# every rank then does the same causal work.  PyTorch's context_parallel (torchtitan) load-balances
# the same way by default (torch.distributed.tensor.experimental._attention,
# _ContextParallelOptions.enable_load_balance = True, head-tail sharding).  Both are the defaults of
# the frameworks here, so the busiest rank does the mean work (CP_IMBALANCE 1); without balancing,
# rank cp-1 would do (2cp-1)/cp of the mean (contiguous causal blocks: rank r computes 2r+1 halves).
def causal_cp_imbalance(cp: int, balanced: bool = True) -> float:
    """Busiest CP rank's causal attention work over the mean."""
    return 1.0 if balanced or cp <= 1 else (2 * cp - 1) / cp


def ring_step_seq(seq_len: float, cp: int) -> float:
    """Query length of one ring step's kernel: with zig-zag balancing each of the cp steps runs one
    attention call on the rank's s/cp queries (the diagonal step causal over its own s/cp keys,
    the others over half of a peer's, or half of its queries over a whole peer block; TE
    AttnFuncWithCPAndKVP2P.forward), so the kernel's efficiency is the one of an s/cp sequence, not
    of the full s."""
    return seq_len / max(cp, 1)


# The softmax-correction merge after each of the cp-1 non-diagonal steps (TE
# flash_attn_fwd_out_correction, an element-wise kernel): read the step's bf16 partial output and
# the fp32 running output, write the fp32 running output: 2 + 4 + 4 bytes per output element; the
# backward accumulates dQ (fp32, the same 10 bytes per element of Q) and the received dK/dV.
MERGE_BYTES_PER_ELEMENT = 10.0


def ring_merge_bytes(cp: int, out_elements: float, q_elements: float,
                     kv_elements: float) -> tuple[float, float]:
    """HBM bytes of the ring's per-step merges: forward (output correction), backward (dQ and
    dK/dV accumulation), over the cp-1 steps after the first."""
    steps = max(cp - 1, 0)
    return (steps * MERGE_BYTES_PER_ELEMENT * out_elements,
            steps * MERGE_BYTES_PER_ELEMENT * (q_elements + kv_elements))
