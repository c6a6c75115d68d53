"""The three network tiers as nested domains, and the networkx graph they describe.

The simulator never walks a per-GPU graph (that would make its cost grow with the GPU count).
Instead a cluster is a stack of *boundaries*, each the egress of a domain of consecutive GPUs:

====  ==============  ====================================  ===============================
b     name            domain                                egress capacity of one domain
====  ==============  ====================================  ===============================
0     scale-up        one GPU                               NVLink/NVSwitch/PCIe per direction
1     scale-out       one NVLink domain (the node, or a     the NICs of its nodes:
                      rack: cluster.scale_up.domain_gpus)   nics_per_node x nic_Gbps each
2     spine           one leaf block (nodes under a leaf)   leaf uplinks = downlinks / oversubscription
3     scale-across    one datacenter                        WAN bandwidth per direction
====  ==============  ====================================  ===============================

Ranks of one NVLink domain talk over NVLink even on different nodes (GB200 NVL72: 18 trays of 4
GPUs on one NVLink switch fabric), so the scale-out boundary is the domain's, not the node's, and a
domain egresses through all its nodes' NICs (explorer/config/domains.py).  A leaf block is
``switch_radix/2`` nodes for a rail-optimized fabric (one leaf per rail, one port per node: NVIDIA
DGX SuperPOD reference architecture) and ``switch_radix/2 / nics_per_node`` nodes
for a classic fat-tree whose leaf takes every NIC of its nodes.  Above the leaves the fabric is
taken as non-blocking inside a datacenter.

All groups of one dimension communicate at once (DESIGN.md, "Contention"), so a domain's egress
is divided among the groups that have members in it: a group with ``g`` members in a domain of
``G`` GPUs gets ``capacity * g / G``.  A collective's channels use all g members' NICs; a ring step of
point-to-point sends has one flow per group leave the node, through one GPU's NICs, which
:mod:`explorer.network.p2p_link` caps it at; a pipeline hop, whose pairs leave a node only from the
stage's boundary ranks, has its flows counted (:mod:`explorer.network.p2p_flows`).  :func:`build_graph`
builds the same cluster as a networkx graph for drawing and for tests that check the analytic shares
against explicit routing.

The scale-up boundary's *wiring* (``cluster.scale_up.kind``) is carried on every group shape and
applied by :mod:`explorer.network.collectives` as a multiplier on the scale-up time of each traffic pattern
(:func:`explorer.network.scale_up_wiring.scale_up_factor`), always at the same ``bandwidth_GBps`` per GPU:

- ``nvswitch``: a non-blocking crossbar — every pattern runs at the full per-GPU bandwidth, and
  the switch can reduce in-network (NVLS, when the GPU has NVLink SHARP).
- ``nvlink-ring``: the GPUs sit on a bidirectional ring of point-to-point NVLinks (e.g. the
  4-GPU NVLink bridges of PCIe cards, or DGX-1's hybrid cube-mesh seen as rings).  Ring
  collectives (and NCCL's intra-node tree chain) only talk to neighbours and run at full link
  bandwidth; traffic between non-neighbours is forwarded over several hops, each hop loading a
  link.  The mean distance between two GPUs on a bidirectional ring of n is about n/4 (exactly
  sum_k min(k, n-k) / (n-1); Dally & Towles, *Principles and Practices of Interconnection
  Networks*, 2004, ch. 3, ring/torus average distance), so a pairwise all-to-all among n >= 4
  GPUs gets about 4/n of the crossbar's per-GPU bandwidth, and a halving-doubling step whose
  partner is d ranks away takes min(d, n-d) times as long.  No NVLS.
- ``pcie``: GPUs behind shared PCIe switches, two GPUs per switch with one x16 uplink of the
  same width as a GPU's link (the usual 8-GPU PCIe server: four switches, two per CPU socket).
  Traffic between the two GPUs of a pair stays in the switch; traffic that leaves the pair goes
  through the uplink, so when *both* GPUs of a pair send out at once (all-to-all, halving-doubling
  steps with partner distance >= 2) each gets half its bandwidth.  A ring sends only one flow per
  direction out of each pair, which one uplink carries at full rate.  No NVLS.
Group members are taken as consecutive GPUs of the node (TP innermost), i.e. neighbours on the
ring and pair-mates on the PCIe switch.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..config import Cluster
from ..config.domains import effective_domain
from ..config.presets import fabric_presets, resolved_scale_out
from ..units import GBps_to_Bps, gbps_to_Bps, ms_to_s, us_to_s
from ..vocabulary import TIERS
from .placement import members_per_domains
from .wan import Load, Wan

# A group's datacenters in rank order and its ring's loads on the WAN links (Fabric.route).
Route = tuple[tuple[int, ...], tuple[Load, ...]]

if TYPE_CHECKING:  # networkx costs ~0.15 s to import; only the graph builders need it
    import networkx as nx

# Achievable fraction of the nominal scale-up bandwidth for NCCL ring collectives.  Fitted once to
# the two ring rows of shared calibration/nccl_busbw.csv (A100 8-GPU all-reduce 235 GB/s busbw at
# 300 GB/s NVLink: 0.783; B200 682.2 GB/s at 900 GB/s: 0.758): their mean.
SCALE_UP_EFFICIENCY = 0.77
# Fraction of NIC line rate NCCL reaches on the default fabric (ib-ndr): fitted per fabric in
# explorer/data/fabrics.yaml (NDR: 0.94, NVIDIA's "46-48 GB/s per NIC", nccl-tests issue #290).
SCALE_OUT_EFFICIENCY = float(fabric_presets()["ib-ndr"]["efficiency"])
# Long-haul TCP/RDMA over WAN links loses about as much as the fabric; no calibration row exists.
SCALE_ACROSS_EFFICIENCY = 0.9
BOUNDARY_NAMES = TIERS                   # the vocabulary's tiers, innermost first
SCALE_UP_KINDS = ("nvswitch", "nvlink-ring", "pcie")
PCIE_GPUS_PER_SWITCH = 2        # GPUs sharing one PCIe switch uplink (see module docstring)


@dataclass(frozen=True)
class LineRates:
    """Each tier's line rate in bytes/s, converted once from the scenario's fields
    (explorer/units.py): one GPU's scale-up link, one NIC, and the WAN per direction (the default
    of every WAN link; wan.py applies a link's own).  Everything that needs a link's rate reads it
    here or from the :class:`Boundary` built from it, never from the raw fields."""

    scale_up_Bps: float
    nic_Bps: float
    wan_Bps: float

    @classmethod
    def for_cluster(cls, c: Cluster) -> LineRates:
        out = resolved_scale_out(c.scale_out)
        up_GBps, nic_Gbps = c.scale_up.bandwidth_GBps, out.nic_Gbps
        assert up_GBps is not None and nic_Gbps is not None   # the defaults and resolved_scale_out fill them
        return cls(GBps_to_Bps(up_GBps), gbps_to_Bps(nic_Gbps),
                   gbps_to_Bps(c.scale_across.bandwidth_Gbps))


@dataclass(frozen=True)
class Boundary:
    """Egress of one domain: its size in GPUs, capacity in bytes/s (efficiency applied), latency,
    and the same egress at line rate (``line_Bps``, no efficiency)."""

    name: str
    domain_gpus: int
    capacity_Bps: float
    latency_s: float
    line_Bps: float = 0.0

    @property
    def per_gpu_Bps(self) -> float:
        """A GPU's share of the domain's achievable egress when all its GPUs send at once."""
        return self.capacity_Bps / self.domain_gpus


@dataclass(frozen=True)
class Fabric:
    """The cluster as nested domains (see module docstring)."""

    boundaries: tuple[Boundary, ...]
    leaf_nodes: int
    gpus: int
    up_kind: str = "nvswitch"   # scale-up wiring: one of SCALE_UP_KINDS
    wan: Wan | None = None      # the datacenters' links (explorer/network/wan.py); None: built without them
    rates: LineRates | None = None   # the tiers' line rates the boundaries were built from

    @classmethod
    def for_cluster(cls, c: Cluster) -> Fabric:
        up, out, across = c.scale_up, resolved_scale_out(c.scale_out), c.scale_across
        rates = LineRates.for_cluster(c)
        gpn, dom = c.gpus_per_node, effective_domain(c)
        half = out.switch_radix // 2
        leaf_nodes = half if out.kind == "rail-optimized" else max(1, half // out.nics_per_node)
        leaf_nodes = min(leaf_nodes, c.nodes // c.datacenters)
        out_us, out_eff = out.latency_us, out.efficiency
        assert out_us is not None and out_eff is not None     # resolved_scale_out fills them
        node_Bps = out.nics_per_node * rates.nic_Bps
        dom_Bps = node_Bps * (dom // gpn)        # every node of the domain brings its NICs
        spine_Bps = leaf_nodes * node_Bps / out.oversubscription
        # A leaf block holds whole domains (boundaries nest): at least one, at most the leaf's nodes.
        block = max(dom, gpn * leaf_nodes // dom * dom)
        bounds = (
            Boundary("scale-up", 1, rates.scale_up_Bps * SCALE_UP_EFFICIENCY, us_to_s(up.latency_us),
                     rates.scale_up_Bps),
            Boundary("scale-out", dom, dom_Bps * out_eff, us_to_s(out_us), dom_Bps),
            Boundary("spine", block, spine_Bps * block / (gpn * leaf_nodes) * out_eff, us_to_s(out_us),
                     spine_Bps * block / (gpn * leaf_nodes)),
            Boundary("scale-across", gpn * c.nodes // c.datacenters,
                     rates.wan_Bps * SCALE_ACROSS_EFFICIENCY, ms_to_s(across.latency_ms), rates.wan_Bps),
        )
        wan = Wan.for_cluster(c, SCALE_ACROSS_EFFICIENCY) if c.datacenters > 1 else None
        return cls(bounds, leaf_nodes, c.gpus, up.kind, wan, rates)

    def tier_capacity_Bps(self, b: int, gpus: int) -> float:
        """Bytes per second boundary ``b`` of a ``gpus``-GPU cluster carries at once, what a tier's
        utilisation is read over: its domains' egress together; the WAN's links, both directions
        (wan.Wan.capacity_Bps: a datacenter of a ring sends on two, of a mesh on D - 1)."""
        bd = self.boundaries[b]
        if self.wan is not None and bd.name == "scale-across":
            return self.wan.capacity_Bps
        return max(gpus / bd.domain_gpus, 1) * bd.capacity_Bps

    def per_domain(self, members: np.ndarray) -> tuple[int, ...]:
        """Members of the group inside one domain of each boundary (placement.members_per_domain)."""
        return members_per_domains(members, tuple(b.domain_gpus for b in self.boundaries))

    def route(self, members: np.ndarray, per: tuple[int, ...]) -> Route:
        """The group's datacenters in rank order and the shares its datacenter ring puts on each
        WAN link (explorer/network/wan.py ring_loads), or ``((), ())`` when it stays in one
        datacenter.  Depends on the members, the domains' sizes and the WAN's topology only, not on
        any rate: a network sweep's rows memoise it (groups.Network._shape)."""
        top = self.boundaries[-1]
        if self.wan is None or len(members) <= per[-1]:
            return (), ()
        dcs, first = np.unique(np.asarray(members) // top.domain_gpus, return_index=True)
        order = tuple(int(d) for d in dcs[np.argsort(first)])     # datacenters in rank order
        if len(order) < 2:
            # One datacenter after all: a group that names a GPU twice (a pair of ranks on one GPU,
            # as one-GPU datacenters give) holds more members than the domain has GPUs.
            return (), ()
        return order, self.wan.ring_loads(order)

    def shape(self, members: np.ndarray, per: tuple[int, ...] | None = None,
              route: Route | None = None) -> GroupShape:
        """How a group (GPU ids of one representative group) sits on the boundaries.  Across
        datacenters the share and latency are those of the slowest WAN link the group's datacenter
        ring crosses (explorer/network/wan.py); on a uniform mesh, the datacenter egress's own.  ``per``:
        :meth:`per_domain` of ``members`` when the caller has it already; ``route``: :meth:`route`
        of ``members`` likewise."""
        n = len(members)
        if per is None:
            per = self.per_domain(members)
        if route is None:
            route = self.route(members, per)
        return self.shape_of(n, per, route)

    def shape_of(self, n: int, per: tuple[int, ...], route: Route) -> GroupShape:
        """:meth:`shape` of a group of ``n`` members given its :meth:`per_domain` and :meth:`route`:
        the rates applied to what the placement and the WAN's topology fixed."""
        shares = [b.capacity_Bps * g / b.domain_gpus for b, g in zip(self.boundaries, per, strict=True)]
        latencies = [b.latency_s for b in self.boundaries]
        order, loads = route
        if order:
            assert self.wan is not None                   # route() orders datacenters only on a WAN
            top = self.boundaries[-1]
            shares[-1], latencies[-1] = self.wan.limit(order, loads, per[-1], top.domain_gpus)
        return GroupShape(n, per, tuple(shares), tuple(latencies), self.up_kind, loads)


@dataclass(frozen=True)
class GroupShape:
    """One communication group on the fabric.

    ``per_domain[b]``: members inside one domain of boundary ``b`` (1 for b = 0);
    ``shares[b]``: bytes/s of that domain's egress available to this group while every group of
    the same dimension communicates; ``latencies[b]``: per-message latency across ``b``.
    """

    n: int
    per_domain: tuple[int, ...]
    shares: tuple[float, ...]
    latencies: tuple[float, ...]
    up_kind: str = "nvswitch"   # scale-up wiring (module docstring); scale_up_wiring.scale_up_factor
    # Across datacenters: (from, to, shares) of each WAN link its datacenter ring loads
    # (explorer/network/wan.py).
    wan_loads: tuple[tuple[int, int, float], ...] = ()

    def spans(self, b: int) -> bool:
        """Whether the group has members on both sides of boundary ``b``."""
        return self.n > self.per_domain[b]

    @property
    def outer(self) -> int:
        """Outermost boundary the group crosses (0 when it stays inside one GPU's links)."""
        return max((b for b in range(len(self.shares)) if self.spans(b)), default=0)

    @property
    def nominal_up_share(self) -> float:
        """The scale-up share before the ring efficiency (SCALE_UP_EFFICIENCY): what NVLS's own
        fitted fraction applies to."""
        return self.shares[0] / SCALE_UP_EFFICIENCY


# ------------------------------------------------------------------------------------------------
# The explicit graph: for drawing and for checking the analytic model on small clusters.
# ------------------------------------------------------------------------------------------------
def build_graph(c: Cluster, max_nodes: int | None = None) -> nx.Graph:
    """The cluster as an undirected networkx graph with a ``tier`` and ``capacity_Bps`` per edge.

    Vertices: ``gpu/N/i``, ``switch/N`` (the NVSwitch of the NVLink domain whose first node is N),
    ``nic/N/k``, ``leaf/L`` (rail-optimized:
    ``leaf/B/r``, one per rail and leaf block), ``spine/D`` (one aggregate per datacenter) and
    ``dc/D`` (datacenter gateway).  ``max_nodes`` keeps the first nodes of each datacenter only (the
    app collapses big clusters this way).

    >>> from explorer.scenario import Cluster, ScaleUp
    >>> g = build_graph(Cluster(gpus_per_node=2, nodes=2, scale_up=ScaleUp(bandwidth_GBps=450.0)))
    >>> sorted(n for n in g if n.startswith("gpu"))
    ['gpu/0/0', 'gpu/0/1', 'gpu/1/0', 'gpu/1/1']
    """
    import networkx as nx

    fab = Fabric.for_cluster(c)
    out = resolved_scale_out(c.scale_out)
    assert fab.rates is not None
    g: nx.Graph = nx.Graph()
    nic_Bps = fab.rates.nic_Bps
    per_dc = c.nodes // c.datacenters
    for dc in range(c.datacenters):
        g.add_node(f"spine/{dc}", kind="spine", dc=dc)
        if c.datacenters > 1:
            g.add_node(f"dc/{dc}", kind="dc", dc=dc)
            g.add_edge(f"spine/{dc}", f"dc/{dc}", tier="scale-across",
                       capacity_Bps=fab.rates.wan_Bps)
        shown = per_dc if max_nodes is None else min(per_dc, max_nodes)
        for local in range(shown):
            node = dc * per_dc + local
            block = local // fab.leaf_nodes
            # The NVSwitch fabric of the node's NVLink domain (a GB200 NVL72 rack: one for 18 trays).
            first = node - node % (fab.boundaries[1].domain_gpus // c.gpus_per_node)
            sw = f"switch/{first}"
            if sw not in g:
                g.add_node(sw, kind="nvswitch", node=first, dc=dc)
            for i in range(c.gpus_per_node):
                gpu = f"gpu/{node}/{i}"
                g.add_node(gpu, kind="gpu", node=node, dc=dc, index=node * c.gpus_per_node + i)
                g.add_edge(gpu, sw, tier="scale-up", capacity_Bps=fab.rates.scale_up_Bps)
            for k in range(out.nics_per_node):
                nic = f"nic/{node}/{k}"
                g.add_node(nic, kind="nic", node=node, dc=dc)
                # Each NIC hangs off the PCIe switch of "its" GPU; model it as attached to that GPU.
                g.add_edge(nic, f"gpu/{node}/{k % c.gpus_per_node}", tier="scale-up", capacity_Bps=nic_Bps)
                leaf = f"leaf/{dc}/{block}/{k}" if out.kind == "rail-optimized" else f"leaf/{dc}/{block}"
                if leaf not in g:
                    g.add_node(leaf, kind="leaf", dc=dc, block=block)
                    # Uplink capacity = this leaf's downlinks / oversubscription.
                    down = fab.leaf_nodes * (1 if out.kind == "rail-optimized" else out.nics_per_node)
                    g.add_edge(leaf, f"spine/{dc}", tier="spine",
                               capacity_Bps=down * nic_Bps / out.oversubscription)
                g.add_edge(nic, leaf, tier="scale-out", capacity_Bps=nic_Bps)
    if fab.wan is not None:
        for link in fab.wan.links:     # the WAN topology's links (a full mesh by default)
            g.add_edge(f"dc/{link.a}", f"dc/{link.b}", tier="scale-across",
                       capacity_Bps=gbps_to_Bps(link.bandwidth_Gbps))
    return g


def routed_ring_bandwidth(c: Cluster, groups: list[list[int]]) -> float:
    """Per-flow bandwidth (bytes/s, no efficiency) when every group sends around its ring at once,
    routed hop by hop on :func:`build_graph`'s graph: each directed link's capacity is split evenly
    among the flows crossing it, and a flow gets its path's smallest slice.  A check of the
    analytic shares of :class:`Fabric` on clusters small enough to route explicitly.

    >>> from explorer.scenario import Cluster, ScaleUp
    >>> c = Cluster(gpus_per_node=2, nodes=2, scale_up=ScaleUp(bandwidth_GBps=100))
    >>> routed_ring_bandwidth(c, [[0, 1]]) / 1e9      # one NVSwitch hop each way
    100.0
    """
    import networkx as nx

    g = build_graph(c)
    name = {d["index"]: n for n, d in g.nodes(data=True) if d.get("kind") == "gpu"}
    flows: dict[tuple[str, str], int] = {}
    paths = []
    for members in groups:
        for a, b in zip(members, members[1:] + members[:1], strict=True):
            if a == b:
                continue
            path = nx.shortest_path(g, name[a], name[b])
            paths.append(path)
            for u, v in itertools.pairwise(path):
                flows[(u, v)] = flows.get((u, v), 0) + 1
    if not paths:
        return float("inf")
    return min(min(g.edges[u, v]["capacity_Bps"] / flows[(u, v)] for u, v in itertools.pairwise(p))
               for p in paths)
