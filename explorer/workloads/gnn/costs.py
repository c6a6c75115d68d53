"""What one GPU computes, keeps and sends for each GraphSAGE layer per pipeline unit (a mini-batch
of seed nodes, or one partition's full-graph pass): the :class:`~explorer.workloads.spec.LayerCost`
every workload fills, each GNN layer a layer kind of its own (their sizes differ hop by hop).

GraphSAGE with the mean aggregator (Hamilton et al., NeurIPS 2017, Eq. 1; DGL's ``SAGEConv``):
``h_v' = W_self h_v + W_neigh mean_{u in N(v)} h_u + b``.
- Aggregation is a sparse-dense product (DGL's g-SpMM ``copy_u``/``mean``): it reads one source row
  per edge and its int64 column index and writes one row per destination — HBM-bound element-wise
  traffic, no GEMM FLOPs.  DGL projects before aggregating when the input is wider than the output
  (``SAGEConv``: ``lin_before_mp = in_feats > out_feats``): the neighbour GEMM then runs on the
  source rows and the aggregation at the output width.
- Two dense GEMMs (self, neighbour): rows x in x out each (explorer/workloads/timing.GemmTimer).
- Hidden layers end in ReLU and dropout (DGL's GraphSAGE example: dropout 0.5): read + write each,
  and dropout's one-byte mask; the last layer feeds a softmax cross-entropy over the classes (fp32
  logits: write, max/sum read, read).
- Backward: dgrad and wgrad GEMMs, and the aggregation's transpose (one gradient row per edge),
  element-wise traffic twice the forward's (timing.BACKWARD_STREAM_FACTOR); the first layer computes
  no input gradient (input features are not learned): no dgrad GEMMs, and no aggregation transpose
  unless the projection runs first (then W_neigh's weight gradient needs it).
- Activations kept for the backward: each layer's source rows (the GEMMs' saved input), the
  aggregated rows, and the output (ReLU) rows with the dropout mask.
Sizes (destinations, sources, edges per layer): explorer/workloads/gnn/sampling.py.
"""
from __future__ import annotations

from dataclasses import dataclass

from ...config import Scenario
from ...config.gnn import Gnn
from ...physics.hardware import BYTES_PER_ELEMENT
from ...physics.work import ZERO_WORK, Gemm, Work
from ..spec import EdgeCost, LayerCost
from ..timing import BACKWARD_STREAM_FACTOR, GemmTimer
from . import sampling

INDEX_BYTES = 8          # int64 column index per edge (DGL/PyG CSR)
RELU_PASSES = 2          # read + write
DROPOUT_PASSES = 2       # read + write, plus a one-byte mask
MASK_BYTES = 1
LOSS_PASSES = 3          # fp32 logits: write, max/sum read, read
FP32 = 4


@dataclass(frozen=True)
class Block:
    """One GraphSAGE layer's graph on one GPU per unit: destination rows, source rows (the
    destinations included), edges, and its widths in and out."""

    dst: float
    src: float
    edges: float
    d_in: int
    d_out: int


def widths(g: Gnn) -> list[tuple[int, int]]:
    """(in, out) width of every layer, input layer first: features -> hidden ... -> classes."""
    dims = [g.features] + [g.hidden] * (g.layers - 1) + [g.classes]
    return list(zip(dims[:-1], dims[1:], strict=True))


def blocks(g: Gnn, seeds: float) -> list[Block]:
    """Every layer's block, input layer first.  Mini-batch: layer i aggregates hop L-i's frontier
    into hop L-1-i's (sampling.frontiers); full graph: the partition's nodes from themselves and
    their halo over the partition's in-edges."""
    w = widths(g)
    if g.mode == "fullgraph":
        n, e, h = sampling.partition_nodes(g), sampling.partition_edges(g), sampling.halo_nodes(g)
        return [Block(n, n + h, e, a, b) for a, b in w]
    s, hop_edges = sampling.frontiers(g, seeds), sampling.sampled_edges(g, seeds)
    L = g.layers
    return [Block(s[L - 1 - i], s[L - i], hop_edges[L - 1 - i], a, b) for i, (a, b) in enumerate(w)]


