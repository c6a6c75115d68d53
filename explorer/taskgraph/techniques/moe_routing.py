"""Mixture-of-experts token routing over the expert-parallel group, as the dispatcher in force
moves the tokens (``communication.moe_dispatcher``, explorer/config/moe_dispatch.py).

- ``alltoall``: a pairwise all-to-all of tokens x top_k x hidden for dispatch and again for
  combine (GShard, Lepikhin et al. ICLR 2021; Megatron-Core's ``alltoall`` token dispatcher): each
  of a token's top_k copies crosses the fabric on its own (priced by network/collectives.py).
- ``deepep`` / ``hybridep`` (DeepSeek-V3 Technical Report, arXiv 2412.19437, Sec. 3.2.2; DeepEP's
  normal kernels; Hybrid-EP): each token crosses the fabric once per destination *node* — the
  distinct nodes among its top_k experts, at most ``moe.max_nodes`` when routing is node-limited
  (Sec. 2.1.2) — and is forwarded over the scale-up links once per destination *GPU*; the two hops
  are pipelined, so a pass takes the slower of the two, each at the rate these kernels measure
  (``RDMA_OVER_NCCL``, ``NVLINK_OVER_NCCL``).
- Imbalance (``moe.imbalance``): the busiest expert rank sets the pace (GShard's capacity factor
  and DeepSeek's balance loss exist to bound it): its expert GEMMs and its all-to-alls take
  imbalance x the mean.
"""
from __future__ import annotations

from dataclasses import replace
from functools import cache

from ...config import Scenario
from ...config.moe_dispatch import resolved_dispatcher
from ...network.collectives import CollectiveCost
from ...network.scale_up_wiring import scale_up_factor
from ...network.topology import BOUNDARY_NAMES, SCALE_OUT_EFFICIENCY, SCALE_UP_EFFICIENCY, GroupShape

# DeepEP's measured rates relative to what the network model gives NCCL on the same links
# (GroupShape.shares already hold NCCL's fraction: SCALE_OUT_EFFICIENCY of the NIC, SCALE_UP_EFFICIENCY
# of NVLink).  DeepEP V1 normal kernels on H800 (~50 GB/s CX7 400 Gb/s NIC, 200 GB/s NVLink per
# direction), DeepSeek-V3 pretraining setting, 24 SMs (deepseek-ai/DeepEP docs/legacy.md, table
# "Normal kernels with NVLink and RDMA forwarding"):
# - RDMA: dispatch 58 GB/s at EP 32 and 51 GB/s at EP 64.  These are logical rates: the test counts
#   every (token, destination node) pair, its own node included (tests/test_internode.py,
#   ``num_rdma_token_sent``).  With 8 experts in 4 of the nodes, E[distinct nodes] = 4(1-(3/4)^8) = 3.60
#   of which the own node is 0.90 (EP 32: 1 of 4 nodes) or 0.45 (EP 64: chosen with probability 1/2):
#   58 x 2.70/3.60 = 43.5 and 51 x 3.15/3.60 = 44.6 GB/s actually cross the NIC, 0.88 of its 50 GB/s,
#   against NCCL's 0.94 (fabrics.yaml, ib-ndr): 0.94 of NCCL's rate.
# - NVLink: intranode dispatch 153 GB/s at EP 8, logical (the rank's own 1/8 included): 134 GB/s cross
#   NVLink, 0.67 of 200 GB/s, against NCCL's SCALE_UP_EFFICIENCY 0.77: 0.87 of NCCL's rate.
# Hybrid-EP measures alike (DeepEP issue #590, 2 x 8 B300: dispatch kernel 44.4 GB/s RDMA, 149 GB/s
# NVLink, BF16), so both hierarchical dispatchers share these factors and differ in SMs.
DEEPEP_RDMA_FRACTION = 0.88
DEEPEP_NVLINK_FRACTION = 134 / 200
RDMA_OVER_NCCL = DEEPEP_RDMA_FRACTION / SCALE_OUT_EFFICIENCY
NVLINK_OVER_NCCL = DEEPEP_NVLINK_FRACTION / SCALE_UP_EFFICIENCY


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


def hierarchical(sc: Scenario, sh: GroupShape) -> bool:
    """Whether the dispatcher in force sends tokens once per node (deepep, hybridep) and the EP
    group spans nodes (inside one node every dispatcher is one NVLink all-to-all)."""
    moe = sc.model.moe
    return (moe is not None and sh.spans(1)
            and resolved_dispatcher(sc.communication.moe_dispatcher, moe) != "alltoall")


