"""What one GPU computes, keeps and sends for each layer of a DLRM / DCNv2 model, one micro-batch
(``b`` samples per GPU) at a time: the :class:`~explorer.workloads.spec.LayerCost` every workload
fills, in this order — the embedding layer (model parallel), the bottom MLP, the interaction (cross
layers or dot products) and the top MLP (all data parallel: their gradients are the dp buckets).

- Embedding layer (sharding.py says what this GPU looks up and holds; table-row-wise cuts a node's
  tables over the GPUs of its NVLink domain, :func:`local_gpus`).  Forward: FBGEMM's
  table-batched embedding gathers each looked-up row (d x table bytes from HBM, a ``hot_share`` of
  them served from cache instead) and writes the pooled sums (Khudia et al., "FBGEMM", arXiv
  2101.05615; Mudigere et al., ISCA 2022, Sec. 4.1: the lookups are memory-bandwidth bound).
  Backward with the fused row-wise Adagrad (FBGEMM ``exact_rowwise_adagrad``): read each id's
  pooled gradient, then read and write every distinct row and its one-fp32 accumulator (the hot
  ids fold into few rows).  Communication: the input dist (ids), the forward output dist (pooled
  embeddings) and the backward gradient dist, as generic edges on ``emb``
  (explorer/taskgraph/edges.py); the ids and pooled embeddings overlap compute when
  ``model.dlrm.pipeline`` (TorchRec's train pipeline), the gradients block the backward.
  Held: the table shards and their accumulators (LayerCost.held_bytes), never all-reduced.
- MLP layers: a GEMM (b x out x in) with bias and ReLU (the top MLP's last layer is the logit, no
  ReLU); backward as every family (explorer/workloads/timing.GemmTimer).  Kept: the input and the
  ReLU output.
- DCNv2 low-rank cross layer (Wang et al., "DCN V2", WWW 2021, Eq. 1 with the low-rank U V^T of
  Sec. 3.3; torchrec.modules.crossnet.LowRankCrossNet): x_{l+1} = x_0 * (U (V^T x_l) + bias) + x_l
  over the width W = (tables + 1) x d: two GEMMs (b x r x W, b x W x r), then the element-wise
  product and sums (read x_0, the GEMM output and x_l, write x_{l+1}).  Kept: x_l, V^T x_l, and
  the GEMM output.
- Dot interaction (Naumov et al., "DLRM", arXiv 1906.00091, Sec. 2.1.3): the b batched
  (tables + 1) x d Gram matrices; the top MLP takes d + (tables + 1) tables / 2 inputs.
"""
from __future__ import annotations

from ...config import Scenario
from ...config.dlrm import Dlrm
from ...config.domains import effective_domain
from ...physics.hardware import BYTES_PER_ELEMENT
from ...physics.work import ZERO_WORK, Gemm, Work
from ..spec import Edge, EdgeCost, LayerCost
from ..timing import BACKWARD_STREAM_FACTOR, GemmTimer
from . import sharding

BIAS_RELU_PASSES = 4      # bias add and in-place ReLU: read + write each
CROSS_PASSES = 4          # x_0 * (y + bias) + x_l: read x_0, y, x_l, write x_{l+1}
LOSS_PASSES = 3           # fp32 logit: sigmoid and binary cross-entropy, read/write
STATE_BYTES = sharding.ROWWISE_STATE_BYTES
SECTOR_BYTES = 32         # the GPU's DRAM access granularity


def exchange_dtype(sc: Scenario) -> str:
    """The dtype of the exchanged embeddings and of the MLPs' activations: the training dtype
    (fp8 training keeps them in bf16)."""
    return "bf16" if sc.training.dtype == "fp8" else sc.training.dtype


def _mlp_layer(timer: GemmTimer, b: int, width_in: int, width_out: int, e: int, relu: bool) -> LayerCost:
    fwd, dgrad, wgrad, _, _ = timer.passes([Gemm(b, width_out, width_in, fp8=False)])
    stream = (BIAS_RELU_PASSES if relu else 2) * b * width_out * e
    kept = b * (width_in + (width_out if relu else 0)) * e
    return LayerCost(fwd + Work(0.0, 0.0, stream), dgrad + Work(0.0, 0.0, BACKWARD_STREAM_FACTOR * stream),
                     wgrad, ZERO_WORK, ZERO_WORK, ZERO_WORK, float(width_in * width_out + width_out), 0.0,
                     float(kept), (), (), (), (), (), 0.0, out_bytes=float(b * width_out * e))


