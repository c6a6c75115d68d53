"""The WAN between datacenters as links, and what a collective's traffic puts on each of them.

A group that spans several datacenters talks across the WAN in datacenter order: its members in
rank order visit datacenters d_0, d_1, ..., d_(k-1), and the collective's inter-datacenter traffic
is a ring over them (d_i -> d_(i+1), the last back to the first), each hop carrying one
datacenter's egress (``CollectiveCost.egress[3]``, "one share").  That is exactly how a ring
all-reduce/reduce-scatter/all-gather crosses (Thakur et al., IJHPCA 2005, Sec. 4: every member
sends (n-1)/n*S to its successor), how the WAN phase of the hierarchical algorithm runs (one ring
of k members per position, collective_algorithms.alpha_beta.hierarchical), and what a pipeline
transfer between two datacenters is (k = 2).  Other patterns (trees, halving-doubling, all-to-all)
are mapped onto the same ring, which is what the per-datacenter egress model always assumed.

Each ring hop is routed on the topology (explorer/config/wan.py): ``mesh`` takes the direct link,
``ring`` the shorter way round (ties clockwise), ``hub`` goes through datacenter 0 unless an end is
the hub.  A directed link's load is the number of hops routed over it; the group's WAN share is
the smallest of capacity x g/G / load over the links it loads (g of the G GPUs of a datacenter are
the group's: every group of a dimension communicates at once, topology.py), and its WAN latency
the longest hop's summed link latencies.  So the slowest crossed link limits the collective; on a
uniform mesh every load is 1 and the figures are the per-datacenter egress model's, bit for bit.

Example: DP over 3 datacenters on a hub.  Hops 0->1, 1->2 (= 1->0, 0->2), 2->0: each spoke link
carries one share in each direction, the hub's links together 2 = D-1 shares each way, and the
spoke-to-spoke link 1-2 does not exist.  On a ring WAN the same ring loads each link once, one way.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from ..config import Cluster
from ..config.wan import datacenter_index, topology_pairs
from ..units import gbps_to_Bps, ms_to_s

Load = tuple[int, int, float]       # directed link (from, to) and the shares routed over it


@dataclass(frozen=True)
class WanLinkSpec:
    """One WAN link: its ends (indices, a < b), nominal bandwidth per direction, achievable
    capacity in bytes/s (efficiency applied) and one-way latency."""

    a: int
    b: int
    bandwidth_Gbps: float
    capacity_Bps: float
    latency_s: float


@dataclass(frozen=True)
class Wan:
    """The datacenters' links (explorer/config/wan.py topology) with their overrides applied."""

    dcs: int
    topology: str
    links: tuple[WanLinkSpec, ...]
    names: tuple[str, ...]

    @classmethod
    def for_cluster(cls, c: Cluster, efficiency: float) -> Wan:
        """The WAN of ``c``: every topology link at the scale-across defaults, then the overrides."""
        wan = c.scale_across
        over = {}
        for link in wan.links:
            a = datacenter_index(link.a, c.datacenter_names, c.datacenters)
            b = datacenter_index(link.b, c.datacenter_names, c.datacenters)
            if a is not None and b is not None:        # validated at load (wan_rules)
                over[(min(a, b), max(a, b))] = link
        specs = []
        for a, b in topology_pairs(wan.topology, c.datacenters):
            o = over.get((a, b))
            bw = o.bandwidth_Gbps if o is not None and o.bandwidth_Gbps is not None else wan.bandwidth_Gbps
            lat = o.latency_ms if o is not None and o.latency_ms is not None else wan.latency_ms
            # The same expressions as topology.Fabric's scale-across boundary: equal links, equal floats.
            specs.append(WanLinkSpec(a, b, bw, gbps_to_Bps(bw) * efficiency, ms_to_s(lat)))
        names = tuple(c.datacenter_name(d) for d in range(c.datacenters))
        return cls(c.datacenters, wan.topology, tuple(specs), names)

    @cached_property
    def _by_pair(self) -> dict[tuple[int, int], WanLinkSpec]:
        # A mesh of 1,024 datacenters has 523,776 links: look them up, never scan (a scan per call
        # made a 1,024-datacenter run take minutes).
        return {(spec.a, spec.b): spec for spec in self.links}

    @cached_property
    def capacity_Bps(self) -> float:
        """Bytes per second all its links carry at once, both directions of each (the datacenters'
        egress together: a datacenter of a ring has two links, of a mesh D - 1)."""
        return 2.0 * sum(spec.capacity_Bps for spec in self.links)

    def link(self, u: int, v: int) -> WanLinkSpec:
        """The link joining ``u`` and ``v`` (either order)."""
        key = (min(u, v), max(u, v))
        try:
            return self._by_pair[key]
        except KeyError:
            raise KeyError(key) from None

    def path(self, u: int, v: int) -> tuple[tuple[int, int], ...]:
        """Directed links a transfer from datacenter ``u`` to ``v`` crosses (module docstring)."""
        if u == v:
            return ()
        if self.topology == "hub":
            return ((u, v),) if 0 in (u, v) else ((u, 0), (0, v))
        if self.topology == "ring":
            D = self.dcs
            fwd = (v - u) % D
            step = 1 if fwd <= D - fwd else -1
            hops, at = [], u
            while at != v:
                nxt = (at + step) % D
                hops.append((at, nxt))
                at = nxt
            return tuple(hops)
        return ((u, v),)

    def ring_loads(self, order: tuple[int, ...]) -> tuple[Load, ...]:
        """Shares each directed link carries when the datacenters ``order`` (rank order) pass one
        datacenter's egress each to the next, the last to the first."""
        loads: dict[tuple[int, int], float] = {}
        k = len(order)
        for i in range(k if k > 1 else 0):
            for hop in self.path(order[i], order[(i + 1) % k]):
                loads[hop] = loads.get(hop, 0.0) + 1.0
        return tuple((u, v, x) for (u, v), x in sorted(loads.items()))

    def limit(self, order: tuple[int, ...], loads: tuple[Load, ...], g: int,
              domain_gpus: int) -> tuple[float, float]:
        """(share in bytes/s, latency in s) of the WAN for a group with ``g`` of a datacenter's
        ``domain_gpus`` GPUs: the slowest loaded link's capacity x g/G / load, and the longest
        hop's summed latency."""
        share = min(self.link(u, v).capacity_Bps * g / domain_gpus / x for u, v, x in loads)
        k = len(order)
        latency = max(sum(self.link(a, b).latency_s for a, b in self.path(order[i], order[(i + 1) % k]))
                      for i in range(k))
        return share, latency
