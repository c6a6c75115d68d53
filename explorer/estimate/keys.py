"""What each cost depends on, as hashable keys, and the network shared by the rows that agree on it.

The estimator prices a configuration from the same functions as the engine, but only once per
distinct input: a layer's cost (explorer/workload.py) reads the model, the training options other
than the global batch and the optimizer, the GPU, and the tp, cp, ep, sequence-parallel and
token-slice degrees — not pp, dp, vpp, the schedule, ZeRO or the network; a collective's cost
(explorer/collectives.py via explorer/network.py) reads the cluster, the rank placement and the
library options, not the model.  :func:`compute_key` and :func:`network_key` name exactly those
inputs, so that a sweep over the NIC bandwidth re-prices only the calls, and a sweep over
pp re-prices nothing of a layer.
"""
from __future__ import annotations

from typing import Any

from ..network import Network
from ..scenario import Scenario

# The dimensions whose group a pass's own collectives use (layer_parts, fsdp_cost); their shapes
# on a stage decide whether two stages price a layer alike.
PASS_DIMS = ("tp", "cp", "ep", "dp", "edp")


def compute_key(sc: Scenario) -> tuple:
    """Everything workload.layer_cost / embedding_cost / logits_cost and the compute model read."""
    t, p = sc.training, sc.parallelism
    return (sc.model, t.micro_batch, t.dtype, t.recompute, t.flash_attention, t.recompute_modules,
            t.fp8_storage, t.framework, sc.hardware, p.tp, p.cp, p.ep,
            p.sequence_parallel and p.tp > 1, p.token_slices)


def network_key(sc: Scenario, free: bool) -> tuple:
    """Everything network.Network reads: the cluster, the degrees and their placement order, the
    collective library's options and the GPU (NCCL's generation, NVLink SHARP)."""
    p, c = sc.parallelism, sc.communication
    return (sc.cluster, p.tp, p.cp, sc.dp, p.pp, p.ep, p.order, c.algorithm, c.library, c.protocol,
            sc.hardware.gpu, free)


# Networks by key: every row of a sweep that keeps the cluster, the degrees and the library shares
# one (and its cached shapes and calls).  Bounded: cleared when a long session fills it.
_NETWORKS: dict[tuple, Network] = {}
_MAX_NETWORKS = 4096


def shared_network(sc: Scenario, key: tuple) -> Network:
    """The Network of ``key`` (built from the first scenario that asked for it)."""
    net = _NETWORKS.get(key)
    if net is None:
        if len(_NETWORKS) >= _MAX_NETWORKS:
            _NETWORKS.clear()
        net = _NETWORKS[key] = Network(sc, free=key[-1])
    return net


class RowNetwork:
    """A network.Network for one row that shares its group shapes and priced calls with every row
    of the same :func:`network_key` (Network caches them per instance), while ``sc`` is the row's
    own scenario (fsdp_cost reads its framework and dtype from ``net.sc``)."""

    __slots__ = ("sc", "free", "net", "cost", "shape", "placement")

    def __init__(self, sc: Scenario, free: bool = False, key: tuple | None = None) -> None:
        self.sc = sc
        self.net = shared_network(sc, key if key is not None else network_key(sc, free))
        self.free = free
        self.cost = self.net.cost
        self.shape = self.net.shape
        self.placement = self.net.placement

    def group_size(self, dim: str, stage: int = 0) -> int:
        return self.net.shape(dim, stage).n

    def members(self, dim: str, stage: int) -> Any:
        return self.net.members(dim, stage)

    def stage_signature(self, stage: int) -> tuple:
        """The shapes of the groups a pass on ``stage`` talks to: stages that agree price alike."""
        shape = self.net.shape
        return tuple(shape(d, stage) for d in PASS_DIMS)
