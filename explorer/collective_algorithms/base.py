"""What every collective algorithm's cost is written in: the operations, the group's shape on the
fabric, the link-limited cost record and the crossing rule.

A cost here is a pure function of the operation, its size S in bytes (nccl-tests convention: the
all-reduce/broadcast buffer, the total all-gather output / reduce-scatter input, the per-rank
all-to-all send buffer; nccl-tests doc/PERFORMANCE.md) and the group's *shape*: its members, how
many sit inside one domain of each boundary, the bytes/s share of each boundary's egress the group
gets while every group of its dimension communicates, and each boundary's per-message latency
(explorer/network/topology.py builds shapes; this layer never reads a scenario).
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any, Protocol

import numpy as np

# The operations a communication group issues (nccl-tests' names; send-recv is one point-to-point pair).
OPS = ("all-reduce", "reduce-scatter", "all-gather", "all-to-all", "broadcast", "send-recv")


class Family(Enum):
    """Whose model prices an algorithm when it is named."""

    NCCL = "nccl"                      # NCCL's kernels: a link cost refined by NCCL's tuning model
    MPI = "mpi"                        # MPICH/Open MPI/Gloo: an alpha-beta model (Thakur et al. 2005)
    POINT_TO_POINT = "point-to-point"  # grouped sends and receives: no algorithm to choose
    OTHER = "other"                    # priced by its own alpha-beta model, only when named


class ShapeLike(Protocol):
    """One communication group on the fabric (explorer.network.topology.GroupShape)."""

    @property
    def n(self) -> int: ...                          # members
    @property
    def per_domain(self) -> tuple[int, ...]: ...     # members inside one domain of each boundary
    @property
    def shares(self) -> tuple[float, ...]: ...       # bytes/s of each boundary's egress for this group
    @property
    def latencies(self) -> tuple[float, ...]: ...    # seconds per message across each boundary
    @property
    def up_kind(self) -> str: ...                    # scale-up wiring: nvswitch, nvlink-ring, pcie
    @property
    def nominal_up_share(self) -> float: ...         # shares[0] before the ring efficiency
    @property
    def outer(self) -> int: ...                      # outermost boundary the group crosses

    def spans(self, b: int) -> bool: ...             # members on both sides of boundary b


class OptionsLike(Protocol):
    """What a library's model needs beyond the shape (explorer.network.collectives.NcclOptions)."""

    @property
    def arch(self) -> str: ...     # NCCL's GPU generation: volta, ampere, hopper, blackwell
    @property
    def nvls(self) -> bool: ...    # GPU and NVSwitch reduce in the switch (NVLink SHARP)
    @property
    def sharp(self) -> bool: ...   # the fabric's switches reduce (InfiniBand SHARP)
    @property
    def nics_per_node(self) -> int: ...   # NICs of a node (0: unknown)
    @property
    def gpus_per_node(self) -> int: ...   # GPUs of a node (0: unknown)
    @property
    def nic_GBps(self) -> float: ...      # one NCCL NIC's line rate, GB/s (0: unknown)
    @property
    def net_cap_Bps(self) -> float: ...   # a domain's egress one collective's channels reach (inf: all)
    @property
    def multi_node_nvlink(self) -> bool: ...   # the NVLink domain spans nodes (NVL72's switch trays)


@dataclass(frozen=True)
class LinkCost:
    """One algorithm on one call: link-limited seconds, the limiting boundary, the bytes leaving
    one domain of each boundary, and (alpha-beta models only) the alpha part already included."""

    time_s: float
    boundary: int
    egress: dict[int, float]
    latency_s: float = 0.0
    # The GPUs' PCIe links to their NICs, not ``boundary``'s bandwidth, set the time (network/
    # pcie_link.py); ``boundary`` is then the outermost the call crosses, whose links it shares.
    pcie: bool = False
    # The boundary whose latency is most of ``latency_s`` where it is not the outermost crossed (a
    # pairwise exchange's per-peer issue on the scale-up links, collectives._pairwise); None: that one.
    latency_boundary: int | None = None


# The scale-up wiring's stretch of a traffic pattern (explorer.network.scale_up_wiring.scale_up_factor):
# (shape, pattern, partner distance) -> factor on the scale-up time.
Wiring = Callable[[ShapeLike, str, int], float]


def crossing(shape: ShapeLike, egress: dict[int, float], up: float = 1.0) -> tuple[float, int]:
    """max over boundaries of egress_bytes / share -> (seconds, limiting boundary); the scale-up
    boundary's time is multiplied by ``up`` (the wiring's factor for the pattern).

    >>> class Two:        # two GPUs on two nodes: 100 GB/s NVLink share, 10 GB/s NIC share
    ...     shares = (100e9, 10e9)
    >>> crossing(Two(), {0: 1e9, 1: 1e9})
    (0.1, 1)
    """
    best, where = 0.0, 0
    for b, volume in egress.items():
        t = volume / shape.shares[b] * (up if b == 0 else 1.0)
        if isinstance(t, np.ndarray):        # shares of many networks at once (network/points.py)
            more = t > best
            best, where = np.where(more, t, best), np.where(more, b, where)
        elif t > best:
            best, where = t, b
    return best, where


def lesser(a: Any, b: Any) -> Any:
    """``min(a, b)`` of two numbers, or elementwise where either is an array of network points
    (network/points.py prices one call over many networks with the same formulas)."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return np.minimum(a, b)
    return min(a, b)


def pick(cond: Any, a: Any, b: Any) -> Any:
    """``a if cond else b``, or elementwise where ``cond`` is an array of network points."""
    if isinstance(cond, np.ndarray):
        return np.where(cond, a, b)
    return a if cond else b


def spanned(shape: ShapeLike, volume: float) -> dict[int, float]:
    """``volume`` leaving one domain of every boundary above scale-up that the group spans."""
    return {b: volume for b in range(1, len(shape.shares)) if shape.spans(b)}


# Sequential WAN crossings of one call over ``dcs`` datacenters (each pays the WAN latency).
def ring_crossings(op: str, dcs: int) -> int:
    """A ring crosses each building boundary once per pass (two passes for an all-reduce)."""
    return 0 if dcs <= 1 else (2 if op == "all-reduce" else 1) * (dcs - 1)


def tree_crossings(op: str, dcs: int) -> int:
    """A tree crosses twice per level (up and down), log2 of the datacenters deep."""
    return 0 if dcs <= 1 else 2 * math.ceil(math.log2(dcs))


def in_network_crossings(op: str, dcs: int) -> int:
    """In-network reduction goes up to the switches and back down once."""
    return 0 if dcs <= 1 else 2
