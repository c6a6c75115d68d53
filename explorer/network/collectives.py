"""Cost of one collective call on a group: NCCL's algorithms and protocols on the tiered fabric.

Two parts multiply out per (algorithm, protocol):

* **Link time** — the bytes the algorithm sends across each boundary of the fabric (NVLink, node
  NICs, leaf uplinks, WAN; topology.py) divided by the group's share of that boundary; the slowest
  boundary sets the time.  A ring crosses every domain boundary once per domain, so its egress per
  domain equals the per-GPU volume 2(n-1)/n*S (Thakur et al., IJHPCA 2005, Sec. 4); NCCL's double
  binary tree (Sanders, Speck & Traeff 2009) moves about 2*S per node (S on two nodes); NVLink
  SHARP (NVLS) sends S to the switch and gets S back; CollNet (InfiniBand SHARP) reduces in the
  network, S per node; a pairwise all-to-all sends (n-g)/n of each member's data out of a domain of g members.
* **NCCL's tuning model** (:mod:`explorer.network.nccl_tuning`) — the protocol's share of that link
  bandwidth (LL 1/2 capped, LL128 0.92, Simple 1; tree and PAT corrections) and NCCL's per-call
  latency (base + hops inside and between nodes), so ``auto`` picks NCCL's (algorithm, protocol).

MPI/Gloo algorithms (halving-doubling, hierarchical, their ring) are alpha-beta models in
:mod:`explorer.network.mpi_algorithms`, protocol "none"; point-to-point (all-to-all, send/recv) too.

Sizes S follow nccl-tests (doc/PERFORMANCE.md): the all-reduce/broadcast buffer, the *total*
all-gather output / reduce-scatter input, the per-rank all-to-all send buffer; ``busbw`` applies
that document's bus factors.  The scale-up wiring (``cluster.scale_up.kind``) multiplies the
scale-up time of each traffic pattern by :func:`scale_up_factor`.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache

from . import mpi_algorithms as mpi
from . import nccl_tuning as nt
from .mpi_algorithms import LinkCost
from .pcie_link import pcie_bound, pcie_boundary, pcie_time
from .scale_up_wiring import scale_up_factor
from .topology import BOUNDARY_NAMES, SCALE_UP_EFFICIENCY, GroupShape

OPS = ("all-reduce", "reduce-scatter", "all-gather", "all-to-all", "broadcast", "send-recv")
NCCL_ALGORITHMS = ("ring", "tree", "nvls", "nvls-tree", "collnet", "pat")
MPI_ALGORITHMS = ("halving-doubling", "hierarchical")
ALGORITHMS = NCCL_ALGORITHMS + MPI_ALGORITHMS + ("pairwise",)
# What NCCL 2.25 implements per operation (tuning.cc: broadcast/reduce ring only; all-gather and
# reduce-scatter ring, NVLS, CollNet Direct and PAT; all-reduce everything but PAT).
NCCL_APPLICABLE = {
    "all-reduce": ("ring", "tree", "nvls", "nvls-tree", "collnet"),
    "reduce-scatter": ("ring", "nvls", "pat"),
    "all-gather": ("ring", "nvls", "pat"),
    "all-to-all": ("pairwise",),
    "broadcast": ("ring",),
    "send-recv": ("ring",),
}
MPI_APPLICABLE = {
    "all-reduce": ("ring", "halving-doubling", "hierarchical"),
    "reduce-scatter": ("ring", "halving-doubling", "hierarchical"),
    "all-gather": ("ring", "halving-doubling", "hierarchical"),
    "all-to-all": ("pairwise",),
    "broadcast": ("ring",),
    "send-recv": ("ring",),
}
# Every name selectable per operation (NCCL's, plus MPI's by name).
APPLICABLE = {op: tuple(dict.fromkeys(NCCL_APPLICABLE[op] + MPI_APPLICABLE[op])) for op in OPS}
LIBRARIES = ("nccl", "mpi", "gloo")

# NVLS achieved fraction of the nominal NVLink bandwidth per GPU generation.  NCCL 2.27's
# nvlsEfficiency gives the ratio between generations (Hopper 0.85, Blackwell 0.74); the scale is
# fitted once to the nvls row of reference/nccl_busbw.csv (B200 8-GPU busbw 838 GB/s -> algbw
# 838/1.75 = 479 GB/s of 900 GB/s = 0.532 -> scale 0.532/0.74 = 0.719).  Hopper: 0.611.
NVLS_SCALE = 0.532 / 0.74
NVLS_EFFICIENCY = {"hopper": NVLS_SCALE * 0.85, "blackwell": NVLS_SCALE * 0.74}
# NVLS-tree across nodes as NCCL's tuning model rates it (src/graph/tuning.cc, ncclTopoTuneModel,
# 2.18-2.25): inter-node bandwidth, halved beyond two nodes, times .70 x nNodes / (2 (nNodes - 1)).
# Without it NVLS-tree came out 20-30 % faster than measured at 8-64 MiB on 2 x p5 and 4 x 8 H100 NDR
# (reference/nccl_multinode.csv).
NVLS_TREE_RATIO = 0.70


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
    pcie_Bps: float = float("inf")  # each GPU's PCIe link to its NICs, bytes/s (hardware.gpu.pcie_GBps)


def _crossing(shape: GroupShape, egress: dict[int, float], up: float = 1.0) -> tuple[float, int]:
    """max over boundaries of egress_bytes / share -> (seconds, limiting boundary); the scale-up
    boundary's time is multiplied by ``up`` (:func:`scale_up_factor` of the pattern)."""
    best, where = 0.0, 0
    for b, volume in egress.items():
        t = volume / shape.shares[b] * (up if b == 0 else 1.0)
        if t > best:
            best, where = t, b
    return best, where


