"""The workload boundary: what one GPU computes, keeps and communicates for one pipeline unit
(a micro-batch, or a token slice of one), layer by layer, as the rest of the simulator reads it.

Every workload family (explorer/workloads/<family>/) turns a scenario into a :class:`WorkloadSpec`;
the task-graph builder, the layer split, the estimator and the memory model read the spec and never
the model type.  Per layer (:class:`LayerCost`): FLOPs and seconds of its matrix kernels and HBM
bytes of its element-wise ones, per pass (:class:`~explorer.physics.work.Work`); the parameters it
holds; the activations it keeps for the backward and what a recomputed layer holds again; and its
communication, each on its dimension (``tp_*`` tensor parallel, ``ep_*`` expert parallel,
``cp_kv_bytes`` the context-parallel ring), and any other traffic as generic :class:`Edge` records
on a dimension of the registry (explorer/dimensions.py: a recommendation model's embedding
all-to-all on ``emb``), which the builder turns into parts or tasks on that dimension
(explorer/taskgraph/edges.py).  Before the first layer and after the last, on the first and last
pipeline chunk: an :class:`EdgeCost` (an embedding or a stem; an output layer and loss, or a
classifier).  Layers come in ``kinds`` that repeat in ``runs``: a transformer has one
or two kinds (dense, MoE), a ResNet one kind per block.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..physics.work import Work


@dataclass(frozen=True)
class Collective:
    """One collective call: operation name and nccl-tests buffer size in bytes."""

    op: str
    size_bytes: float


PHASES = ("fwd", "bwd")


@dataclass(frozen=True)
class Edge:
    """One collective call a layer makes per pipeline unit on a communication dimension that has
    no field of its own: ``dim`` a name of explorer/dimensions.py (its group: Dimension.group),
    ``phase`` the pass that makes it (``fwd`` or ``bwd``), ``op`` the nccl operation
    (all-to-all, all-reduce, ...), ``size_bytes`` the per-GPU buffer as nccl-tests sizes it.

    ``overlap``: the call may run on its own stream beside compute (TorchRec's train pipeline
    issues the next batch's embedding all-to-all while the current batch's dense layers run;
    Ivchenko et al., "TorchRec", RecSys 2022, Sec. 3.3), so the builder draws it as a task of its
    own that only the iteration's end waits for (forward: one unit ahead; backward: after the
    pass); otherwise it blocks the pass that makes it (a part of that pass on its dimension, like
    the MoE all-to-all).  ``label`` names it on the Gantt ("pooled embeddings")."""

    dim: str
    phase: str
    op: str
    size_bytes: float
    overlap: bool = False
    label: str = ""

    def __post_init__(self) -> None:
        if self.phase not in PHASES:
            raise ValueError(f"Edge.phase {self.phase!r}: use one of {', '.join(PHASES)}")
        if self.size_bytes < 0:
            raise ValueError(f"Edge.size_bytes {self.size_bytes!r}: must be >= 0")


@dataclass(frozen=True)
class LayerCost:
    """One layer, one pipeline unit, one GPU."""

    fwd: Work
    bwd_input: Work            # input gradients (dgrad), incl. the attention core backward
    bwd_weight: Work           # weight gradients (wgrad)
    recompute: Work            # forward work repeated in backward, per the recompute policy
    attn_core_fwd: Work        # the s x s attention part of fwd (what ring attention overlaps with)
    expert_fwd: Work           # the routed-expert GEMMs of fwd (what load imbalance stretches)
    params: float              # parameters held by this GPU (dense part)
    expert_params: float       # parameters held by this GPU that belong to experts
    act_bytes: float           # activation bytes kept from forward to backward
    tp_fwd: tuple[Collective, ...]
    tp_bwd: tuple[Collective, ...]
    tp_recompute: tuple[Collective, ...]
    ep_fwd: tuple[Collective, ...]
    ep_bwd: tuple[Collective, ...]
    cp_kv_bytes: float         # bytes of K and V sent per ring-attention step (forward)
    # Bytes the layer holds again during its own backward when it is recomputed, beyond act_bytes
    # (Chen et al., arXiv 1604.06174, Sec. 3); live for one layer at a time, so counted once per GPU.
    recompute_bytes: float = 0.0
    # Activation offloading (workloads/transformer/activations_recipes.py): seconds one offloaded
    # layer's copy takes over the host link each way, and the share of layers offloaded.
    offload_s: float = 0.0
    offload_share: float = 0.0
    # Bytes of the layer's output for one unit, when the family knows them layer by layer (a CNN's
    # feature maps shrink through the network): what a pipeline stage ending with this layer sends
    # forward and receives back as its gradient (PipeDream, Narayanan et al., SOSP 2019, Sec. 3.1).
    # 0: the family's stage outputs are all alike (a transformer's micro-batch x s x h,
    # explorer/taskgraph/layer.pp_message_bytes).
    out_bytes: float = 0.0
    # Collectives on dimensions without a field above (Edge), in the order the pass makes them.
    edges: tuple[Edge, ...] = ()
    # Model-parallel state only this GPU holds (a recommendation model's embedding-table shards,
    # explorer/workloads/dlrm/): bytes of the weights and of their optimizer state.  Counted in
    # memory as parameters and optimizer state; never all-reduced (``params`` is what is), updated
    # inside the backward (its HBM traffic is in ``bwd_input``).
    held_bytes: float = 0.0
    held_state_bytes: float = 0.0
    # A frozen layer (training.frozen_layers, explorer/workloads/freezing.py): forward only — its
    # backward parts, backward collectives and ring-attention backward are left out where priced.
    frozen: bool = False
    # Shares of the forward's ring-attention hand-offs and MoE dispatch/combine all-to-alls that the
    # recompute policy runs again in the backward (0 none, 1 every layer, N/L block recompute;
    # explorer/workloads/transformer/activations_recipes.py ring_recompute_share,
    # dispatch_recompute_share), as tp_recompute repeats the forward's TP collectives.
    cp_recompute: float = 0.0
    ep_recompute: float = 0.0
    # Parameters whose linears keep FP8 weight copies in an FP8 run (taskgraph/techniques/
    # fp8_memory.py), when not params + expert_params: under LoRA the frozen base's, held in
    # held_bytes, whose GEMMs still run FP8, while the trained bf16 adapters have none
    # (workloads/transformer/lora.py).  None: params + expert_params.
    fp8_params: float | None = None


@dataclass(frozen=True)
class EdgeCost:
    """The work before the first layer (first pipeline chunk: an embedding, a stem) or after the
    last (last chunk: an output layer and its loss, a classifier) on one GPU."""

    fwd: Work
    bwd_input: Work
    bwd_weight: Work
    params: float
    act_bytes: float
    held_bytes: float = 0.0        # weights kept but not trained (a frozen embedding's)


@dataclass(frozen=True)
class WorkloadSpec:
    """A whole model for one pipeline unit on one GPU (module docstring).

    ``runs`` lists the layers in model order as (kind index, consecutive layers of that kind);
    ``tail`` the layers that run after the last one on the last chunk, as (kind index, count)
    (multi-token prediction blocks).  ``expert_load`` is the busiest expert rank's load over the
    mean (what stretches each layer's ``expert_fwd``; 1 without experts).  ``distinct_layers``: the
    layers differ one by one (a ResNet's blocks), so a chunk is drawn as its average layer and its
    gradients become ready as its own parameters do; otherwise a chunk is drawn as its last kind
    of layer and its gradients become ready in proportion to its backward."""

    kinds: tuple[LayerCost, ...]
    runs: tuple[tuple[int, int], ...]
    first: EdgeCost
    last: EdgeCost
    tail: tuple[tuple[int, int], ...] = ()
    expert_load: float = 1.0
    distinct_layers: bool = False

    @property
    def layers(self) -> int:
        """Layers of the model (the tail not included)."""
        return sum(n for _, n in self.runs)

    def segments(self, first_layer: int, layers: int) -> list[tuple[LayerCost, int]]:
        """Layers [first_layer, first_layer + layers) as (cost, consecutive count), in model order."""
        out: list[tuple[LayerCost, int]] = []
        start, end = first_layer, first_layer + layers
        at = 0
        for kind, n in self.runs:
            lo, hi = max(at, start), min(at + n, end)
            if hi > lo:
                out.append((self.kinds[kind], hi - lo))
            at += n
            if at >= end:
                break
        return out

    def boundary_bytes(self, last_layer: int) -> float | None:
        """Bytes a pipeline stage whose last layer is ``last_layer`` sends forward per unit (that
        layer's ``out_bytes``); None when the family leaves it to the uniform message size."""
        at = 0
        for kind, n in self.runs:
            if last_layer < at + n:
                got = self.kinds[kind].out_bytes
                return got if got > 0 else None
            at += n
        return None

    def first_layer_of(self, kind: int) -> int | None:
        """Index of the first layer of ``kind`` (None when no layer is of that kind)."""
        at = 0
        for k, n in self.runs:
            if k == kind and n > 0:
                return at
            at += n
        return None

    def kind_of_layers(self) -> list[int]:
        """The kind of every layer, in model order."""
        return [k for k, n in self.runs for _ in range(n)]

    @property
    def model_flops(self) -> float:
        """Matrix FLOPs of one unit's forward and backward on this GPU, every layer, the tail and
        both edges, recomputation not included (the MFU numerator's share, PaLM App. B)."""
        total = 0.0
        for kind, n in (*self.runs, *self.tail):
            lc = self.kinds[kind]
            total += n * (lc.fwd.model + lc.bwd_input.model + lc.bwd_weight.model)
        for e in (self.first, self.last):
            total += e.fwd.model + e.bwd_input.model + e.bwd_weight.model
        return total
