"""Overrides that differ only in network fields a scenario never reads describe one configuration.

A network sweep varies rates and latencies of the three tiers (:data:`NETWORK_FIELDS`).  Some of
them cannot matter to a scenario:

- **The WAN with one datacenter.**  topology.Fabric makes the scale-across boundary's domain the
  whole datacenter, i.e. the whole cluster, so no group spans it (GroupShape.spans), network/wan.py
  builds no WAN (``Fabric.wan`` is None) and the cross-datacenter schedules and synchronisations
  (variants, training.sync) read it only between datacenters.
- **The scale-out fabric when the cluster is one NVLink domain.**  Every group lies inside the
  scale-up domain: nothing crosses the scale-out or spine boundaries, and the NIC-derived NCCL
  options (net_channels, the channel cap) are read only by calls that cross them
  (collectives._best_nccl, _nccl_time).  ``nics_per_node`` is not among the fields dropped: the
  derived ``communication.comm_sms`` of PyTorch FSDP reads it (config/loading.py).  Parameter
  servers (``parallelism.dp_kind: parameter-server``) are the exception: machines of their own,
  reached through the fabric's NICs whatever the replicas' domain, so their fabric is always read.

:func:`effective` drops those keys from an override, so a sweep of 25 NIC rates x 20 NVLink
bandwidths x 20 WAN latencies on a one-datacenter scenario prices 500 configurations, not 10,000,
and gives each of the 10,000 rows its equivalent's figures.  The drop is decided on the base and
on the override: an override that changes the cluster's shape (datacenters, nodes, GPUs per node,
the NVLink domain) keeps every key.  tests/test_network_sweep.py checks the premise on the full
simulation: random scenarios with random values of the dropped fields give identical results.
"""
from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ..config.domains import effective_domain
from ..scenario import Scenario, ScenarioError, from_dict
from .values import value_passes

# The fields of a network sweep: each tier's rates and latencies (docs/scenario-reference.md).
SCALE_UP_FIELDS = ("cluster.scale_up.bandwidth_GBps", "cluster.scale_up.latency_us")
SCALE_OUT_FIELDS = ("cluster.scale_out.nic_Gbps", "cluster.scale_out.latency_us",
                    "cluster.scale_out.efficiency", "cluster.scale_out.oversubscription")
WAN_FIELDS = ("cluster.scale_across.bandwidth_Gbps", "cluster.scale_across.latency_ms",
              "cluster.scale_across.topology")
NETWORK_FIELDS = SCALE_UP_FIELDS + SCALE_OUT_FIELDS + WAN_FIELDS
# Overrides of these change which tiers a group can cross: nothing is dropped from them.
_SHAPE_FIELDS = ("cluster.datacenters", "cluster.nodes", "cluster.gpus_per_node",
                 "cluster.scale_up.domain_gpus", "cluster.scale_up.kind", "hardware.gpu",
                 "parallelism.dp_kind")        # parameter servers read the fabric's NICs (below)


def unread_fields(sc: Scenario) -> frozenset[str]:
    """The :data:`NETWORK_FIELDS` that ``sc``'s simulation never reads (module docstring)."""
    c = sc.cluster
    out: set[str] = set()
    if c.datacenters == 1 and not c.heterogeneous:
        out.update(WAN_FIELDS)
        # Parameter servers are machines of their own, reached through the fabric's NICs whatever the
        # replicas' NVLink domain (variants/lowcomm/decentral.py): their fabric is read.
        if effective_domain(c) >= c.gpus and sc.parallelism.dp_kind != "parameter-server":
            out.update(SCALE_OUT_FIELDS)
    return frozenset(out)


def effective(override: Mapping[str, Any], unread: frozenset[str]) -> dict[str, Any]:
    """``override`` without the keys in ``unread`` (the base's :func:`unread_fields`), unless it
    changes the cluster's shape, then unchanged."""
    if not unread or any(k.startswith(_SHAPE_FIELDS) for k in override):
        return dict(override)
    return {k: v for k, v in override.items() if k not in unread}


def equivalents(base_raw: Mapping[str, Any], overrides: Sequence[Mapping[str, Any]]
                ) -> tuple[list[dict[str, Any]], list[int]]:
    """Each override without the network fields the base never reads (:func:`effective`), and per
    override the index of the first one equal to it so (itself when it is the first).  An override
    with a dropped value its field rejects keeps every key and stands alone, so that it is
    validated in full and reports from_dict's message."""
    try:
        unread = unread_fields(from_dict(dict(base_raw)))
    except ScenarioError:
        unread = frozenset()
    eff: list[dict[str, Any]] = []
    first: dict[Any, int] = {}
    rep: list[int] = []
    for i, ov in enumerate(overrides):
        e = effective(ov, unread)
        if len(e) != len(ov) and not all(value_passes(k, v) for k, v in ov.items() if k not in e):
            e = dict(ov)
            eff.append(e)
            rep.append(i)
            continue
        eff.append(e)
        try:
            key: Any = tuple(sorted(e.items()))
            hash(key)
        except TypeError:                       # a list value (a tuple field): compare its JSON
            key = json.dumps(e, sort_keys=True, default=str)
        rep.append(first.setdefault(key, i))
    return eff, rep