def _spanned(sh: GroupShape, volume: float) -> dict[int, float]:
    return {b: volume for b in range(1, len(sh.shares)) if sh.spans(b)}


def _nvls_share(sh: GroupShape, arch: str) -> float:
    # shares[0] carries the ring efficiency; NVLS has its own fitted fraction instead.
    return sh.shares[0] / SCALE_UP_EFFICIENCY * NVLS_EFFICIENCY.get(arch, 0.0)


def link_time(algo: str, op: str, S: float, sh: GroupShape,
              o: NcclOptions) -> tuple[LinkCost, float] | None:
    """Link-limited cost of NCCL's ``algo`` for this call and its bus bytes (bytes whose rate is
    NCCL's busBw: the ring's per-rank volume, 2*S for trees), or None where NCCL cannot run it."""
    nodes = sh.n // sh.per_domain[1]
    ppn = sh.per_domain[1]
    if algo in ("ring", "pat"):
        if algo == "pat" and (ppn != 1 or nodes < 2 or op not in ("all-gather", "reduce-scatter")):
            return None     # PAT: one GPU per node only (NCCL 2.23+, ncclPatEnable)
        vol = {"all-reduce": 2 * (sh.n - 1) / sh.n * S, "reduce-scatter": (sh.n - 1) / sh.n * S,
               "all-gather": (sh.n - 1) / sh.n * S, "broadcast": S, "send-recv": S}[op]
        up = vol
        if nodes > 1 and o.nics_per_node >= ppn:
            # Each channel's ring leaves a node once, through the NIC of one member; with a NIC per
            # member the exits rotate over the members (one NIC per channel: NCCL's graph search,
            # rail-aligned "GPUi <-> NICi"), so a member forwards (ppn-1)/ppn of its ring traffic over
            # NVLink and the rest through its own NIC (PCIe), not both.
            up = vol * (ppn - 1) / ppn
        egress = {0: up, **_spanned(sh, vol)}
        t, b = _crossing(sh, egress)
        return LinkCost(t, b, egress), vol
    if algo == "tree":
        if nodes <= 1 or op != "all-reduce":
            return None     # between nodes only here (inside one node NCCL's ring always wins)
        # Each node sends about 2*S out: in one of the two trees it is an inner node (S/2 up to
        # its parent, S/2 down to each of two children), in the other a leaf (S/2 up).  With two
        # nodes each tree is a single edge: a node is the root of one (S/2 down) and the leaf of
        # the other (S/2 up), so only S leaves a node while the ring still sends 2(n-1)/n*S -- why
        # nccl-tests' busbw on two nodes "can exceed the actual available peak BW" (AddyLaddy,
        # NVIDIA, nccl-tests issue #22; again in nccl-tests issue #169, 2023).
        out = S if nodes == 2 else 2 * S
        egress = {0: 2 * S, **_spanned(sh, out)}
        t, b = _crossing(sh, egress)
        return LinkCost(t, b, egress), 2 * S
    if algo in ("nvls", "nvls-tree"):
        if not o.nvls or o.arch not in NVLS_EFFICIENCY or ppn < 2:
            return None
        if algo == "nvls" and nodes > 1 and not o.sharp:
            return None     # NVLS across nodes needs CollNet (SHARP) switches (NCCL 2.25)
        if algo == "nvls-tree" and (nodes <= 1 or op != "all-reduce"):
            return None     # NVLS-tree is disabled on one node
        if algo == "nvls" and op != "all-reduce":
            if nodes > 1:
                return None  # NVLS all-gather/reduce-scatter across nodes needs CollNet heads
            vol = (sh.n - 1) / sh.n * S
            t = vol / _nvls_share(sh, o.arch)
            return LinkCost(t, 0, {0: vol}), vol
        if algo == "nvls":
            out = S
        else:       # NCCL's NVLS-tree rate (NVLS_TREE_RATIO) as the bytes a node's NICs carry
            out = (S if nodes <= 2 else 2 * S) * 2 * (nodes - 1) / nodes / NVLS_TREE_RATIO
        egress = _spanned(sh, out)
        t_out, b = _crossing(sh, egress) if egress else (0.0, 0)
        t_in = S / _nvls_share(sh, o.arch)
        t, b = (t_in, 0) if t_in >= t_out else (t_out, b)
        return LinkCost(t, b, {0: S, **egress}), S
    if algo == "collnet":
        if not o.sharp or nodes <= 1 or op != "all-reduce":
            return None
        # In-node reduce-scatter and all-gather, the switches reduce S per node (NCCL CollNet).
        egress = {0: 2 * (ppn - 1) / ppn * S, **_spanned(sh, S)}
        t, b = _crossing(sh, egress)
        return LinkCost(t, b, egress), 2 * S
    return None


