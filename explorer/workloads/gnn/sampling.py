"""Closed forms of a GNN step's graph sizes: how many nodes and edges each GraphSAGE layer touches
on one GPU, and how many of them are another partition's (what the ``gnn`` dimension moves).

Mini-batch training with neighbour sampling (Hamilton et al., GraphSAGE, NeurIPS 2017, Alg. 2;
DistDGL, Zheng et al. 2020, arXiv 2010.05337, Sec. 3-4):

- A node samples ``min(fanout, average degree)`` neighbours per hop: a node with fewer neighbours
  than the fan-out takes them all (DGL's ``sample_neighbors`` / PyG's ``NeighborLoader`` sample
  without replacement).  The graph's average degree stands for every node's (a power-law graph's
  many low-degree nodes take fewer: an upper bound).
- The frontier after a hop: the nodes it started from (a block's destination nodes are also its
  sources, DGL's ``to_block``) plus the distinct new ones among its ``draws = S x f`` sampled
  neighbours.  Treating each draw as uniform over the N graph nodes, the expected number of
  distinct nodes hit is the occupancy problem's N (1 - (1 - 1/N)^draws) ~= N (1 - exp(-draws / N))
  (Feller, "An Introduction to Probability Theory and Its Applications", Vol. I, 3rd ed., 1968,
  Sec. II.11 / IV.2); only the N - S nodes outside the frontier are new:
  ``S' = S + (N - S) (1 - exp(-S f / N))`` — linear growth S (1 + f) while the frontier is small,
  capped by the graph.
- The remote feature fetch (DistDGL Sec. 4.2, "KVStore"): the input frontier's features, less the
  share the GPU's own partition holds (``local_share``; random partitioning: 1/p) and the share a
  feature cache serves (``cache_hit``).

Full-graph training on p partitions (CAGNET, Tripathy et al. SC20; PipeGCN, Wan et al. ICLR 2022,
Sec. 3): each GPU holds N/p nodes and their 2E/p in-edges and, at every layer, receives the
layer-input rows of its *boundary* (halo) nodes — other partitions' nodes adjacent to its own — in
forward and sends their gradients back in backward.  A random partitioning's expected halo: a node
of another partition is a halo node when at least one of its d neighbours lies in this partition,
each with probability 1/p: ``H = N (1 - 1/p) (1 - (1 - 1/p)^d)``.  METIS partitions have far
fewer (BNS-GCN, Wan et al. MLSys 2022, Table 1: the boundary share per partition); give
``model.gnn.halo_nodes`` then.
"""
from __future__ import annotations

import math

from ...config.gnn import Gnn


def effective_fanouts(g: Gnn) -> tuple[float, ...]:
    """Neighbours sampled per node, hop by hop from the seeds: each fan-out capped by the average
    degree (a node with fewer neighbours takes them all)."""
    d = g.average_degree
    return tuple(min(float(f), d) for f in g.fanouts)


def frontiers(g: Gnn, seeds: float) -> tuple[float, ...]:
    """Expected distinct nodes within h sampled hops of ``seeds`` seed nodes, h = 0..layers
    (module docstring: S' = S + (N - S)(1 - exp(-S f / N)))."""
    n = float(g.nodes)
    out = [min(float(seeds), n)]
    for f in effective_fanouts(g):
        s = out[-1]
        out.append(s + (n - s) * -math.expm1(-s * f / n))
    return tuple(out)


def sampled_edges(g: Gnn, seeds: float) -> tuple[float, ...]:
    """Sampled edges of each hop's block (destinations x effective fan-out), from the seeds out."""
    s = frontiers(g, seeds)
    return tuple(s[h] * f for h, f in enumerate(effective_fanouts(g)))


def local_share(g: Gnn) -> float:
    """Share of sampled nodes the GPU's own partition holds: model.gnn.local_share, else 1/p
    (random partitioning: every node is local with probability 1/p)."""
    if g.local_share is not None:
        return g.local_share
    return 1.0 / (g.partitions or 1)


def fetched_nodes(g: Gnn, seeds: float) -> float:
    """Input-frontier nodes whose features come from another partition per mini-batch:
    S_L x (1 - local share) x (1 - cache hit rate) (DistDGL Sec. 4.2)."""
    return frontiers(g, seeds)[-1] * (1.0 - local_share(g)) * (1.0 - g.cache_hit)


def fetch_bytes(g: Gnn, seeds: float) -> float:
    """Bytes of remote input features one GPU receives per mini-batch:
    fetched nodes x feature width x bytes per stored feature."""
    return fetched_nodes(g, seeds) * g.features * g.feature_bytes


def partition_nodes(g: Gnn) -> float:
    """Nodes one partition holds (N / p)."""
    return g.nodes / (g.partitions or 1)


def partition_edges(g: Gnn) -> float:
    """In-edges of one partition's nodes (each edge used both ways: 2E / p)."""
    return 2.0 * g.edges / (g.partitions or 1)


def halo_nodes(g: Gnn) -> float:
    """Boundary nodes of other partitions one partition reads per layer: model.gnn.halo_nodes, else
    a random partitioning's expected N (1 - 1/p)(1 - (1 - 1/p)^d) (module docstring); 0 on one
    partition."""
    p = g.partitions or 1
    if p == 1:
        return 0.0
    if g.halo_nodes:
        return float(g.halo_nodes)
    q = 1.0 - 1.0 / p
    return g.nodes * q * (1.0 - q ** g.average_degree)


def halo_bytes(g: Gnn, width: int, element_bytes: int) -> float:
    """Bytes one partition receives per layer and pass: halo nodes x layer-input width x bytes."""
    return halo_nodes(g) * width * element_bytes
