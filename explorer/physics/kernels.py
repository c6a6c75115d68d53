"""Time of one GEMM kernel on one GPU, by shape and dtype (attention cores: attention.py).

GEMM (``gemm_seconds``): a roofline with the efficiency losses a tiled GEMM library has, after
NVIDIA, "Matrix Multiplication Background User's Guide" (DU-09799-001, 2023), Sec. 2-3:

    t = max(t_math, t_memory) + EPILOGUE_EXPOSED * t_output + LAUNCH_SECONDS

- ``t_math``: the output is cut into thread-block tiles (tm x tn); each SM computes one tile at a
  time and the tiles run in waves of ``sms`` tiles (wave quantization, Sec. 3.2); partial tiles
  cost a whole tile (tile quantization, Sec. 3.1).  One tile of depth k takes
  2*tm*tn*k / (per-SM rate x reuse(tm, tn)), the per-SM rate being the dtype's dense peak x
  ``large_efficiency`` / sms.  Smaller tiles re-read operands more often (Sec. 2.3: larger tiles
  have more data reuse and are preferred when there are enough of them); the library picks the
  tile that finishes first (cuBLAS heuristics choose among several tile sizes, Sec. 2.3).
- ``t_memory``: operand and output bytes at HBM bandwidth x hbm_efficiency(gpu) (hardware.py).
- ``t_output``: writing C to HBM; the part of it not overlapped with the main loop is the
  k-dependent "pipeline fill / epilogue" term: with small k it is a large share of a tile's time.
- ``LAUNCH_SECONDS``: launch plus prologue/tail of one kernel, amortised over a grouped GEMM.
- wave tails are partly hidden by Stream-K style scheduling (``WAVE_TAIL_EXPOSED``).

For a large GEMM every loss tends to zero and the rate tends to ``large_efficiency`` x peak.
The four constants are fitted once (least mean |log error|) to the calibration rows of
explorer/data/reference/gemm_benchmarks.csv; explorer/fidelity/kernels.py reports both roles.
"""
from __future__ import annotations

from functools import lru_cache
from math import ceil

from ..config import GPU
from ..config.generations import PRE_AMPERE, architecture
from .hardware import BYTES_PER_ELEMENT as BYTES
from .hardware import streaming_bytes_per_s

# Output element size: FP8 GEMMs write bf16 (Transformer Engine and DeepGEMM outputs), fp32 GEMMs
# write fp32, bf16/fp16 write their own type.
OUT_BYTES = {"bf16": 2, "fp16": 2, "fp8": 2, "fp32": 4}
# A weight-gradient GEMM fused with gradient accumulation (Megatron's gradient_accumulation_fusion,
# Transformer Engine's fuse_wgrad_accumulation) adds its product into the fp32 ``main_grad``
# buffer: C = A^T B + C, so its epilogue reads and writes C in fp32 (4 + 4 bytes per element).
ACCUMULATE_FP32_BYTES = 8
DEFAULT_SMS = 132            # H100 SXM, as the GPU dataclass documents for ``sms``

# Thread-block tiles (rows x cols of C) a GEMM library chooses from.  128x256 / 256x128 are the
# large tiles of CUTLASS's Hopper warp-specialised and Ampere multistage kernels and of cuBLAS's
# largest kernels (User's Guide Sec. 2.3 lists 256x128 as the most efficient); 64-row tiles serve
# skinny problems (DeepGEMM's BLOCK_M 64 for small M; wgmma's native M is 64).
TILES = ((128, 256), (256, 128), (128, 128), (64, 256), (64, 128))
_BIG = 128 * 256 / (128 + 256)

