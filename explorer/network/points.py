"""One collective call priced over many networks at once: NCCL's choice and its time per network point.

A sweep over network fields (NIC and NVLink rates, latencies, oversubscription, the WAN) asks every
row for the same calls — the same operation, bytes and group — on a different network.
:func:`explorer.network.collectives.cost` prices one point: every (algorithm, protocol) NCCL weighs,
rated and run, then the least rated time.  Here the points of one call whose groups sit alike on the
fabric (members, members per domain, the scale-up wiring, NCCL's options but for the NIC rate, its
channels and the channels' cap) are priced together.  The same link functions
(collective_algorithms/nccl_links.py) and the same tuning model (nccl_tuning.py) run over numpy arrays
of the points' boundary shares — their few comparisons are elementwise (``crossing``, ``lesser``,
``pick``) — and NCCL's choice is an argmin per point over the candidates in registry and protocol
order (ties to the first, as ``_best_nccl``'s strict ``<``).  The latency term, a handful of scalars,
is priced per distinct (latencies, channels) with the scalar function.

Every result equals :func:`collectives.cost` of its own point bit for bit (the same IEEE operations in
the same order: tests/test_network_points.py), and is stored in its cache (collectives.remember), so
the rows priced next find their calls there.  Calls NCCL's choice does not price (point-to-point,
MPI/Gloo, one member) and points alone in their structure are priced by ``cost`` itself.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from ..collective_algorithms import registry
from ..collective_algorithms.base import LinkCost
from ..collective_algorithms.registry import Algorithm
from . import nccl_tuning as nt
from .collectives import (
    CollectiveCost,
    NcclOptions,
    _nccl_latency,
    _pcie_stage,
    cached,
    cost,
    nccl_algorithms,
    nccl_candidates,
    remember,
)
from .pcie_link import pcie_boundary
from .topology import BOUNDARY_NAMES, GroupShape

__all__ = ["price_points"]


def _structure(sh: GroupShape, o: NcclOptions) -> tuple:
    """What the points priced together share: everything but the rates, latencies and what NCCL's
    options derive from the NIC rate (its channels and their cap)."""
    return (sh.n, sh.per_domain, sh.up_kind, len(sh.shares), o.library, o.protocol, o.arch, o.nvls, o.sharp,
            o.net_ll128, o.nics_per_node, o.gpus_per_node, o.pcie_Bps, o.net_step_bytes, o.multi_node_nvlink)


def price_points(op: str, size_bytes: float, shapes: Sequence[GroupShape], algorithm: str,
                 nvls_capable: bool, options: Sequence[NcclOptions]) -> list[CollectiveCost]:
    """``collectives.cost(op, size_bytes, shapes[i], algorithm, nvls_capable, options[i])`` for every
    point i, each stored in cost's cache."""
    out: list[CollectiveCost | None] = [None] * len(shapes)
    groups: dict[tuple, list[int]] = {}
    for i, (sh, o) in enumerate(zip(shapes, options, strict=True)):
        out[i] = cached((op, size_bytes, sh, algorithm, nvls_capable, o))
        if out[i] is None:                     # priced before (an earlier chunk of the same sweep)
            groups.setdefault(_structure(sh, o), []).append(i)
    for members in groups.values():
        sh0, o0 = shapes[members[0]], options[members[0]]
        algos = nccl_algorithms(op, algorithm, o0) if sh0.n > 1 and size_bytes > 0 else None
        if algos is None or len(members) < 2:
            for i in members:
                out[i] = cost(op, size_bytes, shapes[i], algorithm, nvls_capable, options[i])
            continue
        got = _choose(op, size_bytes, [shapes[i] for i in members], [options[i] for i in members], algos)
        if got is None:                  # the named algorithm cannot run on this group: NCCL's ring
            got = _choose(op, size_bytes, [shapes[i] for i in members], [options[i] for i in members],
                          (registry.get(registry.NCCL_FALLBACK),))
            assert got is not None
        forced = algorithm != registry.AUTO
        for j, i in enumerate(members):
            name, proto, egress, total, lat, boundary, pcie = got[j]
            cc = CollectiveCost(op, size_bytes, sh0.n, name, total, lat, boundary, egress,
                                algorithm if forced and name != algorithm else "", proto, pcie,
                                BOUNDARY_NAMES[sh0.outer])
            remember((op, size_bytes, shapes[i], algorithm, nvls_capable, options[i]), cc)
            out[i] = cc
    assert all(c is not None for c in out)
    return [c for c in out if c is not None]