def _nccl_time(algo: str, proto: str, op: str, S: float, sh: GroupShape, o: NcclOptions,
               link: LinkCost, bus_bytes: float) -> tuple[float, float]:
    """(total, latency) seconds of NCCL's ``algo``/``proto`` given its link cost."""
    nodes = sh.n // sh.per_domain[1]
    ppn = sh.per_domain[1]
    name = ("collnet-direct" if sh.up_kind == "nvswitch" else "collnet-chain") if algo == "collnet" else algo
    intra = "pci" if sh.up_kind == "pcie" else "nvlink"
    up_shift = (sh.latencies[0] * 1e6 - nt.NVLINK_HOP_US)
    net_shift = (sh.latencies[1] * 1e6 - nt.NET_HOP_US) if len(sh.latencies) > 1 else 0.0
    lat = nt.latency_us(name, proto, op, sh.n, nodes, intra, up_shift, net_shift, o.arch)
    if algo == "ring":
        lat *= nt.ring_plateau(op, proto, nodes, sh.n, S, o.arch,
                               o.net_channels if nodes > 1 else nt.DEFAULT_CHANNELS)
    lat_s = lat * 1e-6
    outer = len(sh.shares) - 1
    if sh.spans(outer) and outer >= 3:
        dcs = sh.n // sh.per_domain[outer]
        lat_s += nt.wan_hops(algo, op, dcs) * sh.latencies[outer]
    bus = bus_bytes / link.time_s / 1e9 if link.time_s > 0 else float("inf")
    # Across nodes NCCL caps per channel of its searched graph; inside a node, per SM channel.
    channels = o.net_channels if nodes > 1 else nt.DEFAULT_CHANNELS
    refined = nt.refine_bus_bw(name, proto, bus, o.arch, nodes, ppn, channels)
    if algo == "tree":
        refined *= nt.tree_correction(proto, S)
    t_bw = bus_bytes / (refined * 1e9) if refined < float("inf") else 0.0
    # Across nodes the chunk pipeline fills and drains through the network (nccl_tuning.pipeline_fill_s); a
    # group with ppn of a node's gpus_per_node GPUs has that fraction of the node's NICs and channels.
    frac = ppn / o.gpus_per_node if o.gpus_per_node >= ppn else 1.0
    if nodes > 1 and len(sh.shares) > 1:
        fill = nt.pipeline_fill_s(S, o.net_channels, sh.shares[1], frac)
    else:   # inside one node the NVLink channels fill and drain alike (nccl_tuning.node_fill_s)
        fill = nt.node_fill_s(S, refined, proto, nt.fill_hops(algo, sh.n, op), channels)
    # The PCIe links are a separate stage of the same pipeline: the call runs at the slower of the two.
    return lat_s + max(t_bw + fill, pcie_time(link, sh, o.pcie_Bps, proto)), lat_s