def layer_cost(sc: Scenario, timer: GemmTimer, blk: Block, first: bool, last: bool) -> LayerCost:
    """One layer's forward, backward, parameters and kept activations (module docstring)."""
    g = sc.model.gnn
    assert g is not None
    e = BYTES_PER_ELEMENT[sc.training.dtype]
    e_in = g.feature_bytes if first else e
    before = blk.d_in > blk.d_out                       # DGL SAGEConv lin_before_mp
    agg_w = blk.d_out if before else blk.d_in
    agg_e = e if before else e_in
    gemms = [Gemm(blk.dst, blk.d_out, blk.d_in, fp8=False),
             Gemm(blk.src if before else blk.dst, blk.d_out, blk.d_in, fp8=False)]
    fwd, dgrad, wgrad, _, _ = timer.passes(gemms)
    agg = blk.edges * (agg_w * agg_e + INDEX_BYTES) + blk.dst * agg_w * agg_e
    stream = agg
    kept = (blk.src * blk.d_in * e_in + blk.dst * agg_w * agg_e)
    if not last:
        out = blk.dst * blk.d_out
        stream += (RELU_PASSES + DROPOUT_PASSES) * out * e + out * MASK_BYTES
        kept += out * (e + MASK_BYTES)
    if first:
        # No gradient reaches the input features: no dgrad GEMMs.  The aggregation's transpose is
        # still run where the projection comes first (its output gradient, summed back onto the
        # projected source rows, is what W_neigh's weight gradient reads), else it is not either.
        bwd_in = Work(0.0, 0.0, BACKWARD_STREAM_FACTOR * (stream if before else stream - agg))
    else:
        bwd_in = dgrad + Work(0.0, 0.0, BACKWARD_STREAM_FACTOR * stream)
    return LayerCost(
        fwd=fwd + Work(0.0, 0.0, stream), bwd_input=bwd_in, bwd_weight=wgrad,
        recompute=ZERO_WORK, attn_core_fwd=ZERO_WORK, expert_fwd=ZERO_WORK,
        params=float(2 * blk.d_in * blk.d_out + blk.d_out), expert_params=0.0, act_bytes=kept,
        tp_fwd=(), tp_bwd=(), tp_recompute=(), ep_fwd=(), ep_bwd=(), cp_kv_bytes=0.0)


def seeds(sc: Scenario) -> float:
    """Seed nodes of one unit on one GPU: the micro-batch (mini-batch mode); a full-graph unit is
    the GPU's whole partition, whose training nodes are train_nodes / p."""
    g = sc.model.gnn
    assert g is not None
    if g.mode == "fullgraph":
        return g.train_nodes / (g.partitions or 1)
    return float(sc.training.micro_batch)


def loss_cost(sc: Scenario) -> EdgeCost:
    """After the last layer: the fp32 softmax cross-entropy over the seeds' classes; keeps the
    fp32 logits."""
    g = sc.model.gnn
    assert g is not None
    b = seeds(sc)
    loss = LOSS_PASSES * b * g.classes * FP32
    return EdgeCost(Work(0.0, 0.0, loss), Work(0.0, 0.0, loss), ZERO_WORK, 0.0, b * g.classes * FP32)


def input_cost(stall_s: float) -> EdgeCost:
    """Before the first layer: the seconds the GPU waits for its mini-batch from the host (the CPU
    sampler and the host-to-GPU copy beyond what pipelining hides, loader.stall_s) — no FLOPs, no
    HBM traffic (the input features' remote fetch is the first layer's ``gnn`` edge)."""
    return EdgeCost(Work(0.0, stall_s, 0.0), ZERO_WORK, ZERO_WORK, 0.0, 0.0)
