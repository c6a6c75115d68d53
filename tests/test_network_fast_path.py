"""Distinct networks priced on the memoised path equal the same rows priced from scratch, bit for bit.

A sweep over network fields keeps, across rows, what does not depend on the varied rates: each
group's members, members per domain and WAN route (network/groups.py ``_PER_DOMAIN``,
topology.Fabric.route), priced calls (collectives.cost's cache) and the estimator's interned keys
(pricing/keys.py).  These tests price many random network rows in one call, with every memo warm
from the rows before, and each row alone after every memo is cleared (the scalar path: a fresh
Network, fresh shapes, fresh calls), and ask for exact equality of every figure.  Four datacenters
on mesh, ring and hub make the WAN route differ by topology, so a memo that forgot the topology in
its key would hand one topology's route to another.
"""
from __future__ import annotations

import random

import numpy as np

from explorer.design.base import open_base
from explorer.estimate import estimate_overrides
from explorer.network import collectives, groups
from explorer.network.groups import Network
from explorer.network.topology import Fabric
from explorer.pricing import keys
from explorer.scenario import apply_overrides, from_dict
from explorer.vocabulary import CATEGORIES

_VALUES = {
    "cluster.scale_up.bandwidth_GBps": (50.0, 300.0, 450.0, 900.0, 1800.0),
    "cluster.scale_up.latency_us": (0.0, 0.6, 3.0),
    "cluster.scale_out.nic_Gbps": (25.0, 100.0, 200.0, 400.0, 800.0),
    "cluster.scale_out.latency_us": (0.0, 2.7, 40.0),
    "cluster.scale_out.efficiency": (0.3, 0.9),
    "cluster.scale_out.oversubscription": (1.0, 3.0, 8.0),
    "cluster.scale_across.bandwidth_Gbps": (1.0, 100.0, 400.0, 6400.0),
    "cluster.scale_across.latency_ms": (0.0, 5.0, 80.0),
    "cluster.scale_across.topology": ("mesh", "ring", "hub"),
}


def _rows(seed: int, n: int) -> list[dict]:
    rng = random.Random(seed)
    return [{k: rng.choice(v) for k, v in _VALUES.items() if rng.random() < 0.8} for _ in range(n)]


def _cold() -> None:
    """Forget every memo a row could share with another (the scalar path's fresh start)."""
    keys.clear()
    groups._PER_DOMAIN.clear()
    collectives.clear_costs()


def _figures(est, i: int) -> list[float]:
    return [float(est.iteration_time_s[i]), float(est.mfu[i]), bool(est.fits[i]),
            *(float(est.breakdown_s[k][i]) for k in CATEGORIES if k in est.breakdown_s)]


def _base_raw(datacenters: int) -> dict:
    raw = dict(open_base("two-datacenters").raw)
    return apply_overrides(raw, {"cluster.datacenters": datacenters})


def test_warm_network_rows_equal_each_row_priced_from_scratch():
    for dcs, seed in ((4, 11), (2, 12)):
        raw = _base_raw(dcs)
        rows = _rows(seed, 24)
        _cold()
        warm, why = estimate_overrides(raw, rows)
        assert all(w is None for w in why), why
        times = set()
        for i, ov in enumerate(rows):
            _cold()
            alone, _ = estimate_overrides(raw, [ov])
            assert _figures(warm, i) == _figures(alone, 0), ov
            times.add(float(alone.iteration_time_s[0]))
        assert len(times) > 12          # the rows are distinct networks, not one network repeated


def test_memoised_group_shapes_equal_fabric_shape_of_the_members():
    """Network.shape (memoised members, per-domain counts and route; one shape per alike group) is
    Fabric.shape of the group's own members computed afresh, on every dimension and stage."""
    raw = _base_raw(4)
    for ov in _rows(13, 12):
        sc = from_dict(apply_overrides(raw, ov))
        net = Network(sc)
        fabric = Fabric.for_cluster(sc.cluster)
        for dim in ("tp", "dp", "pp"):
            for stage in range(sc.parallelism.pp):
                assert net.shape(dim, stage) == fabric.shape(np.array(net.members(dim, stage))), (dim, ov)


def test_the_route_follows_the_wan_topology():
    """The memo's key carries the WAN topology: the dp ring over four datacenters (0, 1, 2, 3 in rank
    order) loads the mesh's four direct links 0->1, 1->2, 2->3, 3->0 once each, and on a hub every
    spoke once each way, six directed links (explorer/network/wan.py, module docstring)."""
    raw = _base_raw(4)
    got = {}
    for topo in ("mesh", "hub"):          # mesh first: a key without the topology would hand it on
        net = Network(from_dict(apply_overrides(raw, {"cluster.scale_across.topology": topo})))
        got[topo] = net.shape("dp", 0).wan_loads
    assert got["mesh"] == ((0, 1, 1.0), (1, 2, 1.0), (2, 3, 1.0), (3, 0, 1.0))
    assert got["hub"] == ((0, 1, 1.0), (0, 2, 1.0), (0, 3, 1.0), (1, 0, 1.0), (2, 0, 1.0), (3, 0, 1.0))
