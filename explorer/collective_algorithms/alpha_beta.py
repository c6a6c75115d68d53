"""MPI/Gloo collective algorithms as alpha-beta models (no NCCL protocols): ring, recursive
halving-doubling and hierarchical (level-by-level) reduction.

Thakur, Rabenseifner & Gropp, "Optimization of Collective Communication Operations in MPICH",
IJHPCA 19(1), 2005 (Sec. 4): ring all-gather/reduce-scatter (n-1)*alpha + (n-1)/n * S*beta, ring
all-reduce twice that; recursive halving/doubling with log2(n) steps of halving sizes
(Rabenseifner's all-reduce = reduce-scatter + all-gather).  NCCL implements none of halving-doubling
or hierarchical: they are priced only when named, or when ``communication.library`` is mpi/gloo.

Alpha per step is the scenario's per-message latency of the boundary the step crosses
(``GroupShape.latencies``); beta comes from the boundary shares (:func:`.base.crossing`).  Every
function here has the registry's alpha-beta signature ``(op, S, shape, wiring) -> LinkCost``.
"""
from __future__ import annotations

import math

from .base import LinkCost, ShapeLike, Wiring, crossing


def ring(op: str, S: float, sh: ShapeLike, wiring: Wiring) -> LinkCost:
    """Thakur et al. Sec. 4: the ring, every step waiting for its slowest (outermost) edge."""
    n = sh.n
    steps, vol = {"all-reduce": (2 * (n - 1), 2 * (n - 1) / n * S),
                  "reduce-scatter": (n - 1, (n - 1) / n * S),
                  "all-gather": (n - 1, (n - 1) / n * S),
                  "broadcast": (n - 1, S)}[op]
    lat = steps * sh.latencies[sh.outer]
    egress = {b: vol for b in range(len(sh.shares)) if b == 0 or sh.spans(b)}
    bw, b = crossing(sh, egress)
    return LinkCost(lat + bw, b, egress, lat)


def halving_doubling(op: str, S: float, sh: ShapeLike, wiring: Wiring) -> LinkCost:
    """Recursive halving (reduce-scatter) and doubling (all-gather), near partners first."""
    n = sh.n
    p2 = 1 << (n.bit_length() - 1)
    lat = bw = 0.0
    worst_b, worst_t = 0, -1.0
    egress: dict[int, float] = {}
    passes = 2 if op == "all-reduce" else 1
    for j in range(int(math.log2(p2))):
        dist = 1 << j
        vol = S / (1 << (j + 1))
        crossed = [b for b in range(len(sh.shares)) if b == 0 or dist >= sh.per_domain[b]]
        step = {b: sh.per_domain[b] * vol if b else vol for b in crossed}
        t, b = crossing(sh, step, wiring(sh, "exchange", dist))
        lat += passes * sh.latencies[max(crossed)]
        bw += passes * t
        for k, v in step.items():
            egress[k] = egress.get(k, 0.0) + passes * v
        if t > worst_t:
            worst_t, worst_b = t, b
    if p2 != n:
        # Thakur et al. Sec. 4.4: the n - p2 extra ranks hand their data to a partner first and get
        # the result back at the end: two more full-size exchanges over the outermost boundary.
        extra = {b: S for b in range(len(sh.shares)) if b == 0 or sh.spans(b)}
        t, b = crossing(sh, extra)
        lat += 2 * sh.latencies[sh.outer]
        bw += 2 * t
        for k, v in extra.items():
            egress[k] = egress.get(k, 0.0) + 2 * v
    return LinkCost(lat + bw, worst_b, egress, lat)


def hierarchical(op: str, S: float, sh: ShapeLike, wiring: Wiring) -> LinkCost:
    """Reduce-scatter level by level outward (all-reduce at the top), all-gather back inward.

    Phase l runs among the d = g_l / g_(l-1) sub-domains of a level-l domain on S/g_(l-1) bytes per
    GPU; its traffic leaves every lower domain too, so the limit is the max over b < l.
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
        t, b = crossing(sh, phase)
        lat += passes * (d - 1) * sh.latencies[level - 1]
        bw += passes * t
        for k, v in phase.items():
            egress[k] = egress.get(k, 0.0) + passes * v
        if t > worst_t:
            worst_t, worst_b = t, b
    return LinkCost(lat + bw, worst_b, egress, lat)
