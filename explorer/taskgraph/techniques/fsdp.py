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
"""
from __future__ import annotations

from dataclasses import dataclass

from ...config.frameworks import profile
from ...network.collectives import bus_factor
from ...network.groups import Network
from .optimizer import PARAM_BYTES, grad_reduce_bytes


@dataclass(frozen=True)
class FsdpCost:
    """One layer's ZeRO-3 communication per micro-batch: exposed and hidden seconds under the
    forward and the backward, and bus bytes (gathers + reduce-scatter)."""

    exposed_f: float = 0.0
    exposed_b: float = 0.0
    hidden_f: float = 0.0
    hidden_b: float = 0.0
    bus_bytes: float = 0.0


def fsdp_cost(params: float, expert_params: float, net: Network, stage: int, f_comp: float, b_comp: float,
              prefetch_layers: int, dp_overlap: bool) -> FsdpCost:
    """The ZeRO-3 cost of a layer holding ``params`` dense (sharded over dp) and ``expert_params``
    (over edp) parameters whose forward computes ``f_comp`` and backward ``b_comp`` seconds."""
    f_comm = b_gather = b_reduce = bus = 0.0
    grad_bytes = grad_reduce_bytes(net.sc)
    for dim, n_params in (("dp", params), ("edp", expert_params)):
        if n_params <= 0 or net.group_size(dim, stage) <= 1:
            continue
        ag = net.cost("all-gather", n_params * PARAM_BYTES, dim, stage)
        rs = net.cost("reduce-scatter", n_params * grad_bytes, dim, stage)
        f_comm += ag.time_s
        b_gather += ag.time_s
        b_reduce += rs.time_s
        bus += (2 * n_params * PARAM_BYTES + n_params * grad_bytes) * bus_factor("all-gather", ag.n)
    if prefetch_layers == 0:
        return FsdpCost(f_comm, b_gather + b_reduce, 0.0, 0.0, bus)
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
    return FsdpCost(exp_f, exp_b, f_comm - exp_f, b_gather + b_reduce - exp_b, bus)
