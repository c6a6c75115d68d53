"""Cost of one collective call on a group: NCCL's algorithms and protocols on the tiered fabric.

Two parts multiply out per (algorithm, protocol):

* **Link time** — the bytes the algorithm sends across each boundary of the fabric (NVLink, node
  NICs, leaf uplinks, WAN; topology.py) divided by the group's share of that boundary; the slowest
  boundary sets the time.  Each algorithm's link cost is its registry entry's
  (:mod:`explorer.collective_algorithms`: nccl_links.py); a pairwise all-to-all sends (n-g)/n of
  each member's data out of a domain of g members.
* **NCCL's tuning model** (:mod:`explorer.network.nccl_tuning`) — the protocol's share of that link
  bandwidth (LL 1/2 capped, LL128 0.92, Simple 1; tree and PAT corrections) and NCCL's per-call
  latency (base + hops inside and between nodes), so ``auto`` picks NCCL's (algorithm, protocol).

MPI/Gloo algorithms (halving-doubling, hierarchical, their ring) and other families' are their
entries' alpha-beta models (collective_algorithms/alpha_beta.py), protocol "none"; point-to-point
(all-to-all, send/recv) too.  Nothing here compares algorithm names: which algorithms an operation
has, whose model prices one and why NCCL could not run it are the registry's.

Sizes S follow nccl-tests (doc/PERFORMANCE.md): the all-reduce/broadcast buffer, the *total*
all-gather output / reduce-scatter input, the per-rank all-to-all send buffer; ``busbw`` applies
that document's bus factors.  The scale-up wiring (``cluster.scale_up.kind``) multiplies the
scale-up time of each traffic pattern by :func:`scale_up_factor`.
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace

from ..collective_algorithms import registry
from ..collective_algorithms.base import OPS, Family, LinkCost, crossing
from ..collective_algorithms.registry import Algorithm
from ..vocabulary import LATENCY_SUFFIX, PCIE_LIMIT
from . import nccl_tuning as nt
from .domain_links import capped_shape
from .p2p_link import p2p_latency, send_recv_link
from .pcie_link import pcie_bound, pcie_boundary, pcie_time
from .scale_up_wiring import scale_up_factor
from .topology import BOUNDARY_NAMES, GroupShape

__all__ = ["OPS", "CollectiveCost", "NcclOptions", "bus_factor", "cost", "p2p_latency"]


def bus_factor(op: str, n: int) -> float:
    """nccl-tests bus-bandwidth factor (doc/PERFORMANCE.md): busbw = algbw * factor."""
    if n <= 1:
        return 1.0
    if op == "all-reduce":
        return 2 * (n - 1) / n
    if op in ("reduce-scatter", "all-gather", "all-to-all"):
        return (n - 1) / n
    return 1.0


@dataclass(frozen=True)
class CollectiveCost:
    """Time of one call and what limited it."""

    op: str
    size_bytes: float
    n: int
    algorithm: str
    time_s: float
    latency_s: float          # the latency part of time_s
    boundary: str             # the boundary whose bandwidth limited the call ("none" if n == 1)
    egress: tuple[float, ...] = ()   # bytes leaving one domain of each boundary (link load)
    requested: str = ""       # the algorithm asked for when it could not run here ("" otherwise)
    protocol: str = "none"    # NCCL protocol (LL, LL128, Simple); "none" for p2p and MPI/Gloo
    pcie: bool = False        # the GPUs' PCIe links to their NICs set the time, not ``boundary``'s
    outer: str = "none"       # the tier whose latency is most of latency_s: the outermost crossed, mostly

    @property
    def limited_by(self) -> str:
        """What a page says limits the call: at least half of it latency, its outermost tier's
        ("scale-across latency"; serving's 0.5); else ``pcie`` where the GPUs' PCIe links set its
        time (``boundary``, which sharing and loads use, is then the outermost); else ``boundary``."""
        slow = self.time_s > 0 and self.latency_s >= 0.5 * self.time_s
        return f"{self.outer}{LATENCY_SUFFIX}" if slow else PCIE_LIMIT if self.pcie else self.boundary

    @property
    def algbw_GBps(self) -> float:
        return self.size_bytes / self.time_s / 1e9 if self.time_s > 0 else 0.0

    @property
    def busbw_GBps(self) -> float:
        return self.algbw_GBps * bus_factor(self.op, self.n)


@dataclass(frozen=True)
class NcclOptions:
    """What the library model needs beyond the group's shape (from the scenario)."""

    library: str = "nccl"       # communication.library
    protocol: str = "auto"      # communication.protocol (forces one, like NCCL_PROTO)
    arch: str = "hopper"        # NCCL's GPU generation (nccl_tuning.gpu_arch)
    nvls: bool = False          # the GPU and NVSwitch reduce in the switch (NVLink SHARP)
    sharp: bool = False         # the fabric's switches reduce (InfiniBand SHARP -> CollNet)
    net_ll128: bool = True      # LL128 across the fabric (GPUDirect RDMA; off for TCP sockets)
    net_channels: int = nt.DEFAULT_CHANNELS   # NCCL's multi-node graph channels (nt.net_channels)
    nics_per_node: int = 0      # NICs of a node (0: unknown, no ring member leaves by its own NIC)
    gpus_per_node: int = 0      # GPUs of a node (0: unknown, a group across nodes takes whole nodes)
    nic_GBps: float = 0.0       # one NCCL NIC's line rate, GB/s (a GPU's bonded NICs as one; 0: unknown)
    pcie_Bps: float = float("inf")  # each GPU's PCIe link to its NICs, bytes/s (hardware.gpu.pcie_GBps)
    # A domain's egress one collective's channels reach, bytes/s (domain_links.channel_nics_Bps; inf: all)
    net_cap_Bps: float = float("inf")
    # NCCL's Simple step across the network, bytes (nt.NET_CHUNK_BYTES; the fabric preset's step_KiB)
    net_step_bytes: float = nt.NET_CHUNK_BYTES
    # The NVLink domain is a rack's switch trays, beyond one NVSwitch board (GB200 NVL72:
    # explorer/config/domains.py), where NVLink SHARP reaches less of the nominal
    # (nccl_links.NVLS_MULTI_NODE_RATIO)
    multi_node_nvlink: bool = False


def _rating_channels(sh: GroupShape, o: NcclOptions, rating: bool) -> int:
    """Channels _nccl_time's bandwidth caps multiply.  Across nodes NCCL rates per channel of its
    searched graph and runs twice as many (nt.run_channels); inside a node, per SM channel."""
    if sh.n // sh.per_domain[1] > 1:
        return o.net_channels if rating else nt.run_channels(o.net_channels)
    return nt.DEFAULT_CHANNELS


def _nccl_latency(alg: Algorithm, proto: str, op: str, S: float, sh: GroupShape, o: NcclOptions) -> float:
    """Seconds of NCCL's latency term for ``alg``/``proto`` (its tuning model's base and hops, the
    ring's plateau factor, the WAN's crossings): the same as NCCL rates a choice and as the call runs."""
    nodes = sh.n // sh.per_domain[1]
    row = alg.tuning_row(sh.up_kind)
    intra = "pci" if sh.up_kind == "pcie" else "nvlink"
    up_shift = (sh.latencies[0] * 1e6 - nt.NVLINK_HOP_US)
    net_shift = (sh.latencies[1] * 1e6 - nt.NET_HOP_US) if len(sh.latencies) > 1 else 0.0
    lat = nt.latency_us(row, proto, op, sh.n, nodes, intra, up_shift, net_shift, o.arch)
    lat *= nt.latency_factor(row, op, proto, nodes, sh.n, S, o.arch,
                             o.net_channels if nodes > 1 else nt.DEFAULT_CHANNELS)
    lat_s = lat * 1e-6
    outer = len(sh.shares) - 1
    if sh.spans(outer) and outer >= 3:
        dcs = sh.n // sh.per_domain[outer]
        lat_s += alg.wan_crossings(op, dcs) * sh.latencies[outer]
    return lat_s


def _nccl_time(alg: Algorithm, proto: str, op: str, S: float, sh: GroupShape, o: NcclOptions,
               link: LinkCost, bus_bytes: float, rating: bool, lat_s: float,
               t_pcie: float | None = None) -> tuple[float, float]:
    """(total, latency) seconds of NCCL's ``alg``/``proto`` given its link cost: as NCCL's tuning model
    rates it when it chooses (``rating``: per-channel caps on the searched graph's channels), or as the call
    runs (on the channels NCCL duplicated them into, nccl_tuning.run_channels).  ``lat_s``:
    :func:`_nccl_latency`; ``t_pcie``: the PCIe stage's seconds on this link when the caller has
    them (_best_nccl prices a choice both ways)."""
    nodes = sh.n // sh.per_domain[1]
    ppn = sh.per_domain[1]
    row = alg.tuning_row(sh.up_kind)
    bus = bus_bytes / link.time_s / 1e9 if link.time_s > 0 else float("inf")
    channels = _rating_channels(sh, o, rating)
    refined = nt.refine_bus_bw(row, proto, bus, o.arch, nodes, ppn, channels)
    refined *= nt.bandwidth_correction(row, proto, S)
    t_bw = bus_bytes / (refined * 1e9) if refined < float("inf") else 0.0
    # Across nodes the chunk pipeline fills and drains through the network (nccl_tuning.pipeline_fill_s); a
    # group with ppn of a node's gpus_per_node GPUs has that fraction of the node's NICs and channels.
    frac = ppn / o.gpus_per_node if o.gpus_per_node >= ppn else 1.0
    if nodes > 1 and len(sh.shares) > 1:
        # NCCL_BUFFSIZE (the fabric's net_step_bytes) sizes Simple's buffer only; LL and LL128 keep their own
        # (NCCL_LL_BUFFSIZE, NCCL_LL128_BUFFSIZE), priced at NCCL's default step as before.
        step = o.net_step_bytes if proto == "Simple" else nt.NET_CHUNK_BYTES
        fill = nt.pipeline_fill_s(S, o.net_channels, sh.shares[1], frac, step)
    else:   # inside one node the NVLink channels fill and drain alike (nccl_tuning.node_fill_s)
        fill = nt.node_fill_s(S, refined, proto, nt.fill_hops(alg.ring_pipeline, sh.n, op), channels)
    # The PCIe links are a separate stage of the same pipeline: the call runs at the slower of the two.  A
    # tree with one GPU per node has all of its node's NIC traffic, both ways, on that GPU's link: NCCL's
    # TREE-pattern discount (nt.pattern_discount) applies to that stage as well.
    if t_pcie is None:
        t_pcie = _pcie_stage(alg, proto, sh, o, link)
    return lat_s + max(t_bw + fill, t_pcie), lat_s


def _pcie_stage(alg: Algorithm, proto: str, sh: GroupShape, o: NcclOptions, link: LinkCost) -> float:
    """Seconds of the call's PCIe stage on ``link`` (pcie_link.pcie_time over NCCL's tree-pattern
    discount)."""
    return pcie_time(link, sh, o.pcie_Bps, proto) / nt.pattern_discount(alg.tuning_row(sh.up_kind),
                                                                        sh.per_domain[1])


def _pairwise(op: str, S: float, sh: GroupShape) -> LinkCost:
    n = sh.n
    # NCCL posts the n-1 sends and receives of an all-to-all in one group call, so they run
    # concurrently: one point-to-point latency to the farthest peer (p2p_latency) plus a scale-up
    # latency per further peer to issue them.  For n = 2 this is exactly a send/recv.
    far, issue = p2p_latency(sh), max(n - 2, 0) * sh.latencies[0]
    egress = {0: (n - 1) / n * S, **{b: sh.per_domain[b] * S * (n - sh.per_domain[b]) / n
                                     for b in range(1, len(sh.shares)) if sh.spans(b)}}
    bw, b = crossing(sh, egress, scale_up_factor(sh, "all-to-all"))
    return LinkCost(far + issue + bw, b, egress, far + issue, latency_boundary=0 if issue > far else None)


def _alpha_beta(alg: Algorithm, op: str, S: float, sh: GroupShape) -> LinkCost:
    """``alg``'s alpha-beta model on this call, the scale-up wiring applied to its patterns."""
    assert alg.alpha_beta is not None
    link = alg.alpha_beta(op, S, sh, scale_up_factor)
    # In one node MPI's segments fill a pipeline like NCCL's chunks.
    return _with_node_fill(link, op, S, sh, alg.ring_pipeline)


def _with_node_fill(link: LinkCost, op: str, S: float, sh: GroupShape, ring_pipeline: bool) -> LinkCost:
    """``link`` plus the in-node pipeline fill of Simple steps at its achieved bus bandwidth
    (nccl_tuning.node_fill_s, depth fill_hops), unchanged across nodes, where the network sets the
    time, or without a bandwidth term."""
    if sh.spans(1) or link.time_s <= link.latency_s:
        return link
    bus = bus_factor(op, sh.n) * S / (link.time_s - link.latency_s) / 1e9
    return replace(link, time_s=link.time_s + nt.node_fill_s(S, bus, "Simple",
                                                             nt.fill_hops(ring_pipeline, sh.n, op)))


def _result(op: str, S: float, sh: GroupShape, alg: str, proto: str, link: LinkCost, total: float,
            lat: float, requested: str) -> CollectiveCost:
    egress = tuple(link.egress.get(i, 0.0) for i in range(len(sh.shares)))
    where = sh.outer if link.latency_boundary is None else link.latency_boundary
    return CollectiveCost(op, S, sh.n, alg, total, lat, BOUNDARY_NAMES[link.boundary], egress, requested,
                          proto, link.pcie, BOUNDARY_NAMES[where])


def nccl_candidates(op: str, S: float, sh: GroupShape, o: NcclOptions, algos: tuple[Algorithm, ...],
                    ll128: bool) -> Iterator[tuple[Algorithm, LinkCost, float, tuple[LinkCost, float] | None,
                                                   tuple[str, ...]]]:
    """Each of ``algos`` that can run on ``sh``, in order: its link cost and bus bytes, the link NCCL's
    tuning model rates it on where that differs (else None), and the protocols NCCL offers it (or the
    one forced).  ``sh`` and ``o`` may carry arrays of network points (network/points.py)."""
    for alg in algos:
        assert alg.nccl is not None
        got = alg.nccl.link(op, S, sh, o)
        if got is None:
            continue
        rated = alg.nccl.rated(op, S, sh, o) if alg.nccl.rated is not None else None
        row = alg.tuning_row(sh.up_kind)
        protos = nt.protocols_for(row, op, ll128)
        if o.protocol != "auto":
            protos = nt.forced_protocols(row, o.protocol, protos)
        yield alg, got[0], got[1], rated, protos


def _best_nccl(op: str, S: float, sh: GroupShape, algos: tuple[Algorithm, ...], o: NcclOptions,
               ) -> tuple[Algorithm, str, LinkCost, float, float] | None:
    """NCCL's choice among ``algos``: the (algorithm, protocol) of least time as NCCL rates it (an
    algorithm's ``rated`` link where NCCL's tuning model differs from its real link), priced on its real
    link."""
    ll128 = sh.up_kind != "pcie" and (o.net_ll128 or not sh.spans(1))
    if len(sh.shares) > 1 and sh.spans(1) and sh.shares[1] > o.net_cap_Bps:
        sh = capped_shape(sh, o.net_cap_Bps)
    best = None
    key = float("inf")
    same_channels = _rating_channels(sh, o, True) == _rating_channels(sh, o, False)
    for alg, link, bus_bytes, rated, protos in nccl_candidates(op, S, sh, o, algos, ll128):
        # As rated equals as run when NCCL's rating reads the same link and the same channels
        # (_nccl_time's ``rating`` changes only the channels): priced once then.
        same = rated is None and same_channels
        for proto in protos:
            # The latency and, on the same link, the PCIe stage are alike both ways: priced once.
            lat_s = _nccl_latency(alg, proto, op, S, sh, o)
            t_pcie = _pcie_stage(alg, proto, sh, o, link)
            total, lat = _nccl_time(alg, proto, op, S, sh, o, link, bus_bytes, False, lat_s, t_pcie)
            if same:
                as_rated = total
            elif rated is None:
                as_rated = _nccl_time(alg, proto, op, S, sh, o, link, bus_bytes, True, lat_s, t_pcie)[0]
            else:
                as_rated = _nccl_time(alg, proto, op, S, sh, o, *rated, True, lat_s)[0]
            if best is None or as_rated < key:
                best, key = (alg, proto, link, total, lat), as_rated
    if best is not None:
        alg, proto, link, total, lat = best
        t_pcie = _pcie_stage(alg, proto, sh, o, link)
        if 0 < t_pcie and total - lat <= t_pcie * (1 + 1e-12):     # the links bound it: name their tier
            best = (alg, proto, replace(link, boundary=pcie_boundary(sh), pcie=True), total, lat)
    return best


# Calls priced once per process: a sweep's rows build their own Network, but most share group shapes
# and bucket sizes (the estimator's realistic grid of llama3-405b-16k: 2,458 calls, 422 distinct).
# Everything priced is immutable (frozen dataclasses of tuples), so the cached cost is shared as is.
# A plain dict, not functools.lru_cache, so that network/points.py can store the calls it priced over
# many networks at once (:func:`remember`); the oldest entry goes first when it is full.
COST_CACHE_SIZE = 1 << 16
_COSTS: dict[tuple, CollectiveCost] = {}


def clear_costs() -> None:
    """Forget every priced call (tests that price from scratch)."""
    _COSTS.clear()


def cached(key: tuple) -> CollectiveCost | None:
    """What :func:`cost` has stored for ``key`` (its arguments, as :func:`remember` takes them), if any."""
    return _COSTS.get(key)


def remember(key: tuple, cc: CollectiveCost) -> None:
    """Store ``cc`` as the cost of ``key`` = (op, size_bytes, shape, algorithm, nvls_capable, options),
    :func:`cost`'s arguments, as priced elsewhere with the same formulas (network/points.py)."""
    if len(_COSTS) >= COST_CACHE_SIZE:
        try:
            _COSTS.pop(next(iter(_COSTS)))
        except (RuntimeError, StopIteration, KeyError):   # the app's other sessions change it meanwhile
            pass
    _COSTS[key] = cc


def cost(op: str, size_bytes: float, shape: GroupShape, algorithm: str = "auto",
         nvls_capable: bool = False, options: NcclOptions | None = None) -> CollectiveCost:
    """Cost of ``op`` on ``size_bytes`` (nccl-tests convention) over the group ``shape``.

    ``algorithm="auto"``: with library nccl, NCCL's choice — every (algorithm, protocol) NCCL
    implements for the operation (registry.nccl_candidates), costed by its tuning model, the least
    time wins (ties to the first in registry and PROTOCOLS order); with mpi/gloo, the fastest of that
    library's alpha-beta algorithms (registry.library_candidates).  A named algorithm with an
    alpha-beta model and no NCCL kernel (MPI's, or another family's) is priced by that model.  A
    named NCCL algorithm that does not exist for ``op`` or cannot run on this group (tree inside one
    node, NVLS across nodes without SHARP, CollNet without SHARP, PAT with several GPUs per node)
    falls back to ring, as NCCL does when the requested algorithm is unavailable (its ``NCCL_ALGO``
    documentation); the cost then carries the requested name in ``requested``.  Point-to-point
    operations (all-to-all, send/recv) have no algorithm to choose.
    """
    key = (op, size_bytes, shape, algorithm, nvls_capable, options)
    got = _COSTS.get(key)
    if got is None:
        got = _price(op, size_bytes, shape, algorithm, nvls_capable, options)
        remember(key, got)
    return got


def nccl_algorithms(op: str, algorithm: str, o: NcclOptions) -> tuple[Algorithm, ...] | None:
    """The algorithms NCCL's choice weighs for ``op`` when :func:`cost` takes NCCL's path: every
    candidate of its ``auto``, or the named NCCL algorithm where it implements ``op`` (empty: it
    cannot, and NCCL's ring runs instead); None when the call is priced otherwise (a point-to-point
    operation, an MPI/Gloo library, an algorithm of another family)."""
    if op in ("all-to-all", "send-recv"):
        return None
    forced = algorithm != registry.AUTO
    named = registry.find(algorithm) if forced else None
    priced = named is not None and named.alpha_beta is not None and named.implements(op)
    if o.library != "nccl" and (not forced or priced):
        return None
    if named is not None and priced and named.nccl is None:
        return None
    runs = named is not None and named.nccl is not None and named.implements(op)
    return registry.nccl_candidates(op) if not forced else (named,) if runs and named else ()


def _price(op: str, size_bytes: float, shape: GroupShape, algorithm: str, nvls_capable: bool,
           options: NcclOptions | None) -> CollectiveCost:
    """:func:`cost`, uncached."""
    if op not in OPS:
        raise ValueError(f"unknown collective {op!r} (valid: {', '.join(OPS)})")
    o = options or NcclOptions(nvls=nvls_capable)
    if shape.n <= 1 or size_bytes <= 0:
        return CollectiveCost(op, size_bytes, shape.n, "none", 0.0, 0.0, "none")
    forced = algorithm != registry.AUTO
    named = registry.find(algorithm) if forced else None
    if op == "all-to-all":
        # In one node NCCL's point-to-point channels fill a chunk pipeline too, in one pass.
        link = pcie_bound(_with_node_fill(_pairwise(op, size_bytes, shape), op, size_bytes, shape, False),
                          shape, o.pcie_Bps)
        exchange = named is not None and named.family is Family.POINT_TO_POINT
        requested = algorithm if forced and not exchange else ""
        return _result(op, size_bytes, shape, "pairwise", "none", link, link.time_s, link.latency_s,
                       requested)
    if op == "send-recv":
        # One ring step of S per member: the flow that leaves a node gets one GPU's NICs and PCIe link
        # (p2p_link.py), the others pass S on over NVLink.
        link = send_recv_link(size_bytes, shape, o, o.pcie_Bps)
        return _result(op, size_bytes, shape, "ring", "none", link, link.time_s, link.latency_s, "")
    priced = named is not None and named.alpha_beta is not None and named.implements(op)
    if o.library != "nccl" and (not forced or priced):
        algos = registry.library_candidates(op, o.library) if named is None else (named,)
        # The fastest as it runs, its PCIe links included: chosen before them, a faster NIC could pick an
        # algorithm whose NIC time is shorter but whose PCIe time is not (gloo: ring over
        # halving-doubling, 8.0 -> 12.0 ms for a 75 GB/s bucket when the NICs went 200 -> 800 Gb/s).
        best = min(((a, pcie_bound(_alpha_beta(a, op, size_bytes, shape), shape, o.pcie_Bps)) for a in algos),
                   key=lambda x: x[1].time_s)
        link = best[1]
        return _result(op, size_bytes, shape, best[0].name, "none", link, link.time_s, link.latency_s, "")
    if named is not None and priced and named.nccl is None:
        link = pcie_bound(_alpha_beta(named, op, size_bytes, shape), shape, o.pcie_Bps)
        return _result(op, size_bytes, shape, named.name, "none", link, link.time_s, link.latency_s, "")
    nccl = nccl_algorithms(op, algorithm, o)
    assert nccl is not None                # the branches above took every other path
    got = _best_nccl(op, size_bytes, shape, nccl, o) if nccl else None
    if got is None:     # forced algorithm impossible here: NCCL's ring
        got = _best_nccl(op, size_bytes, shape, (registry.get(registry.NCCL_FALLBACK),), o)
        assert got is not None
    alg, proto, link, total, lat = got
    requested = algorithm if forced and alg.name != algorithm else ""
    return _result(op, size_bytes, shape, alg.name, proto, link, total, lat, requested)
