"""ZeRO-3 / FSDP: parameters sharded over the data-parallel group and gathered layer by layer
(Rajbhandari et al., "ZeRO: Memory Optimizations Toward Training Trillion Parameter Models", SC20
Sec. 5.3; Zhao et al., "PyTorch FSDP", VLDB 2023).

Each layer's parameters are all-gathered before its forward and again before its backward, and its
gradients reduce-scattered after — 3 x the layer's bytes per micro-batch instead of the 2 x per
iteration of ZeRO 1-2.  With ``prefetch_layers`` >= 1 the gather of the next layer runs during this
layer's compute (FSDP's forward/backward prefetch), so only the excess of communication over
compute is exposed; with 0 every gather waits in front of its layer.

The framework (explorer/config/frameworks.py) sets the wire dtype of the reduce-scatter (FSDP's
``reduce_dtype``, fp32 in torchtitan) and, for DeepSpeed, the prefetch budget: ZeRO-3 fetches at
most ``stage3_prefetch_bucket_size`` parameters ahead of use, so of a layer larger than that budget
only the prefetched share of its gather can hide under the previous layer's compute.

FSDP2 (``fully_shard``) adds copies on the compute stream that FSDP1's flat parameter does not
make (FrameworkProfile.fsdp_copy_kernels): after each all-gather, foreach_all_gather_copy_out runs
split_with_sizes_copy from the all-gather buffer into every unsharded parameter, in the stream that
waits for the gather (read + write of the layer's parameters); before each reduce-scatter,
foreach_reduce_scatter_copy_in runs chunk_cat of the unsharded gradients into the reduce-scatter
input, allocated in ``reduce_dtype`` (read the gradient, write it in the reduce dtype), on the
compute stream too (pytorch/pytorch torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py at
commit 8fc2039: foreach_all_gather_copy_out, foreach_reduce).  The gather's copy-in of the local
shard runs on its own stream and moves 1/dp of that: not charged.

Memory (:func:`zero3_working_set`): beyond its shards, ZeRO-3 holds the gathered layer, the layers
prefetched ahead and one layer's full gradients before their reduce-scatter.  FSDP2 under a
pipeline (:func:`fsdp_step_sync`) keeps far more: torchtitan does not reshard after the forward
with pp > 1 and the pipeline stage runs its backwards with resharding after backward and gradient
sync off (see explorer/config/frameworks.py), so the stage's parameters stay unsharded for the
whole step, and each backward's unsharded gradient is accumulated, unsharded, until the stage's
last backward reduces it: FSDPParam.to_accumulated_grad_if_needed upcasts it to ``reduce_dtype``
(fp32 in torchtitan's default mixed precision) and accumulate_unsharded_grad_if_needed adds each
later micro-batch's into it (pytorch/pytorch torch/distributed/fsdp/_fully_shard/_fsdp_param.py).
"""
from __future__ import annotations

from dataclasses import dataclass

from ...config import Scenario
from ...config.frameworks import profile
from ...network.collectives import bus_factor
from ...network.groups import Network
from .optimizer import GRAD_BYTES, PARAM_BYTES, grad_reduce_bytes, param_bytes


def fsdp_step_sync(sc: Scenario) -> bool:
    """ZeRO-3 under a pipeline in a framework that keeps the stage's parameters gathered across
    micro-batches and reduces its gradients once per step (FrameworkProfile.fsdp_pp_step_sync)."""
    par = sc.parallelism
    return par.zero == 3 and par.pp > 1 and profile(sc.training.framework).fsdp_pp_step_sync


def zero3_working_set(sc: Scenario, whole_bytes, layer_bytes):
    """(parameter bytes, gradient bytes) a ZeRO-3 GPU holds unsharded beyond its shards, for a GPU
    whose chunks hold ``whole_bytes`` of bf16 parameters, the largest layer gathered being
    ``layer_bytes`` (floats or numpy arrays alike):

    - plain ZeRO-3 / FSDP: the gathered layer plus ``communication.prefetch_layers`` gathered ahead,
      and one layer's full bf16 gradients before their reduce-scatter;
    - FSDP2 under a pipeline (:func:`fsdp_step_sync`): every parameter the GPU holds, gathered for
      the step, and the accumulated unsharded gradients in the reduce dtype (module docstring),
      plus the bf16 gradient of the layer whose backward runs (it is added into them after).
"""
    weight = param_bytes(sc)
    one_layer_grads = layer_bytes / weight * max(GRAD_BYTES, weight)     # fp32 training: fp32 gradients
    if fsdp_step_sync(sc):
        return whole_bytes, one_layer_grads + whole_bytes / weight * grad_reduce_bytes(sc)
    return layer_bytes * (1 + sc.communication.prefetch_layers), one_layer_grads


def comm_zero(sc: Scenario) -> int:
    """The ZeRO stage whose communication pattern the run follows: ``parallelism.zero``, except
    FSDP2 under a pipeline (:func:`fsdp_step_sync`), whose traffic is ZeRO-2's: parameters gathered
    once per step under the first forward, gradients reduce-scattered once per step, after the
    stage's last backward (:func:`grad_reduce_overlaps`).  Memory keeps ZeRO-3's shards plus what
    the step holds gathered (:func:`zero3_working_set`)."""
    return 2 if fsdp_step_sync(sc) else sc.parallelism.zero


