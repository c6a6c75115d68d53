"""Rows that differ only in network fields have their collective calls priced together.

A sweep over NIC and NVLink rates, latencies or the WAN (NETWORK_FIELDS) asks every row for the same
calls — the same operation, bytes and group — on a different network.  Priced row by row, each distinct
network runs NCCL's choice through every (algorithm, protocol) of every call in Python, about a third of
the row's estimate.  Before the rows are profiled, :func:`prime_networks` profiles the first row of each
group of rows equal but for network fields, takes the calls its network priced, places the same calls on
every other row's network (its shapes, memoised there for the row's own profile) and prices each call
over all of them at once (network/points.py, numpy over the points' rates; equal to the scalar cost
bit for bit).  The rows' own profiles then find their calls in collectives.cost's cache.  A row whose
calls differ (a layer split moved by the network, a bucket size derived from it) prices the others as
before: priming changes when a call is priced, never what it costs.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..config import Scenario
from ..network.collectives import NcclOptions
from ..network.points import price_points
from ..network.topology import GroupShape
from ..pricing.keys import network_key, shared_network
from ..pricing.profile import row_profile
from ..variants.registry import needs_simulation
from .equivalence import NETWORK_FIELDS

__all__ = ["MIN_ROWS", "prime_networks"]

MIN_ROWS = 8                 # fewer network points of one layout: priced one by one, as before


def prime_networks(scenarios: Sequence[Scenario | None], overrides: Sequence[Mapping[str, Any]]) -> int:
    """Price together the calls of the rows of ``scenarios`` (None: invalid) whose ``overrides``
    agree but for network fields; the number of calls priced this way.  Rows the estimator leaves
    to the simulation (variants/registry.needs_simulation) are not primed: it prices none of their
    calls, and their groups may not exist before the simulation resolves them (PipeDream's
    ``stage_replicas: auto``: fold/replica_choice.resolved)."""
    groups: dict[str, list[int]] = {}
    for i, (sc, ov) in enumerate(zip(scenarios, overrides, strict=True)):
        if sc is not None and not needs_simulation(sc):
            groups.setdefault(repr(sorted((k, v) for k, v in ov.items() if k not in NETWORK_FIELDS)),
                              []).append(i)
    priced = 0
    for rows in groups.values():
        if len(rows) >= MIN_ROWS:
            priced += _prime([s for s in (scenarios[i] for i in rows) if s is not None])
    return priced


def _prime(rows: list[Scenario]) -> int:
    first = rows[0]
    row_profile(first)
    free = first.parallelism.ideal_pipeline
    calls = shared_network(first, network_key(first, free), free).priced_calls()
    points: dict[tuple, tuple[list[GroupShape], list[NcclOptions]]] = {}
    for sc in rows[1:]:
        net = shared_network(sc, network_key(sc, free), free)
        for op, size, dim, stage in calls:
            _, _, shape, algorithm, nvls, options = net.cost_key(op, size, dim, stage)
            got = points.setdefault((op, size, algorithm, nvls), ([], []))
            got[0].append(shape)
            got[1].append(options)
    for (op, size, algorithm, nvls), (shapes, options) in points.items():
        price_points(op, size, shapes, algorithm, nvls, options)
    return sum(len(s) for s, _ in points.values())
