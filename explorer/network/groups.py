"""The scenario's communication groups on its fabric, and the cost of a call on each group.

Binds placement (which GPUs form a group) to topology (what each boundary offers) and collectives
(how long a call takes), with a cache per (dimension, stage), since every micro-batch of a stage
issues the same calls.
"""
from __future__ import annotations

import itertools
from dataclasses import replace

import numpy as np

from .. import dimensions
from ..collective_algorithms import registry
from ..config import Scenario
from ..config.domains import effective_domain
from ..config.presets import datasheet_name, fabric_presets, resolved_scale_out
from ..schedules import registry as schedules
from ..schedules.registry import Placement as SchedulePlacement
from ..units import GBps_to_Bps, gbps_to_GBps
from .collectives import CollectiveCost, NcclOptions, cost
from .domain_links import channel_nics_Bps
from .group_routes import base_group, slowest_group
from .nccl_tuning import NET_CHUNK_BYTES, gpu_arch, net_channels
from .p2p_flows import flow_shape, pipeline_hop_flows
from .placement import Placement
from .replica_groups import replica_members
from .topology import Fabric, GroupShape, Route

# The largest NVLink domain on one NVSwitch baseboard (HGX/DGX 8-GPU boards); a larger domain is a
# rack's NVLink switch trays (GB200/GB300 NVL72, GH200 NVL32), however its GPUs are written as nodes
# (18 trays of 4, or one "node" of 72: tests/test_controls_domains.py prices them alike).
NVSWITCH_BOARD_GPUS = 8


