"""Cost of one collective call on a group, per algorithm: latency-bandwidth (alpha-beta) models.

Latency and bandwidth terms follow Thakur, Rabenseifner & Gropp, "Optimization of Collective
Communication Operations in MPICH", IJHPCA 19(1), 2005 (Sec. 4): ring all-gather and reduce-scatter
(n-1)*alpha + (n-1)/n * S*beta; ring all-reduce twice that; recursive halving/doubling with log2(n)
steps of halving sizes (Rabenseifner's all-reduce = reduce-scatter + all-gather); pairwise-exchange
all-to-all (n-1)/n * S*beta, its n-1 exchanges issued concurrently as NCCL does.  NCCL's double
binary tree (Sanders, Speck & Traeff, Parallel Computing 35(12), 2009; NCCL 2.4) costs
2*log2(nodes) latencies and about 2*S of traffic per node.

The beta of a multi-tier group is not one number: each boundary the traffic crosses (NVLink, node
NICs, leaf uplinks, WAN; see topology.py) has its own share of bandwidth, and the time is set by the
boundary whose *egress volume / share* is largest.  A ring crosses every domain boundary once per
domain, so its egress per domain equals the per-GPU volume; an all-to-all sends (n-g)/n of each
member's data out of a domain holding g members; halving-doubling crosses a boundary only in the
steps whose partner distance reaches past it.

Sizes S follow nccl-tests (doc/PERFORMANCE.md): the all-reduce/broadcast buffer, the *total*
all-gather output / reduce-scatter input, the per-rank all-to-all send buffer.  ``busbw`` applies
that document's bus factors so numbers compare with nccl-tests output.

The scale-up wiring (``cluster.scale_up.kind``: crossbar NVSwitch, NVLink ring, PCIe switches;
topology.py's module docstring) multiplies the scale-up time of each traffic pattern by
:func:`scale_up_factor`: 1 for neighbour patterns (ring, chain), the mean hop distance for an
all-to-all on an NVLink ring, 2 for traffic that leaves a PCIe switch from both of its GPUs.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from .topology import BOUNDARY_NAMES, PCIE_GPUS_PER_SWITCH, SCALE_UP_EFFICIENCY, GroupShape

OPS = ("all-reduce", "reduce-scatter", "all-gather", "all-to-all", "broadcast", "send-recv")
ALGORITHMS = ("ring", "tree", "halving-doubling", "hierarchical", "nvls", "pairwise")
# Which algorithms exist for which operation (NCCL has no tree reduce-scatter/all-gather).
APPLICABLE = {
    "all-reduce": ("ring", "tree", "halving-doubling", "hierarchical", "nvls"),
    "reduce-scatter": ("ring", "halving-doubling", "hierarchical"),
    "all-gather": ("ring", "halving-doubling", "hierarchical"),
    "all-to-all": ("pairwise",),
    "broadcast": ("ring", "tree"),
    "send-recv": ("ring",),
}

# NVLink SHARP (in-switch reduction): each GPU sends S to the switch and receives S back, so the
# all-reduce moves S per direction instead of 2(n-1)/n*S.  Achieved fraction of the link fitted to
# the nvls row of calibration/nccl_busbw.csv: B200 8-GPU busbw 838 GB/s -> algbw 838/1.75 = 479 GB/s
# of 900 GB/s = 0.532 (in-switch reduction throughput, not the links, limits it).
NVLS_EFFICIENCY = 0.532


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
    latency_s: float          # the alpha part of time_s
    boundary: str             # the boundary whose bandwidth limited the call ("none" if n == 1)
    egress: tuple[float, ...] = ()   # bytes leaving one domain of each boundary (link load)
    requested: str = ""       # the algorithm asked for when it could not run here ("" otherwise)

    @property
    def algbw_GBps(self) -> float:
        return self.size_bytes / self.time_s / 1e9 if self.time_s > 0 else 0.0

    @property
    def busbw_GBps(self) -> float:
        return self.algbw_GBps * bus_factor(self.op, self.n)


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


def scale_up_factor(sh: GroupShape, pattern: str, dist: int = 0) -> float:
    """How many times longer a scale-up transfer of ``pattern`` takes on ``sh``'s wiring than on a
    non-blocking NVSwitch crossbar at the same per-GPU bandwidth (topology.py module docstring).

    ``pattern``: ``ring`` (neighbour sends: ring steps, NCCL's intra-node tree chain, the
    hierarchical in-node rings), ``all-to-all`` (every member to every other; the factor applies
    to the in-node part of the volume), ``exchange`` (every member with the partner ``dist``
    ranks away at once: a halving-doubling step).  Members are consecutive GPUs of a node.
    """
    g = sh.per_domain[1]                 # members of the group inside one node
    if sh.up_kind == "nvswitch" or g <= 1 or pattern == "ring":
        return 1.0
    if pattern == "all-to-all":
        if sh.up_kind == "nvlink-ring":
            # Each byte crosses the mean ring distance of links (Dally & Towles ch. 3).
            f = ring_mean_distance(g)
        else:
            # PCIe: one switch's uplink carries what both its GPUs send outside the pair,
            # 2 (g-2)/g of S, where one GPU's own link carries (g-1)/g of S.
            pair = PCIE_GPUS_PER_SWITCH
            f = max(1.0, pair * (g - pair) / (g - 1))
        # Only the in-node part, (g-1) of the n-1 peers, uses the scale-up wiring.
        return ((g - 1) * f + (sh.n - g)) / max(sh.n - 1, 1)
    if pattern == "exchange" and 0 < dist < g:
        if sh.up_kind == "nvlink-ring":
            return float(min(dist, g - dist))        # the partner is that many hops away
        if dist >= PCIE_GPUS_PER_SWITCH:
            return float(PCIE_GPUS_PER_SWITCH)       # both GPUs of a pair share the uplink
    return 1.0


@dataclass(frozen=True)
class AlgorithmCost:
    """What one algorithm's model gives for one call: total and latency seconds, the index of the
    boundary whose bandwidth limits it, and the bytes leaving one domain of each boundary."""

    time_s: float
    latency_s: float
    boundary: int
    egress: dict[int, float]


def _crossing(shape: GroupShape, egress: dict[int, float], up: float = 1.0) -> tuple[float, int]:
    """max over boundaries of egress_bytes / share -> (seconds, limiting boundary); the scale-up
    boundary's time is multiplied by ``up`` (:func:`scale_up_factor` of the pattern)."""
    best, where = 0.0, 0
    for b, volume in egress.items():
        t = volume / shape.shares[b] * (up if b == 0 else 1.0)
        if t > best:
            best, where = t, b
    return best, where