def p2p_latency(sh: GroupShape) -> float:
    """Seconds a point-to-point call over ``sh`` takes besides its bytes: the farthest peer's hop
    latency and, across nodes, the proxies' hand-off (nccl_tuning.P2P_NET_US)."""
    net = nt.P2P_NET_US * 1e-6 if len(sh.shares) > 1 and sh.spans(1) else 0.0
    return net + sh.latencies[sh.outer]


def _pairwise(op: str, S: float, sh: GroupShape) -> LinkCost:
    n = sh.n
    # NCCL posts the n-1 sends and receives of an all-to-all in one group call, so they run
    # concurrently: one point-to-point latency to the farthest peer (p2p_latency) plus a scale-up
    # latency per further peer to issue them.  For n = 2 this is exactly a send/recv.
    lat = p2p_latency(sh) + max(n - 2, 0) * sh.latencies[0]
    egress = {0: (n - 1) / n * S}
    for b in range(1, len(sh.shares)):
        if sh.spans(b):
            g = sh.per_domain[b]
            egress[b] = g * S * (n - g) / n
    bw, b = _crossing(sh, egress, scale_up_factor(sh, "all-to-all"))
    return LinkCost(lat + bw, b, egress, lat)


def _mpi(name: str, op: str, S: float, sh: GroupShape) -> LinkCost:
    if name == "halving-doubling":
        link = mpi.halving_doubling(op, S, sh, _crossing, scale_up_factor)
    elif name == "hierarchical":
        link = mpi.hierarchical(op, S, sh, _crossing)
    else:
        link = mpi.mpi_ring(op, S, sh, _crossing)
    # In one node MPI's segments fill a pipeline like NCCL's chunks.
    return _with_node_fill(link, op, S, sh, name)


def _with_node_fill(link: LinkCost, op: str, S: float, sh: GroupShape, algo: str) -> LinkCost:
    """``link`` plus the in-node pipeline fill of Simple steps at its achieved bus bandwidth
    (nccl_tuning.node_fill_s, depth fill_hops(algo)); unchanged across nodes, where the network
    sets the time, or without a bandwidth term."""
    if sh.spans(1) or link.time_s <= link.latency_s:
        return link
    bus = bus_factor(op, sh.n) * S / (link.time_s - link.latency_s) / 1e9
    return replace(link, time_s=link.time_s + nt.node_fill_s(S, bus, "Simple", nt.fill_hops(algo, sh.n, op)))


def _result(op: str, S: float, sh: GroupShape, alg: str, proto: str, link: LinkCost, total: float,
            lat: float, requested: str) -> CollectiveCost:
    egress = tuple(link.egress.get(i, 0.0) for i in range(len(sh.shares)))
    return CollectiveCost(op, S, sh.n, alg, total, lat, BOUNDARY_NAMES[link.boundary], egress, requested,
                          proto)


def _best_nccl(op: str, S: float, sh: GroupShape, algos: tuple[str, ...], o: NcclOptions,
               ) -> tuple[str, str, LinkCost, float, float] | None:
    """NCCL's choice among ``algos``: the (algorithm, protocol) of least modelled time."""
    ll128 = sh.up_kind != "pcie" and (o.net_ll128 or not sh.spans(1))
    best = None
    for algo in algos:
        got = link_time(algo, op, S, sh, o)
        if got is None:
            continue
        link, bus_bytes = got
        protos = nt.protocols_for(algo, op, ll128)
        if o.protocol != "auto":
            # A forced protocol is enabled even where NCCL would not enable it by default (NCCL_PROTO).
            protos = (o.protocol,) if (o.protocol in protos or algo in ("ring", "tree")) else ()
        for proto in protos:
            total, lat = _nccl_time(algo, proto, op, S, sh, o, link, bus_bytes)
            if best is None or total < best[3]:
                best = (algo, proto, link, total, lat)
    if best is not None:
        algo, proto, link, total, lat = best
        t_pcie = pcie_time(link, sh, o.pcie_Bps, proto)
        if 0 < t_pcie and total - lat <= t_pcie * (1 + 1e-12):     # the links bound it: name their tier
            best = (algo, proto, replace(link, boundary=pcie_boundary(sh)), total, lat)
    return best


