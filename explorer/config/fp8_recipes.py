"""How an FP8 run scales its tensors (``training.fp8_recipe``), and what each recipe costs in HBM
traffic, GEMM rate and memory.  Read only when ``training.dtype`` is fp8.

- ``delayed``: Transformer Engine ``DelayedScaling`` — one scale per tensor, taken from the amax
  history of earlier iterations, so the cast of a tensor needs no look at the tensor first and is
  fused into the kernel that produces it (TE docs, "Using FP8 with Transformer Engine": "delayed
  scaling ... amax history").  Megatron-LM's default (megatron/training/arguments.py,
  ``--fp8-recipe`` default 'delayed'; Megatron's ``tensorwise`` is ``current`` here).
- ``current``: TE ``Float8CurrentScaling`` — the scale is the tensor's own amax of this iteration,
  so a reduction pass reads the whole high-precision tensor before any element can be cast (TE
  docs, Float8CurrentScaling: amax "computed from the current tensor"): one more read per element.
- ``blockwise``: TE ``Float8BlockScaling``, DeepSeek-V3's fine-grained quantisation (arXiv
  2412.19437, Sec. 3.3.2): one fp32 scale per 1x128 tile of activations/gradients, per 128x128
  block of weights; the tile's amax is found inside the cast kernel (online), no extra pass; the
  backward's 128x1 copy has its own scales (Sec. 3.3.2: activations re-tiled "from 1x128 to 128x1").
- ``mxfp8``: TE ``MXFP8BlockScaling`` (OCP Microscaling Formats v1.0: blocks of 32 elements, one
  E8M0 1-byte scale each): Blackwell tensor cores apply the block scales in the MMA; the row-wise
  and column-wise copies are quantised separately from the high-precision source (a block of 32
  along a row is not a block along a column, so the transpose cannot reuse them).

Default (``None``): the recipe NVIDIA's stacks run on the GPU: ``mxfp8`` on Blackwell (NVIDIA-NeMo/
Megatron-Bridge, src/megatron/bridge/training/mixed_precision.py: the Blackwell preset
``bf16_with_mxfp8_mixed`` sets fp8_recipe "mxfp8"; torchtitan docs/mxfp8.md, "MXFP8 Training on
B200 GPUs"), ``delayed`` elsewhere (Megatron-LM's default above; the same file's FP8 presets use
"delayed" with fp8_amax_history_len 1024).
"""
from __future__ import annotations

import re

from .schema import ScenarioError

FP8_RECIPES = ("delayed", "current", "blockwise", "mxfp8")
# GPU presets with MX (block-scaled) tensor cores: the Blackwell generation (NVIDIA Blackwell
# architecture technical brief, 2024: second-generation Transformer Engine with micro-tensor scaling).
MX_PRESETS = ("b200", "gb200", "gb300")
_MX_NAME = re.compile(r"\bG?B[23]00\b", re.IGNORECASE)

# HBM bytes per element of an FP8 GEMM input, beyond its bf16 traffic (workloads/timing.py prices
# them): forward, the activation's cast fused into its producer, which writes the FP8 copy and its
# transpose (2 bytes); backward, the incoming bf16 gradient read (2) and written as FP8 in both
# layouts (2) by a separate cast-transpose.  These are the delayed recipe's (and today's) figures.
CAST_BYTES_FWD = 2.0
CAST_BYTES_BWD = 4.0
# Current scaling: the amax reduction reads the bf16 tensor once more before the cast (2 bytes).
AMAX_PASS_BYTES = 2.0
# Scale tensors written with the two FP8 copies, per element: blockwise one fp32 per 128 (1x128
# and 128x1 tiles, DeepSeek-V3 Sec. 3.3.2), MXFP8 one E8M0 byte per 32 (OCP MX v1.0 Sec. 5.3),
# row-wise and column-wise.
BLOCK_SCALE_BYTES = {"delayed": 0.0, "current": 0.0, "blockwise": 2 * 4 / 128, "mxfp8": 2 * 1 / 32}
# Weight scales: blockwise 128x128 blocks (one fp32 per 16,384 elements; the block is square, so
# its transpose reuses them), MXFP8 1x32 both ways.
WEIGHT_SCALE_BYTES = {"delayed": 0.0, "current": 0.0, "blockwise": 4 / 128**2, "mxfp8": 2 * 1 / 32}

