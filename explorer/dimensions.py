"""The communication dimensions: one frozen record per dimension, asked everywhere.

A *dimension* is a kind of communication group: tensor (tp), context (cp), expert (ep), pipeline
(pp) and data (dp) parallelism, and the expert-data-parallel groups (edp) that reduce the experts'
gradients and are reported with dp.  The breakdown's categories, the engine's streams and the
Gantt's lanes, the colours of both palettes, the advice a bar gets and the views that list
dimensions are all derived from :data:`DIMENSIONS` (explorer/vocabulary.py builds the shared
words from it), so nothing else keeps a list of dimensions.

API (what a workload or a view needs; everything else is derived):

``DIMENSIONS``             name -> :class:`Dimension`, in report order.  A workload that sends a new
                           kind of traffic (say a recommendation model's embedding all-to-all, "emb")
                           adds ONE entry here; its tasks then carry ``kind``/``stream``/parts named
                           after it and every breakdown, lane, colour and view picks it up.
``get(name)``              the record (ValueError naming the known dimensions otherwise).
``reported()``             the dimensions reported under their own name (breakdown categories,
                           byte counts, Gantt lanes), in order: tp, cp, ep, pp, dp.
``reported_as(name)``      the dimension whose category ``name``'s time and bytes count in (edp -> dp).
``blocking()``             the reported dimensions whose calls sit on the compute stream between a
                           layer's GEMMs (compute waits for them): tp, cp, ep.
``shown_in(view)``         the reported dimensions a view lists (one of :data:`VIEWS`).
``degree_label(name)``     the sidebar's label of its degree ("Tensor parallel (tp)").
``group_of(name)``         the dimension whose ranks form its communication group (emb -> dp).
"""
from __future__ import annotations

from dataclasses import dataclass

# The views that list dimensions: the iteration breakdown, the Gantt's lanes, bytes per tier
# (Topology tab), the tier that limits the most exposed dimension (Topology tab), the scaling
# curve's exposed seconds, the datacenter map's WAN crossings and "Explain this bar".
VIEWS = ("breakdown", "gantt", "traffic", "topology", "scaling", "datacenters", "explain")
EVERY_VIEW = frozenset(VIEWS)


@dataclass(frozen=True)
class Dimension:
    """One communication dimension.

    ``color`` is the app's (Tableau 10: distinguishable in print and on a projector) and
    ``present_color`` its presentation-mode counterpart (Okabe & Ito, "Color Universal Design",
    2008: distinguishable with the common colour-vision deficiencies).  ``band`` places its bars in
    an aggregated Gantt band: (offset from the band's centre, height); the blocking dimensions share
    the compute row, the overlapped ones get thin rows of their own above and below it.
    """

    name: str                     # key of every breakdown, byte count, lane and Gantt trace
    label: str                    # what a reader sees ("Tensor parallel")
    color: str
    present_color: str
    blocking: bool                # compute waits for its calls (they run on the compute stream)
    remedy: str                   # what shortens its collectives, whatever link they cross
    counts_as: str = ""           # the dimension it is reported under ("" = itself)
    degree_label: str = ""        # the sidebar's label of its degree ("" = label)
    band: tuple[float, float] = (0.0, 0.5)
    views: frozenset[str] = EVERY_VIEW
    # The dimension whose group of ranks its calls span ("" = its own): a dimension that is not a
    # parallel degree (a recommendation model's embedding exchange) names the degree whose ranks
    # it spans, and the network forms its groups as that one's (explorer/network/groups.py).
    group: str = ""
    # Which of that group's ranks a call spans: "" all of them, "node" those in the representative
    # rank's NVLink domain, "across" one per domain (the ranks at the same place in theirs): a
    # hierarchical exchange's two steps (TorchRec's table-row-wise output dist: a reduce-scatter
    # inside the node, then an all-to-all between nodes).
    scope: str = ""

    @property
    def category(self) -> str:
        """The breakdown category (and Gantt lane, byte count) its time and bytes count in."""
        return self.counts_as or self.name


_DP_REMEDY = ("overlapping it with the backward (communication.dp_overlap), bucket size "
              "(communication.bucket_MB), P3 priorities for the first layers' buckets "
              "(communication.dp_priority), gradient compression (communication.compression.kind), or "
              "synchronising less often (training.sync)")

