"""Typed records the task graph carries for the stages after the engine.

A :class:`LinkCall` is one kind of network call as the builder priced it: the bytes it puts on
each tier boundary (``egress``, from the collective model or a technique's own dispatch model such
as node-limited MoE routing) and how often a GPU class makes it.  Utilisation and traffic views sum
these; they never ask the network to price a call again, so what they report is what the
timeline charged (issue 9: the scale-out NICs at 148 % on deepseek-v3 came from re-pricing a
node-limited dispatch as a plain all-to-all).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

from ..network.group_routes import spread_loads

if TYPE_CHECKING:
    from ..network.groups import Network


@dataclass(frozen=True)
class LinkCall:
    """``count`` calls on dimension ``dim`` (per pipeline unit when held by a chunk, per iteration
    when held by a task) by one GPU of a group of ``group`` GPUs.

    ``egress[i]``: bytes one call moves out of one domain of boundary i (0: the GPU's scale-up
    link, 1: its node, 2: its leaf block, 3: its datacenter), the convention of
    ``collectives.CollectiveCost.egress``; ``per_domain[i]``: the group's GPUs inside one such
    domain.  ``pairwise``: a point-to-point transfer between two stages (crosses each boundary
    once per pair, not once per spanned domain).
    """

    dim: str
    op: str
    egress: tuple[float, ...]
    group: int
    per_domain: tuple[int, ...]
    count: float
    pairwise: bool = False
    # Across datacenters: (from, to, shares) per WAN link the group's datacenter ring loads, one
    # share being egress[3] (GroupShape.wan_loads; explorer/network/wan.py).
    wan_loads: tuple[tuple[int, int, float], ...] = ()

    def scaled(self, factor: float) -> LinkCall:
        """The same call made ``factor`` times as often."""
        return LinkCall(self.dim, self.op, self.egress, self.group, self.per_domain, self.count * factor,
                        self.pairwise, self.wan_loads)

    def per_gpu(self, boundary: int) -> float:
        """Bytes one GPU sends across ``boundary`` over all ``count`` calls: a domain's egress
        shared by the group's GPUs in that domain."""
        if boundary >= len(self.egress):
            return 0.0
        return self.count * self.egress[boundary] / self.per_domain[boundary]

    def domain_traffic(self, boundary: int, gpus_per_group_set: float) -> float:
        """Bytes across ``boundary`` summed over all its domains, for ``gpus_per_group_set`` GPUs
        that each belong to one group of this dimension (a stage's tp*cp*dp GPUs): the groups they
        form times the domains each spans (a transfer: once per pair) times a domain's egress."""
        if boundary >= len(self.egress):
            return 0.0
        if self.pairwise:
            return self.count * gpus_per_group_set * self.egress[boundary]
        groups = gpus_per_group_set / self.group
        domains = self.group / self.per_domain[boundary]
        return self.count * groups * domains * self.egress[boundary]


def priced_link(net: Network, dim: str, op: str, size: float, stage: int, count: float,
                pairwise: bool = False) -> list[LinkCall]:
    """``count`` calls of ``op`` on ``size`` bytes over ``dim``'s group of ``stage`` with the egress
    the collective model charges them (none when nothing moves or the group is one GPU)."""
    if count <= 0 or size <= 0:
        return []
    sh = net.shape(dim, stage)
    if sh.n <= 1:
        return []
    cc = net.cost(op, size, dim, stage)
    # The WAN links every group of the stage loads, not only the representative's (a stage's
    # groups may cross different links: network/group_routes.py).
    wan = spread_loads(net, dim, stage, sh.wan_loads)
    return [LinkCall(dim, op, cc.egress, sh.n, sh.per_domain, count, pairwise, wan)]


# -- what a task is ------------------------------------------------------------------------------
# Each task carries one of these typed payloads (named tuples: immutable, typed, cheap to create
# for the ~100k tasks of a large pipeline).  Consumers read attributes, dispatching on the type.


class PassInfo(NamedTuple):
    """A compute pass: forward, backward, weight-gradient or DualPipe's fused F&B."""

    micro_batch: int
    chunk: int                          # local chunk on the GPU (virtual stage, DualPipe direction)
    layers: int                         # 0 for a fused F&B (drawn as one block)
    comm: dict                          # per dimension: its per-layer call, as priced (hover)
    layer_parts: tuple = ()             # one layer's parts, the drawing template
    flops: float = 0.0
    hidden: tuple = ()                  # (dim, seconds) of communication hidden under the pass
    op: str = ""                        # the fused pair, in words
    pair_mb: int = -1                   # a fused F&B: the backward's micro-batch (-1 otherwise)
    pair_chunk: int = -1                # ... and its local chunk (DualPipe's direction)
    # Activation offload copies of the pass (ChunkWork.offload_fields): (direction "d2h"/"h2d",
    # layers, copy-engine seconds, exposed seconds), () without offloading.
    offload: tuple = ()


class TransferInfo(NamedTuple):
    """A pipeline transfer of activations (forward) or their gradients (backward)."""

    micro_batch: int
    chunk: int
    bytes: float
    group: int
    algorithm: str
    tier: str
    busbw_GBps: float
    direction: str
    pair: int                           # network.members("pp", pair): the stage pair it uses


class BucketInfo(NamedTuple):
    """Data-parallel gradient buckets (or ZeRO parameter gathers) merged into one task."""

    chunk: int
    bytes: float
    bus_bytes: float
    buckets: int                        # buckets merged into this task
    bucket_bytes: float
    group: int
    algorithm: str
    tier: str
    busbw_GBps: float
    op: str
    dim: str                            # dp (dense) or edp (expert)
    layer_rank: int                     # 0 holds the chunk's first layers (produced last)
    groups: int                         # bucket tasks of the chunk
    share: float                        # of the chunk's parameters


class OverlapInfo(NamedTuple):
    """ZeRO-3 gathers/reductions running under a pass's compute (drawn, never blocking)."""

    micro_batch: int
    chunk: int
    bytes: float
    group: int
    op: str = "FSDP gather/reduce (overlapped)"
    dim: str = "dp"
    bus_bytes: float = 0.0
    buckets: int = 0
    bucket_bytes: float = 0.0
    algorithm: str = ""
    tier: str = ""
    busbw_GBps: float | None = None


class StepInfo(NamedTuple):
    """The optimizer step (nothing more to say than its duration)."""


Payload = PassInfo | TransferInfo | BucketInfo | OverlapInfo | StepInfo