def deduplicated_bytes(size: float, nodes: int, g1: int, top_k: int, max_nodes: int) -> tuple[float, float]:
    """(fabric, NVLink) bytes one GPU sends in one hierarchical pass of ``size`` bytes (its tokens x
    top_k x hidden): E[distinct remote nodes] copies of each token over the NIC, E[distinct other
    GPUs] copies over NVLink (the own node's directly, the others' forwarded by the GPU they land
    on).  Node-limited routing picks M nodes first, then the top_k experts among theirs
    (DeepSeek-V3 Sec. 2.1.2; DeepEP tests/test_internode.py draws them so), so the distinct nodes and
    GPUs are the occupancy of top_k draws over the M reachable nodes and their GPUs
    (:func:`expected_distinct_nodes`).  Routing is uniform, so by symmetry a remote node is
    (nodes-1)/nodes of the distinct ones and another GPU of the node (g1-1)/g1 of the distinct GPUs.

    >>> f, v = deduplicated_bytes(8.0, 8, 8, 8, 4)      # DeepSeek-V3: EP 64, top-8, 4 nodes
    >>> round(f, 3), round(v, 3)
    (3.15, 6.28)
    """
    one_copy = size / top_k
    reach = min(max_nodes, nodes) if max_nodes > 0 else nodes
    fabric = one_copy * expected_distinct_nodes(reach, top_k, top_k) * (nodes - 1) / nodes
    ranks = reach * g1
    nvlink = one_copy * expected_distinct_nodes(ranks, top_k, top_k) * (g1 - 1) / g1
    return fabric, nvlink


def hierarchical_pass(size: float, sh: GroupShape, top_k: int,
                      max_nodes: int) -> tuple[CollectiveCost, float]:
    """One DeepEP/Hybrid-EP dispatch (or combine) of ``size`` bytes (this GPU's tokens x top_k x
    hidden) over the EP group ``sh``, as a CollectiveCost (algorithm ``node-aware``), and its bus
    bytes.

    Fabric hop: :func:`deduplicated_bytes`' fabric bytes spread over the outer boundaries like a
    plain all-to-all of the nodes, at RDMA_OVER_NCCL of NCCL's rate; NVLink hop: its NVLink bytes at
    NVLINK_OVER_NCCL of NCCL's (with the scale-up wiring factor).  The hops are pipelined (DeepEP
    forwards chunks as they arrive): the slower one (the limiting boundary) sets the time.
    Latency: the concurrent sends of collectives._pairwise, one fabric round and g1-1 NVLink
    rounds per node pair."""
    g1 = sh.per_domain[1]
    nodes = sh.n // g1
    inter, intra = deduplicated_bytes(size, nodes, g1, top_k, max_nodes)
    up = scale_up_factor(replace(sh, n=g1), "all-to-all")
    outer = {b: sh.per_domain[b] * inter * (sh.n - sh.per_domain[b]) / (sh.n - g1)
             for b in range(1, len(sh.shares)) if sh.spans(b)}
    t_intra = intra / (sh.shares[0] * NVLINK_OVER_NCCL) * up
    lat = sh.latencies[sh.outer] + max(nodes - 2 + g1 - 1, 0) * sh.latencies[0]
    limit, worst = 0, t_intra
    for b, v in outer.items():
        t = v / (sh.shares[b] * RDMA_OVER_NCCL)
        if t > worst:
            limit, worst = b, t
    egress = (intra,) + tuple(outer.get(b, 0.0) for b in range(1, len(sh.shares)))
    cc = CollectiveCost("all-to-all", size, sh.n, "node-aware", worst + lat, lat,
                        BOUNDARY_NAMES[limit], egress)
    return cc, inter + intra


def dispatch_pass(sc: Scenario, size: float, sh: GroupShape) -> tuple[CollectiveCost, float] | None:
    """The hierarchical pass of ``size`` bytes when the dispatcher deduplicates per node and the
    group spans nodes; None when it is a plain all-to-all (priced by the network model)."""
    moe = sc.model.moe
    if moe is None or not hierarchical(sc, sh):
        return None
    return hierarchical_pass(size, sh, moe.top_k, moe.max_nodes)


def imbalance_extra_s(expert_gemm_s: float, load: float) -> float:
    """Extra seconds of each pass on the busiest expert rank, whose load is ``load`` x the mean:
    (load - 1) x the seconds of its routed-expert GEMMs at the mean load."""
    return (load - 1) * expert_gemm_s