# The four constants below were fitted together to the 15 calibration rows of gemm_benchmarks.csv
# (grid search minimising mean |log(predicted/measured)|, 0.048 at the optimum; validation rows 0.057).
# reuse(tm, tn) = (tile's operand reuse / the 128x256 tile's) ** TILE_REUSE_EXPONENT, reuse being
# tm*tn/(tm+tn), the FLOPs per operand element a tile loads (User's Guide Sec. 2.1).
TILE_REUSE_EXPONENT = 1.25
# Share of the output write not hidden behind the main loop (the fit puts it at 1: the k=512-2048
# DeepGEMM rows lose what writing C costs, serially).
EPILOGUE_EXPOSED = 1.0
# Per-kernel launch/prologue/tail, seconds.  The fit drives it to 0: the published benchmarks time
# back-to-back launches, which hide it, and so does a training step's stream of queued kernels.
# Kept as a term so that a grouped GEMM pays it once.
LAUNCH_SECONDS = 0.0
# Share of the last, partial wave's idle SMs that remain idle: 1 = strict wave quantization (one
# tile per SM per wave, User's Guide Sec. 3.2); persistent kernels with Stream-K / split-K
# decomposition (Osama et al., "Stream-K", PPoPP 2023; CUTLASS 3.x and cuBLAS 12 on Hopper) hand
# the tail's work to the idle SMs, so only part of it stays exposed.
WAVE_TAIL_EXPOSED = 0.25


# fp32 on the CUDA cores of a GPU without TF32, over its fp16 tensor-core peak: V100 SXM2 15.7 of
# 125 and T4 8.1 of 65 TFLOPS (NVIDIA V100 and T4 datasheets).
PRE_AMPERE_FP32_OVER_FP16 = 1 / 8


def dtype_peak_tflops(gpu: GPU, dtype: str) -> float:
    """Dense peak for GEMMs in ``dtype``: the GPU's ``fp32_tflops`` where given; else fp32 runs as
    TF32 at half the bf16 rate on tensor cores that have it (NVIDIA A100 and H100 datasheets: TF32
    156 / 495 dense against bf16 312 / 989), and on the CUDA cores of a GPU without TF32 (Volta,
    Turing: config/generations.py) at :data:`PRE_AMPERE_FP32_OVER_FP16` of its fp16 peak."""
    if dtype == "fp8":
        return gpu.fp8_tflops or gpu.peak_tflops
    if dtype == "fp32":
        if gpu.fp32_tflops:
            return gpu.fp32_tflops
        if architecture(gpu) in PRE_AMPERE:
            return gpu.peak_tflops * PRE_AMPERE_FP32_OVER_FP16
        return gpu.peak_tflops / 2
    return gpu.peak_tflops


# Split-K (cuBLAS and CUTLASS split-K / "parallel reduction" kernels; Osama et al., Stream-K,
# PPoPP 2023, Sec. 2): when the output has fewer tiles than the GPU has SMs, the k dimension is
# cut into slices computed by separate thread blocks whose fp32 partial tiles are then summed.
# A slice is at least SPLIT_K_MIN_DEPTH deep (a few k-iterations of the main loop's pipeline);
# the partials cost a write and a read of an fp32 m x n per slice at HBM bandwidth.  Libraries
# split only reductions far deeper than the output is wide: every slice stays at least
# SPLIT_K_MIN_RATIO x max(m, n) deep (so the split grows with k and shrinks as the output widens,
# keeping efficiency monotone in each dimension).  That splits the weight gradients of
# convolutions (C_in*k*k x C_out reduced over batch x positions, which cuDNN's wgrad kernels
# parallelise; Chetlur et al., arXiv 1410.0759), not DeepGEMM's small-M GEMMs (k about 3x n),
# which its published rows show unsplit (gemm_benchmarks.csv).
SPLIT_K_MIN_DEPTH = 256
SPLIT_K_MIN_RATIO = 16
SPLIT_K_PARTIAL_BYTES = 2 * 4


