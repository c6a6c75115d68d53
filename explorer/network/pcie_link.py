"""The GPU's PCIe link as the first stage of its path to the network.

Whatever a GPU sends to or receives from another node crosses its PCIe link: GPUDirect RDMA has the
NIC read and write GPU memory over PCIe.  A node whose NICs add up to more than its GPUs' links can
carry (one H100 behind a PCIe 5.0 x16 link, 52.8 GB/s measured, driving four 400 Gb/s NICs) runs at
the links' rate: about 50 GB/s busbw in nccl-tests, not the NICs' 200 (nccl-tests issue #232, 2024).
The link is a separate stage of the same chunk pipeline as the NICs, so a call takes the longer of
the two; the NICs' own model (line rate, NCCL's protocol refinements, pipeline fill) is unchanged
where the links are wide enough, as on every rail-optimised node with one NIC per GPU.
"""
from __future__ import annotations

from dataclasses import replace

from ..collective_algorithms.base import LinkCost
from .topology import GroupShape

# Share of the bytes a protocol puts on a link that is payload: LL sends 8 bytes of data with 8 of
# flags, LL128 120 of every 128 (NCCL's protocols; the fractions nccl_tuning's refinements use).
PAYLOAD = {"LL": 0.5, "LL128": 120 / 128, "Simple": 1.0, "none": 1.0}


def pcie_time(link: LinkCost, sh: GroupShape, pcie_Bps: float, proto: str = "none") -> float:
    """Seconds the call needs at least for its traffic through the GPUs' PCIe links: a domain's
    egress (``link.egress``) is spread over its members' links.  0 without a cap (``pcie_Bps`` inf).

    >>> from explorer.network.topology import GroupShape
    >>> two = GroupShape(2, (1, 1), (300e9, 188e9), (1e-6, 4e-6))
    >>> round(pcie_time(LinkCost(0.0, 1, {0: 2e9, 1: 1e9}), two, 52.8e9) * 1e3, 2)   # 1 GB at 52.8 GB/s
    18.94
    """
    if pcie_Bps == float("inf"):
        return 0.0
    t = 0.0
    for b, v in link.egress.items():
        if b >= 1 and sh.n > sh.per_domain[b]:          # sh.spans(b), inlined: priced per call
            t = max(t, v / (sh.per_domain[b] * pcie_Bps))
    return t / PAYLOAD.get(proto, 1.0)


def pcie_boundary(sh: GroupShape) -> int:
    """The boundary whose egress the links limit: the outermost the group crosses (at least the
    node's, the links being the first stage of leaving it)."""
    return max(sh.outer, 1)


def pcie_bound(link: LinkCost, sh: GroupShape, pcie_Bps: float) -> LinkCost:
    """``link`` no faster than its latency plus its traffic through the GPUs' PCIe links."""
    floor = link.latency_s + pcie_time(link, sh, pcie_Bps)
    return replace(link, time_s=floor, boundary=pcie_boundary(sh), pcie=True) if floor > link.time_s else link
