"""Per-chunk work: what one pipeline chunk (a contiguous run of layers on one stage) computes and
sends for one pipeline unit, priced once, with every technique applied.

A layer's parts (compute, recompute, weight gradients and the exposed TP/CP/EP/ZeRO-3
communication) come from :func:`layer_parts`; a chunk sums its layers and adds the embedding or
output layer when it holds them (:func:`chunk_work`).  Communication hidden under the GEMMs (TP
collective matmul, ring attention, FSDP prefetch) is kept apart, to be drawn but never to block.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from ..config.fp8_recipes import gemm_modules
from ..engine.records import LinkCall
from ..workloads.spec import EdgeCost, LayerCost, WorkloadSpec
from .edges import EdgeCall, merged, overlapped
from .layer import (
    COMPUTE_PARTS,
    ChunkContext,
    LayerParts,
    Params,
    Parts,
    comm_info,
    fsdp_links,
    layer_links,
    layer_parts,
    price_fsdp,
    sum_parts,
)
from .techniques.fsdp import comm_zero
from .techniques.optimizer import param_bytes

__all__ = ["COMPUTE_PARTS", "ChunkContext", "ChunkWork", "Params", "balanced", "chunk_held", "chunk_work",
           "fuse", "slowed", "sum_parts"]


@dataclass(frozen=True)
class ChunkWork:
    """One pipeline chunk (a contiguous run of layers on one stage) for one micro-batch."""

    index: int                       # global chunk index c*pp + stage
    layers: int
    fwd_parts: Parts
    bwd_parts: Parts
    fwd_layer: Parts                 # one (average) layer's forward parts, for drawing
    bwd_layer: Parts
    hw_flops: float                  # FLOPs executed per micro-batch (fwd + bwd + recompute)
    model_flops: float               # FLOPs without recompute (MFU numerator, PaLM App. B)
    params: float                    # dense parameters held
    expert_params: float
    act_bytes: float                 # activations kept per micro-batch
    tp_bytes: float                  # bytes sent per micro-batch, per dimension (bus bytes)
    cp_bytes: float
    ep_bytes: float
    comm: dict                       # per dimension (tp, cp, ep; dp under ZeRO-3): its typical call
    fsdp_hidden: tuple[float, float] = (0.0, 0.0)   # ZeRO-3 gather/reduce time hidden behind F, B
    fsdp_bytes: float = 0.0          # ZeRO-3 bus bytes per micro-batch (gathers + reduce-scatter)
    fsdp_layer_bytes: float = 0.0    # bf16 bytes of the largest layer this chunk gathers
    hidden_f: Parts = ()             # communication hidden under the forward, per dim
    hidden_b: Parts = ()             # ... under the backward (TP overlap, ring attention)
    flops_f: float = 0.0             # FLOPs of the forward, backward (input grads + recompute), W pass
    flops_b: float = 0.0
    flops_w: float = 0.0
    link_calls: tuple[LinkCall, ...] = ()           # TP/EP/CP/ZeRO-3 calls per pipeline unit, as priced
    # When the chunk's gradients are ready during its backward: (fraction of the backward's time,
    # fraction of the chunk's parameters whose gradients exist by then), cumulative, in backward
    # order.  Empty: in proportion (layers of a few repeated kinds); filled when the workload's
    # layers differ one by one (WorkloadSpec.distinct_layers: a ResNet's blocks).
    grad_curve: tuple[tuple[float, float], ...] = ()
    # Bytes one recomputed layer of this chunk holds again during its backward (the largest of its
    # layer kinds'; analysis/memory.recompute_transient), 0 without recomputation.
    transient: float = 0.0
    # Activation offloading (a drawing annotation; its stall is already in the compute parts):
    # (layers offloaded per micro-batch, copy-engine seconds of their copies each way, exposed
    # seconds of the forward's copies, of the backward's).
    offload: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 0.0)
    # What an FP8 run keeps beside the bf16 weights (config/fp8_recipes.py, analysis/memory.py):
    # parameters of the chunk's layers, whose linears run FP8 GEMMs (the embedding and output layer
    # stay bf16), and the count of those GEMMs (each with its own scaling state).
    fp8_params: float = 0.0
    fp8_gemms: float = 0.0
    fp8_layer_params: float = 0.0    # the largest of those layers (ZeRO-3 gathers one at a time)
    # Generic edges (workloads/spec.Edge, taskgraph/edges.py): bus bytes per unit per reported
    # dimension, blocking and overlapped alike, and the overlapped ones as their stream's tasks.
    edge_bytes: Parts = ()
    edge_calls: tuple[EdgeCall, ...] = ()
    held_bytes: float = 0.0          # model-parallel weights and their optimizer state (LayerCost)
    held_state_bytes: float = 0.0

    def offload_fields(self, kind: str) -> tuple:
        """What a pass of ``kind`` (F, B, Bi, W) shows of the offload copies: (direction, layers,
        copy seconds, exposed seconds), or () when it makes none (the W pass restores nothing)."""
        layers, copy, exp_f, exp_b = self.offload
        if layers <= 0 or copy <= 0 or kind == "W":
            return ()
        return ("d2h", layers, copy, exp_f) if kind == "F" else ("h2d", layers, copy, exp_b)

    def ready_fraction(self, share: float) -> float:
        """Fraction of the chunk's backward after which ``share`` of its parameters have their
        gradients (a DP bucket of the first ``share`` in backward order is ready then)."""
        if not self.grad_curve:
            return share
        for t, p in self.grad_curve:
            if p >= share - 1e-12:
                return t
        return 1.0

    def pass_fields(self, kind: str) -> tuple[float, Parts]:
        """FLOPs of one pass of this chunk (F, B full, Bi input gradients only, W) and the
        communication hidden under it (timeline fields)."""
        if kind == "F":
            return self.flops_f, self.hidden_f
        if kind == "W":
            return self.flops_w, ()
        return self.flops_b + (self.flops_w if kind == "B" else 0.0), self.hidden_b

    def split(self, parts: Parts, weight: bool) -> Parts:
        """The weight-gradient part (W pass) or everything else (B pass) of backward ``parts``."""
        return tuple((k, v) for k, v in parts if (k == "weight-grad") == weight)

@dataclass
class _Acc:
    """Running sums while a chunk adds up its layers and edges (local to chunk_work)."""

    fwd: list = field(default_factory=list)
    bwd: list = field(default_factory=list)
    over_f: list = field(default_factory=list)
    over_b: list = field(default_factory=list)
    links: list = field(default_factory=list)
    hw: float = 0.0
    model: float = 0.0
    params: float = 0.0
    eparams: float = 0.0
    act: float = 0.0
    tpb: float = 0.0
    cpb: float = 0.0
    epb: float = 0.0
    hid_f: float = 0.0
    hid_b: float = 0.0
    fsdp_bytes: float = 0.0
    layer_bytes: float = 0.0
    fl_f: float = 0.0
    fl_b: float = 0.0
    fl_w: float = 0.0
    off: list = field(default_factory=lambda: [0.0, 0.0, 0.0, 0.0])
    fp8_params: float = 0.0
    fp8_gemms: float = 0.0
    fp8_layer: float = 0.0
    edge_bytes: list = field(default_factory=list)
    edge_calls: list = field(default_factory=list)


def _add_layers(ctx: ChunkContext, a: _Acc, lc: LayerCost, count: int, stage: int) -> LayerParts:
    a.links += [c.scaled(count) for c in layer_links(ctx, lc, stage)]
    lp = layer_parts(ctx, lc, stage)
    a.fwd += [(k, v * count) for k, v in lp.fwd]
    a.bwd += [(k, v * count) for k, v in lp.bwd]
    flops = lc.fwd.gemm_flops + lc.bwd_input.gemm_flops + lc.bwd_weight.gemm_flops
    a.hw += count * (flops + lc.recompute.gemm_flops)
    a.model += count * (lc.fwd.model + lc.bwd_input.model + lc.bwd_weight.model)   # Work.model
    a.params += count * lc.params
    a.eparams += count * lc.expert_params
    a.act += count * lc.act_bytes
    a.tpb += count * lp.tp_bytes
    a.cpb += count * lp.cp_bytes
    a.epb += count * lp.ep_bytes
    a.over_f += [(k, v * count) for k, v in lp.hidden_f]
    a.over_b += [(k, v * count) for k, v in lp.hidden_b]
    a.fl_f += count * lc.fwd.gemm_flops
    a.fl_b += count * (lc.bwd_input.gemm_flops + lc.recompute.gemm_flops)
    a.fl_w += count * lc.bwd_weight.gemm_flops
    a.hid_f += count * lp.fsdp.hidden_f
    a.hid_b += count * lp.fsdp.hidden_b
    a.fsdp_bytes += count * lp.fsdp.bus_bytes
    gathered = gathered_params(ctx, lc.params, lc.expert_params, stage)
    a.layer_bytes = max(a.layer_bytes, gathered * param_bytes(ctx.sc))
    fp8 = lc.params + lc.expert_params if lc.fp8_params is None else lc.fp8_params   # LoRA: the base's
    a.fp8_params += count * fp8
    a.fp8_gemms += count * _gemms(ctx.sc, lc.expert_params > 0)
    a.fp8_layer = max(a.fp8_layer, fp8)
    for i, v in enumerate((lc.offload_share, lp.offload_copy, lp.offload_f, lp.offload_b)):
        a.off[i] += count * v
    if lc.edges:
        a.edge_bytes += [(k, v * count) for k, v in lp.edge_bytes]
        a.edge_calls += overlapped(ctx, lc, count, stage)
    return lp


def gathered_params(ctx: ChunkContext, dense: float, expert: float, stage: int) -> float:
    """The parameters of ``dense`` + ``expert`` that ZeRO-3 gathers on ``stage``: those of a group
    of more than one rank (dense over dp, experts over the expert-data-parallel group).  A group of
    one holds its parameters whole and gathers nothing (FSDP's NO_SHARD at world size 1,
    torch/distributed/fsdp/_init_utils.py): experts with ep = dp are such a group."""
    net = ctx.net
    return (dense if net.group_size("dp", stage) > 1 else 0.0) + \
        (expert if expert and net.group_size("edp", stage) > 1 else 0.0)


def _gemms(sc, moe_layer: bool) -> float:
    """FP8 GEMM modules of one layer (config/fp8_recipes.gemm_modules): a MoE layer's local experts
    are its routed experts over the expert-parallel group."""
    moe = sc.model.moe
    local = moe.experts / max(sc.parallelism.ep, 1) if moe is not None else 0.0
    shared = moe.shared_experts if moe is not None else 0
    return gemm_modules(sc.model.mla is not None, local, shared, moe_layer)


def _add_edge(ctx: ChunkContext, a: _Acc, edge: EdgeCost, stage: int) -> None:
    """The embedding or output layer on the chunk that holds it (and its ZeRO-3 gathers)."""
    t = ctx.cm.time
    ef, eb, ew = t(edge.fwd), t(edge.bwd_input), t(edge.bwd_weight)
    a.fwd.append(("compute", ef))
    a.bwd.append(("compute", eb))
    a.bwd.append(("weight-grad", ew))
    if comm_zero(ctx.sc) == 3 and edge.params > 0:
        # FSDP shards the embedding and output layer too: gathered before their forward and
        # backward, gradients reduce-scattered after, like any layer.
        fs = price_fsdp(ctx, Params(edge.params), stage, ef, eb + ew)
        a.links += fsdp_links(ctx, Params(edge.params), stage)
        a.fwd += [("compute", fs.copy_f), ("dp", fs.exposed_f)]
        a.bwd += [("compute", fs.copy_b), ("dp", fs.exposed_b)]
        a.hid_f += fs.hidden_f
        a.hid_b += fs.hidden_b
        a.fsdp_bytes += fs.bus_bytes
        a.layer_bytes = max(a.layer_bytes, gathered_params(ctx, edge.params, 0, stage) * param_bytes(ctx.sc))
    flops = edge.fwd.gemm_flops + edge.bwd_input.gemm_flops + edge.bwd_weight.gemm_flops
    a.fl_f += edge.fwd.gemm_flops
    a.fl_b += edge.bwd_input.gemm_flops
    a.fl_w += edge.bwd_weight.gemm_flops
    a.hw += flops
    a.model += edge.fwd.model + edge.bwd_input.model + edge.bwd_weight.model
    a.params += edge.params
    a.act += edge.act_bytes


def chunk_work(ctx: ChunkContext, gc: int, stage: int, first_layer: int, layers: int) -> ChunkWork:
    """Chunk ``gc`` on ``stage``: layers [first_layer, first_layer + layers), plus the workload's
    first edge (embedding, stem) on the first chunk and its last (output layer, classifier) and
    tail layers on the last, unless the ideal pipeline drops them."""
    spec = ctx.spec
    segments = spec.segments(first_layer, layers)
    a = _Acc()
    lf: Parts = ()
    lb: Parts = ()
    steps: list[tuple[float, float]] = []      # (backward seconds, parameters) per layer, forward order
    for lc, count in segments:
        lp = _add_layers(ctx, a, lc, count, stage)
        lf, lb = lp.fwd, lp.bwd
        steps.append((count * sum(v for _, v in lp.bwd), count * lc.params))
    if spec.distinct_layers:           # the drawing template: the chunk's average layer
        lf, lb = (tuple((k, v / max(layers, 1)) for k, v in sum_parts(*acc)) for acc in (a.fwd, a.bwd))
    first, last = gc == 0, gc == ctx.chunks - 1
    for kind, count in _tail(spec, last, ctx.ideal):
        _add_layers(ctx, a, spec.kinds[kind], count, stage)
    edges: list[tuple[float, float]] = [(0.0, 0.0), (0.0, 0.0)]     # first, last (backward s, params)
    for i, edge in _ends(spec, first, last, ctx.ideal, ctx.tied_same_gpu):
        _add_edge(ctx, a, edge, stage)
        edges[i] = (ctx.cm.time(edge.bwd_input) + ctx.cm.time(edge.bwd_weight), edge.params)
    curve = _grad_curve([edges[1], *reversed(steps), edges[0]]) if spec.distinct_layers else ()
    transient = max((lc.recompute_bytes for lc, _ in segments), default=0.0)
    held, held_state = chunk_held(spec, segments, first, last, ctx.ideal, ctx.tied_same_gpu)
    return ChunkWork(gc, layers, sum_parts(*a.fwd), sum_parts(*a.bwd), lf, lb, a.hw, a.model, a.params,
                     a.eparams, a.act, a.tpb, a.cpb, a.epb, _calls(ctx, stage, a.layer_bytes),
                     (a.hid_f, a.hid_b),
                     a.fsdp_bytes, a.layer_bytes, sum_parts(*a.over_f), sum_parts(*a.over_b), a.fl_f, a.fl_b,
                     a.fl_w, tuple(a.links), curve, transient, tuple(a.off), a.fp8_params, a.fp8_gemms,
                     a.fp8_layer, sum_parts(*a.edge_bytes), merged(a.edge_calls), held, held_state)


def _tail(spec: WorkloadSpec, last: bool, ideal: frozenset[str]) -> tuple[tuple[int, int], ...]:
    """Layers after the model's last one on the last chunk (multi-token prediction's blocks,
    DeepSeek-V3 Sec. 2.2; their projection and output head are in the last edge), unless the ideal
    pipeline drops the edges."""
    return spec.tail if last and "edges" not in ideal else ()


def _ends(spec: WorkloadSpec, first: bool, last: bool, ideal: frozenset[str],
          tied: bool) -> list[tuple[int, EdgeCost]]:
    """The workload's edges a chunk adds, as (0 first, 1 last, edge), when it holds the first or
    last end, unless the ideal pipeline drops them.  ``tied``: tied embeddings on a GPU that holds
    both ends (ChunkContext.tied_same_gpu): one V x h/tp matrix, held, reduced and updated once,
    counted with the embedding on chunk 0 — the output layer's copy is left out whether it trains
    (``params``) or is held frozen (``held_bytes``: LoRA, workloads/transformer/lora.py).  A last
    stage on another GPU keeps its own copy (Megatron-LM)."""
    if "edges" in ideal:
        return []
    out = [(0, spec.first)] if first else []
    if last:
        out.append((1, replace(spec.last, params=0.0, held_bytes=0.0) if tied else spec.last))
    return out


def chunk_held(spec: WorkloadSpec, segments: list[tuple[LayerCost, int]], first: bool, last: bool,
               ideal: frozenset[str], tied: bool) -> tuple[float, float]:
    """ChunkWork.held_bytes and held_state_bytes of a chunk of ``segments`` (layer, count) holding
    the first and/or last end: its layers', its tail layers' and its edges' held weights
    (LayerCost.held_bytes, EdgeCost.held_bytes) and the layers' held optimizer state, as
    chunk_work adds the edges (:func:`_ends`).  The estimator's memory (pricing/memory.py) reads
    the same figures."""
    layers = [*segments, *((spec.kinds[k], n) for k, n in _tail(spec, last, ideal))]
    edges = _ends(spec, first, last, ideal, tied)
    return (sum(n * lc.held_bytes for lc, n in layers) + sum(e.held_bytes for _, e in edges),
            sum(n * lc.held_state_bytes for lc, n in layers))


def _grad_curve(backward: list[tuple[float, float]]) -> tuple[tuple[float, float], ...]:
    """ChunkWork.grad_curve from (seconds, parameters) of each part in backward order: a part's
    gradients exist once its backward ends (PyTorch DDP's autograd hooks mark them ready then;
    Li et al., VLDB 2020, Sec. 3.2.3)."""
    total_t = sum(t for t, _ in backward) or 1.0
    total_p = sum(p for _, p in backward) or 1.0
    out, t_acc, p_acc = [], 0.0, 0.0
    for t, p in backward:
        t_acc += t
        p_acc += p
        out.append((t_acc / total_t, p_acc / total_p))
    return tuple(out)


def _calls(ctx: ChunkContext, stage: int, layer_bytes: float) -> dict:
    """The chunk's typical call per dimension as priced here (hover, link summary): TP, CP, EP per
    layer, and under ZeRO-3 the gather of its largest layer (techniques/fsdp.py), so that the
    analysis reads the call instead of pricing it a second time."""
    out = comm_info(ctx, stage)
    if comm_zero(ctx.sc) == 3 and layer_bytes > 0 and ctx.net.group_size("dp", stage) > 1:
        cc = ctx.net.cost("all-gather", layer_bytes, "dp", stage)
        out["dp"] = {"op": "all-gather", "bytes": layer_bytes, "group": cc.n, "algorithm": cc.algorithm,
                     "tier": cc.limited_by, "busbw_GBps": cc.busbw_GBps, "time_s": cc.time_s}
    return out


def balanced(chunks: list[ChunkWork]) -> list[ChunkWork]:
    """Every chunk given the average chunk's work (the ideal pipeline's equal stages): times,
    FLOPs and bytes averaged, layer count and parameters kept (memory stays that of the split).
    The per-layer drawing template is rescaled so the chunk's layers fill its pass exactly."""
    n = len(chunks)

    def avg(get) -> Parts:
        return sum_parts(*((k, v / n) for ch in chunks for k, v in get(ch)))

    fwd, bwd = avg(lambda ch: ch.fwd_parts), avg(lambda ch: ch.bwd_parts)
    hw = sum(ch.hw_flops for ch in chunks) / n
    model = sum(ch.model_flops for ch in chunks) / n
    tpb, cpb, epb = (sum(getattr(ch, a) for ch in chunks) / n for a in ("tp_bytes", "cp_bytes", "ep_bytes"))
    fsdp_b = sum(ch.fsdp_bytes for ch in chunks) / n
    hid = (sum(ch.fsdp_hidden[0] for ch in chunks) / n, sum(ch.fsdp_hidden[1] for ch in chunks) / n)
    out = []
    for ch in chunks:
        k = max(ch.layers, 1)
        out.append(replace(ch, fwd_parts=fwd, bwd_parts=bwd, fwd_layer=tuple((a, v / k) for a, v in fwd),
                           bwd_layer=tuple((a, v / k) for a, v in bwd), hw_flops=hw, model_flops=model,
                           tp_bytes=tpb, cp_bytes=cpb, ep_bytes=epb, fsdp_bytes=fsdp_b, fsdp_hidden=hid))
    return out