def grad_reduce_overlaps(sc: Scenario) -> bool:
    """Whether gradient buckets leave during the backward (``communication.dp_overlap`` and the
    framework's ``grad_reduce_overlaps_backward``); never under :func:`fsdp_step_sync`, whose
    reduce-scatters follow the stage's last backward and hold the compute stream, nor under ZeRO-3,
    whose only step-end buckets (a two-direction schedule's pair all-reduce, pair_sync.py) carry
    the gradient shards accumulated over every micro-batch, final after the stage's last backward
    (the layers' reduce-scatters themselves overlap inside the passes: :func:`fsdp_cost`)."""
    fw = profile(sc.training.framework)
    return (sc.communication.dp_overlap and fw.grad_reduce_overlaps_backward and not fsdp_step_sync(sc)
            and sc.parallelism.zero != 3)


@dataclass(frozen=True)
class FsdpCost:
    """One layer's ZeRO-3 communication per micro-batch: exposed and hidden seconds under the
    forward and the backward, and bus bytes (gathers + reduce-scatter)."""

    exposed_f: float = 0.0
    exposed_b: float = 0.0
    hidden_f: float = 0.0
    hidden_b: float = 0.0
    bus_bytes: float = 0.0
    copy_f: float = 0.0              # FSDP2 copy kernels on the compute stream (seconds)
    copy_b: float = 0.0


def fsdp_copy_bytes(params: float, grad_bytes: int, weight_bytes: int = PARAM_BYTES) -> tuple[float, float]:
    """HBM bytes FSDP2's copy kernels move per micro-batch for ``params`` parameters, under the
    forward (one gather's copy-out) and the backward (a gather's copy-out and the reduce-scatter's
    copy-in into ``grad_bytes``-byte elements), as the module docstring derives.

    >>> fsdp_copy_bytes(1e9, 4)        # bf16 parameters, fp32 reduce: 4 B/param, then 4 + 6
    (4000000000.0, 10000000000.0)
    """
    gather = 2.0 * params * weight_bytes           # split_with_sizes_copy: read + write
    reduce = params * (weight_bytes + grad_bytes)  # chunk_cat: read the gradient, write reduce dtype
    return gather, gather + reduce


def fsdp_cost(params: float, expert_params: float, net: Network, stage: int, f_comp: float, b_comp: float,
              prefetch_layers: int, dp_overlap: bool, hbm_bytes_per_s: float = 0.0) -> FsdpCost:
    """The ZeRO-3 cost of a layer holding ``params`` dense (sharded over dp) and ``expert_params``
    (over edp) parameters whose forward computes ``f_comp`` and backward ``b_comp`` seconds;
    with ``hbm_bytes_per_s`` > 0 and a framework with FSDP2's copy kernels, their seconds
    (:func:`fsdp_copy_bytes`) run on the compute stream (``copy_f``/``copy_b``) and lengthen the
    compute the next layer's gather hides under."""
    f_comm = b_gather = b_reduce = bus = copy_fb = copy_bb = 0.0
    grad_bytes = grad_reduce_bytes(net.sc)
    weight = param_bytes(net.sc)
    copies = hbm_bytes_per_s > 0 and profile(net.sc.training.framework).fsdp_copy_kernels
    for dim, n_params in (("dp", params), ("edp", expert_params)):
        if n_params <= 0 or net.group_size(dim, stage) <= 1:
            continue
        if copies:
            cf, cb = fsdp_copy_bytes(n_params, grad_bytes, weight)
            copy_fb += cf
            copy_bb += cb
        ag = net.cost("all-gather", n_params * weight, dim, stage)
        rs = net.cost("reduce-scatter", n_params * grad_bytes, dim, stage)
        f_comm += ag.time_s
        b_gather += ag.time_s
        b_reduce += rs.time_s
        bus += (2 * n_params * weight + n_params * grad_bytes) * bus_factor("all-gather", ag.n)
    copy_f = copy_fb / hbm_bytes_per_s if copies else 0.0
    copy_b = copy_bb / hbm_bytes_per_s if copies else 0.0
    f_comp, b_comp = f_comp + copy_f, b_comp + copy_b
    if prefetch_layers == 0:
        return FsdpCost(f_comm, b_gather + b_reduce, 0.0, 0.0, bus, copy_f, copy_b)
    budget = profile(net.sc.training.framework).zero3_prefetch_params
    share = 1.0
    if budget is not None and params + expert_params > 0:
        # DeepSpeed ZeRO-3: only ``budget`` parameters of the next layers are gathered ahead; the
        # rest of a layer's gather is issued when the layer is reached, in front of its compute.
        share = min(1.0, budget * prefetch_layers / (params + expert_params))
    late_f, late_b = f_comm * (1 - share), b_gather * (1 - share)
    ahead_f, ahead_b = f_comm - late_f, b_gather - late_b
    exp_f = max(0.0, ahead_f - f_comp) + late_f
    if dp_overlap:
        # Layer-wise reduce-scatter overlapped with the backward of the layers before it.
        exp_b = max(0.0, ahead_b + b_reduce - b_comp) + late_b
    else:
        # dp_overlap off: only the prefetched gathers hide; each layer's gradient reduce-scatter
        # runs after its backward with nothing to hide behind.
        exp_b = max(0.0, ahead_b - b_comp) + late_b + b_reduce
    return FsdpCost(exp_f, exp_b, f_comm - exp_f, b_gather + b_reduce - exp_b, bus, copy_f, copy_b)
