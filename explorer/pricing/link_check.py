"""Rows whose links might carry more than their iteration: left to the simulation.

The simulation raises an iteration to its busiest link's busy seconds when calls of several
dimensions overlap on one link (analysis/link_bound.py).  The estimator counts no bytes per link,
but it knows a bound: a call lasts at least its bytes over its share of every boundary it crosses
(collective_algorithms.base.crossing), and every group of its dimension sends at once, so one call
adds at most its own seconds to a link's busy time averaged over the link's domains, divided by the
stages (each holds 1/p of the GPUs).  A link is therefore busy at most the largest stage's communication
seconds per iteration — every call of its passes, hidden or exposed, its pipeline transfers and its
gradient buckets and gathers (:func:`comm_seconds`).  A row whose stages communicate no longer
than its iteration cannot be link-bound; the others (communication overlapping beyond the
iteration) come from the simulation, exact by construction.
"""
from __future__ import annotations

import numpy as np

from ..config import Scenario
from .chunk_basis import BWD, COMPUTE_PARTS, F_IDX, FWD, PARTS
from .keys import memo_table
from .pipeline import StageTimes
from .profile import Layout, RowProfile

_COMM = [i for i, k in enumerate(PARTS) if k not in COMPUTE_PARTS]
_HIDDEN_F = [F_IDX["hidden_f"], F_IDX["fsdp_hidden_f"]]
_HIDDEN_B = [F_IDX["hidden_b"], F_IDX["fsdp_hidden_b"]]
_PER_PASS = memo_table()


def _per_pass(layout: Layout, p: int, parts: tuple[int, ...] | None = None,
              hidden: bool = True) -> np.ndarray:
    """(p, J) each pass's communication seconds per column (RealOps order): of ``parts`` (indices
    of PARTS; default every communication part) and, with ``hidden``, the pass's hidden seconds.
    Memoised on the layout (its key holds the schedule, p and v) and the parts: rows of one layout
    share it.  The entry keeps its layout and is used only for that very object, so a key interned
    again after keys.clear() (a long session, between two rows of one call) never returns another
    layout's seconds."""
    parts = tuple(_COMM) if parts is None else parts
    key = (layout.key, parts, hidden)
    got = _PER_PASS.get(key)
    if got is not None and got[0] is layout:
        return got[1]
    f = layout.feat[layout.holds]                                    # (p, nch, FEATURES)
    comm_f = f[..., FWD][..., list(parts)].sum(-1)
    comm_b = f[..., BWD][..., list(parts)].sum(-1)
    if hidden:
        comm_f = comm_f + f[..., _HIDDEN_F].sum(-1)
        comm_b = comm_b + f[..., _HIDDEN_B].sum(-1)
    # Columns in RealOps order: per chunk F, B, Bi, W (the weight gradient sends nothing), then the
    # fused F&B of (forward chunk, backward chunk).
    kinds = np.stack([comm_f, comm_b, comm_b, np.zeros_like(comm_b)], axis=-1).reshape(p, -1)
    fused = (comm_f[:, :, None] + comm_b[:, None, :]).reshape(p, -1)
    per_pass = np.concatenate([kinds, fused], axis=1)
    _PER_PASS[key] = (layout, per_pass)
    return per_pass


def comm_seconds(prof: RowProfile, st: StageTimes, r: int, dims: frozenset[str] | None = None) -> float:
    """An upper bound of any link's busy seconds per iteration of ``prof`` (row ``r`` of ``st``):
    its largest stage's communication seconds — each pass's calls, hidden or exposed, times the
    passes of its kind the row runs (StageTimes.per_column), each transfer times the transfers it
    sends, its gradient buckets and gathers — per iteration (m of the units simulated).  ``dims``:
    those dimensions' only (pp the transfers, dp the buckets and gathers; a pass's hidden seconds,
    which are not kept by dimension, with any of tp, cp, ep and dp)."""
    share = prof.m / prof.units
    if dims is None:
        per_pass = _per_pass(prof.layout, prof.p)                    # (p, J)
    else:
        parts = tuple(i for i in _COMM if PARTS[i] in dims)
        per_pass = _per_pass(prof.layout, prof.p, parts, bool(parts))
    passes = share * (st.per_column[r] * per_pass).sum(-1)
    total = passes
    if dims is None or "pp" in dims:
        total = total + share * st.sends[r] @ prof.transfer
    if dims is None or "dp" in dims:
        total = total + prof.job_dur.sum(-1) + prof.trailing + prof.gates.max(axis=-1, initial=0.0)
    return float(np.max(total))


