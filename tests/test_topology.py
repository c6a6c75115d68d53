"""The analytic tier shares against explicit routing on the networkx graph of the same cluster."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from explorer.network.placement import Placement
from explorer.network.topology import (
    SCALE_ACROSS_EFFICIENCY,
    SCALE_OUT_EFFICIENCY,
    SCALE_UP_EFFICIENCY,
    Fabric,
    build_graph,
    routed_ring_bandwidth,
)
from explorer.scenario import Cluster, ScaleAcross, ScaleOut, ScaleUp, from_dict

EFF = (SCALE_UP_EFFICIENCY, SCALE_OUT_EFFICIENCY, SCALE_OUT_EFFICIENCY, SCALE_ACROSS_EFFICIENCY)


def cluster(kind="fat-tree", o=1.0, nodes=16, dcs=1, radix=16, nics=4, gpn=4):
    return Cluster(gpus_per_node=gpn, nodes=nodes, datacenters=dcs,
                   scale_up=ScaleUp(bandwidth_GBps=300),
                   scale_out=ScaleOut(kind=kind, nic_Gbps=200, nics_per_node=nics, oversubscription=o,
                                      switch_radix=radix),
                   scale_across=ScaleAcross(bandwidth_Gbps=100))


def all_groups(n_gpus: int, size: int, stride: int) -> list[list[int]]:
    """Every group of a dimension with ``size`` members ``stride`` GPUs apart."""
    seen, out = set(), []
    for base in range(n_gpus):
        if base in seen:
            continue
        members = [base + k * stride for k in range(size)]
        if members[-1] >= n_gpus or any(m in seen for m in members):
            continue
        seen.update(members)
        out.append(members)
    return out


@pytest.mark.parametrize("kind,o,size,stride", [
    ("fat-tree", 1.0, 16, 4),      # one member per node, all nodes: NIC-bound
    ("fat-tree", 4.0, 4, 16),      # one member per leaf block: spine-bound, 4:1
    ("fat-tree", 2.0, 8, 8),       # two members per block
    ("rail-optimized", 4.0, 16, 4),
    ("fat-tree", 1.0, 4, 1),       # inside one node: NVSwitch-bound
])
def test_analytic_share_equals_explicit_routing(kind, o, size, stride):
    c = cluster(kind, o)
    fab = Fabric.for_cluster(c)
    groups = all_groups(c.gpus, size, stride)
    assert len(groups) * size == c.gpus            # every GPU communicates at once
    sh = fab.shape(np.array(groups[0]))
    # The ring's bottleneck share, efficiency removed, against hop-by-hop routing.
    analytic = min(sh.shares[b] / EFF[b] for b in range(4) if b == 0 or sh.spans(b))
    assert routed_ring_bandwidth(c, groups) == pytest.approx(analytic, rel=1e-9)


def test_wan_share_equals_explicit_routing():
    c = cluster(nodes=8, dcs=2)
    groups = all_groups(c.gpus, 2, 16)               # each pair straddles the two datacenters
    sh = Fabric.for_cluster(c).shape(np.array(groups[0]))
    assert sh.spans(3)
    assert routed_ring_bandwidth(c, groups) == pytest.approx(sh.shares[3] / EFF[3], rel=1e-9)


def test_graph_has_every_tier_and_honours_oversubscription():
    c = cluster("fat-tree", 4.0, nodes=8, dcs=2)
    g = build_graph(c)
    kinds = {d["kind"] for _, d in g.nodes(data=True)}
    assert kinds == {"gpu", "nvswitch", "nic", "leaf", "spine", "dc"}
    assert sum(1 for _, d in g.nodes(data=True) if d["kind"] == "gpu") == 32
    up = [d["capacity_Bps"] for u, v, d in g.edges(data=True) if d["tier"] == "spine"]
    # A leaf block of 2 nodes x 4 NICs x 25 GB/s, uplinks a quarter of that.
    assert up and all(x == pytest.approx(2 * 4 * 25e9 / 4) for x in up)


def test_rail_optimized_has_one_leaf_per_rail_per_block():
    g = build_graph(cluster("rail-optimized", nodes=16))
    leaves = [n for n, d in g.nodes(data=True) if d["kind"] == "leaf"]
    assert len(leaves) == 4 * 2                      # 4 rails x 2 blocks of 8 nodes


def test_placement_order_sets_strides():
    sc = from_dict({"model": {"preset": "llama3-8b"}, "training": {"global_batch": 64},
                    "cluster": {"nodes": 16}, "parallelism": {"tp": 8, "pp": 4, "order": "tp-cp-pp-dp"}})
    pl = Placement.for_scenario(sc)
    assert pl.strides == {"tp": 1, "cp": 8, "pp": 8, "dp": 32}
    assert list(pl.members("dp", 0)) == [0, 32, 64, 96]
    assert list(pl.members("pp", 0)) == [0, 8, 16, 24]


@settings(max_examples=400, deadline=None, derandomize=True)
@given(st.integers(0, 2**31))
def test_progression_counts_equal_counting_every_member(seed):
    # members_per_domains counts an arithmetic progression of ids in closed form; it must count
    # what members_per_domain counts id by id, for any first id, step, size and domain, and other
    # groups (unsorted, repeated or irregular ids) go to the counting itself.
    from explorer.network.placement import members_per_domain, members_per_domains
    rng = np.random.default_rng(seed)
    n = int(rng.choice([1, 2, 3, 7, 64, 257, 3000]))
    step = int(rng.choice([1, 2, 3, 5, 8, 12, 64, 100]))
    members = int(rng.integers(0, 5000)) + step * np.arange(n, dtype=np.int64)
    shape = rng.random()
    if shape < 0.15:
        members = rng.permutation(members)
    elif shape < 0.25 and n > 2:
        members[n // 2] += 1                             # one id off the progression
    elif shape < 0.3:
        members[: max(1, n // 3)] = members[0]          # repeated ids
    domains = (1, *(int(d) for d in rng.choice([2, 3, 7, 8, 72, 256, 1000, 16384], size=3)))
    assert members_per_domains(members, domains) == tuple(members_per_domain(members, d) for d in domains)
