"""Where a recommendation model's embedding tables live and what one GPU looks up, holds and
exchanges per micro-batch, for each TorchRec sharding type (Ivchenko et al., "TorchRec: a PyTorch
Domain Library for Recommendation Systems", RecSys 2022, Sec. 3.2; torchrec/distributed/types.py
ShardingType).  ``n`` GPUs (the data-parallel group: every replica holds a part of the tables and
its own samples), ``b`` samples per GPU per micro-batch, so each lookup step serves ``n b``.

- ``table_wise``: each table whole on one GPU; tables are placed greedily, the heaviest pooling
  first on the least loaded GPU (the longest-processing-time rule, Graham 1969), so the busiest
  GPU's lookups are what the step waits for.  Output dist: an all-to-all of pooled embeddings.
- ``column_wise``: every table cut into n column shards of d/n: every GPU looks up every table's
  ids for its d/n columns (balanced).  Output dist: an all-to-all of the pooled shards.
- ``row_wise``: every table cut into n row blocks; ids are bucketised to their row's owner and
  each GPU pools what it holds for all n b samples: partial sums, reduced by a reduce-scatter
  (TorchRec's RwPooledEmbeddingDist), gradients all-gathered back.
- ``table_row_wise``: each table whole on one node (placed as table-wise places them on GPUs, over
  the nodes), cut into row blocks over that node's ``local`` GPUs (TorchRec's TwRw sharding, built
  for multi-node jobs: the row-wise exchange stays on NVLink).  Output dist (TorchRec's
  TwRwPooledEmbeddingDist): a reduce-scatter of the node's partial sums inside the node, then an
  all-to-all of the pooled embeddings between the nodes, one GPU per node at each place; gradients
  back the other way (all-to-all, then an all-gather in the node).
- ``data_parallel``: the table replicated; lookups local, its gradient all-reduced like a dense
  layer's (TorchRec's DpPooledEmbeddingSharding), no exchange.
Tables of at most ``dp_max_rows`` rows are data parallel whatever the plan (HugeCTR's and
TorchRec's planners replicate small tables: their all-reduce is cheaper than an exchange).

Per GPU and micro-batch (nccl-tests buffer sizes): the forward exchange of pooled embeddings is
``b x tables x d x bytes`` for an all-to-all (the issue's closed form; bus bytes x (n-1)/n), the
reduce-scatter's input ``n b x tables x d x bytes``; table-row-wise's reduce-scatter in the node
``n b x (tables / N) x d x bytes`` (the node's share of the tables, N = n / local nodes) and its
all-to-all between nodes ``b x tables x d x bytes`` over N ranks; the backward sends their gradients the same
way; the input dist sends each sample's ids to their tables' owners: ``b x sum(pooling) x 8``
(int64 ids, TorchRec's KJTAllToAll), n times that under column-wise sharding, whose every GPU
needs every id.  An uneven table-wise split sends more from the busiest
GPU; the exchange is priced balanced (the issue's closed form).
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass

from ...config.dlrm import Dlrm

ID_BYTES = 8               # int64 ids (TorchRec KeyedJaggedTensor values)
ROWWISE_STATE_BYTES = 4    # row-wise Adagrad: one fp32 accumulator per row (FBGEMM momentum1)


@dataclass(frozen=True)
class Plan:
    """What one GPU holds, looks up and exchanges (per sample of the lookup step, per micro-batch
    sample of its own); see the module docstring."""

    sharded_tables: int          # tables exchanged (not data parallel)
    ids_per_sample: float        # sum of the sharded tables' pooling factors (input dist)
    lookups_per_step_sample: float   # rows (of width ``lookup_dim``) this GPU gathers per sample of
    lookup_dim: float                # the n b samples of a step, on the busiest GPU
    replicated_lookups: float    # rows gathered per own sample from replicated tables (width d)
    held_rows: float             # rows of the sharded tables held by the most loaded GPU
    held_dim: float              # ... each of this width
    replicated_params: float     # elements of the replicated tables (dense: all-reduced)
    op: str                      # the output dist's collective
    exchange_per_sample: float   # elements of pooled embeddings exchanged per own sample (b units)
    replicated_tables: int = 0
    local: int = 1               # table-row-wise: GPUs per node a table's rows are cut over
    id_owners: int = 1           # GPUs each id is sent to: column-wise, every column shard's

    def exchange_bytes(self, b: int, n: int, e: int) -> float:
        """nccl-tests buffer of one forward output dist (or backward gradient dist) per GPU; for
        table-row-wise, of its all-to-all between the nodes (:meth:`node_bytes`: the step inside)."""
        if self.sharded_tables == 0 or n <= 1:
            return 0.0
        per = self.exchange_per_sample * e
        return b * n * per if self.op == "reduce-scatter" else b * per

    def node_bytes(self, b: int, n: int, e: int) -> float:
        """Table-row-wise: the reduce-scatter's input inside a node, the node's partial sums for all
        n b samples of its 1/N of the tables (0 for the other plans or one GPU per node)."""
        if self.op != "twrw" or self.sharded_tables == 0 or self.local <= 1:
            return 0.0
        return b * n * self.exchange_per_sample / (n // self.local) * e

    def ids_bytes(self, b: int, n: int) -> float:
        """nccl-tests buffer of one input dist (ids to their tables' owners) per GPU: ``b x
        sum(pooling) x 8`` when each id has one owner; column-wise every GPU holds a shard of every
        table and needs every sample's ids (TorchRec's CwPooledEmbeddingSharding sends a table's
        features to each of its shards' ranks), so each GPU sends its ids to all n - 1 others: the
        buffer is n times larger (bus bytes = buffer x (n-1)/n)."""
        if not self.sharded_tables or n <= 1:
            return 0.0
        return b * self.ids_per_sample * ID_BYTES * self.id_owners


def _table_wise_loads(d: Dlrm, tables: list[int], n: int) -> tuple[float, float]:
    """(pooling, rows) of the busiest GPU when ``tables`` are placed whole, heaviest pooling first
    on the GPU with the least pooling so far (ties: fewer rows, lower index)."""
    heap = [(0.0, 0.0, g) for g in range(n)]
    order = sorted(tables, key=lambda i: (-d.table_pooling(i), -d.table_rows(i), i))
    for i in order:
        pool, rows, g = heapq.heappop(heap)
        heapq.heappush(heap, (pool + d.table_pooling(i), rows + d.table_rows(i), g))
    return max(p for p, _, _ in heap), max(r for _, r, _ in heap)


def plan(d: Dlrm, n: int, local: int = 1) -> Plan:
    """The sharding of ``d``'s tables over ``n`` GPUs, ``local`` of them per node (module docstring;
    only table-row-wise reads it)."""
    everything = list(range(d.tables))
    if d.sharding == "data_parallel" or n <= 1:
        sharded: list[int] = []
    else:
        sharded = [i for i in everything if d.table_rows(i) > d.dp_max_rows]
    placed = set(sharded)           # once: rebuilt per table it made 100,000 tables quadratic
    replicated = [i for i in everything if i not in placed]
    pool = float(sum(d.table_pooling(i) for i in sharded))
    rows = float(sum(d.table_rows(i) for i in sharded))
    rep_lookups = float(sum(d.table_pooling(i) for i in replicated))
    rep_params = float(sum(d.table_rows(i) for i in replicated)) * d.dim
    t = len(sharded)
    if d.sharding == "table_wise" and sharded:
        busy_pool, busy_rows = _table_wise_loads(d, sharded, n)
        return Plan(t, pool, busy_pool, d.dim, rep_lookups, busy_rows, d.dim, rep_params, "all-to-all",
                    t * d.dim, len(replicated))
    if d.sharding == "column_wise" and sharded:
        return Plan(t, pool, pool, d.dim / n, rep_lookups, rows, d.dim / n, rep_params, "all-to-all",
                    t * d.dim, len(replicated), id_owners=n)
    if d.sharding == "table_row_wise" and sharded:
        local = max(1, min(local, n))
        busy_pool, busy_rows = _table_wise_loads(d, sharded, n // local)
        return Plan(t, pool, busy_pool / local, d.dim, rep_lookups, busy_rows / local, d.dim, rep_params,
                    "twrw", t * d.dim, len(replicated), local)
    if d.sharding == "row_wise" and sharded:
        return Plan(t, pool, pool / n, d.dim, rep_lookups, rows / n, d.dim, rep_params, "reduce-scatter",
                    t * d.dim, len(replicated))
    return Plan(0, 0.0, 0.0, d.dim, rep_lookups, 0.0, d.dim, rep_params, "all-to-all", 0.0, len(replicated))
