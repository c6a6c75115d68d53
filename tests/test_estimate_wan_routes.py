"""The estimator on WANs whose routes take several links (pricing/link_check.multi_hop_wan).

Found by an invariant hunt: on a ring of 4 datacenters a data-parallel ring two hops long and the
pipeline transfers share a WAN link; the simulation raises the iteration to that link's busy time
(then 4.80 s, now 3.85 s: each replica's transfers on their own link, network/group_routes.py) while
the estimator's link bound, which counts a link's own datacenters only, let its 3.92 s stand — and a
sweep or a search showed that figure.
"""
from __future__ import annotations

import pytest

from explorer.estimate import estimate_many
from explorer.network.wan import Wan
from explorer.pricing.link_check import wan_transit_factor
from explorer.scenario import from_dict
from explorer.simulate import simulate


def _raw(topology: str, dcs: int) -> dict:
    return {"name": "wan routes",
            "model": {"layers": 4, "hidden": 4096, "heads": 16, "vocab": 1000, "seq_len": 2048},
            "training": {"global_batch": 96 if dcs == 3 else 128, "micro_batch": 1},
            "hardware": {"gpu": "h100-sxm"},
            "cluster": {"nodes": 6 if dcs == 3 else dcs, "gpus_per_node": 8, "datacenters": dcs,
                        "scale_across": {"bandwidth_Gbps": 10, "latency_ms": 5, "topology": topology}},
            "parallelism": {"tp": 4, "pp": 4, "zero": 0, "order": "tp-cp-ep-pp-dp"}}


@pytest.mark.parametrize("topology", ["mesh", "ring", "hub"])
@pytest.mark.parametrize("dcs", [2, 3, 4, 5, 6, 7, 8, 12])
def test_the_transit_factor_counts_the_origins_the_routes_put_on_a_link(topology, dcs):
    """By brute force over network/wan.py's routes: the most origin datacenters on one link."""
    wan = Wan(dcs, topology, (), ())
    origins: dict[tuple[int, int], set[int]] = {}
    for u in range(dcs):
        for v in range(dcs):
            for hop in wan.path(u, v):
                origins.setdefault(hop, set()).add(u)
    most = max((len(o) for o in origins.values()), default=1)
    gpus = 16 * dcs
    sc = from_dict({**_raw(topology, 4), "cluster": {"nodes": 2 * dcs, "gpus_per_node": 8, "datacenters": dcs,
                                                     "scale_across": {"topology": topology}},
                    "training": {"global_batch": gpus, "micro_batch": 1},
                    "parallelism": {"tp": 8, "pp": 1, "zero": 0}})
    assert wan_transit_factor(sc) == most


@pytest.mark.parametrize("topology, dcs", [("ring", 4), ("hub", 4), ("mesh", 4), ("ring", 3)])
def test_the_estimate_equals_the_simulation_on_every_topology(topology, dcs):
    sc = from_dict(_raw(topology, dcs))
    assert estimate_many([sc]).iteration_time_s[0] == pytest.approx(simulate(sc).iteration_time_s, rel=1e-9)


def test_the_ring_is_slower_than_the_mesh_by_its_shared_link():
    """Link 0 -> 1 carries the data-parallel rings' 3.26 GB and replica 0's pipeline transfers
    (1.07 GB) per iteration: 3.85 s at 10 Gb/s, the iteration.  Replica 1's transfers cross link
    2 -> 3, not 0 -> 1: counting them there too (every group on the representative's route, before
    network/group_routes.py) read 4.80 s."""
    ring, mesh = (simulate(from_dict(_raw(t, 4))) for t in ("ring", "mesh"))
    assert ring.iteration_time_s == pytest.approx(3.8478, rel=1e-3)
    assert mesh.iteration_time_s == pytest.approx(2.9156, rel=1e-3)
    link = {(w["a"], w["b"]): w for w in ring.wan_links}
    assert link[("dc0", "dc1")]["bytes_a_to_b"] == pytest.approx(3.255e9 + 1.0737e9, rel=1e-3)
    assert link[("dc2", "dc3")]["bytes_a_to_b"] == pytest.approx(3.255e9 + 1.0737e9, rel=1e-3)