def _cross_layer(timer: GemmTimer, b: int, width: int, rank: int, e: int) -> LayerCost:
    fwd, dgrad, wgrad, _, _ = timer.passes([Gemm(b, rank, width, fp8=False), Gemm(b, width, rank, fp8=False)])
    stream = CROSS_PASSES * b * width * e
    kept = b * (2 * width + rank) * e
    return LayerCost(fwd + Work(0.0, 0.0, stream), dgrad + Work(0.0, 0.0, BACKWARD_STREAM_FACTOR * stream),
                     wgrad, ZERO_WORK, ZERO_WORK, ZERO_WORK, float(2 * width * rank + width), 0.0,
                     float(kept), (), (), (), (), (), 0.0, out_bytes=float(b * width * e))


def _dot_layer(timer: GemmTimer, b: int, d: Dlrm, e: int) -> LayerCost:
    f = d.tables + 1
    fwd, dgrad, _, _, _ = timer.passes([Gemm(f, f, d.dim, count=b, fp8=False)])
    out = d.dim + f * d.tables // 2
    stream = b * (f * d.dim + out) * e
    return LayerCost(fwd + Work(0.0, 0.0, stream), dgrad + dgrad + Work(0.0, 0.0, 2 * stream), ZERO_WORK,
                     ZERO_WORK, ZERO_WORK, ZERO_WORK, 0.0, 0.0, float(b * f * d.dim * e),
                     (), (), (), (), (), 0.0, out_bytes=float(b * out * e))


def local_gpus(sc: Scenario, n: int) -> int:
    """The data-parallel GPUs of one NVLink domain (a node), where table-row-wise cuts a table's
    rows: every GPU is a data-parallel rank (tp = cp = ep = pp = 1), so the domain's GPUs."""
    return max(1, min(n, effective_domain(sc.cluster)))


def _exchange_edges(p: sharding.Plan, d: Dlrm, b: int, n: int, e: int) -> tuple[Edge, ...]:
    """The input dist (ids), the forward output dist and the backward gradient dist (module
    docstring): one call each on ``emb``, or table-row-wise's two steps on ``emb_node`` (in the
    node) and ``emb_across`` (between nodes)."""
    size = p.exchange_bytes(b, n, e)
    if size <= 0:
        return ()
    ids = Edge("emb", "fwd", "all-to-all", p.ids_bytes(b, n), d.pipeline, "sparse ids")
    if p.op != "twrw":
        return (ids, Edge("emb", "fwd", p.op, size, d.pipeline, "pooled embeddings"),
                Edge("emb", "bwd", "all-gather" if p.op == "reduce-scatter" else "all-to-all", size, False,
                     "embedding gradients"))
    node, nodes = p.node_bytes(b, n, e), n // p.local
    fwd: tuple[Edge, ...] = ((Edge("emb_node", "fwd", "reduce-scatter", node, d.pipeline,
                                   "pooled embeddings (node)"),) if node > 0 else ())
    bwd: tuple[Edge, ...] = ()
    if nodes > 1:
        fwd += (Edge("emb_across", "fwd", "all-to-all", size, d.pipeline, "pooled embeddings (nodes)"),)
        bwd = (Edge("emb_across", "bwd", "all-to-all", size, False, "embedding gradients (nodes)"),)
    if node > 0:
        bwd += (Edge("emb_node", "bwd", "all-gather", node, False, "embedding gradients (node)"),)
    return (ids, *fwd, *bwd)


