"""The WAN routes of every group of a dimension on a stage, not only its representative's.

A collective is priced on one representative group (groups.Network.members: the first replica's),
and every group of the dimension on the stage communicates at once.  Where the datacenter boundary
cuts the stage so that its groups sit alike (data parallelism across datacenters, each replica of
the pipeline in one), every group crosses the WAN as the representative does, and its bytes may be
counted on the representative's links.  Where it cuts through a group's own ranks (tensor or
context parallelism across datacenters, a two-direction schedule's weight copies on one-GPU
datacenters), groups of one stage take different links: tp 2 over datacenters 2 and 3 pairs GPU 2
with GPU 4 and GPU 3 with GPU 5, so the weight copies' all-reduce loads links 2-4 and 3-5 once each,
not link 2-4 twice (a hunt found a 1 Gb/s link read 22.67 s busy, and the iteration raised to it,
where it carried half).

Every group of ``dim`` holding stage ``stage``'s GPUs is the representative translated by the
coordinates of the dimensions it does not span (placement.Placement: a GPU id's digits in the
placement's strides), so the groups are enumerated as one array and grouped by the datacenters
their ranks sit in, in rank order: groups that visit the same datacenters in the same order take
the same route (topology.Fabric.route).
"""
from __future__ import annotations

from typing import Protocol

import numpy as np

from ..config import Scenario
from .placement import Placement
from .topology import Fabric, Route
from .wan import Load


class Network(Protocol):
    """What this module reads of groups.Network (which imports it: a protocol, not an import)."""

    sc: Scenario
    placement: Placement
    fabric: Fabric
    _where: int | None

    def route(self, dim: str, stage: int) -> Route: ...

    def members(self, dim: str, stage: int) -> np.ndarray: ...

# Per dimension the placement's coordinates its groups do not span: the translations between them.
# (dp's group is the dense gradient group, dp x cp ranks: placement.Placement.members; a pipeline
# hop's pair, stage s's GPU and stage s+1's of the same coordinates, is translated by all three.)
FREE = {"tp": ("cp", "dp"), "cp": ("tp", "dp"), "dp": ("tp",), "pair": ("tp", "cp", "dp"),
        "pp": ("tp", "cp", "dp")}
# The dimensions priced on their slowest group (a pipeline hop has its own: _slowest_pair).
SLOWEST = ("tp", "cp", "dp", "pair")
# A group, its members per domain, its route and the share of the stage's groups taking that route.
Distinct = tuple[np.ndarray, tuple[int, ...], Route, float]
_SHARES: dict[tuple, tuple[tuple[Route, float], ...]] = {}
_SHARES_MAX = 1 << 14


def spread_loads(net: Network, dim: str, stage: int,
                 loads: tuple[Load, ...]) -> tuple[Load, ...]:
    """``loads`` (the representative group's, GroupShape.wan_loads) as every group of ``dim`` on
    ``stage`` puts them on the WAN's links on average: each route's loads times the share of the
    groups that take it (:func:`route_shares`); ``loads`` itself where all take one route."""
    if not loads:
        return loads
    # The estimator's RowNetwork (pricing/keys.py) holds the network its rows share: its routes.
    shares = route_shares(getattr(net, "net", net), dim, stage)
    if len(shares) == 1:
        return loads
    out: dict[tuple[int, int], float] = {}
    for (_, each), frac in shares:
        for u, v, x in each:
            out[(u, v)] = out.get((u, v), 0.0) + x * frac
    return tuple((u, v, x) for (u, v), x in out.items())


def route_shares(net: Network, dim: str, stage: int) -> tuple[tuple[Route, float], ...]:
    """The distinct WAN routes of ``dim``'s groups holding ``stage``'s GPUs (for ``pp``, the pairs
    of hop ``stage``), each with the share of those groups that take it (summing to 1), in order of
    their first group's id.  One route, share 1, where the groups sit alike, off a WAN, for the
    dimensions whose groups are not translates of one another (ep, edp: their own accounts) and
    for PipeDream's stage replicas.  A route ``((), ())`` (groups inside one datacenter) carries
    their share nowhere."""
    own = net.route(dim, stage)
    fabric = net.fabric
    if fabric.wan is None or dim not in FREE or net.sc.parallelism.stage_replicas:
        return ((own, 1.0),)
    key = (net._where, dim, stage)
    got = _SHARES.get(key)
    if got is None:
        if len(_SHARES) >= _SHARES_MAX:
            _SHARES.clear()
        got = _SHARES[key] = _shares(net, dim, stage, own)
    return got