def nccl_options(sc: Scenario) -> NcclOptions:
    """The library model's inputs from a scenario: library, forced protocol, NCCL's GPU generation,
    NVLink SHARP (GPU and NVSwitch), InfiniBand SHARP, and whether LL128 crosses the fabric (NCCL
    enables LL128 only over GPUDirect-RDMA paths; the eth-* fabrics are TCP sockets) and the GPU's
    PCIe link to its NICs."""
    gpu, out = sc.hardware.gpu, resolved_scale_out(sc.cluster.scale_out)
    assert out.nic_Gbps is not None and out.efficiency is not None   # resolved_scale_out fills them
    # NCCL's "node" is the NVLink domain (MNNVL: explorer/config/domains.py): its GPUs and all the
    # NICs of its nodes.
    dom = effective_domain(sc.cluster)
    nics = out.nics_per_node * (dom // sc.cluster.gpus_per_node)
    channels = net_channels(nics, gbps_to_GBps(out.nic_Gbps))
    return NcclOptions(library=sc.communication.library, protocol=sc.communication.protocol,
                       arch=gpu_arch(datasheet_name(gpu), gpu.peak_tflops, gpu.fp8_tflops),
                       nvls=gpu.nvlink_sharp and sc.cluster.scale_up.kind == "nvswitch",
                       sharp=out.sharp, net_ll128=not out.fabric.startswith("eth"),
                       net_channels=channels, nics_per_node=nics, gpus_per_node=dom,
                       # One NCCL NIC's rate: a GPU's several NICs bond into one (domain_links).
                       nic_GBps=gbps_to_GBps(out.nic_Gbps) * nics / max(min(nics, dom), 1),
                       pcie_Bps=GBps_to_Bps(gpu.pcie_GBps) if gpu.pcie_GBps else float("inf"),
                       net_cap_Bps=channel_nics_Bps(dom, nics, channels, out.nic_Gbps, out.efficiency),
                       net_step_bytes=net_step_bytes(out.fabric),
                       multi_node_nvlink=dom > NVSWITCH_BOARD_GPUS)


def net_step_bytes(fabric: str) -> float:
    """NCCL's Simple step across the network on ``fabric``: its preset's ``step_KiB`` (a platform that
    sets NCCL_BUFFSIZE, as aws-ofi-nccl does on EFA: explorer/data/fabrics.yaml), else NCCL's default
    (nccl_tuning.NET_CHUNK_BYTES)."""
    kib = fabric_presets().get(fabric, {}).get("step_KiB")
    return float(kib) * 1024 if kib else NET_CHUNK_BYTES


def degraded_stages(sc: Scenario, placement: Placement) -> frozenset[int]:
    """Pipeline stages with a GPU on a degraded node (cluster.faults: the cluster's last nodes)."""
    f = sc.cluster.faults
    if not f.degraded:
        return frozenset()
    gpn, nodes = sc.cluster.gpus_per_node, sc.cluster.nodes
    first = max(nodes - f.degraded_nodes, 0) * gpn
    ids = np.arange(first, nodes * gpn, dtype=np.int64)
    stages = (ids // placement.strides["pp"]) % sc.parallelism.pp
    return frozenset(int(s) for s in np.unique(stages))


def _uneven_wan(sc: Scenario) -> tuple | None:
    """The WAN's per-link overrides where it has some (its links then differ), with the default
    rate and latency the other links keep, else None: what a placement's slowest pipeline route
    and slowest group depend on beyond the topology (Network._wan_routes, group_routes.py).  With
    overrides, which link is slowest depends on the default too: a hunt found a sweep over
    ``scale_across.bandwidth_Gbps`` served a slowest group chosen at another row's rate."""
    wan = sc.cluster.scale_across
    if sc.cluster.datacenters == 1 or not wan.links:
        return None
    return (tuple(wan.links), wan.bandwidth_Gbps, wan.latency_ms)


def pipeline_wraps(par) -> bool:
    """Whether the schedule of ``par`` (a Parallelism) sends on the hop from the last stage to stage
    0: an interleaved schedule's last stage hands chunk k to stage 0 (Network.members); two lanes
    and a V turn on one rank instead (taskgraph/layout.Layout.pair).  A Network's WAN flow counts
    read it (p2p_flows.pipeline_hop_flows), so networks shared by key must agree on it
    (pricing/keys.network_key)."""
    sched = schedules.get(par.schedule)
    return par.vpp > 1 and not sched.two_directions and sched.placement is not SchedulePlacement.V


# (placement, ep, dimension, stage, domain sizes, WAN topology) -> the group's members, members per
# domain and WAN route (Network._shape).
_PER_DOMAIN: dict[tuple, tuple[np.ndarray, tuple[int, ...], Route]] = {}
PER_DOMAIN_CACHE = 1 << 16
_WHERE: dict[tuple, int] = {}        # placement, ep, domain sizes, replicas, WAN topology -> interned
# (placement, domain sizes) -> per stage the GPU whose pipeline hop crosses the outermost boundary
# (Network._slowest_pair).
_PAIRS: dict[tuple, np.ndarray] = {}
_WHERE_IDS = itertools.count()


class Network:
    """Group shapes and collective costs for one scenario."""

    def __init__(self, sc: Scenario, free: bool = False) -> None:
        """``free``: every call takes no time (the ideal pipeline's free communication); calls
        keep their bytes, algorithm and limiting tier."""
        self.sc = sc
        self.free = free
        self.placement = Placement.for_scenario(sc)
        self.fabric = Fabric.for_cluster(sc.cluster)
        self.algorithm = sc.communication.algorithm
        self.options = nccl_options(sc)
        self.nvls = self.options.nvls
        self.degraded_stages = degraded_stages(sc, self.placement)
        # Per-network memos of cost and shape.  Plain dicts, not a functools.lru_cache per instance:
        # wrapping two bound methods costs about 0.1 ms (functools.update_wrapper), a tenth of what a
        # sweep spends on a distinct network.
        self._costs: dict[tuple[str, float, str, int], CollectiveCost] = {}
        self._shape_of: dict[tuple[str, int], GroupShape] = {}
        # (size, members per domain, WAN route) -> its shape on this network's rates (_shape).
        self._shapes: dict[tuple, GroupShape] = {}
        self._where: int | None = None        # _shape's memo key but for the dimension and stage
        # (op, dimension) -> why the requested algorithm could not run and what ran instead, over
        # every call the task graph priced, so a warning can name the calls that fell back once.
        self.fallbacks: dict[tuple[str, str], str] = {}

    def members(self, dim: str, stage: int) -> np.ndarray:
        """GPU ids of the representative group of ``dim`` on ``stage``.

        ``pp``: the pair (stage, stage+1), wrapping to stage 0 after the last stage (the hop an
        interleaved schedule makes between virtual chunks).  ``pair``: the ranks s and p-1-s that
        hold stage s's two weight copies in a two-direction schedule.
        """
        known = dimensions.DIMENSIONS.get(dim)
        if known is not None and known.group:
            # Spans another degree's ranks (Dimension.group: emb, gnn -> dp), all or a scope of them.
            return self._scoped(self.members(known.group, stage), known.scope)
        pl, p = self.placement, self.sc.parallelism
        if p.stage_replicas:             # PipeDream's per-stage replicas (replica_groups.py)
            got = replica_members(self.sc, dim, stage)
            if got is not None:
                return got
        if dim == "pp":
            return self._slowest_pair(stage, (stage + 1) % p.pp)
        if dim in ("ep", "edp"):
            return pl.expert_members(dim, p.ep, stage)
        # tp, cp, dp and ``pair`` (the two pipeline ranks holding stage ``stage`` in a two-direction
        # schedule, DualPipe or Chimera: rank s and rank p-1-s, same tp/cp/dp coordinates,
        # taskgraph/techniques/pair_sync.py): the first replica's group, or on a WAN whose groups
        # of the stage take different routes, the slowest's (group_routes.py).
        return slowest_group(self, dim, stage, base_group(self, dim, stage))

    def _slowest_pair(self, stage: int, nxt: int) -> np.ndarray:
        """The pair (a GPU of ``stage``, its counterpart of the same tp/cp/dp coordinates on ``nxt``)
        that crosses the outermost boundary, the first such in id order: every replica's hop runs at
        once and the data-parallel step waits for the slowest, and where a stage's size does not
        tile the domains the replicas' pairs sit differently (tp 4, pp 3 on 8-GPU nodes: replica 0
        hands stage 0 to 1 inside a node, replica 1 across nodes, which a hunt found priced on
        NVLink).  Where every pair sits alike, replica 0's, as before."""
        pl = self.placement
        key = (tuple(pl.strides.items()), tuple(pl.sizes.items()),
               tuple(b.domain_gpus for b in self.fabric.boundaries), _uneven_wan(self.sc))
        firsts = _PAIRS.get(key)
        if firsts is None:                # every stage's at once, per placement (a sweep shares it)
            stride, p = pl.strides["pp"], pl.sizes["pp"]
            every = np.arange(int(np.prod(list(pl.sizes.values()))), dtype=np.int64)
            st = (every // stride) % p
            partner = every + ((st + 1) % p - st) * stride
            level = np.zeros(len(every), dtype=np.int64)
            for b, bd in enumerate(self.fabric.boundaries[1:], start=1):
                level[every // bd.domain_gpus != partner // bd.domain_gpus] = b
            cap, lat = self._wan_routes(every, partner, level)
            # Per stage the first GPU (in id order) of its outermost level — on a WAN whose links
            # differ, of its slowest route — : sort by (stage, -level, capacity, -latency, id) and
            # take each stage's first.
            order = np.lexsort((every, -lat, cap, -level, st))
            firsts = every[order[np.searchsorted(st[order], np.arange(p))]]
            if len(_PAIRS) >= PER_DOMAIN_CACHE:
                _PAIRS.pop(next(iter(_PAIRS)))
            _PAIRS[key] = firsts
        a = int(firsts[stage])
        return np.array([a, a + (nxt - stage) * self.placement.strides["pp"]], dtype=np.int64)

    def _wan_routes(self, every: np.ndarray, partner: np.ndarray,
                    level: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per pair (every[i], partner[i]) the least capacity and the longest one-way latency of the
        WAN links its transfers take both ways (wan.Wan.path), where its pair crosses the WAN and
        the links differ (``cluster.scale_across.links``); else +inf and 0, alike for every pair.
        A hunt found replicas whose hops crossed different links priced on the first replica's
        fast link while another's took a 50 Gb/s one (27x its capacity in flight)."""
        cap, lat = np.full(len(every), np.inf), np.zeros(len(every))
        wan = self.fabric.wan
        top = len(self.fabric.boundaries) - 1
        if wan is None or _uneven_wan(self.sc) is None:
            return cap, lat
        G = self.fabric.boundaries[top].domain_gpus
        at = np.flatnonzero(level == top)
        pairs, inverse = np.unique(np.stack([every[at] // G, partner[at] // G]), axis=1, return_inverse=True)
        worst_cap, worst_lat = np.empty(pairs.shape[1]), np.empty(pairs.shape[1])
        for j, (u, v) in enumerate(pairs.T.tolist()):
            ways = (wan.path(u, v), wan.path(v, u))
            worst_cap[j] = min(wan.link(x, y).capacity_Bps for way in ways for x, y in way)
            worst_lat[j] = max(sum(wan.link(x, y).latency_s for x, y in way) for way in ways)
        cap[at], lat[at] = worst_cap[inverse.ravel()], worst_lat[inverse.ravel()]
        return cap, lat

    def cost(self, op: str, size_bytes: float, dim: str, stage: int) -> CollectiveCost:
        """The cost of ``op`` on ``size_bytes`` over ``dim``'s group on ``stage`` (memoised)."""
        key = (op, size_bytes, dim, stage)
        got = self._costs.get(key)
        if got is None:
            got = self._costs[key] = self._cost(op, size_bytes, dim, stage)
        return got

    def priced_calls(self) -> list[tuple[str, float, str, int]]:
        """Every (op, size_bytes, dim, stage) this network has priced so far (estimate/prime.py
        prices the same calls of other networks together)."""
        return list(self._costs)

    def cost_key(self, op: str, size_bytes: float, dim: str, stage: int) -> tuple:
        """collectives.cost's arguments for :meth:`cost` of this call (its cache key)."""
        return (op, size_bytes, self.shape(dim, stage), self.algorithm, self.nvls, self.options)

    def shape(self, dim: str, stage: int) -> GroupShape:
        """The shape of ``dim``'s group on ``stage`` (memoised)."""
        key = (dim, stage)
        got = self._shape_of.get(key)
        if got is None:
            got = self._shape_of[key] = self._shape(dim, stage)
        return got

    def _scoped(self, members: np.ndarray, scope: str) -> np.ndarray:
        """``members`` cut to a Dimension.scope: those in the first one's NVLink domain ("node"), or
        those at its place in their own domains ("across"), or all of them ("")."""
        if not scope:
            return members
        domain = self.fabric.boundaries[1].domain_gpus if len(self.fabric.boundaries) > 1 else 1
        first = int(members[0])
        keep = (members // domain == first // domain) if scope == "node" else \
            (members % domain == first % domain)
        return members[keep]

    def route(self, dim: str, stage: int) -> Route:
        """The datacenters ``dim``'s group on ``stage`` visits in rank order and the shares its ring
        puts on each WAN link (Fabric.route; ``((), ())`` inside one datacenter), memoised as the
        shapes are."""
        return self._placed(dim, stage)[2]

    def _placed(self, dim: str, stage: int) -> tuple[np.ndarray, tuple[int, ...], Route]:
        """``dim``'s group on ``stage``: its members, members per domain and WAN route (memoised
        across rows that place groups alike: _PER_DOMAIN)."""
        known = dimensions.DIMENSIONS.get(dim)
        if known is not None and known.group and not known.scope:
            dim = known.group            # the same ranks as the degree it names: one memo entry
        # The members (placement.py: digits of the GPU id in the placement's strides) and how many
        # share a domain depend on the placement, ep and the domains' sizes only: a sweep's rows
        # that differ in anything else (NIC speed, recompute, ZeRO stage...) share them.
        # So do the datacenters it visits and its ring's loads on the WAN links (Fabric.route), given
        # the WAN's topology: only the rates are applied per row (Fabric.shape_of).
        if self._where is None:                # the key's part shared by every (dim, stage): once
            pl, wan = self.placement, self.fabric.wan
            where = (tuple(pl.strides.items()), tuple(pl.sizes.items()), self.sc.parallelism.ep,
                     tuple(b.domain_gpus for b in self.fabric.boundaries), self.sc.parallelism.stage_replicas,
                     (wan.dcs, wan.topology, _uneven_wan(self.sc)) if wan is not None else None)
            # Interned to an integer: a tuple of tuples rehashes its items at every lookup.  Never
            # reused (a counter, not the table's size), so a bounded table forgets, never confuses.
            wid = _WHERE.get(where)
            if wid is None:
                if len(_WHERE) >= PER_DOMAIN_CACHE:
                    _WHERE.clear()
                wid = _WHERE[where] = next(_WHERE_IDS)
            self._where = wid
        key = (self._where, dim, stage)
        got = _PER_DOMAIN.get(key)
        if got is None:
            members = self.members(dim, stage)
            members.flags.writeable = False                   # shared by every row with this key
            per = self.fabric.per_domain(members)
            got = _PER_DOMAIN[key] = (members, per, self.fabric.route(members, per))
            if len(_PER_DOMAIN) > PER_DOMAIN_CACHE:
                _PER_DOMAIN.pop(next(iter(_PER_DOMAIN)))      # oldest first: a bounded memo
        return got

    def _shape(self, dim: str, stage: int) -> GroupShape:
        # A dimension that is not a parallel degree spans the ranks of the one it names
        # (dimensions.Dimension.group: the embedding exchange spans the data-parallel group).
        known = dimensions.DIMENSIONS.get(dim)
        members, per, route = self._placed(dim, stage)
        # Stages whose groups sit alike (same size, members per domain and WAN route) share one shape.
        alike = (len(members), per, route)
        shape = self._shapes.get(alike)
        if shape is None:
            shape = self._shapes[alike] = self.fabric.shape_of(*alike)
        if (known.group if known is not None and known.group else dim) in ("dp", "edp") and \
                stage in self.degraded_stages and shape.spans(1):
            # A data-parallel group through a degraded node is as fast as that node's NICs
            # (cluster.faults: a ring runs at its slowest link's rate).
            f = self.sc.cluster.faults.nic_factor
            shape = replace(shape, shares=(shape.shares[0], shape.shares[1] * f, *shape.shares[2:]))
        if dim == "pp" and not self.sc.parallelism.stage_replicas and shape.spans(1):
            # A pipeline hop: only the stage's boundary ranks leave a node, each flow by its own GPU's
            # NICs (p2p_flows.py), not the node's G GPUs that Fabric.shape_of splits its NICs among.
            par = self.sc.parallelism
            flows = pipeline_hop_flows(self.fabric, self.placement, pipeline_wraps(par))[stage % par.pp]
            o = self.options
            shape = flow_shape(self.fabric, shape, flows, o.nics_per_node, o.gpus_per_node)
        return shape

    def _cost(self, op: str, size_bytes: float, dim: str, stage: int) -> CollectiveCost:
        shape = self.shape(dim, stage)
        cc = cost(op, size_bytes, shape, self.algorithm, self.nvls, self.options)
        if self.free:
            cc = replace(cc, time_s=0.0, latency_s=0.0)
        if cc.requested and op != "send-recv":
            # A point-to-point transfer has no collective algorithm to choose: never a fallback.
            asked = registry.find(cc.requested)
            if asked is None or not asked.implements(op):
                why = f"NCCL has no {cc.requested} for these operations"
            else:
                why = asked.why_unavailable(self.options)
            self.fallbacks.setdefault((op, dimensions.reported_as(dim)), f"{why}; {cc.algorithm} used")
        return cc

    def group_size(self, dim: str, stage: int = 0) -> int:
        return self.shape(dim, stage).n
