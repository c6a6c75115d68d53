"""Every group of a stage on its own WAN links (explorer/network/group_routes.py).

A call is priced on its representative group, but every group of the dimension on the stage sends
at once; where the datacenter boundary cuts through the groups' own ranks they take different
links.  Found by an invariant hunt: eight one-GPU datacenters on a mesh, tp 2 (GPUs 2 and 3 in
datacenters 2 and 3), Chimera on pp 4, link 2-4 at 1 Gb/s.  The weight copies' all-reduce pairs
GPU 2 with GPU 4 and GPU 3 with GPU 5, but both were counted on link 2-4: it read 22.67 s of
traffic, and the simulation raised the iteration to it, while it carries half and the estimate
(11.48 s) was right.  Here, on a smaller model: 58.47 s against 29.36 s."""
from __future__ import annotations

import pytest

from explorer.estimate import estimate_many
from explorer.network.group_routes import route_shares, spread_loads
from explorer.network.groups import Network
from explorer.scenario import from_dict
from explorer.simulate import simulate


def _raw(schedule: str = "chimera", slow: bool = True, order: str = "tp-cp-ep-pp-dp", tp: int = 2,
         bandwidth: float = 400) -> dict:
    links = [{"a": 2, "b": 4, "bandwidth_Gbps": 1}] if slow else []
    return {"name": "groups across a mesh",
            "model": {"layers": 16, "hidden": 4096, "heads": 32, "vocab": 32000, "seq_len": 1024},
            "training": {"global_batch": 16, "micro_batch": 1},
            "hardware": {"gpu": "h100-sxm"},
            "cluster": {"nodes": 8, "gpus_per_node": 1, "datacenters": 8,
                        "scale_across": {"bandwidth_Gbps": bandwidth, "latency_ms": 0, "topology": "mesh",
                                         "links": links}},
            "parallelism": {"tp": tp, "pp": 8 // tp, "zero": 2, "schedule": schedule, "order": order}}


def test_the_weight_copies_of_two_tensor_ranks_take_two_links():
    net = Network(from_dict(_raw()))
    shares = route_shares(net, "pair", 1)                 # stage 1 (GPUs 2, 3) with stage 2 (GPUs 4, 5)
    assert [(order, frac) for (order, _), frac in shares] == [((2, 4), 0.5), ((3, 5), 0.5)]
    # The representative's loads (one pair on link 2-4 both ways) spread over both pairs' links.
    own = net.shape("pair", 1).wan_loads
    assert sorted(own) == [(2, 4, 1.0), (4, 2, 1.0)]
    assert sorted(spread_loads(net, "pair", 1, own)) == [(2, 4, 0.5), (3, 5, 0.5), (4, 2, 0.5), (5, 3, 0.5)]
    # A pipeline hop's pairs likewise: 2 -> 4 and 3 -> 5.
    hops = route_shares(net, "pp", 1)
    assert [(order, frac) for (order, _), frac in hops] == [((2, 4), 0.5), ((3, 5), 0.5)]


def test_groups_that_sit_alike_keep_one_route():
    """Data parallelism across datacenters, each pipeline in one: every tp rank's dp group visits
    the same datacenters, so the representative's route carries them all (share 1, loads as
    priced)."""
    raw = _raw(tp=2, slow=False)
    raw["cluster"].update({"nodes": 4, "gpus_per_node": 4, "datacenters": 2})
    raw["cluster"]["scale_across"] = {"bandwidth_Gbps": 100}
    raw["parallelism"] = {"tp": 2, "pp": 2, "schedule": "1f1b", "zero": 1, "order": "tp-cp-ep-pp-dp"}
    net = Network(from_dict(raw))
    shares = route_shares(net, "dp", 0)
    assert len(shares) == 1 and shares[0][1] == 1.0
    own = net.shape("dp", 0).wan_loads
    assert own and spread_loads(net, "dp", 0, own) is own


@pytest.mark.parametrize("schedule", ["chimera", "dualpipe"])
def test_the_link_bound_reads_each_link_its_own_groups(schedule):
    sc = from_dict(_raw(schedule))
    sim = simulate(sc)
    assert not any(n.kind == "link" for n in sim.notices)
    assert sim.iteration_time_s == pytest.approx(estimate_many([sc]).iteration_time_s[0], rel=1e-9)
    # (Counting both tensor ranks' bytes on link 2-4 read 58.47 s, both schedules.)
    assert sim.iteration_time_s == pytest.approx(29.363 if schedule == "chimera" else 29.351, abs=1e-3)
    links = {(w["a"], w["b"]): w for w in sim.wan_links}
    slow, twin = links[("dc2", "dc4")], links[("dc3", "dc5")]
    assert slow["utilisation"] <= 1.0
    # Both tensor ranks' weight copies and transfers: about the same bytes on each link.
    assert slow["bytes_a_to_b"] == pytest.approx(twin["bytes_a_to_b"], rel=0.1)


def test_spreading_moves_bytes_between_links_and_keeps_their_sum():
    """On a uniform 1 Gb/s mesh (no link sets the pace) the WAN's bytes per iteration are those
    of every call, however they are spread: 45.86 GB."""
    sim = simulate(from_dict(_raw(slow=False, bandwidth=1)))
    total = sum(w["bytes_a_to_b"] + w["bytes_b_to_a"] for w in sim.wan_links)
    assert total == pytest.approx(45.856e9, rel=1e-4)
    links = {(w["a"], w["b"]): w for w in sim.wan_links}
    assert links[("dc0", "dc6")]["bytes_a_to_b"] == pytest.approx(links[("dc1", "dc7")]["bytes_a_to_b"])


@pytest.mark.parametrize("slow", [(2, 4), (3, 5)])
def test_a_call_is_priced_on_its_slowest_group(slow):
    """The slow link under either tensor rank's weight copies gives one iteration, 29.363 s (the
    step waits for the slowest group).  Priced on the first rank's group, a slow link under the
    second's read 29.234 s: its groups at 400 Gb/s, the link bound charging the excess to tp."""
    raw = _raw("chimera")
    raw["cluster"]["scale_across"]["links"] = [{"a": slow[0], "b": slow[1], "bandwidth_Gbps": 1}]
    sc = from_dict(raw)
    net = Network(sc)
    assert net.members("pair", 1).tolist() == list(slow)
    sim = simulate(sc)
    assert sim.iteration_time_s == pytest.approx(29.3629, abs=1e-4)
    assert sim.breakdown_s["tp"] == pytest.approx(0.072, abs=1e-3)
    assert estimate_many([sc]).iteration_time_s[0] == pytest.approx(sim.iteration_time_s, rel=1e-9)


def _cut(slow: tuple[int, int]) -> dict:
    """Three datacenters of two 2-GPU nodes, dp outermost: stage 0's tensor groups {0, 3} (inside
    datacenter 0), {1, 4} and {2, 5} (across link 0-1); stage 1's mirror them across link 1-2."""
    return {"name": "tensor groups cut by the WAN",
            "model": {"layers": 16, "hidden": 4096, "heads": 32, "vocab": 32000, "seq_len": 1024},
            "training": {"global_batch": 12, "micro_batch": 1}, "hardware": {"gpu": "h100-sxm"},
            "cluster": {"nodes": 6, "gpus_per_node": 2, "datacenters": 3,
                        "scale_across": {"bandwidth_Gbps": 400, "latency_ms": 0, "topology": "mesh",
                                         "links": [{"a": slow[0], "b": slow[1], "bandwidth_Gbps": 1}]}},
            "parallelism": {"tp": 2, "pp": 2, "dp": 3, "zero": 1, "schedule": "1f1b",
                            "order": "dp-tp-cp-ep-pp"}}


@pytest.mark.parametrize("slow", [(0, 1), (1, 2)])
def test_a_stage_whose_first_group_stays_home_is_priced_on_the_groups_that_cross(slow):
    """Found by a re-check hunt: stage 0's first tensor group sits inside datacenter 0, so its
    all-reduces were priced (and counted) with no WAN, while the stage's other groups cross the
    1 Gb/s link 0-1: 0.50 s, against 38.41 s for the mirror image (link 1-2 under stage 1).  Now
    both read 38.19 s of exposed tp; the iterations differ by the first and last stages' own work."""
    sc = from_dict(_cut(slow))
    sim = simulate(sc)
    assert sim.breakdown_s["tp"] == pytest.approx(38.19, abs=0.01)
    assert sim.iteration_time_s == pytest.approx(38.244 if slow == (0, 1) else 38.435, abs=1e-3)
    assert estimate_many([sc]).iteration_time_s[0] == pytest.approx(sim.iteration_time_s, rel=1e-9)


def test_a_sweep_over_the_wan_rate_does_not_depend_on_its_order():
    """Found by a re-check hunt: which tensor group is slowest depends on the default WAN rate
    beside a link that overrides it (link 2-3 at 200 Gb/s: the slowest at a 400 Gb/s default, not
    at 100), and the members were memoised without that rate, so a row read the group chosen for
    the row before it (0.3287 s where alone it reads 0.3713 s)."""
    def raw(bw: float) -> dict:
        r = _raw("1f1b", slow=False, bandwidth=bw)
        r["cluster"]["scale_across"]["links"] = [{"a": 2, "b": 3, "bandwidth_Gbps": 200}]
        r["parallelism"] = {"tp": 2, "pp": 1, "dp": 4, "zero": 1, "schedule": "1f1b",
                            "order": "tp-cp-ep-dp-pp"}
        return r

    fast, slow = from_dict(raw(400)), from_dict(raw(100))
    assert Network(fast).members("tp", 0).tolist() == [2, 3]
    assert Network(slow).members("tp", 0).tolist() == [0, 1]
    one = estimate_many([slow, fast]).iteration_time_s
    other = estimate_many([fast, slow]).iteration_time_s
    assert (one[1], one[0]) == (other[0], other[1])
    assert other[0] == pytest.approx(0.371289, abs=1e-6) and other[1] == pytest.approx(0.979013, abs=1e-6)
    assert simulate(slow).iteration_time_s == pytest.approx(0.979013, abs=1e-6)
    assert simulate(fast).iteration_time_s == pytest.approx(0.371289, abs=1e-6)


def test_on_a_uniform_wan_the_slowest_group_is_the_same_at_any_latency():
    """A hub of eight one-GPU datacenters, tp 2 and dp 2 on stage 0: tensor group {0, 1} takes one
    link from the hub, {2, 3} two through it, at the same share.  The members are memoised without
    the WAN's rates where no link is overridden, so the choice must not depend on them: the longer
    route is taken at 0 ms too (most links on a hop), and a sweep over the latency gives each row
    its own figure in either order."""
    def raw(latency: float) -> dict:
        r = _raw("1f1b", slow=False, bandwidth=100)
        r["cluster"]["scale_across"].update(topology="hub", latency_ms=latency)
        r["parallelism"] = {"tp": 2, "pp": 2, "dp": 2, "zero": 1, "schedule": "1f1b",
                            "order": "tp-cp-ep-dp-pp"}
        return r

    zero, five = from_dict(raw(0)), from_dict(raw(5))
    assert Network(zero).members("tp", 0).tolist() == [2, 3]
    assert Network(five).members("tp", 0).tolist() == [2, 3]
    one = estimate_many([zero, five]).iteration_time_s
    other = estimate_many([five, zero]).iteration_time_s
    assert (one[0], one[1]) == (other[1], other[0])
    assert simulate(five).iteration_time_s == pytest.approx(float(one[1]), rel=1e-12)
    assert one[1] > one[0]
