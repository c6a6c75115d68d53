"""Mixture-of-experts token routing over the expert-parallel group.

- Plain dispatch (``moe.max_nodes`` = 0): a pairwise all-to-all of tokens x top_k x hidden for
  dispatch and again for combine (GShard, Lepikhin et al. ICLR 2021; Megatron-Core's default
  ``alltoall`` token dispatcher): each of a token's top_k copies crosses the fabric on its own.
- Node-limited routing with node-aware dispatch (``moe.max_nodes`` = M > 0; DeepSeek-V3 Technical
  Report, 2024, Sec. 2.1.2 and 3.2.2): each token crosses the fabric once per destination node —
  the distinct nodes among its top_k experts, at most M — and is forwarded to its experts over the
  scale-up links; the two hops are pipelined, so a pass takes the slower of the two.
- Imbalance (``moe.imbalance``): the busiest expert rank sets the pace (GShard's capacity factor
  and DeepSeek's balance loss exist to bound it): its expert GEMMs and its all-to-alls take
  imbalance x the mean.
"""
from __future__ import annotations

from dataclasses import replace
from functools import cache

from ...network.collectives import CollectiveCost
from ...network.scale_up_wiring import scale_up_factor
from ...network.topology import BOUNDARY_NAMES, GroupShape


@cache
def expected_distinct_nodes(nodes: int, k: int, limit: int) -> float:
    """E[min(D, limit)], D the number of distinct nodes among ``k`` experts each on a uniformly
    random one of ``nodes`` nodes (balanced routing; drawn with replacement).  The distribution of
    D is the classical occupancy problem (Feller, An Introduction to Probability Theory, vol. 1,
    ch. II.11), computed draw by draw: a draw hits a new node with probability (nodes - j)/nodes.

    >>> round(expected_distinct_nodes(8, 8, 8), 3), expected_distinct_nodes(8, 8, 1)
    (5.251, 1.0)
    """
    top = min(k, nodes)
    prob = [1.0] + [0.0] * top          # prob[j]: j distinct nodes so far
    for _ in range(k):
        nxt = [0.0] * (top + 1)
        for j, pj in enumerate(prob):
            if pj:
                nxt[j] += pj * j / nodes
                if j < top:
                    nxt[j + 1] += pj * (nodes - j) / nodes
        prob = nxt
    return sum(min(j, limit) * pj for j, pj in enumerate(prob))


def node_limited(sh: GroupShape, max_nodes: int) -> bool:
    """Whether node-aware dispatch applies: a node limit is set and the EP group spans nodes."""
    return max_nodes > 0 and sh.spans(1)


def node_aware_pass(size: float, sh: GroupShape, top_k: int, max_nodes: int) -> tuple[CollectiveCost, float]:
    """One node-aware all-to-all of ``size`` bytes (this GPU's tokens x top_k x hidden) over the EP
    group ``sh``, as a CollectiveCost (algorithm ``node-aware``), and its bus bytes.

    Fabric hop: E[min(D, M)] copies of each token leave the node, ``inter`` bytes per GPU, spread
    over the outer boundaries like a plain all-to-all of the nodes; NVLink hop: an all-to-all among
    the g1 GPUs of a node (with the scale-up wiring factor).  The hops are pipelined: the slower
    one (the limiting boundary) sets the time.  Latency: the concurrent sends of
    collectives._pairwise, one fabric round and g1-1 NVLink rounds per node pair."""
    g1 = sh.per_domain[1]
    nodes = sh.n // g1
    distinct = expected_distinct_nodes(nodes, top_k, max_nodes)
    up = scale_up_factor(replace(sh, n=g1), "all-to-all")
    per_token_copy = size / top_k                    # this GPU's tokens, one copy each
    inter = per_token_copy * distinct * (nodes - 1) / nodes
    outer = {b: sh.per_domain[b] * inter * (sh.n - sh.per_domain[b]) / (sh.n - g1)
             for b in range(1, len(sh.shares)) if sh.spans(b)}
    t_inter = max(v / sh.shares[b] for b, v in outer.items())
    intra = size * (g1 - 1) / g1
    t_intra = intra / sh.shares[0] * up
    lat = sh.latencies[sh.outer] + max(nodes - 2 + g1 - 1, 0) * sh.latencies[0]
    limit, worst = 0, t_intra
    for b, v in outer.items():
        if v / sh.shares[b] > worst:
            limit, worst = b, v / sh.shares[b]
    egress = (intra,) + tuple(outer.get(b, 0.0) for b in range(1, len(sh.shares)))
    cc = CollectiveCost("all-to-all", size, sh.n, "node-aware", max(t_inter, t_intra) + lat, lat,
                        BOUNDARY_NAMES[limit], egress)
    return cc, inter + intra


def imbalance_extra_s(expert_gemm_s: float, load: float) -> float:
    """Extra seconds of each pass on the busiest expert rank, whose load is ``load`` x the mean:
    (load - 1) x the seconds of its routed-expert GEMMs at the mean load."""
    return (load - 1) * expert_gemm_s
