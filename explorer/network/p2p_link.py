"""One send/recv call over a group: a ring step of its members, priced on the links each byte really uses.

A ``send-recv`` over a group of ``n`` members is one ring step: every member sends ``S`` to the next and
receives from the one before, all at once (ring attention's K/V hand-off, Transformer Engine's
``AttnFuncWithCPAndKVP2P``: each step posts one isend to the next CP rank and one irecv from the previous;
a pipeline pair is a ring of two).  With ``k`` consecutive members in each NVLink domain (a node):

* **scale-up**: k-1 of a node's members hand their S to a neighbour over NVLink; with a NIC per member the
  member whose neighbour is on the next node sends through its own NIC (GPUDirect RDMA over PCIe), not
  over NVLink (the convention of nccl_links.ring).  The step lasts as long as the busiest member, which
  sends S over NVLink when k > 1; the mean bytes a member puts on NVLink are S * (k-1)/k (``egress[0]``,
  what comm_bytes_by_tier and the utilisation views add up: 0 for a pair of GPUs on two nodes).
* **scale-out**: one flow per group leaves each node (the last member's), the only flow of its group
  there.  NCCL's network transport sends a point-to-point flow through the NICs local to the sending GPU
  (src/graph/topo.cc ``ncclTopoGetLocalNet``: the GPU's nearest NICs, channel by channel), so the flow
  gets at most one GPU's NICs: the domain's egress / min(NICs, GPUs), as nccl_table._pair_shapes prices
  nccl-tests' crossing pair.  The group's share of its node (Fabric.shape_of: capacity x k / domain GPUs)
  counts k members' NICs, which a collective's channels use (one exit per channel, nccl_links.ring) but
  one flow cannot.  The node's G/k groups send G/k such flows at once, so a flow gets the lesser of the
  two: capacity x k / G (its fair share of the node's egress) and capacity / min(NICs, G) (one GPU's
  NICs, :func:`one_gpu_nics`).  With one member per node both are one NIC's worth and nothing changes.
  A pair whose hop sends fewer flows out of a node than its G GPUs (a pipeline hop: only the stage's
  boundary ranks cross) comes with its share already counted per flow (p2p_flows.flow_shape, at most
  one GPU's NICs), which :func:`one_flow_share` leaves as it is.
* **further boundaries** (leaf uplinks, the WAN): S over the group's share, one flow per group per
  domain as before (Fabric.shape_of's fair share); a pipeline hop's leaf uplinks split among the
  flows that leave the leaf block, its WAN links among the flows routed over each (p2p_flows.py).
* **PCIe**: the crossing flow leaves through the sending GPU's own PCIe link (pcie_link.py): S over one
  link's rate, not spread over the k members' links as a collective's egress is.
"""
from __future__ import annotations

from dataclasses import replace

from ..collective_algorithms.base import LinkCost, OptionsLike, crossing, spanned
from . import nccl_tuning as nt
from .pcie_link import pcie_boundary
from .topology import GroupShape

__all__ = ["one_flow_share", "one_gpu_nics", "p2p_latency", "send_recv_link"]


def p2p_latency(sh: GroupShape) -> float:
    """Seconds a point-to-point call over ``sh`` takes besides its bytes: the farthest peer's hop
    latency and, across nodes, the proxies' hand-off (nccl_tuning.P2P_NET_US)."""
    net = nt.P2P_NET_US * 1e-6 if len(sh.shares) > 1 and sh.spans(1) else 0.0
    return net + sh.latencies[sh.outer]


def one_gpu_nics(capacity_Bps: float, nics: int, gpus: int) -> float:
    """Bytes/s of one GPU's NICs in an NVLink domain of ``gpus`` GPUs and ``nics`` NICs whose egress
    is ``capacity_Bps``: capacity / min(NICs, GPUs), the NICs NCCL's ncclTopoGetLocalNet gives the GPU
    (module docstring): one NIC where NICs are fewer than GPUs, a GPU's bonded NICs where they are
    more; the whole egress when either count is unknown (0).

    >>> one_gpu_nics(94e9, 2, 8) / 1e9, one_gpu_nics(8 * 47e9, 16, 8) / 1e9
    (47.0, 47.0)
    """
    return capacity_Bps / max(1, min(nics, gpus))


def one_flow_share(sh: GroupShape, o: OptionsLike) -> float:
    """Bytes/s the one flow of a group that leaves its NVLink domain gets there (module docstring):
    min(the group's share, one GPU's NICs), one GPU's NICs being the domain's egress (share x G / k)
    over min(NICs, G).  The group's share as it is when the NICs or GPUs of a domain are unknown (0),
    and when it is one flow's already (p2p_flows.flow_shape: at most one GPU's NICs, so at most the
    second term).

    >>> from explorer.network.collectives import NcclOptions
    >>> ring = GroupShape(16, (1, 8), (300e9, 8 * 47e9), (1e-6, 4e-6))   # 8 members a node, 8 NICs
    >>> one_flow_share(ring, NcclOptions(nics_per_node=8, gpus_per_node=8)) / 1e9
    47.0
    """
    k, gpus, nics = sh.per_domain[1], o.gpus_per_node, o.nics_per_node
    if gpus <= 0 or nics <= 0:
        return sh.shares[1]
    capacity = sh.shares[1] * gpus / k
    return min(sh.shares[1], one_gpu_nics(capacity, nics, gpus))


def _crosses_on_nvlink(sh: GroupShape, o: OptionsLike) -> bool:
    """Whether the member whose neighbour is on the next node also hands its bytes over NVLink: when
    its node has fewer NICs than members (the flow goes to a NIC of another GPU: NCCL's PXN, as
    nccl_links.ring counts it) or the NICs are unknown."""
    return o.nics_per_node < sh.per_domain[1]


def send_recv_link(S: float, sh: GroupShape, o: OptionsLike, pcie_Bps: float) -> LinkCost:
    """Link cost of one ring step of ``S`` bytes per member over ``sh`` (module docstring): latency
    plus the slowest boundary for the busiest member, at least the sending GPU's PCIe link when the
    step leaves the node; ``egress``: the mean bytes per member on scale-up, S out of every domain
    the group spans."""
    lat = p2p_latency(sh)
    if not (len(sh.shares) > 1 and sh.spans(1)):
        egress = {0: S}
        t, b = crossing(sh, egress)
        return LinkCost(lat + t, b, egress, lat)
    k = sh.per_domain[1]
    via_nvlink = _crosses_on_nvlink(sh, o)
    busiest = {0: S if k > 1 or via_nvlink else 0.0, **spanned(sh, S)}
    flow = replace(sh, shares=(sh.shares[0], one_flow_share(sh, o), *sh.shares[2:]))
    t, b = crossing(flow, busiest)
    mean_up = S if via_nvlink else S * (k - 1) / k
    egress = {0: mean_up, **spanned(sh, S)}
    link = LinkCost(lat + t, b, egress, lat)
    floor = lat + S / pcie_Bps
    if floor > link.time_s:
        return replace(link, time_s=floor, boundary=pcie_boundary(sh), pcie=True)
    return link