def _ring(op: str, S: float, sh: GroupShape) -> AlgorithmCost:
    n = sh.n
    steps, vol = {"all-reduce": (2 * (n - 1), 2 * (n - 1) / n * S),
                  "reduce-scatter": (n - 1, (n - 1) / n * S),
                  "all-gather": (n - 1, (n - 1) / n * S),
                  "broadcast": (n - 1, S),           # pipelined chain: every member forwards S once
                  "send-recv": (1, S)}[op]
    # Every step of a ring waits for its slowest edge, so all steps pay the outermost latency.
    lat = steps * sh.latencies[sh.outer]
    egress = {b: vol for b in range(len(sh.shares)) if b == 0 or sh.spans(b)}
    bw, b = _crossing(sh, egress)
    return AlgorithmCost(lat + bw, lat, b, egress)


def _tree(op: str, S: float, sh: GroupShape) -> AlgorithmCost | None:
    nodes = sh.n // sh.per_domain[1]
    if nodes <= 1:
        return None  # NCCL uses trees between nodes only; inside a node it is a chain (= ring)
    depth = math.ceil(math.log2(nodes))
    chain = sh.per_domain[1] - 1
    passes = 2 if op == "all-reduce" else 1          # reduce up + broadcast down, pipelined
    lat = passes * (depth * sh.latencies[sh.outer] + chain * sh.latencies[0])
    egress = {b: passes * S for b in range(len(sh.shares)) if b == 0 or sh.spans(b)}
    bw, b = _crossing(sh, egress)
    return AlgorithmCost(lat + bw, lat, b, egress)


def _halving_doubling(op: str, S: float, sh: GroupShape) -> AlgorithmCost:
    n = sh.n
    p2 = 1 << (n.bit_length() - 1)
    lat = bw = 0.0
    worst_b, worst_t = 0, -1.0
    egress: dict[int, float] = {}
    steps = int(math.log2(p2))
    passes = 2 if op == "all-reduce" else 1
    for j in range(steps):
        dist = 1 << j                                   # near partners first (ranks hierarchical)
        vol = S / (1 << (j + 1))
        crossed = [b for b in range(len(sh.shares)) if b == 0 or dist >= sh.per_domain[b]]
        step = {b: sh.per_domain[b] * vol if b else vol for b in crossed}
        t, b = _crossing(sh, step, scale_up_factor(sh, "exchange", dist))
        lat += passes * sh.latencies[max(crossed)]
        bw += passes * t
        for k, v in step.items():
            egress[k] = egress.get(k, 0.0) + passes * v
        if t > worst_t:
            worst_t, worst_b = t, b
    if p2 != n:
        # Thakur et al. Sec. 4.4: the n - p2 extra ranks first hand their data to a partner and get
        # the result back at the end: two more full-size exchanges over the outermost boundary.
        extra = {b: S for b in range(len(sh.shares)) if b == 0 or sh.spans(b)}
        t, b = _crossing(sh, extra)
        lat += 2 * sh.latencies[sh.outer]
        bw += 2 * t
        for k, v in extra.items():
            egress[k] = egress.get(k, 0.0) + 2 * v
    return AlgorithmCost(lat + bw, lat, worst_b, egress)


