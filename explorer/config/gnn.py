"""The graph neural network section (``model.gnn``, ``model.kind: gnn``): GraphSAGE node
classification on one large graph, trained data-parallel over graph partitions
(explorer/workloads/gnn/ prices it).

Two modes:
- ``minibatch``: mini-batch training with neighbour sampling (Hamilton et al., GraphSAGE, NeurIPS
  2017; distributed as in DistDGL, Zheng et al. 2020, arXiv 2010.05337): each GPU samples a
  multi-hop neighbourhood of its seed nodes and fetches the input features of the sampled nodes
  its own partition does not hold.
- ``fullgraph``: full-graph training on partitions (partition-parallel GCN: CAGNET, Tripathy et
  al. SC20; PipeGCN, Wan et al. ICLR 2022; BNS-GCN, Wan et al. MLSys 2022): each GPU holds one
  partition and exchanges the features (forward) and gradients (backward) of its boundary
  ("halo") nodes at every layer.

The loader derives the transformer fields from it (:func:`derive`): layers = GNN layers, hidden =
hidden width, vocab = classes, seq_len 1 (a sample is one seed node), and fills ``partitions`` with
parallelism.dp (:func:`fill_partitions`: the partitions are the data-parallel replicas);
:func:`rule_gnn` refuses what the family does not model.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from .model_parts import refuse_parts
from .schema import ScenarioError, build

GNN_MODES = ("minibatch", "fullgraph")


@dataclass(frozen=True)
class Gnn:
    """GraphSAGE on one graph (defaults: ogbn-products, Hu et al., OGB, NeurIPS 2020, Table 2)."""

    mode: str = field(default="minibatch", metadata={"choices": GNN_MODES, "doc": (
        "minibatch = neighbour sampling with remote feature fetch (DistDGL); fullgraph = every node "
        "every step, halo exchange per layer (CAGNET, PipeGCN)")})
    nodes: int = field(default=2_449_029, metadata={"min": 1, "max": 100_000_000_000,
                                                    "doc": "graph nodes (ogbn-products 2,449,029)"})
    edges: int = field(default=61_859_140, metadata={
        "min": 1, "max": 1_000_000_000_000,
        "doc": "graph edges as OGB counts them, each used in both directions (average degree "
               "2 x edges / nodes)"})
    features: int = field(default=100, metadata={"min": 1, "max": 1_000_000,
                                                 "doc": "input feature width per node"})
    feature_bytes: int = field(default=4, metadata={"choices": (1, 2, 4), "doc": (
        "bytes per stored input feature element (OGB: fp32 = 4; SALIENT keeps fp16 = 2)")})
    classes: int = field(default=47, metadata={"min": 1, "max": 1_000_000, "doc": "output classes"})
    train_nodes: int = field(default=196_615, metadata={
        "min": 1, "max": 100_000_000_000, "doc": "labelled training nodes: one epoch visits each once"})
    layers: int = field(default=3, metadata={"min": 1, "max": 64, "doc": "GraphSAGE layers (hops)"})
    hidden: int = field(default=256, metadata={"min": 1, "max": 1_048_576, "doc": "hidden width"})
    fanouts: tuple[int, ...] = field(default=(15, 10, 5), metadata={
        "min": 1, "max": 100_000, "max_items": 64,
        "doc": "minibatch: neighbours sampled per node, hop by hop from the seed nodes (PyG's "
               "num_neighbors order; DGL lists them input layer first); one per layer"})
    local_share: float | None = field(default=None, metadata={
        "min": 0.0, "max": 1.0,
        "doc": "minibatch: share of sampled nodes whose features the GPU's own partition holds; "
               "default 1 / partitions (random partitioning); METIS keeps most local (DistDGL)"})
    cache_hit: float = field(default=0.0, metadata={
        "min": 0.0, "max": 1.0, "doc": "minibatch: share of remote feature reads a local cache serves"})
    halo_nodes: int = field(default=0, metadata={
        "min": 0, "max": 100_000_000_000,
        "doc": "fullgraph: boundary nodes of another partition each partition reads per layer; 0 = "
               "the expected count of a random partitioning"})
    overlap: bool = field(default=False, metadata={
        "doc": "the feature fetch (next mini-batch prefetched: DistDGLv2, SALIENT) or the halo "
               "exchange (stale halo: PipeGCN) runs under compute instead of before it"})
    cpu_workers: int = field(default=40, metadata={
        "min": 1, "max": 100_000,
        "doc": "minibatch: CPU sampler threads per machine, shared by its GPUs (SALIENT's 16-GPU "
               "run: 2 GPUs x 20 'CPU per GPU', artifact README)"})
    sampler_edges_per_core_s: float = field(default=3.85e6, metadata={
        "min": 1.0, "max": 1e12,
        "doc": "minibatch: sampled edges one sampler thread samples and slices per second (SALIENT "
               "artifact's single-GPU epoch: 16,513 ms for 1,179 mini-batches with 20 workers, paced "
               "by the sampler; explorer/workloads/gnn/loader.py)"})
    pipelined: bool = field(default=True, metadata={
        "doc": "minibatch: the CPU sampler and the host-to-GPU copy prepare the next mini-batches "
               "while this one trains (SALIENT), so a step takes the longest of the three; false: "
               "the GPU waits for both every step"})
    # Graph partitions: parallelism.dp, one per data-parallel replica (filled at load: the layer
    # costs read it, and the model's identity keys the estimator's memo: pricing/keys.compute_key).
    partitions: int | None = field(default=None, metadata={"derived": True})

    @property
    def average_degree(self) -> float:
        """Neighbours per node, each edge counted from both ends: 2 E / N."""
        return 2.0 * self.edges / self.nodes


GNN_FIELD = field(default=None, metadata={
    "doc": "a graph neural network (GraphSAGE, model.kind gnn) instead of a transformer; absent = a "
           "transformer"})

# The transformer fields a GNN derives (as a convnet's, loading.CONV_DERIVED): a sample is one
# seed node (seq_len 1), layers its GraphSAGE layers, hidden its hidden width, vocab its classes.
GNN_DERIVED = ("layers", "hidden", "heads", "kv_heads", "ffn_hidden", "seq_len", "vocab", "dropout",
               "tied_embeddings")


def derive(model: dict[str, Any]) -> dict[str, Any]:
    """``model`` (a raw mapping with model.kind gnn) with its gnn section (the defaults when absent)
    and the transformer fields it derives; a given one that disagrees is refused, naming it."""
    g = build(Gnn, model.get("gnn") or {}, "model.gnn")
    values = (g.layers, g.hidden, 1, 1, g.hidden, 1, g.classes, False, False)
    derived = dict(zip(GNN_DERIVED, values, strict=True))
    for k, v in derived.items():
        if model.get(k) is not None and model[k] != v:
            raise ScenarioError(f"model.{k}", f"{model[k]!r} does not match model.gnn (it gives {v!r}); "
                                              "leave it out, it is derived from model.gnn")
    return {**model, "gnn": model.get("gnn") or {}, **derived}


def fill_partitions(model: Any, dp: int) -> Any:
    """``model`` with ``gnn.partitions`` = the data-parallel degree."""
    g = model.gnn
    if g is None or g.partitions == dp:
        return model
    return replace(model, gnn=replace(g, partitions=dp))


def rule_gnn(sc: Any) -> None:
    """A GNN trains data-parallel only (partitions are the replicas), without transformer parts,
    recomputation or FP8; a mini-batch GNN has one fan-out per layer and at most its training nodes
    as the seeds of a step (global_batch); a full-graph step is one pass over the graph: one
    partition per GPU, micro-batch 1."""
    m, p, tr = sc.model, sc.parallelism, sc.training
    g = m.gnn
    if g is None:
        return
    why = "a GNN (model.gnn) trains data-parallel over graph partitions here"
    for dim in ("tp", "cp", "ep", "pp", "token_slices"):
        if getattr(p, dim) != 1:
            raise ScenarioError(f"parallelism.{dim}", f"{getattr(p, dim)}: {why}; set it to 1")
    refuse_parts(m, ("moe", "mla", "mtp_depth", "conv"), f"is not a GNN part; {why} without it (remove it)")
    if tr.recompute != "none":
        raise ScenarioError("training.recompute", f"{tr.recompute!r}: recomputing GNN layers is not "
                                                  "modelled; use none")
    if tr.dtype == "fp8":
        raise ScenarioError("training.dtype", "'fp8': GNN training runs in bf16, fp16 or fp32 here")
    if g.train_nodes > g.nodes:
        raise ScenarioError("model.gnn.train_nodes", f"{g.train_nodes} is more than model.gnn.nodes = "
                                                     f"{g.nodes}; at most {g.nodes}")
    # An epoch visits each training node once as a seed: a step of more seeds than there are would
    # sample nodes twice, and its epoch came out shorter than the step (a hunt: 0.94 s against 1.64 s).
    if g.mode == "minibatch" and tr.global_batch > g.train_nodes:
        raise ScenarioError("training.global_batch", f"{tr.global_batch} seed nodes per step is more than "
                                                     f"model.gnn.train_nodes = {g.train_nodes}: a mini-batch "
                                                     f"step's seeds are training nodes; at most "
                                                     f"{g.train_nodes}")
    if g.mode == "minibatch" and g.halo_nodes:
        raise ScenarioError("model.gnn.halo_nodes", f"{g.halo_nodes}: the halo exchange is full-graph "
                                                    "training's; set model.gnn.mode: fullgraph, or remove it")
    # A partition's halo is nodes of the other partitions: at most the nodes outside its own share.
    outside = g.nodes - -(-g.nodes // p.dp)
    if g.mode == "fullgraph" and g.halo_nodes > outside:
        raise ScenarioError("model.gnn.halo_nodes", f"{g.halo_nodes} is more than the {outside} nodes "
                                                    f"outside "
                                                    f"a partition ({g.nodes} nodes in {p.dp} partitions); at "
                                                    f"most {outside}")
    if g.mode == "minibatch" and len(g.fanouts) != g.layers:
        raise ScenarioError("model.gnn.fanouts", f"{list(g.fanouts)} has {len(g.fanouts)} entries; give one "
                                                 f"per layer (model.gnn.layers = {g.layers})")
    if g.mode == "fullgraph" and (tr.micro_batch != 1 or tr.global_batch != p.dp):
        raise ScenarioError("training.global_batch",
                            f"{tr.global_batch} with micro_batch {tr.micro_batch}: a full-graph step is one "
                            f"pass over the graph, one partition per GPU; set global_batch {p.dp}, "
                            "micro_batch 1")
