"""Bytes, tier load and main calls of a full iteration without its tasks: the measures
analysis/measures.measure reads from the task list, from the transfer counts instead.

Nothing here depends on timing.  A class's network calls are its chunks' per-unit calls times the
units it runs and, per stage pair, the calls of one transfer times the transfers it sends
(utilisation.class_calls counts tasks that share a calls tuple the same way), plus its gradient
buckets' calls once per iteration; the main call of pp is the slowest transfer, of dp the slowest
bucket (report.link_summary).  Every measure is linear in those counts, so each class's per-unit
calls, each pair's transfer calls and each class's buckets are measured once with
utilisation.class_traffic and tier_utilisation themselves (:class:`Basis`, kept on the builder),
and an iteration's measures are the counts times them.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...analysis.report import link_summary
from ...analysis.utilisation import class_traffic, tier_utilisation
from ...engine.records import BucketInfo, LinkCall, OverlapInfo, TransferInfo
from ...engine.scheduler import Task
from ...taskgraph.builder import IterationBuilder
from ...vocabulary import COMM_DIMS
from .tail import Tail, tail

DIRECTIONS = ("forward", "backward")


@dataclass(frozen=True)
class Basis:
    """Measures of one unit of each class's chunk work and of one transfer on each pair."""

    unit_traffic: np.ndarray         # (p, dims, tiers) bytes one GPU sends per unit, per dimension
    unit_comm: np.ndarray            # (p, dims) bus bytes per unit (tp, cp, ep, dp; pp 0)
    unit_load: np.ndarray            # (p, loads) bytes over capacity per unit, per load key
    pair_traffic: np.ndarray         # (pairs, dims, tiers) one transfer on a pair (either way)
    pair_load: np.ndarray            # (pairs, loads)
    step_traffic: np.ndarray         # (p, dims, tiers) each class's gradient buckets, per iteration
    step_comm: np.ndarray            # (p, dims)
    step_load: np.ndarray            # (p, loads)
    load_keys: tuple                 # tier_utilisation's keys (tier names, WAN link directions)
    message: np.ndarray              # (pairs,) bytes of one transfer on each pair
    tiers: int


def basis(b: IterationBuilder) -> Basis:
    """The :class:`Basis` of builder ``b`` (its chunks and network: the count does not matter),
    computed once and kept on it."""
    got = b.__dict__.get("_array_basis")
    if got is None:
        got = b.__dict__["_array_basis"] = _basis(b)
    return got


def _measure(b: IterationBuilder, s: int, calls: list[LinkCall]) -> tuple[np.ndarray, dict]:
    traffic = class_traffic(b, s, [], calls)
    by_class: list[list] = [[] for _ in range(b.p)]
    per_class: list[list[LinkCall]] = [[] for _ in range(b.p)]
    per_class[s] = calls
    return np.array([traffic[d] for d in COMM_DIMS]), tier_utilisation(b, b.net, by_class, 1.0, per_class)


