"""GPU memory an FP8 run keeps for its FP8 linears' weights beyond the bf16 working copy the
memory report counts for every parameter: the FP8 weight copies and the recipe's scaling state
(explorer/config/fp8_recipes.py, :func:`fp8_state_bytes`).

Transformer Engine casts each FP8 linear's weight once per optimizer step and reuses the cast for
every micro-batch (TE docs, "Performance Optimizations", FP8 weight caching with
``is_first_microbatch``, which Megatron-Core passes): the FP8 weight and, on Hopper, its transpose
for the dgrad GEMM stay allocated across the step, with the recipe's scales (blockwise 128x128,
MXFP8 1x32 in both layouts); a delayed-scaling module keeps an amax history per FP8 tensor.  Where
the recipe stores the weights as FP8 parameters (FP8_PRIMARY_WEIGHTS: NVIDIA's delayed, current
and MXFP8 presets), those copies *are* the weights and the bf16 working copy does not exist, so
the difference is the FP8 copies less 2 bytes per parameter: about nothing on Hopper's per-tensor
recipes (1 + 1 byte), a byte less on Blackwell's (no transpose), 1/16 more for MXFP8's scales.
Only the transformer layers' linears are FP8; the embedding and output layer stay bf16
(ChunkWork.fp8_params).

Under ZeRO-3 a layer's weights exist unsharded only while gathered (techniques/fsdp.py), so the
FP8 copies are those of the gathered working set (the largest layer, ``prefetch_layers`` more);
FSDP2 under a pipeline keeps the whole stage gathered, hence all of its copies.  The scaling state
belongs to the modules and is kept for every layer the GPU holds.
"""
from __future__ import annotations

import numpy as np

from ...config import Scenario
from ...config.fp8_recipes import FP8_PRIMARY_WEIGHTS, fp8_state_bytes, resolved_recipe, supports_mx
from ...config.generations import runs_fp8
from .fsdp import fsdp_step_sync
from .optimizer import PARAM_BYTES


def fp8_memory_bytes(sc: Scenario, fp8_params, fp8_gemms, layer_params, sharded=True):
    """Bytes per GPU an FP8 run of ``sc`` keeps for its FP8 weights and scaling state beyond the
    bf16 weights counted for every parameter (negative where FP8 parameters replace a larger bf16
    copy), its chunks' layers holding ``fp8_params`` parameters in ``fp8_gemms`` FP8 GEMMs, the
    largest of those layers holding ``layer_params`` (ZeRO-3 gathers it when ``sharded``: a
    data-parallel group of one rank holds whole parameters and gathers nothing, analysis/memory.py;
    floats or numpy arrays); 0 unless the run's linear layers are FP8 (config/generations.runs_fp8:
    not on a GPU without FP8 tensor cores, which runs the recipe in bf16)."""
    if not runs_fp8(sc):
        return 0.0 * fp8_params
    gpu = sc.hardware.gpu
    recipe = resolved_recipe(sc.training.fp8_recipe, gpu.origin, gpu.name)
    cached = fp8_params
    if sc.parallelism.zero >= 3 and not fsdp_step_sync(sc):
        gathered = layer_params * (1 + sc.communication.prefetch_layers)
        cached = np.where(sharded, np.minimum(fp8_params, gathered), fp8_params)
    kept = fp8_state_bytes(recipe, cached, fp8_gemms, supports_mx(gpu.origin, gpu.name))
    return kept - (PARAM_BYTES * cached if FP8_PRIMARY_WEIGHTS[recipe] else 0.0)