# GEMM rate relative to per-tensor FP8, from component measurements.  Hopper block scaling
# promotes partial sums to CUDA cores every 128 K-elements to apply the scales (DeepSeek-V3 Sec.
# 3.3.2): DeepGEMM's best dense row, 1,358 TFLOP/s (H800, M=4096 N=7168 K=16384, DeepGEMM README)
# against cuBLAS per-tensor FP8's best, 1,402.6 (H100 SXM MAMF, ml-engineering; same die),
# explorer/data/reference/gemm_benchmarks.csv.  MXFP8 on Blackwell: the tensor core applies the
# block scales itself (PTX ISA, tcgen05.mma kind::mxf8f6f4), at the FP8 dense rate (B200 datasheet:
# one FP8/FP6 peak); no published cuBLAS MXFP8 measurement contradicts it, so 1 — and so for 1x128
# blockwise scales on Blackwell (workloads/timing.py applies the Hopper rate on non-MX GPUs only).
BLOCKWISE_GEMM_RATE = 1358 / 1402.6
GEMM_RATE = {"delayed": 1.0, "current": 1.0, "blockwise": BLOCKWISE_GEMM_RATE, "mxfp8": 1.0}

# Memory.  DelayedScaling keeps an amax history of 1024 fp32 entries (TE recipe default
# amax_history_len=1024) for each FP8 tensor of a GEMM, plus its scale and inverse scale; the other
# recipes keep one scale (current) or their scale tensors.  A TE module holds quantizer state for
# 3 tensors per GEMM in the forward (input, weight, output) and 2 in the backward (grad_output,
# grad_input): NVIDIA/TransformerEngine transformer_engine/pytorch/module/base.py, set_meta_tensor
# (``num_gemms * 3 if fwd else num_gemms * 2``).
AMAX_HISTORY_LEN = 1024
FP8_TENSORS_PER_GEMM = 3 + 2
# FP8 weight copies cached across micro-batches (TE docs, "Performance Optimizations: FP8 weight
# caching", ``is_first_microbatch``): the FP8 weight and, for the dgrad GEMM on Hopper's TN-only FP8
# tensor cores, its transpose (blockwise and MXFP8 keep both layouts on every GPU: a column-wise
# copy of their own), 1 byte each per parameter.
FP8_WEIGHT_COPIES = 2
# Whether the recipe keeps its FP8 linears' weights as FP8 parameters (Megatron's
# ``fp8_param_gather``: the weights are stored, and gathered, as FP8 tensors, with no bf16 working
# copy; the fp32 master copy stays in the optimizer) or as bf16 with FP8 copies cast from them.
# NVIDIA-NeMo/Megatron-Bridge src/megatron/bridge/training/mixed_precision.py: the delayed,
# tensorwise (``current`` here) and MXFP8 presets set fp8_param_gather=True; the blockwise
# ("subchannel") preset sets it False.
FP8_PRIMARY_WEIGHTS = {"delayed": True, "current": True, "blockwise": False, "mxfp8": True}

FP8_RECIPE_FIELD = {
    "choices": FP8_RECIPES,
    "doc": "FP8 scaling recipe (training.dtype fp8): delayed = per-tensor amax history (TE "
           "DelayedScaling); current = per-tensor amax of this step (an extra read pass); blockwise = "
           "1x128 / 128x128 scales (DeepSeek-V3); mxfp8 = 1x32 E8M0 blocks (Blackwell only); default "
           "mxfp8 on Blackwell, else delayed"}


def supports_mx(preset: str | None, name: str) -> bool:
    """Whether the GPU has MX block-scaled tensor cores (Blackwell): its preset's (the one a GPU is
    based on, whatever it is named), or a custom GPU's named like one (B200, GB200, B300, GB300).

    >>> supports_mx("b200", ""), supports_mx(None, "H100 SXM"), supports_mx(None, "GB300 NVL72")
    (True, False, True)
    >>> supports_mx("h100-sxm", "B200")          # an H100 renamed: still Hopper's tensor cores
    False
    """
    if preset is not None:
        return preset in MX_PRESETS
    return bool(_MX_NAME.search(name or ""))


def resolved_recipe(choice: str | None, preset: str | None, name: str) -> str:
    """The recipe in force: ``choice`` when set, else mxfp8 on Blackwell, delayed elsewhere.

    >>> resolved_recipe(None, "h100-sxm", "H100 SXM"), resolved_recipe(None, "b200", "B200")
    ('delayed', 'mxfp8')
    """
    if choice is not None:
        return choice
    return "mxfp8" if supports_mx(preset, name) else "delayed"