# Calls priced once per process: a sweep's rows build their own Network, but most share group shapes
# and bucket sizes (the estimator's realistic grid of llama3-405b-16k: 2,458 calls, 422 distinct).
# Everything priced is immutable (frozen dataclasses of tuples), so the cached cost is shared as is.
COST_CACHE_SIZE = 1 << 16


@lru_cache(maxsize=COST_CACHE_SIZE)
def cost(op: str, size_bytes: float, shape: GroupShape, algorithm: str = "auto",
         nvls_capable: bool = False, options: NcclOptions | None = None) -> CollectiveCost:
    """Cost of ``op`` on ``size_bytes`` (nccl-tests convention) over the group ``shape``.

    ``algorithm="auto"``: with library nccl, NCCL's choice — every (algorithm, protocol) NCCL
    implements for the operation, costed by its tuning model, the least time wins (ties to the
    first in NCCL_ALGORITHMS/PROTOCOLS order); with mpi/gloo, the fastest of that library's
    algorithms.  A named algorithm that does not exist for ``op`` or cannot run on this group (tree
    inside one node, NVLS across nodes without SHARP, CollNet without SHARP, PAT with several GPUs
    per node) falls back to ring, as NCCL does when the requested algorithm is unavailable (its
    ``NCCL_ALGO`` documentation); the cost then carries the requested name in ``requested``.
    Point-to-point operations (all-to-all, send/recv) have no algorithm to choose.
    """
    if op not in OPS:
        raise ValueError(f"unknown collective {op!r} (valid: {', '.join(OPS)})")
    o = options or NcclOptions(nvls=nvls_capable)
    if shape.n <= 1 or size_bytes <= 0:
        return CollectiveCost(op, size_bytes, shape.n, "none", 0.0, 0.0, "none")
    forced = algorithm != "auto"
    if op == "all-to-all":
        # In one node NCCL's point-to-point channels fill a chunk pipeline too, in one pass.
        link = pcie_bound(_with_node_fill(_pairwise(op, size_bytes, shape), op, size_bytes, shape, "p2p"),
                          shape, o.pcie_Bps)
        requested = algorithm if forced and algorithm != "pairwise" else ""
        return _result(op, size_bytes, shape, "pairwise", "none", link, link.time_s, link.latency_s,
                       requested)
    if op == "send-recv":
        # One transfer of S between the pair: S crosses every boundary between them.
        egress = {0: size_bytes, **_spanned(shape, size_bytes)}
        t, b = _crossing(shape, egress)
        lat = p2p_latency(shape)
        link = pcie_bound(LinkCost(lat + t, b, egress, lat), shape, o.pcie_Bps)
        return _result(op, size_bytes, shape, "ring", "none", link, link.time_s, lat, "")
    if o.library != "nccl" and (not forced or algorithm in MPI_APPLICABLE[op]):
        names = MPI_APPLICABLE[op] if not forced else (algorithm,)
        best = min(((n, _mpi(n, op, size_bytes, shape)) for n in names), key=lambda x: x[1].time_s)
        name, link = best[0], pcie_bound(best[1], shape, o.pcie_Bps)
        return _result(op, size_bytes, shape, name, "none", link, link.time_s, link.latency_s, "")
    if forced and algorithm in MPI_ALGORITHMS and algorithm in MPI_APPLICABLE[op]:
        link = pcie_bound(_mpi(algorithm, op, size_bytes, shape), shape, o.pcie_Bps)
        return _result(op, size_bytes, shape, algorithm, "none", link, link.time_s, link.latency_s, "")
    algos = NCCL_APPLICABLE[op] if not forced else (algorithm,) if algorithm in NCCL_APPLICABLE[op] else ()
    got = _best_nccl(op, size_bytes, shape, algos, o) if algos else None
    if got is None:     # forced algorithm impossible here: NCCL's ring
        got = _best_nccl(op, size_bytes, shape, ("ring",), o)
        assert got is not None
    alg, proto, link, total, lat = got
    requested = algorithm if forced and alg != algorithm else ""
    return _result(op, size_bytes, shape, alg, proto, link, total, lat, requested)
