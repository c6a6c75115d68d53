"""The optimizer step and the bytes per parameter that memory and traffic count.

Mixed-precision training (Micikevicius et al., ICLR 2018) keeps a bf16 working copy of the weights
and bf16 gradients, plus fp32 master weights and Adam's two moments: K = 12 bytes of optimizer
state per parameter (Rajbhandari et al., ZeRO, SC20 Sec. 3.1).  Training in fp32
(``training.dtype: fp32``) has no working copy: the weights are the fp32 master, 4 bytes, so the
optimizer state is the moments alone (K - 4) and ZeRO's and FSDP's gathers move 4-byte weights
(:func:`param_bytes`, :func:`optimizer_state_bytes`).  The step itself is memory bound:
it streams every state once (Megatron-LM's fused Adam), so its time is bytes / HBM bandwidth.
"""
from __future__ import annotations

from ...config import Scenario
from ...config.frameworks import GRAD_BYTES as GRAD_BYTES  # re-exported (fsdp.py)
from ...config.frameworks import profile
from ...physics.hardware import weight_bytes

# GRAD_BYTES (config/frameworks.py): a bf16 gradient; memory holds grad_buffer_bytes, the wire
# moves grad_reduce_bytes.
PARAM_BYTES = 2                 # bf16 working copy of the weights
# fp32 master + moments (ZeRO paper, K = 12 for Adam).  "adam-bf16": AdamW with both moments in bf16
# and an fp32 master, 4 + 2 + 2 bytes (DeepSeek-V3 technical report, Sec. 3.3.2 "Low-Precision
# Optimizer States": "we adopt the BF16 data format instead of FP32 to track the first and second
# moments in the AdamW optimizer"; Megatron-Core's --use-precision-aware-optimizer with
# --exp-avg-dtype bf16 --exp-avg-sq-dtype bf16 keeps the same).
OPTIMIZER_STATE_BYTES = {"adam": 12, "adam-bf16": 8, "sgd": 8}
# HBM traffic of one optimizer step per parameter: Adam reads master, m, v (fp32) and the bf16
# gradient and writes master, m, v and the bf16 weight: 14 + 14 bytes; with bf16 moments 10 + 10;
# SGD with momentum 10 + 10.
OPTIMIZER_TRAFFIC_BYTES = {"adam": 28, "adam-bf16": 20, "sgd": 20}


# The fp32 master copy a mixed-precision optimizer keeps (part of OPTIMIZER_STATE_BYTES).
MASTER_BYTES = 4


def param_bytes(sc: Scenario) -> int:
    """Bytes of a weight as the GPU holds and gathers it: the bf16 working copy (PARAM_BYTES), or
    the fp32 weight itself when training in fp32 (physics/hardware.weight_bytes)."""
    return weight_bytes(sc.training.dtype)


def optimizer_state_bytes(sc: Scenario) -> int:
    """Optimizer state bytes per parameter: OPTIMIZER_STATE_BYTES, less the fp32 master copy when
    training in fp32 (the weights are the master: Adam's moments alone, 8 bytes)."""
    state = OPTIMIZER_STATE_BYTES[sc.training.optimizer]
    return state - MASTER_BYTES if sc.training.dtype == "fp32" else state


def optimizer_time(dense: float, expert: float, dp: int, edp: int, zero: int, optimizer: str,
                   hbm_bytes_per_s: float) -> float:
    """Seconds of one optimizer step on a GPU holding ``dense`` and ``expert`` parameters: ZeRO >= 1
    shards the states over the data-parallel group (dense over dp, experts over edp), so each GPU
    updates its shard only."""
    if zero >= 1:
        dense /= dp
        expert /= max(edp, 1)
    return (dense + expert) * OPTIMIZER_TRAFFIC_BYTES[optimizer] / hbm_bytes_per_s


# communication.grad_reduce_dtype's bytes per element where it names one.
REDUCE_DTYPE_BYTES = {"fp32": 4, "bf16": 2}


def grad_reduce_bytes(sc: Scenario) -> int:
    """Bytes per gradient element the data-parallel reduction moves: ``communication.
    grad_reduce_dtype``'s, or by default the training dtype's, or fp32 where the framework reduces
    in fp32 (explorer/config/frameworks.py, ``grad_reduce_fp32``; Megatron-LM's
    --grad-reduce-in-bf16 turns it off, megatron/training/arguments.py)."""
    forced = sc.communication.grad_reduce_dtype
    if forced in REDUCE_DTYPE_BYTES:
        return REDUCE_DTYPE_BYTES[forced]
    return profile(sc.training.framework).grad_reduce_bytes(sc.training.dtype)


def grad_buffer_bytes(sc: Scenario) -> int:
    """Bytes per parameter of the gradient buffer a GPU holds: the reduce dtype's where the
    framework accumulates and reduces in one buffer (Megatron-Core's main_grad, allocated in fp32
    if grad_reduce_in_fp32 else in the parameters' dtype, explorer/config/frameworks.py
    ``grad_buffer_in_reduce_dtype``), else the bf16 gradient (GRAD_BYTES)."""
    prof = profile(sc.training.framework)
    if prof.grad_buffer_in_reduce_dtype:
        return grad_reduce_bytes(sc)
    return prof.grad_buffer_bytes(sc.training.dtype)