def _basis(b: IterationBuilder) -> Basis:
    p = b.p
    rows = []
    for s in range(p):
        calls = [c for ch, _ in b.rank_chunks(s) for c in ch.link_calls]      # one unit each
        traffic, load = _measure(b, s, calls)
        held = [ch for ch, _ in b.rank_chunks(s)]
        # Per dimension by name (a workload may register more: explorer/dimensions.py); pp's bytes
        # are the transfers', added per pair below; dp's per unit are FSDP's gathers.
        per = {d: sum(getattr(ch, f"{d}_bytes") for ch in held) for d in ("tp", "cp", "ep")}
        per["dp"] = sum(ch.fsdp_bytes for ch in held)
        rows.append((traffic, load, [per.get(d, 0.0) for d in COMM_DIMS]))
    tiers = rows[0][0].shape[1]
    pair_traffic = np.zeros((p, len(COMM_DIMS), tiers))
    pair_loads: dict[int, dict] = {}
    for q in range(p):
        # Forward and backward transfers on a pair share one calls tuple (builder._pp_links).
        links = b._transfer_shape(q, q, "forward")[5]
        if links:
            traffic, pair_loads[q] = _measure(b, q, list(links))
            pair_traffic[q] = traffic
    # Once per iteration: each class's gradient buckets (their own calls; bus bytes on dp).
    step_traffic = np.zeros((p, len(COMM_DIMS), tiers))
    step_comm = np.zeros((p, len(COMM_DIMS)))
    step_loads: dict[int, dict] = {}
    tl = tail(b)
    for s in range(p):
        mine = [t for t in (tl.buckets if tl is not None else ()) if t.cls == s]
        if mine:
            traffic, step_loads[s] = _measure(b, s, [c for t in mine for c in t.links])
            step_traffic[s] = traffic
            step_comm[s, COMM_DIMS.index("dp")] = sum(t.info.bus_bytes for t in mine
                                                      if isinstance(t.info, (BucketInfo, OverlapInfo)))
    # Every key any measurement has (beyond analysis/utilisation.ALL_WAN_KEYS_UP_TO WAN links a
    # measurement holds only its loaded directions), the tiers first as the first one lists them.
    loads = [r[1] for r in rows] + list(pair_loads.values()) + list(step_loads.values())
    keys = tuple(dict.fromkeys(k for load in loads for k in load))

    def row(load: dict | None) -> list[float]:
        return [0.0] * len(keys) if load is None else [load.get(k, 0.0) for k in keys]

    pair_load = np.array([row(pair_loads.get(q)) for q in range(p)]).reshape(p, len(keys))
    step_load = np.array([row(step_loads.get(s)) for s in range(p)]).reshape(p, len(keys))
    return Basis(np.stack([r[0] for r in rows]), np.array([r[2] for r in rows]),
                 np.array([row(r[1]) for r in rows]), pair_traffic, pair_load,
                 step_traffic, step_comm, step_load, keys, np.asarray(b.pp_pair_bytes), tiers)


def transfer_tasks(b: IterationBuilder, sends: np.ndarray) -> list[Task]:
    """One representative transfer task per (class, pair, direction) that sends: ``sends``
    (2, p, pairs) counts forward and backward transfers."""
    out = []
    for d, direction in enumerate(DIRECTIONS):
        for s, pair in zip(*np.nonzero(sends[d]), strict=True):
            shape = b._transfer_shape(int(pair), int(s), direction)
            st, stream, priority, time_s, parts, links, tail, tier, wire = shape
            out.append(Task(st, stream, "pp", time_s, [], priority, parts, TransferInfo(0, 0, *tail), links,
                            tier=tier, wire=wire))
    return out


def byte_measures(b: IterationBuilder, units: int, sends: np.ndarray,
                  tl: Tail) -> tuple[tuple[dict, ...], tuple[dict, ...], dict, dict]:
    """Per class bus bytes per dimension and bytes per tier boundary, the tiers' load (bytes over
    capacity: utilisation x T) and the main call of each dimension, for ``units`` pipeline units
    per class (half of them through each chunk under two directions), ``sends`` (2, p, pairs)
    transfers and the once-per-iteration buckets of ``tl``."""
    B = basis(b)
    # Each chunk a class holds runs every unit, but under two directions (Chimera, DualPipe) each
    # direction's chunk runs half of them: its pipeline takes half the micro-batches.
    per_chunk = units / (2 if b.schedule.two_directions else 1)
    per_pair = sends.sum(axis=0)                                        # (p, pairs)
    traffic = per_chunk * B.unit_traffic + np.einsum("sq,qdt->sdt", per_pair, B.pair_traffic) + B.step_traffic
    load = per_chunk * B.unit_load.sum(axis=0) + per_pair.sum(axis=0) @ B.pair_load + B.step_load.sum(axis=0)
    comm = per_chunk * B.unit_comm + B.step_comm
    comm[:, COMM_DIMS.index("pp")] += per_pair @ B.message
    comm_t = tuple(dict(zip(COMM_DIMS, row.tolist(), strict=True)) for row in comm)
    traffic_t = tuple({d: tuple(traffic[s, i].tolist()) for i, d in enumerate(COMM_DIMS)}
                      for s in range(b.p))
    links = link_summary(b, [*transfer_tasks(b, sends), *tl.buckets])
    return comm_t, traffic_t, dict(zip(B.load_keys, load.tolist(), strict=True)), links