def check_recipe(choice: str | None, preset: str | None, name: str) -> None:
    """Raise a one-line ScenarioError for MXFP8 on a GPU without MX tensor cores."""
    if choice == "mxfp8" and not supports_mx(preset, name):
        valid = ", ".join(r for r in FP8_RECIPES if r != "mxfp8")
        raise ScenarioError("training.fp8_recipe", f"'mxfp8' needs MX tensor cores (Blackwell: "
                            f"b200, gb200, gb300); on {name or preset or 'this GPU'} use {valid}")


def writes_transpose(recipe: str, mx_gpu: bool) -> bool:
    """Whether the cast writes a second, column-wise FP8 copy.  Hopper's FP8 tensor cores take only
    the TN layout, so every recipe needs the transpose for dgrad/wgrad; Blackwell's take any layout
    for per-tensor scales, and Transformer Engine then skips the transpose (pytorch/csrc/
    quantizer.cpp: ``create_transpose = columnwise_usage && !nvte_is_non_tn_fp8_gemm_supported()``).
    Block scales run along one direction, so blockwise and MXFP8 always quantise both copies."""
    return not (mx_gpu and recipe in ("delayed", "current"))


def cast_bytes(recipe: str, mx_gpu: bool = False) -> tuple[float, float]:
    """(forward, backward) HBM bytes per element of an FP8 GEMM input for ``recipe`` on a GPU with
    (``mx_gpu``, Blackwell) or without MX tensor cores: the fused forward cast and the backward
    cast-transpose (CAST_BYTES_*), less the transpose's 1-byte write where none is made
    (:func:`writes_transpose`), current scaling's amax pass, and the block scales.

    >>> cast_bytes("delayed"), cast_bytes("current"), cast_bytes("mxfp8"), cast_bytes("delayed", True)
    ((2.0, 4.0), (4.0, 6.0), (2.0625, 4.0625), (1.0, 3.0))
    """
    amax = AMAX_PASS_BYTES if recipe == "current" else 0.0
    extra = amax + BLOCK_SCALE_BYTES[recipe] - (0.0 if writes_transpose(recipe, mx_gpu) else 1.0)
    return CAST_BYTES_FWD + extra, CAST_BYTES_BWD + extra


def fp8_state_bytes(recipe: str, weight_params: float, gemms: int, mx_gpu: bool = False) -> float:
    """Bytes an FP8 run keeps beside the bf16 weights for ``weight_params`` FP8 GEMM weights in
    ``gemms`` GEMMs: the cached FP8 weight copies (one without a transpose, :func:`writes_transpose`)
    and their scales, and the per-tensor scaling state (delayed: amax history + scale + inverse
    scale, fp32, per FP8 tensor).

    >>> fp8_state_bytes("delayed", 1e6, 1)
    2020520.0
    """
    per_tensor = {"delayed": AMAX_HISTORY_LEN + 2, "current": 2}.get(recipe, 0) * 4
    copies = FP8_WEIGHT_COPIES if writes_transpose(recipe, mx_gpu) else 1
    weights = (copies + WEIGHT_SCALE_BYTES[recipe]) * weight_params
    return weights + gemms * FP8_TENSORS_PER_GEMM * per_tensor


def gemm_modules(mla: bool, local_experts: float, shared_experts: int, moe_layer: bool) -> float:
    """FP8 GEMMs (each with its own scaling state) of one transformer layer as Megatron-Core builds
    it on Transformer Engine modules: attention's fused QKV and output projections (MLA: the Q and
    KV down- and up-projections and the output projection, five linears, DeepSeek-V2 arXiv
    2405.04434 Sec. 2.1.2), and the MLP's fc1 (gate and up fused) and fc2; a MoE layer's experts
    are a GroupedLinear of one GEMM per local expert for fc1 and for fc2 (TE ``num_gemms``), plus
    the shared experts' fc1 and fc2 when there are any (one fused MLP).  The router stays bf16.

    >>> gemm_modules(False, 0, 0, False), gemm_modules(True, 4, 1, True)
    (4, 15)
    """
    attention = 5 if mla else 2
    if not moe_layer:
        return attention + 2
    return attention + 2 * local_experts + (2 if shared_experts else 0)