def row_tiles(m: float, tm: int, ragged: bool) -> float:
    """Row tiles of one group of ``m`` rows (mean) cut into tiles of ``tm``: ceil(m / tm), or for
    ragged groups (MoE experts, whose token counts vary from expert to expert and step to step)
    the expected count m / tm + 1/2: each expert's segment is padded to whole tiles (DeepGEMM's
    contiguous layout aligns every expert's rows to the block M, DeepGEMM README "Grouped GEMMs
    (contiguous layout)"), and with counts spread over more than a tile the padding is half a tile
    on average.  Checked on torchao's grouped-mm benchmark (pytorch/ao pull request #2490: 16
    experts, 8192 routed rows with offsets 272, 832, ... 8192): its exact tiles of 128 rows sum to
    72 = 16 x (512/128 + 1/2)."""
    return m / tm + 0.5 if ragged else ceil(m / tm)


def _math_seconds(m: float, n: float, k: float, group: float, sms: int, sm_rate: float,
                  hbm: float = float("inf"), ragged: bool = False) -> float:
    """Wave- and tile-quantized time of the main loop, best tile (User's Guide Sec. 3.1-3.2), and
    for an output of fewer tiles than SMs the best split-K, partial sums included."""
    best = float("inf")
    most = k / (SPLIT_K_MIN_RATIO * max(m, n))          # slices allowed by the depth rule
    for tm, tn in TILES:
        tiles = group * row_tiles(m, tm, ragged) * ceil(n / tn)
        reuse = (tm * tn / (tm + tn) / _BIG) ** TILE_REUSE_EXPONENT
        split = 1
        while True:
            full = tiles * split / sms
            waves = full + WAVE_TAIL_EXPOSED * (ceil(full) - full)
            partials = SPLIT_K_PARTIAL_BYTES * split * group * m * n / hbm if split > 1 else 0.0
            best = min(best, waves * 2.0 * tm * tn * ceil(k / split) / (sm_rate * reuse) + partials)
            if tiles * split * 2 > sms or k / (split * 2) < SPLIT_K_MIN_DEPTH or split * 2 > most:
                break
            split *= 2
    return best


@lru_cache(maxsize=1 << 16)
def gemm_seconds(m: float, n: float, k: float, dtype: str, gpu: GPU, large_efficiency: float,
                 group: int = 1, accumulate_fp32: bool = False, ragged: bool = False) -> float:
    """Seconds of one (m x k) @ (k x n) GEMM in ``dtype``; ``large_efficiency`` is the fraction of
    the dtype's peak that large GEMMs reach (hardware.py's fitted default or the user's).  With
    ``group`` > 1 the GEMM is one of ``group`` equal ones run as one grouped kernel (MoE experts):
    tiles share waves and the launch is paid once; the result is the per-GEMM share.  ``ragged``:
    the groups' row counts vary around ``m`` (routed tokens), each padded to whole tiles
    (:func:`row_tiles`)."""
    m, n, k = max(m, 1.0), max(n, 1.0), max(k, 1.0)
    g = max(int(group), 1)
    sms = gpu.sms or DEFAULT_SMS
    peak = dtype_peak_tflops(gpu, dtype) * 1e12
    hbm = streaming_bytes_per_s(gpu)
    math = _math_seconds(m, n, k, g, sms, peak * large_efficiency / sms, hbm, ragged and g > 1)
    out = g * m * n * (ACCUMULATE_FP32_BYTES if accumulate_fp32 else OUT_BYTES[dtype]) / hbm
    memory = g * (m * k + k * n) * BYTES[dtype] / hbm + out
    return (max(math, memory) + EPILOGUE_EXPOSED * out + LAUNCH_SECONDS) / g


def gemm_efficiency(m: float, n: float, k: float, dtype: str, gpu: GPU, large_efficiency: float,
                    group: int = 1) -> float:
    """Achieved fraction of the dtype's dense peak, 2mnk / (time x peak)."""
    t = gemm_seconds(m, n, k, dtype, gpu, large_efficiency, group)
    return 2.0 * m * n * k / (t * dtype_peak_tflops(gpu, dtype) * 1e12)