def slowed(ch: ChunkWork, factor: float) -> ChunkWork:
    """``ch`` on a GPU whose kernels take ``factor`` times longer (a straggler): its compute,
    recompute and weight-gradient parts scaled, its communication parts unchanged (the network is
    not slower; the peers' wait for the slow GPU is what the schedule then shows)."""
    if factor == 1.0:
        return ch

    def scale(parts: Parts) -> Parts:
        return tuple((k, v * factor if k in COMPUTE_PARTS else v) for k, v in parts)

    return replace(ch, fwd_parts=scale(ch.fwd_parts), bwd_parts=scale(ch.bwd_parts),
                   fwd_layer=scale(ch.fwd_layer), bwd_layer=scale(ch.bwd_layer))


def fuse(fwd: Parts, bwd: Parts, under: Parts = ()) -> Parts:
    """DualPipe's F&B: the forward of one micro-batch and the backward of another run together so
    that each one's communication (all-to-all, TP, ...) hides behind the other's computation
    (DeepSeek-V3 report Fig. 4).  The pair takes its compute time, or its communication time if
    that is longer; only the excess is exposed, split over the dimensions in proportion.

    ``under``: communication already hidden under the halves' own compute, by dimension (TP and CP
    under the GEMMs, ZeRO-3 gathers and reductions as ``dp``).  It takes the same compute time as
    cover, and a dimension's calls run one after another on its links, so the pair also lasts at
    least each dimension's communication, exposed and hidden together; what that adds beyond the
    compute and the exposed communication is charged to that dimension.  Without it a ZeRO-3 pair
    hid its exposed gathers behind compute its hidden ones already filled: the nodes' NICs read
    109 % busy (issue 32)."""
    compute = [(k, v) for k, v in fwd + bwd if k in COMPUTE_PARTS]
    comm = [(k, v) for k, v in fwd + bwd if k not in COMPUTE_PARTS]
    t_comp = sum(v for _, v in compute)
    t_comm = sum(v for _, v in comm)
    excess = max(0.0, t_comm - t_comp)
    exposed = [(k, excess * v / t_comm) for k, v in comm] if excess > 0 else []
    per_dim = dict(sum_parts(*comm, *under))
    need, dim = max(((v, k) for k, v in per_dim.items()), default=(0.0, ""))
    extra = max(0.0, need - max(t_comp, t_comm))
    return sum_parts(*compute, *exposed, *([(dim, extra)] if extra > 0 else []))
