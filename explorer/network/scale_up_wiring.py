"""How the scale-up wiring (``cluster.scale_up.kind``) stretches a traffic pattern inside a node.

An NVSwitch crossbar carries any pattern at each GPU's bandwidth; an NVLink ring makes an all-to-all
travel the mean ring distance, and PCIe pairs share one switch uplink (topology.py module docstring).
:func:`scale_up_factor` gives the factor the collective models multiply their scale-up time by.
"""
from __future__ import annotations

from ..collective_algorithms.base import ShapeLike
from .topology import PCIE_GPUS_PER_SWITCH


def ring_mean_distance(n: int) -> float:
    """Mean hop distance between two distinct GPUs on a bidirectional ring of ``n``:
    sum_k min(k, n-k) / (n-1), about n/4 (Dally & Towles, Principles and Practices of
    Interconnection Networks, 2004, ch. 3: average distance of a ring / 1-D torus).

    >>> ring_mean_distance(2), ring_mean_distance(4), round(ring_mean_distance(8), 3)
    (1.0, 1.3333333333333333, 2.286)
    """
    if n <= 2:
        return 1.0
    return sum(min(k, n - k) for k in range(1, n)) / (n - 1)


def scale_up_factor(sh: ShapeLike, pattern: str, dist: int = 0) -> float:
    """How many times longer a scale-up transfer of ``pattern`` takes on ``sh``'s wiring than on a
    non-blocking NVSwitch crossbar at the same per-GPU bandwidth (topology.py module docstring).

    ``ring`` (neighbour sends: rings, tree chains): 1; ``all-to-all``: the mean ring distance on an
    NVLink ring, or the PCIe uplink sharing, on the in-node part of the volume; ``exchange`` (a
    halving-doubling step with partner ``dist`` away).  Members are consecutive GPUs of a node.
    """
    g = sh.per_domain[1]
    if sh.up_kind == "nvswitch" or g <= 1 or pattern == "ring":
        return 1.0
    if pattern == "all-to-all":
        if sh.up_kind == "nvlink-ring":
            f = ring_mean_distance(g)
        else:
            # PCIe: one switch's uplink carries what both its GPUs send outside the pair.
            pair = PCIE_GPUS_PER_SWITCH
            f = max(1.0, pair * (g - pair) / (g - 1))
        return ((g - 1) * f + (sh.n - g)) / max(sh.n - 1, 1)
    if pattern == "exchange" and 0 < dist < g:
        if sh.up_kind == "nvlink-ring":
            return float(min(dist, g - dist))
        if dist >= PCIE_GPUS_PER_SWITCH:
            return float(PCIE_GPUS_PER_SWITCH)
    return 1.0