def base_group(net: Network, dim: str, stage: int) -> np.ndarray:
    """The first replica's group of ``dim`` on ``stage`` (every coordinate it does not span 0),
    which the others translate: placement.Placement.members for tp, cp and dp; stage s's GPU and
    stage p-1-s's for the weight copies (``pair``, in id order); stage s's and stage s+1's for a
    pipeline hop (``pp``, wrapping to stage 0 after the last)."""
    pl = net.placement
    p = pl.sizes["pp"]
    if dim == "pp":
        return np.array([pl.gpu(pp=stage), pl.gpu(pp=(stage + 1) % p)], dtype=np.int64)
    if dim == "pair":
        return np.unique(np.array([pl.gpu(pp=stage), pl.gpu(pp=p - 1 - stage)], dtype=np.int64))
    return pl.members(dim, stage)


def _groups(net: Network, dim: str, stage: int) -> np.ndarray | None:
    """(groups, members) every group of ``dim`` holding ``stage``'s GPUs (the base group first),
    or None when they all visit the same datacenters in the same order (one route) or none of
    them crosses the WAN."""
    pl = net.placement
    free = [d for d in FREE[dim] if pl.sizes[d] > 1]
    if not free:
        return None
    offsets = np.zeros(1, dtype=np.int64)
    for d in free:                 # every combination of the free coordinates (the first varies slowest)
        offsets = (offsets[:, None] + pl.strides[d] * np.arange(pl.sizes[d], dtype=np.int64)).ravel()
    groups = base_group(net, dim, stage)[None, :] + offsets[:, None]
    dcs = groups // net.fabric.boundaries[-1].domain_gpus
    if bool((dcs == dcs[0]).all()) or bool((dcs == dcs[:, :1]).all()):
        return None                # one route; or no group leaves its datacenter (tp inside nodes)
    return groups


def _distinct(net: Network, dim: str, stage: int) -> list[Distinct] | None:
    """Per distinct sequence of datacenters among :func:`_groups` (in order of its first group's
    id): that group, its members per domain, its route and the share of the groups that visit
    those datacenters; None where :func:`_groups` is."""
    groups = _groups(net, dim, stage)
    if groups is None:
        return None
    fabric = net.fabric
    _, first, counts = np.unique(groups // fabric.boundaries[-1].domain_gpus, axis=0, return_index=True,
                                 return_counts=True)
    out = []
    for j in np.argsort(first, kind="stable"):
        g = groups[int(first[j])]
        per = fabric.per_domain(g)
        out.append((g, per, fabric.route(g, per), float(counts[j]) / len(groups)))
    return out


def slowest_group(net: Network, dim: str, stage: int, base: np.ndarray) -> np.ndarray:
    """The group of ``dim`` on ``stage`` whose WAN route is the slowest — least share of its
    slowest link, then longest latency, then most links on a hop, then the first in id order —
    where the stage's groups take different routes ("every group runs at once and the step
    waits for the slowest", as a pipeline hop is priced: groups.Network._slowest_pair), a group
    that crosses the WAN before one that does not; ``base`` (the first replica's) where they take
    one.  Found with the routes' bytes: tp 2 across two one-GPU datacenters, the weight copies'
    all-reduce priced on the first tensor rank's fast link while the other's crossed a 1 Gb/s
    one; and by a re-check hunt: with the first tensor group inside datacenter 0, the others'
    all-reduces across a 1 Gb/s link priced with no WAN at all (0.50 s where its mirror image
    read 38.4 s)."""
    fabric = net.fabric
    if fabric.wan is None or dim not in SLOWEST or net.sc.parallelism.stage_replicas:
        return base
    routes = _distinct(net, dim, stage)
    if routes is None:
        return base
    top = fabric.boundaries[-1].domain_gpus
    best, worst = base, (np.inf, 0.0, 0)
    for g, per, (order, loads), _ in routes:
        if not order:
            continue
        share, latency = fabric.wan.limit(order, loads, per[-1], top)
        # Then the most links on one hop of its ring: on a WAN without overrides, whose rates the
        # members' memo does not hold (groups._uneven_wan), the choice is the same at any latency.
        k = len(order)
        hops = max(len(fabric.wan.path(order[i], order[(i + 1) % k])) for i in range(k))
        if (share, -latency, -hops) < worst:
            best, worst = g, (share, -latency, -hops)
    return best


def _shares(net: Network, dim: str, stage: int, own: Route) -> tuple[tuple[Route, float], ...]:
    """route_shares' routes, each group on its own (a group inside one datacenter on none: its share
    of the call's bytes crosses no WAN link).  Every crossing group is taken to send the call's
    egress, the priced group's: a ring leaves each datacenter it visits once, whatever the ranks
    each holds (Fabric.route orders the ring by datacenter)."""
    routes = _distinct(net, dim, stage)
    if routes is None:
        return ((own, 1.0),)
    out: dict[Route, float] = {}
    for _, _, route, frac in routes:
        out[route] = out.get(route, 0.0) + frac
    return tuple(out.items())