def _choose(op: str, S: float, shapes: list[GroupShape], opts: list[NcclOptions],
            algos: tuple[Algorithm, ...]) -> list[tuple] | None:
    """collectives._best_nccl over the points: per point the fields of its CollectiveCost (algorithm,
    protocol, bytes leaving each boundary, seconds, latency seconds, limiting boundary's name, whether
    the GPUs' PCIe links set the time), or None where no candidate runs on this group."""
    sh0, o0 = shapes[0], opts[0]
    shares = [np.array([sh.shares[b] for sh in shapes]) for b in range(len(sh0.shares))]
    nic = np.array([o.nic_GBps for o in opts])
    cap = np.array([o.net_cap_Bps for o in opts])
    channels = np.array([o.net_channels for o in opts], dtype=np.int64)
    ll128 = sh0.up_kind != "pcie" and (o0.net_ll128 or not sh0.spans(1))
    if len(sh0.shares) > 1 and sh0.spans(1):
        # domain_links.capped_shape where the group's NIC share is above what its channels reach.
        capped = shares[1] > cap
        domains = [sh0.per_domain[b] / sh0.per_domain[1] for b in range(len(shares))]
        shares = [shares[0]] + [np.where(capped, np.minimum(shares[b], cap * domains[b]), shares[b])
                                if sh0.spans(b) else shares[b] for b in range(1, len(shares))]
    # The link functions and the tuning model take these where they take one point's (their ShapeLike
    # and OptionsLike, typed for scalars): the same code, elementwise.
    A: Any = _with_arrays(sh0, shares=tuple(shares))   # the structure's; its latencies are not read
    opts_many: Any = _with_arrays(o0, nic_GBps=nic, net_cap_Bps=cap, net_channels=channels)
    # The latency term reads the points' latencies and channels only: priced once per distinct pair.
    distinct: dict[tuple, int] = {}
    firsts: list[int] = []                   # the first point of each distinct pair
    which = np.empty(len(shapes), np.int64)
    for i, (sh, o) in enumerate(zip(shapes, opts, strict=True)):
        k = which[i] = distinct.setdefault((sh.latencies, o.net_channels), len(distinct))
        if k == len(firsts):
            firsts.append(i)
    cands: list[tuple] = []                  # (algorithm, protocol, link, total, latency) per candidate
    rated_times: list[np.ndarray] = []
    for alg, link, bus_bytes, rated, protos in nccl_candidates(op, S, A, opts_many, algos, ll128):
        for proto in protos:
            lat = np.array([_nccl_latency(alg, proto, op, S, shapes[i], opts[i]) for i in firsts])[which]
            t_pcie = _pcie_stage(alg, proto, A, opts_many, link)      # structural: the egress, the PCIe rate
            total = _time(alg, proto, op, S, A, opts_many, link, bus_bytes, False, lat, t_pcie)
            if rated is None:
                as_rated = _time(alg, proto, op, S, A, opts_many, link, bus_bytes, True, lat, t_pcie)
            else:
                as_rated = _time(alg, proto, op, S, A, opts_many, *rated, True, lat,
                                 _pcie_stage(alg, proto, A, opts_many, rated[0]))
            cands.append((alg, proto, link, total, lat))
            rated_times.append(as_rated)
    if not cands:
        return None
    best = np.argmin(np.vstack(rated_times), axis=0)      # the first least, as _best_nccl's strict <
    picked = []
    for alg, proto, link, total, lat in cands:
        boundary = np.broadcast_to(np.asarray(link.boundary), total.shape).copy()
        pcie = np.zeros(total.shape, dtype=bool)
        t_pcie = _pcie_stage(alg, proto, A, opts_many, link)
        if 0 < t_pcie:                                    # the links bound it: name their tier
            pcie = total - lat <= t_pcie * (1 + 1e-12)
            boundary[pcie] = pcie_boundary(A)
        egress = tuple(link.egress.get(b, 0.0) for b in range(len(sh0.shares)))    # as collectives._result
        picked.append((alg.name, proto, egress, total.tolist(), lat.tolist(),
                       [BOUNDARY_NAMES[b] for b in boundary.tolist()], pcie.tolist()))
    out = []
    for i, k in enumerate(best.tolist()):
        name, proto, egress, total, lat, boundary, pcie = picked[k]
        out.append((name, proto, egress, total[i], lat[i], boundary[i], bool(pcie[i])))
    return out


def _with_arrays(one: Any, **arrays: Any) -> Any:
    """``one`` point's shape or options with the points' arrays in place of some of its numbers (the
    fields are typed as scalars; the functions that read them take arrays elementwise)."""
    return replace(one, **arrays)


def _time(alg: Algorithm, proto: str, op: str, S: float, sh: Any, o: Any, link: LinkCost,
          bus_bytes: float, rating: bool, lat_s: np.ndarray, t_pcie: float) -> np.ndarray:
    """collectives._nccl_time over the points: the same operations in the same order."""
    nodes = sh.n // sh.per_domain[1]
    ppn = sh.per_domain[1]
    row = alg.tuning_row(sh.up_kind)
    time_s = np.broadcast_to(np.asarray(link.time_s, dtype=float), lat_s.shape)
    bus: Any
    with np.errstate(divide="ignore"):
        bus = np.where(time_s > 0, bus_bytes / np.where(time_s > 0, time_s, 1.0) / 1e9, np.inf)
    net_channels: Any = np.asarray(o.net_channels)
    channels: Any
    if nodes > 1:                                         # collectives._rating_channels
        channels = net_channels if rating else np.minimum(
            nt.RUN_CHANNEL_FACTOR * np.maximum(net_channels, 1), nt.MAX_CHANNELS)
    else:
        channels = np.full(lat_s.shape, nt.DEFAULT_CHANNELS)
    refined = nt.refine_bus_bw(row, proto, bus, o.arch, nodes, ppn, channels)
    refined = refined * nt.bandwidth_correction(row, proto, S)
    with np.errstate(divide="ignore"):
        t_bw = np.where(refined < np.inf, bus_bytes / (refined * 1e9), 0.0)
    frac = ppn / o.gpus_per_node if o.gpus_per_node >= ppn else 1.0
    if nodes > 1 and len(sh.shares) > 1:
        step = o.net_step_bytes if proto == "Simple" else nt.NET_CHUNK_BYTES
        fill = nt.pipeline_fill_s(S, net_channels, sh.shares[1], frac, step)
    else:
        fill = nt.node_fill_s(S, refined, proto, nt.fill_hops(alg.ring_pipeline, sh.n, op), channels)
    return lat_s + np.maximum(t_bw + fill, t_pcie)
