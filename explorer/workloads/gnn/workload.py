"""The graph neural network family as the registry sees it (explorer/workloads/registry.py): a
scenario whose model has a ``gnn`` section (``model.kind: gnn``).  GraphSAGE, every layer its own
layer kind (costs.py: its block shrinks hop by hop towards the seeds), nothing before the first
layer, the loss after the last; data parallel only (the graph's partitions are the replicas: the
model's gradients are all-reduced over dp as any model's), and the ``gnn`` dimension for the
traffic between partitions (the remote feature fetch of a mini-batch, the halo exchange of a
full-graph pass).  Seed nodes are its samples; one full-graph unit is one partition's pass.
Before the first layer: the GPU's wait for its mini-batch from the host (the CPU sampler and the
host-to-GPU copy, loader.py), which a pipelined loader hides under the GPU's own step.
"""
from __future__ import annotations

from ...config import Model, Scenario
from ..family import HostInput, Nouns
from ..spec import WorkloadSpec
from . import costs, loader
from .edges import with_edges


def recognises(m: Model) -> bool:
    """A model with a ``gnn`` section (model.gnn) is a graph neural network."""
    return m.gnn is not None


def spec(sc: Scenario) -> WorkloadSpec:
    """One kind per GraphSAGE layer, each a run of one, input layer first, with its gnn edges;
    before the first, the wait for the host a loop that does not pipeline it has (loader.stall_s)."""
    g = sc.model.gnn
    assert g is not None
    timer = costs.GemmTimer(sc)
    blocks = costs.blocks(g, costs.seeds(sc))
    n = len(blocks)
    layers = tuple(with_edges(sc, i, costs.layer_cost(sc, timer, b, i == 0, i == n - 1), b)
                   for i, b in enumerate(blocks))
    stall = loader.stall_s(sc, loader.host_work(sc, costs.seeds(sc)))
    return WorkloadSpec(layers, tuple((i, 1) for i in range(n)), costs.input_cost(stall),
                        costs.loss_cost(sc), distinct_layers=True)


def host_input(sc: Scenario) -> HostInput | None:
    """The host's work for each mini-batch (loader.host_work): pipelined, the slower of the CPU
    sampler and the host-to-GPU copy, which sets the pace when it outlasts the GPU's whole step;
    not pipelined, both one after the other before every mini-batch.  None for a full-graph pass."""
    g = sc.model.gnn
    assert g is not None
    if g.mode == "fullgraph":
        return None
    hw = loader.host_work(sc, costs.seeds(sc))
    if not g.pipelined:
        return HostInput(hw.sampler_s + hw.copy_s, False,
                         f"the CPU sampler ({_ms(hw.sampler_s)}) and then the host-to-GPU copy "
                         f"({_ms(hw.copy_s)}) of every mini-batch run before its step",
                         "pipelined (model.gnn.pipelined) they run under the GPU's step", "mini-batch")
    if hw.sampler_s >= hw.copy_s:
        return HostInput(hw.sampler_s, True,
                         f"the CPU sampler ({_ms(hw.sampler_s)} per mini-batch with "
                         f"{_threads(loader.workers_per_gpu(sc))} per GPU)",
                         "more sampler threads (model.gnn.cpu_workers) hide it", "mini-batch")
    return HostInput(hw.copy_s, True,
                     f"the host-to-GPU copy ({hw.copy_bytes / 1e6:,.0f} MB per mini-batch, {_ms(hw.copy_s)})",
                     "a faster host link (hardware.gpu.pcie_GBps) hides it", "mini-batch")


def _threads(n: float) -> str:
    return f"{n:g} thread" + ("" if n == 1 else "s")


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.1f} ms"


def params(sc: Scenario) -> float:
    """Every trainable parameter: per layer W_self and W_neigh (in x out each) and a bias."""
    g = sc.model.gnn
    assert g is not None
    return float(sum(2 * a * b + b for a, b in costs.widths(g)))


def nouns(m: Model) -> Nouns:
    """Seed nodes per second (partitions for a full-graph pass); layers are GraphSAGE layers."""
    assert m.gnn is not None
    if m.gnn.mode == "fullgraph":
        return Nouns("partition passes", "partitions", "GraphSAGE layers", "input", "loss")
    return Nouns("seed nodes", "seed nodes", "GraphSAGE layers", "input", "loss")


def samples_per_epoch(m: Model, dp: int) -> int:
    """One epoch visits every training node once as a seed (OGB's epoch; SALIENT's and DistDGL's
    epoch times); a full-graph step is one pass over the graph, one partition per GPU: ``dp``
    partition passes (its samples) are an epoch."""
    g = m.gnn
    assert g is not None
    return dp if g.mode == "fullgraph" else g.train_nodes


def caption(m: Model) -> str:
    """What the transformer fields the loader derived are for this GNN."""
    g = m.gnn
    assert g is not None
    how = ("full-graph, halo exchange per layer" if g.mode == "fullgraph"
           else f"mini-batch, fan-outs {list(g.fanouts)}")
    return (f"GraphSAGE ({how}): {g.layers} layers of width {g.hidden} on a graph of {g.nodes:,} nodes "
            f"and {g.edges:,} edges, {g.features} features, {g.classes} classes. Trains data-parallel over "
            "graph partitions (tp, cp, ep, pp 1).")


CONTROLS = (
    ("model.gnn.mode", "GNN training (mini-batch or full graph)", "choice"),
    ("model.gnn.nodes", "Graph nodes", "int"),
    ("model.gnn.edges", "Graph edges", "int"),
    ("model.gnn.train_nodes", "Training nodes (one epoch)", "int"),
    ("model.gnn.features", "Input feature width", "int"),
    ("model.gnn.feature_bytes", "Bytes per feature element", "choice"),
    ("model.gnn.classes", "Classes", "int"),
    ("model.gnn.layers", "GraphSAGE layers", "int"),
    ("model.gnn.hidden", "Hidden width", "int"),
    ("model.gnn.fanouts", "Fan-outs per layer, from the seeds (mini-batch)", "list"),
    ("model.gnn.local_share", "Local share of sampled features (default 1/partitions)", "optional"),
    ("model.gnn.cache_hit", "Feature cache hit rate", "float"),
    ("model.gnn.halo_nodes", "Halo nodes per partition (0 = random)", "int"),
    ("model.gnn.overlap", "Overlap fetch/halo with compute", "bool"),
    ("model.gnn.cpu_workers", "CPU sampler threads per machine", "int"),
    ("model.gnn.sampler_edges_per_core_s", "Sampler rate (edges per thread-second)", "float"),
    ("model.gnn.pipelined", "Pipeline sampler and host copy with the GPU", "bool"),
)
