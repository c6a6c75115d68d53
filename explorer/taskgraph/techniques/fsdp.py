"""ZeRO-3 / FSDP: parameters sharded over the data-parallel group and gathered layer by layer
(Rajbhandari et al., "ZeRO: Memory Optimizations Toward Training Trillion Parameter Models", SC20
Sec. 5.3; Zhao et al., "PyTorch FSDP", VLDB 2023).

Each layer's parameters are all-gathered before its forward and again before its backward, and its
gradients reduce-scattered after — 3 x the layer's bytes per micro-batch instead of the 2 x per
iteration of ZeRO 1-2.  With ``prefetch_layers`` >= 1 the gather of the next layer runs during this
layer's compute (FSDP's forward/backward prefetch), so only the excess of communication over
compute is exposed; with 0 every gather waits in front of its layer.
"""
from __future__ import annotations

from dataclasses import dataclass

from ...collectives import bus_factor
from ...network import Network
from .optimizer import GRAD_BYTES, PARAM_BYTES


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
    for dim, n_params in (("dp", params), ("edp", expert_params)):
        if n_params <= 0 or net.group_size(dim, stage) <= 1:
            continue
        ag = net.cost("all-gather", n_params * PARAM_BYTES, dim, stage)
        rs = net.cost("reduce-scatter", n_params * GRAD_BYTES, dim, stage)
        f_comm += ag.time_s
        b_gather += ag.time_s
        b_reduce += rs.time_s
        bus += (2 * n_params * PARAM_BYTES + n_params * GRAD_BYTES) * bus_factor("all-gather", ag.n)
    if prefetch_layers == 0:
        return FsdpCost(f_comm, b_gather + b_reduce, 0.0, 0.0, bus)
    exp_f = max(0.0, f_comm - f_comp)
    if dp_overlap:
        # Layer-wise reduce-scatter overlapped with the backward of the layers before it.
        exp_b = max(0.0, b_gather + b_reduce - b_comp)
    else:
        # dp_overlap off: only the prefetched gathers hide; each layer's gradient reduce-scatter
        # runs after its backward with nothing to hide behind.
        exp_b = max(0.0, b_gather - b_comp) + b_reduce
    return FsdpCost(exp_f, exp_b, f_comm - exp_f, b_gather + b_reduce - exp_b, bus)
