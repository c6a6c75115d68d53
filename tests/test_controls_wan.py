"""Direction tests for the scale-across fields (WAN topology, presets, per-link overrides and
``parallelism.span``): each moves the iteration the way the WAN's physics says, strictly.
tests/test_controls.py collects ``COVERED``; closed forms are in tests/test_scale_across.py."""
from __future__ import annotations

import json
from functools import cache
from typing import Any

from explorer.scenario import load
from explorer.simulate import simulate

from conftest import ROOT

TWO_DC = ROOT / "scenarios" / "two-datacenters.yaml"
# DP 24 across three datacenters (two-datacenters' model and layout on 96 nodes).
THREE = {"cluster.nodes": 96, "cluster.datacenters": 3, "training.global_batch": 480, "parallelism.dp": 24}
# The file's own WAN figures removed, so a preset's apply.
NO_WAN = {"cluster.scale_across.bandwidth_Gbps": None, "cluster.scale_across.latency_ms": None}


@cache
def _time(frozen: str) -> float:
    return simulate(load(TWO_DC, json.loads(frozen))).iteration_time_s


def time(**ov: Any) -> float:
    return _time(json.dumps({k.replace("__", "."): v for k, v in sorted(ov.items())}))


def test_hub_topology_adds_a_wan_hop_between_spokes():
    """cluster.scale_across.topology: DP across three datacenters on a ring WAN crosses the same
    direct links as on the mesh (equal time); on a hub the spoke-to-spoke hop 1 -> 2 goes through
    datacenter 0, two links and twice the latency, so every bucket waits longer: strictly slower."""
    three = {k.replace(".", "__"): v for k, v in THREE.items()}
    mesh = time(**three)
    assert time(**three, cluster__scale_across__topology="ring") == mesh
    assert time(**three, cluster__scale_across__topology="hub") > mesh * 1.05


def test_wan_presets_order_by_technology():
    """cluster.scale_across.preset: metro DWDM (6.4 Tb/s, 0.5 ms) < long-haul (1.6 Tb/s, 30 ms) and
    cloud inter-region (400 Gb/s, 5 ms) in iteration time: DP crosses the WAN every iteration."""
    no = {k.replace(".", "__"): v for k, v in NO_WAN.items()}
    metro = time(**no, cluster__scale_across__preset="metro-dwdm")
    cloud = time(**no, cluster__scale_across__preset="cloud-inter-region")
    haul = time(**no, cluster__scale_across__preset="long-haul")
    assert metro < haul and metro < cloud


def test_a_slower_link_override_slows_the_collective_that_crosses_it():
    """cluster.scale_across.links: the DP ring over three datacenters crosses link dc1-dc2; at a
    quarter of the bandwidth it limits the collective (slower), at four times it cannot (the
    other links still limit: equal)."""
    three = {k.replace(".", "__"): v for k, v in THREE.items()}
    base = time(**three)
    slow = time(**three, cluster__scale_across__links=[{"a": "dc1", "b": "dc2", "bandwidth_Gbps": 400}])
    fast = time(**three, cluster__scale_across__links=[{"a": "dc1", "b": "dc2", "bandwidth_Gbps": 6400}])
    assert slow > base * 1.05
    assert fast == base


def test_span_pp_puts_only_activations_on_the_wan():
    """parallelism.span: dp (two-datacenters' own order) sends the gradient reduction across; pp
    keeps DP inside each building and sends only activations across: faster (8.0 -> 6.0 s)."""
    dp = time(parallelism__span="dp")
    pp = time(parallelism__span="pp", parallelism__order=None)
    assert dp == time()
    assert pp < 0.8 * dp


COVERED = {
    "cluster.scale_across.topology": "test_hub_topology_adds_a_wan_hop_between_spokes",
    "cluster.scale_across.preset": "test_wan_presets_order_by_technology",
    "cluster.scale_across.links": "test_a_slower_link_override_slows_the_collective_that_crosses_it",
    "parallelism.span": "test_span_pp_puts_only_activations_on_the_wan",
}