def _hierarchical(op: str, S: float, sh: GroupShape) -> AlgorithmCost:
    """Reduce-scatter level by level outward, (all-reduce at the top), all-gather back inward.

    Phase l runs among the d = g_l / g_(l-1) sub-domains of a level-l domain on data S/g_(l-1) per
    GPU; its traffic leaves every lower domain too, so the limiting boundary is the max over b < l.
    """
    per = list(sh.per_domain) + [sh.n]
    passes = 2 if op == "all-reduce" else 1
    lat = bw = 0.0
    worst_b, worst_t = 0, -1.0
    egress: dict[int, float] = {}
    for level in range(1, len(per)):
        d = per[level] // max(per[level - 1], 1)
        if d <= 1:
            continue
        per_gpu = (d - 1) / d * S / per[level - 1]
        phase = {bb: per[bb] * per_gpu for bb in range(level)}
        t, b = _crossing(sh, phase)
        lat += passes * (d - 1) * sh.latencies[level - 1]
        bw += passes * t
        for k, v in phase.items():
            egress[k] = egress.get(k, 0.0) + passes * v
        if t > worst_t:
            worst_t, worst_b = t, b
    return AlgorithmCost(lat + bw, lat, worst_b, egress)


def _nvls(op: str, S: float, sh: GroupShape) -> AlgorithmCost | None:
    if sh.spans(1):
        return None  # in-switch reduction reaches the GPUs of one NVSwitch domain only
    lat = 2 * sh.latencies[0]
    # shares[0] carries the ring efficiency; NVLS has its own fitted one instead.
    return AlgorithmCost(lat + S / (sh.shares[0] / SCALE_UP_EFFICIENCY * NVLS_EFFICIENCY), lat, 0, {0: S})


def _pairwise(op: str, S: float, sh: GroupShape) -> AlgorithmCost:
    n = sh.n
    # NCCL posts the n-1 sends and receives of an all-to-all in one group call, so they run
    # concurrently: one latency of the farthest peer plus a scale-up latency per further peer to
    # issue them — not Thakur's n-1 sequential exchanges, which would charge a WAN round trip per
    # peer.  For n = 2 this is exactly a send/recv.
    lat = sh.latencies[sh.outer] + (n - 2) * sh.latencies[0]
    egress = {0: (n - 1) / n * S}
    for b in range(1, len(sh.shares)):
        if sh.spans(b):
            g = sh.per_domain[b]
            egress[b] = g * S * (n - g) / n
    bw, b = _crossing(sh, egress, scale_up_factor(sh, "all-to-all"))
    return AlgorithmCost(lat + bw, lat, b, egress)


_IMPL = {"ring": _ring, "tree": _tree, "halving-doubling": _halving_doubling,
         "hierarchical": _hierarchical, "nvls": _nvls, "pairwise": _pairwise}


def cost(op: str, size_bytes: float, shape: GroupShape, algorithm: str = "auto",
         nvls_capable: bool = False) -> CollectiveCost:
    """Cost of ``op`` on ``size_bytes`` (nccl-tests convention) over the group ``shape``.

    ``algorithm="auto"`` evaluates every applicable algorithm and keeps the fastest (ties go to
    the first in ALGORITHMS order, so results are deterministic).  A named algorithm that does not
    exist for ``op`` (tree reduce-scatter/all-gather) or cannot run on this group (tree inside one
    node, NVLS across nodes) falls back to ring, as NCCL does when the requested algorithm is not
    available for a call (NCCL's ``NCCL_ALGO`` documentation: the list restricts the choice, and
    ring is the algorithm every collective supports); an all-to-all has only its pairwise exchange.
    The cost then carries the requested name in ``requested`` so callers can say so.
    """
    if op not in OPS:
        raise ValueError(f"unknown collective {op!r} (valid: {', '.join(OPS)})")
    if shape.n <= 1 or size_bytes <= 0:
        return CollectiveCost(op, size_bytes, shape.n, "none", 0.0, 0.0, "none")
    candidates = APPLICABLE[op]
    forced = algorithm != "auto"
    if forced:
        candidates = (algorithm,) if algorithm in candidates else ()
    best: AlgorithmCost | None = None
    alg = ""
    for name in candidates:
        if name == "nvls" and not nvls_capable:
            continue
        res = _IMPL[name](op, size_bytes, shape)
        if res is not None and (best is None or res.time_s < best.time_s):
            best, alg = res, name
    if best is None:  # forced algorithm not possible here: ring (pairwise for an all-to-all)
        alg = "ring" if "ring" in APPLICABLE[op] else APPLICABLE[op][0]
        best = _IMPL[alg](op, size_bytes, shape)
    requested = algorithm if forced and alg != algorithm else ""
    egress = tuple(best.egress.get(i, 0.0) for i in range(len(shape.shares)))
    return CollectiveCost(op, size_bytes, shape.n, alg, best.time_s, best.latency_s,
                          BOUNDARY_NAMES[best.boundary], egress, requested)