def embedding_layer(sc: Scenario, d: Dlrm, n: int) -> LayerCost:
    """The sharded tables' lookups, held shards and exchange edges on ``emb`` (module docstring)."""
    p = sharding.plan(d, n, local_gpus(sc, n))
    b = sc.training.micro_batch
    e = BYTES_PER_ELEMENT[exchange_dtype(sc)]
    et = BYTES_PER_ELEMENT[d.table_dtype]
    cold = 1.0 - d.hot_share
    step = b * n                                   # samples one lookup step serves
    ids = step * p.lookups_per_step_sample + b * p.replicated_lookups
    # Bytes of one gathered (partial) row: HBM is read in 32-byte sectors (CUDA C++ Best Practices
    # Guide, "Coalesced Access to Global Memory"), so a narrow column shard costs a whole sector.
    row = max(p.lookup_dim * et, SECTOR_BYTES)
    # Pooled sums written: a row-wise shard pools every table for all n b samples (partial sums),
    # a table- or column-wise one its 1/n of the tables' (or columns') outputs; replicated tables
    # pool the GPU's own b samples.
    share = 1.0 if p.op == "reduce-scatter" else p.local / max(n, 1) if p.op == "twrw" else 1.0 / max(n, 1)
    pooled_out = step * p.exchange_per_sample * share + b * p.replicated_tables * d.dim
    fwd = Work(0.0, 0.0, ids * row * cold + pooled_out * e)
    # Backward: each id's pooled-gradient row read, each distinct row and accumulator read and written.
    bwd = Work(0.0, 0.0, ids * p.lookup_dim * e + 2 * ids * cold * (row + STATE_BYTES))
    edges = _exchange_edges(p, d, b, n, e)
    kept = step * p.lookups_per_step_sample * sharding.ID_BYTES + b * (d.tables * d.dim) * e
    return LayerCost(fwd, bwd, ZERO_WORK, ZERO_WORK, ZERO_WORK, ZERO_WORK, p.replicated_params, 0.0,
                     float(kept), (), (), (), (), (), 0.0, out_bytes=float(b * d.tables * d.dim * e),
                     edges=edges, held_bytes=p.held_rows * p.held_dim * et,
                     held_state_bytes=p.held_rows * STATE_BYTES)


def layer_costs(sc: Scenario, n: int) -> tuple[LayerCost, ...]:
    """Every layer's cost for one micro-batch on one GPU of a data-parallel group of ``n``."""
    d = sc.model.dlrm
    assert d is not None                           # this family is chosen by its dlrm section
    timer = GemmTimer(sc)
    e = BYTES_PER_ELEMENT[exchange_dtype(sc)]
    b = sc.training.micro_batch
    out = [embedding_layer(sc, d, n)]
    width = d.dense_features
    for w in d.bottom_mlp:
        out.append(_mlp_layer(timer, b, width, w, e, True))
        width = w
    if d.interaction == "dcn":
        width = (d.tables + 1) * d.dim
        out += [_cross_layer(timer, b, width, d.cross_rank, e) for _ in range(d.cross_layers)]
    else:
        out.append(_dot_layer(timer, b, d, e))
        width = d.dim + (d.tables + 1) * d.tables // 2
    for i, w in enumerate(d.top_mlp):
        out.append(_mlp_layer(timer, b, width, w, e, i < len(d.top_mlp) - 1))
        width = w
    return tuple(out)


def input_cost(sc: Scenario) -> EdgeCost:
    """Before the bottom MLP: the fp32 dense features cast to the compute dtype."""
    d = sc.model.dlrm
    assert d is not None
    b = sc.training.micro_batch
    e = BYTES_PER_ELEMENT[exchange_dtype(sc)]
    return EdgeCost(Work(0.0, 0.0, b * d.dense_features * (4 + e)), ZERO_WORK, ZERO_WORK, 0.0, 0.0)


def loss_cost(sc: Scenario) -> EdgeCost:
    """After the logit: the fp32 sigmoid binary cross-entropy; keeps the fp32 logits."""
    b = sc.training.micro_batch
    loss = LOSS_PASSES * b * 4
    return EdgeCost(Work(0.0, 0.0, loss), Work(0.0, 0.0, loss), ZERO_WORK, 0.0, b * 4.0)


def params(d: Dlrm) -> float:
    """Every trainable parameter: the tables, the MLPs and the interaction."""
    total = float(d.total_rows) * d.dim
    width = d.dense_features
    for w in d.bottom_mlp:
        total += width * w + w
        width = w
    if d.interaction == "dcn":
        width = (d.tables + 1) * d.dim
        total += d.cross_layers * (2 * width * d.cross_rank + width)
    else:
        width = d.dim + (d.tables + 1) * d.tables // 2
    for w in d.top_mlp:
        total += width * w + w
        width = w
    return total