def maybe_link_bound(profs: list[RowProfile], st: StageTimes, T: np.ndarray) -> np.ndarray:
    """(rows,) whether a row's links might carry more than its iteration ``T``: the module's bound,
    and where a group's datacenter ring takes a hop through another datacenter (:func:`_transit`)
    that bound for the dimensions crossing the WAN times :func:`wan_transit_factor`."""
    out = np.zeros(len(profs), dtype=bool)
    for r, pr in enumerate(profs):
        factor, dims = _transit(pr)
        out[r] = comm_seconds(pr, st, r) > T[r] or (
            factor > 1 and factor * comm_seconds(pr, st, r, dims) > T[r])
    return out


def wan_transit_factor(sc: Scenario) -> int:
    """The most datacenters whose traffic one directed WAN link can carry (network/wan.py routes):
    1 where every pair has its own link (a mesh, a ring of 3, two datacenters); on a ring of D the
    shorter way round, ties clockwise, puts floor(D/2) origins on a clockwise link; on a hub every
    spoke's traffic to a spoke leaves the hub on that spoke's link: D - 1.  The module's bound
    holds per origin (its groups share the link as topology.py divides it), so a WAN link's busy
    seconds are at most this many times the WAN-crossing dimensions' bound."""
    dcs, topology = sc.cluster.datacenters, sc.cluster.scale_across.topology
    if dcs < 3 or topology == "mesh":
        return 1
    return dcs // 2 if topology == "ring" else dcs - 1


_TRANSIT: dict[int, tuple[float, frozenset[str]]] = memo_table()
# "pair": the two weight copies' all-reduce of a two-direction schedule (pair_sync.py), one of
# the dp stream's buckets (pricing/buckets.py adds its seconds to theirs).
_DIMS = ("tp", "cp", "ep", "dp", "edp", "pair", "pp")


def _transit(prof: RowProfile) -> tuple[float, frozenset[str]]:
    """(factor, dimensions whose groups cross the WAN) of a row's network (memoised on its key):
    the factor is :func:`wan_transit_factor` when some group's ring takes a hop routed through
    another datacenter, else 1 (every link then carries its own two datacenters' groups only).
    Found by an invariant hunt: on a ring of 4, a data-parallel ring between datacenters 0 and 2
    went through datacenter 1 and shared that link with the pipeline's transfers, and the estimate
    was 18 % short (3.92 against the simulation's 4.80 s).

    Times the most uneven split of a crossing group over its datacenters (the most of its ranks
    one datacenter holds over the fewest): a group's WAN share is the link's capacity x g/G with g
    the most ranks it has in one datacenter (topology.Fabric.shape_of), so groups split 2-1-1,
    1-2-1 and 1-1-2 over three datacenters are granted up to max/min times a link's capacity
    together (at most G/min groups of a datacenter's G GPUs each hold min of their ranks there).
    Found by a re-check hunt: tp 4 over three datacenters, estimate 0.0827 s against the
    simulation's link-bound 0.1074 s."""
    key = prof.net.key
    got = _TRANSIT.get(key)
    if got is not None:
        return got
    net = prof.net.net
    wan, factor = net.fabric.wan, wan_transit_factor(prof.sc)
    dims: set[str] = set()
    through = False
    uneven = 1.0
    if wan is not None:
        G = net.fabric.boundaries[-1].domain_gpus
        for dim in _DIMS:
            for s in range(prof.p):
                order, _ = net.route(dim, s)
                if order:
                    dims.add("dp" if dim in ("edp", "pair") else dim)     # their buckets are dp's jobs
                    k = len(order)
                    through = through or (factor > 1 and any(
                        len(wan.path(order[i], order[(i + 1) % k])) > 1 for i in range(k)))
                    held = np.bincount(net.members(dim, s) // G)
                    held = held[held > 0]
                    uneven = max(uneven, float(held.max() / held.min()))
    got = _TRANSIT[key] = ((factor if through else 1) * uneven, frozenset(dims))
    return got