DIMENSIONS: dict[str, Dimension] = {d.name: d for d in (
    Dimension("tp", "Tensor parallel", "#54A24B", "#009E73", True,
              "overlapping it with the GEMMs it sits between (communication.tp_overlap), sequence "
              "parallelism (parallelism.sequence_parallel: a reduce-scatter and an all-gather instead of "
              "each all-reduce, activations sharded), or a tensor-parallel group kept inside one node"),
    Dimension("cp", "Context parallel", "#72B7B2", "#56B4E9", True,
              "fewer context-parallel ranks, or a context-parallel group kept on NVLink (ring attention "
              "hides its K/V exchange under the attention blocks only while a block outlasts a step)"),
    Dimension("ep", "Expert parallel", "#FF9DA6", "#882255", True,
              "node-limited routing (model.moe.max_nodes: each token's experts on few nodes), fewer "
              "experts per token, or a schedule that overlaps the all-to-all with the other direction's "
              "compute (parallelism.schedule: dualpipe)"),
    Dimension("pp", "Pipeline parallel", "#9D755D", "#999999", False,
              "fewer pipeline stages, or stage-to-stage sends on a faster link (parallelism.order decides "
              "which dimension stays inside a node)", degree_label="Pipeline stages", band=(0.37, 0.16)),
    Dimension("dp", "Data parallel", "#E45756", "#D55E00", False, _DP_REMEDY, band=(-0.37, 0.16)),
    Dimension("edp", "Expert data parallel", "#E45756", "#D55E00", False, _DP_REMEDY, counts_as="dp",
              band=(-0.37, 0.16)),
    # The two weight copies of a two-direction schedule (DualPipe, Chimera) summing their
    # gradients over pipeline ranks s and p-1-s (taskgraph/techniques/pair_sync.py): gradient
    # synchronisation, reported with dp.
    Dimension("pair", "Weight-copy gradient sync", "#E45756", "#D55E00", False,
              "keeping the two pipeline ranks of a stage (s and pp-1-s) on a fast link, or a schedule "
              "with one weight copy (parallelism.schedule)", counts_as="dp", band=(-0.37, 0.16)),
    # A recommendation model's embedding exchange (explorer/workloads/dlrm/): the forward all-to-all
    # of pooled embeddings and the backward all-to-all of their gradients between the GPUs holding
    # the table shards and those holding the samples — every replica (Mudigere et al., "Software-
    # Hardware Co-design for Fast and Scalable Training of DLRM", ISCA 2022, Sec. 3.1: tables
    # sharded over all GPUs, dense layers data parallel), hence the dp group.  Not blocking as a
    # dimension: a pipelined exchange runs on its own stream (workloads/spec.Edge.overlap); a
    # blocking one is a part of the pass that makes it, drawn on this lane.
    Dimension("emb", "Embedding all-to-all", "#17BECF", "#88CCEE", False,
              "pipelining the next batch's lookups and all-to-all under this batch's dense layers "
              "(model.dlrm.pipeline), fewer or narrower tables (model.dlrm.tables, model.dlrm.dim), "
              "a sharding plan that keeps more of the lookups local (model.dlrm.sharding), or a faster "
              "scale-out network", band=(0.37, 0.16), group="dp"),
    # Table-row-wise sharding's two steps (explorer/workloads/dlrm/sharding.py; TorchRec's
    # TwRwPooledEmbeddingDist): the partial sums reduce-scattered inside each node, then the pooled
    # embeddings exchanged between nodes; both reported as the embedding exchange.
    Dimension("emb_node", "Embedding reduce-scatter in the node", "#17BECF", "#88CCEE", False,
              "the same as the embedding all-to-all's", counts_as="emb", band=(0.37, 0.16), group="dp",
              scope="node"),
    Dimension("emb_across", "Embedding all-to-all between nodes", "#17BECF", "#88CCEE", False,
              "the same as the embedding all-to-all's", counts_as="emb", band=(0.37, 0.16), group="dp",
              scope="across"),
    # A GNN's traffic between graph partitions (explorer/workloads/gnn/): the remote feature fetch
    # of a sampled mini-batch (DistDGL, arXiv 2010.05337, Sec. 4.2) or the per-layer halo exchange
    # of full-graph training (PipeGCN, ICLR 2022, Sec. 3); the partitions are the dp replicas.
    Dimension("gnn", "GNN feature fetch / halo", "#B6992D", "#DDCC77", False,
              "a partitioning that keeps more sampled neighbours or halo nodes local (model.gnn.local_share, "
              "model.gnn.halo_nodes), a feature cache (model.gnn.cache_hit), smaller fan-outs, overlapping "
              "it with compute (model.gnn.overlap), or a faster scale-out network", band=(0.37, 0.16),
              group="dp"),
)}


def get(name: str) -> Dimension:
    """The registered dimension called ``name`` (ValueError listing the known ones otherwise)."""
    try:
        return DIMENSIONS[name]
    except KeyError:
        known = ", ".join(DIMENSIONS)
        raise ValueError(f"unknown communication dimension {name!r}; known: {known}") from None


def group_of(name: str) -> str:
    """The dimension whose ranks form ``name``'s groups (itself unless its record names another).

    >>> group_of("emb"), group_of("tp")
    ('dp', 'tp')
    """
    return get(name).group or name


def reported() -> tuple[str, ...]:
    """The dimensions reported under their own name, in registry order."""
    return tuple(d.name for d in DIMENSIONS.values() if d.category == d.name)


def reported_as(name: str) -> str:
    """The reported dimension ``name`` counts in (itself, or e.g. dp for edp)."""
    return get(name).category


def blocking() -> tuple[str, ...]:
    """The reported dimensions whose calls block the compute stream, in registry order."""
    return tuple(d for d in reported() if DIMENSIONS[d].blocking)


def degree_label(name: str) -> str:
    """The sidebar's label of the dimension's degree: "Tensor parallel (tp)", "Pipeline stages (pp)".

    >>> degree_label("tp"), degree_label("pp")
    ('Tensor parallel (tp)', 'Pipeline stages (pp)')
    """
    d = get(name)
    return f"{d.degree_label or d.label} ({d.name})"


def shown_in(view: str) -> tuple[str, ...]:
    """The reported dimensions ``view`` (one of :data:`VIEWS`) lists, in registry order."""
    if view not in VIEWS:
        raise ValueError(f"unknown view {view!r}; known: {', '.join(VIEWS)}")
    return tuple(d for d in reported() if view in DIMENSIONS[d].views)