def test_a_ring_whose_groups_hop_to_neighbours_keeps_the_priced_bound():
    """campus-4-buildings' groups visit the ring's datacenters in order (every hop one link): no
    link carries another datacenter's traffic, so its rows stay priced (a search of its 67,320
    valid layouts would otherwise simulate thousands of them: 56 s -> 6 min)."""
    from explorer.pricing.link_check import _transit
    from explorer.pricing.profile import row_profile
    from explorer.scenario import load, shipped_scenarios

    factor, dims = _transit(row_profile(load(shipped_scenarios()["campus-4-buildings"])))
    assert factor == 1 and "dp" in dims
    ring, _ = _transit(row_profile(from_dict(_raw("ring", 4))))
    assert ring == 2


@pytest.mark.parametrize("schedule", ["dualpipe", "chimera"])
def test_the_weight_copies_all_reduce_counts_its_routes_through_other_datacenters(schedule):
    """A two-direction schedule all-reduces stage s's gradients with stage p-1-s's copy
    (taskgraph/techniques/pair_sync.py).  With one stage a datacenter on a ring of 8, stages 1
    and 6 are three links apart, through datacenters 0 and 7, and their all-reduce shares link
    0-7 with that of stages 0 and 7: the simulation's iteration is that link's busy time.  Found by
    a hunt: the link check left the pair dimension out of the routes it walks, and the estimate
    (what sweep and search rank by) read 15.36 s against the simulation's 26.25 s."""
    raw = {"name": "pair across a ring",
           "model": {"layers": 16, "hidden": 4096, "heads": 32, "vocab": 32000, "seq_len": 1024},
           "training": {"global_batch": 16, "micro_batch": 1},
           "hardware": {"gpu": "h100-sxm"},
           "cluster": {"nodes": 8, "gpus_per_node": 1, "datacenters": 8,
                       "scale_across": {"bandwidth_Gbps": 1, "latency_ms": 0, "topology": "ring"}},
           "parallelism": {"tp": 1, "pp": 8, "zero": 0, "schedule": schedule, "order": "tp-cp-ep-dp-pp"}}
    sc = from_dict(raw)
    sim = simulate(sc)
    assert any(n.kind == "link" for n in sim.notices)           # the link sets the pace
    assert estimate_many([sc]).iteration_time_s[0] == pytest.approx(sim.iteration_time_s, rel=1e-9)


@pytest.mark.parametrize("nodes, gpus_per_node, seconds", [(6, 2, 0.107374), (3, 4, 0.071583)])
def test_groups_split_unevenly_over_datacenters_are_left_to_the_simulation(nodes, gpus_per_node, seconds):
    """tp 4 over three datacenters of four GPUs, dp outermost: the tensor groups hold 2-1-1, 1-2-1
    and 1-1-2 of their ranks in datacenters 0, 1, 2 and all take the ring 0 -> 1 -> 2 -> 0.  Each
    is granted the link's capacity x 2/4 (its most ranks in one datacenter), three of them 1.5x the
    link; the simulation's link bound raises the iteration to the link's busy time.  Found by a
    re-check hunt: the estimate read 0.0827 s against 0.1074 s (and 0.0692 against 0.0716)."""
    raw = {"name": "uneven split",
           "model": {"layers": 8, "hidden": 2048, "heads": 16, "vocab": 32000, "seq_len": 2048},
           "training": {"global_batch": 3, "micro_batch": 1}, "hardware": {"gpu": "h100-sxm"},
           "cluster": {"nodes": nodes, "gpus_per_node": gpus_per_node, "datacenters": 3,
                       "scale_across": {"bandwidth_Gbps": 100, "latency_ms": 0, "topology": "mesh"}},
           "parallelism": {"tp": 4, "pp": 1, "dp": 3, "schedule": "1f1b", "order": "dp-tp-cp-ep-pp"}}
    sc = from_dict(raw)
    sim = simulate(sc)
    assert sim.iteration_time_s == pytest.approx(seconds, abs=1e-6)
    assert any(n.kind == "link" for n in sim.notices)
    assert estimate_many([sc]).iteration_time_s[0] == pytest.approx(sim.iteration_time_s, rel=1e-9)
