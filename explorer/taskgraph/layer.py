"""One layer's work on a stage, priced once with every technique applied: its forward and
backward parts (compute, recompute, weight gradients, exposed TP/CP/EP/ZeRO-3 communication), the
communication hidden under its GEMMs, and the network calls it makes (for utilisation).
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from ..config import Scenario
from ..config.frameworks import profile as framework_profile
from ..engine.records import LinkCall, priced_link
from ..network.collectives import bus_factor
from ..network.groups import Network
from ..physics.hardware import BYTES_PER_ELEMENT, ComputeModel
from ..physics.work import ZERO_WORK
from ..workloads.spec import Collective, LayerCost, WorkloadSpec
from .edges import blocking_links, blocking_parts, edge_bytes, first_calls
from .layout import Layout
from .techniques.fsdp import FsdpCost, comm_zero, fsdp_cost
from .techniques.moe_routing import dispatch_pass, imbalance_extra_s
from .techniques.optimizer import grad_reduce_bytes, param_bytes
from .techniques.ring_attention import RingCost, ring_cost
from .techniques.tp_overlap import exposed_tp

Parts = tuple[tuple[str, float], ...]
COMPUTE_PARTS = ("compute", "weight-grad", "recompute")

@dataclass(frozen=True)
class Params:
    """The parameters of an embedding or output layer, as ZeRO-3 gathers them (no experts)."""

    params: float
    expert_params: float = 0.0


@dataclass(frozen=True)
class ChunkContext:
    """What pricing a chunk needs: the scenario, its network and compute model, the workload's
    description (its layer kinds' and ends' costs, explorer/workloads/spec.py) and the
    ideal-pipeline aspects in force."""

    sc: Scenario
    net: Network
    cm: ComputeModel
    ideal: frozenset[str]
    spec: WorkloadSpec
    chunks: int                      # pp * vpp
    tied_same_gpu: bool              # tied embeddings held once (one GPU holds both ends)

    @property
    def expert_load(self) -> float:
        """Busiest expert rank's load / the mean (the workload's routing skew and imbalance); 1
        without experts."""
        return self.spec.expert_load


@dataclass(frozen=True)
class LayerParts:
    """One layer's forward and backward parts on a stage, and what its communication moved."""

    fwd: Parts
    bwd: Parts
    tp_bytes: float
    cp_bytes: float
    ep_bytes: float
    fsdp: FsdpCost
    hidden_f: Parts                  # tp/cp seconds running under the forward's GEMMs
    hidden_b: Parts
    # Activation offloading, already inside the compute parts above (the stall): the exposed
    # seconds of the forward's and backward's host copies, weighted by the share offloaded, and
    # the copy seconds each way, likewise weighted (what the copy engine is busy for).
    offload_f: float = 0.0
    offload_b: float = 0.0
    offload_copy: float = 0.0
    # Bus bytes per unit of its generic edges (workloads/spec.Edge), per reported dimension.
    edge_bytes: Parts = ()


def sum_parts(*parts: tuple[str, float]) -> Parts:
    """Parts added up per category, positive ones only, in first-seen order."""
    acc: dict[str, float] = {}
    for k, v in parts:
        if v > 0:
            acc[k] = acc.get(k, 0.0) + v
    return tuple(acc.items())


def _coll_time(ctx: ChunkContext, calls, dim: str, stage: int) -> tuple[float, float]:
    """Seconds and bus bytes of a sequence of collectives on ``dim``'s group of ``stage``."""
    secs = bus = 0.0
    for c in calls:
        cc = ctx.net.cost(c.op, c.size_bytes, dim, stage)
        secs += cc.time_s
        bus += c.size_bytes * bus_factor(c.op, cc.n)
    return secs, bus


def _ep_time(ctx: ChunkContext, calls, stage: int) -> tuple[float, float]:
    """Seconds and bus bytes of one layer pass's MoE dispatch/combine all-to-alls (moe_routing)."""
    moe = ctx.sc.model.moe
    if not calls or moe is None:
        return 0.0, 0.0
    if ctx.net.free:
        return 0.0, _coll_time(ctx, calls, "ep", stage)[1]
    sh = ctx.net.shape("ep", stage)
    secs = bus = 0.0
    for c in calls:
        hier = dispatch_pass(ctx.sc, c.size_bytes, sh)
        if hier is None:
            s, b = _coll_time(ctx, (c,), "ep", stage)
        else:
            s, b = hier[0].time_s, hier[1]
        secs += s
        bus += b
    return secs * ctx.expert_load, bus


def _ring(ctx: ChunkContext, lc: LayerCost, stage: int) -> RingCost:
    if lc.cp_kv_bytes <= 0:
        return RingCost()
    cpn = ctx.sc.parallelism.cp
    step = ctx.net.cost("send-recv", lc.cp_kv_bytes, "cp", stage).time_s
    step_b = ctx.net.cost("send-recv", 2 * lc.cp_kv_bytes, "cp", stage).time_s
    attn_step = ctx.cm.time(lc.attn_core_fwd) / cpn
    return ring_cost(cpn, lc.cp_kv_bytes, step, step_b, attn_step, 0.0 if lc.frozen else lc.cp_recompute)


def price_fsdp(ctx: ChunkContext, lc: LayerCost | Params, stage: int, f_comp: float,
               b_comp: float) -> FsdpCost:
    if comm_zero(ctx.sc) != 3:
        return FsdpCost()
    comm = ctx.sc.communication
    return fsdp_cost(lc.params, lc.expert_params, ctx.net, stage, f_comp, b_comp, comm.prefetch_layers,
                     comm.dp_overlap, ctx.cm.hbm_bytes_per_s)


def layer_parts(ctx: ChunkContext, lc: LayerCost, stage: int) -> LayerParts:
    """Forward and backward parts of one layer: compute, recompute and exposed tp/cp/ep/dp."""
    t = ctx.cm.time
    f_comp = t(lc.fwd)
    b_comp = t(lc.bwd_input)
    w_comp = t(lc.bwd_weight)
    r_comp = t(lc.recompute) if lc.recompute != ZERO_WORK else 0.0
    tp_f_all, tp_f_bytes = _coll_time(ctx, lc.tp_fwd, "tp", stage)
    tp_b_all, tp_b_bytes = _coll_time(ctx, lc.tp_bwd + lc.tp_recompute, "tp", stage)
    tp_f, tp_b = tp_f_all, tp_b_all
    if ctx.sc.communication.tp_overlap and lc.tp_fwd:
        gemm_f = lc.fwd.gemm_s - lc.attn_core_fwd.gemm_s
        tp_f, tp_b = exposed_tp(tp_f_all, tp_b_all, gemm_f, len(lc.tp_fwd),
                                len(lc.tp_bwd) + len(lc.tp_recompute))
    ring = _ring(ctx, lc, stage)
    ep_f, ep_f_bytes = _ep_time(ctx, lc.ep_fwd, stage)
    ep_b, ep_b_bytes = _ep_time(ctx, lc.ep_bwd, stage)
    # The recomputed forward's dispatch and combine (LayerCost.ep_recompute), as tp_recompute's collectives.
    ep_b, ep_b_bytes = ep_b + lc.ep_recompute * ep_f, ep_b_bytes + lc.ep_recompute * ep_f_bytes
    if lc.frozen:          # forward only (workloads/freezing.py): the ring's backward hand-offs go too
        ring = replace(ring, exposed_b=0.0, hidden_b=0.0, bytes=ring.bytes / 3)
    load = ctx.expert_load
    if lc.expert_fwd.gemm_s and load > 1:
        extra = imbalance_extra_s(lc.expert_fwd.gemm_s, load)
        f_comp += extra
        if not lc.frozen:
            b_comp += extra
            w_comp += extra
    fs = price_fsdp(ctx, lc, stage, f_comp, b_comp + w_comp + r_comp)
    # Activation offloading: an offloaded layer's copy to the host runs on its own stream beside
    # the next layer's forward, the copy back beside the backward of the layer after it (TE's
    # double buffer); only what outlasts that compute stalls the stream.
    off_f = lc.offload_share * max(lc.offload_s - f_comp, 0.0)
    off_b = lc.offload_share * max(lc.offload_s - (b_comp + w_comp + r_comp), 0.0)
    f_comp += off_f
    b_comp += off_b
    f_comp += fs.copy_f              # FSDP2's copy kernels run on the compute stream (techniques/fsdp.py)
    b_comp += fs.copy_b
    fwd: Parts = (("compute", f_comp), ("tp", tp_f), ("cp", ring.exposed_f), ("ep", ep_f),
                  ("dp", fs.exposed_f))
    bwd: Parts = (("recompute", r_comp), ("compute", b_comp), ("weight-grad", w_comp), ("tp", tp_b),
                  ("cp", ring.exposed_b), ("ep", ep_b), ("dp", fs.exposed_b))
    if lc.edges:
        # Generic edges that block the pass (taskgraph/edges.py): parts on their dimension.
        edge_f, edge_b = blocking_parts(ctx, lc, stage)
        fwd, bwd = fwd + edge_f, bwd + edge_b
    return LayerParts(fwd, bwd, tp_f_bytes + tp_b_bytes, ring.bytes, ep_f_bytes + ep_b_bytes, fs,
                      (("tp", tp_f_all - tp_f), ("cp", ring.hidden_f)),
                      (("tp", tp_b_all - tp_b), ("cp", ring.hidden_b)),
                      off_f, off_b, lc.offload_share * lc.offload_s,
                      edge_bytes(ctx, lc, stage) if lc.edges else ())


def fsdp_links(ctx: ChunkContext, lc: LayerCost | Params, stage: int) -> list[LinkCall]:
    """ZeRO-3's two gathers and one reduce-scatter of a layer per micro-batch (techniques/fsdp.py)."""
    if comm_zero(ctx.sc) != 3:
        return []
    out: list[LinkCall] = []
    for dim, params in (("dp", lc.params), ("edp", lc.expert_params)):
        out += priced_link(ctx.net, dim, "all-gather", params * param_bytes(ctx.sc), stage, 2)
        out += priced_link(ctx.net, dim, "reduce-scatter", params * grad_reduce_bytes(ctx.sc), stage, 1)
    return out


def _ep_links(ctx: ChunkContext, call: Collective, stage: int) -> list[LinkCall]:
    """One MoE dispatch or combine as :func:`_ep_time` priced it: an NCCL all-to-all, or the
    hierarchical pass of DeepEP / Hybrid-EP (moe_routing.dispatch_pass)."""
    sh = ctx.net.shape("ep", stage)
    hier = dispatch_pass(ctx.sc, call.size_bytes, sh)
    if hier is None:
        return priced_link(ctx.net, "ep", call.op, call.size_bytes, stage, 1)
    cc = hier[0]
    return [LinkCall("ep", call.op, cc.egress, sh.n, sh.per_domain, 1, wan_loads=sh.wan_loads)]


def layer_links(ctx: ChunkContext, lc: LayerCost, stage: int) -> list[LinkCall]:
    """The network calls one layer makes per pipeline unit, as :func:`layer_parts` priced them:
    TP collectives, MoE dispatch/combine, ring attention's K/V hand-offs (cp-1 forward, cp-1 of
    K/V and dK/dV backward), the recomputed forward's TP collectives, dispatch/combine and K/V
    hand-offs (LayerCost.tp_recompute, ep_recompute, cp_recompute), ZeRO-3's gathers and
    reduce-scatters and the blocking generic edges (the overlapped ones are their tasks' calls:
    taskgraph/edges.py)."""
    out: list[LinkCall] = []
    for call in lc.tp_fwd + lc.tp_bwd + lc.tp_recompute:
        out += priced_link(ctx.net, "tp", call.op, call.size_bytes, stage, 1)
    for call in lc.ep_fwd:             # the forward's, and again where recomputation re-runs them
        out += [c.scaled(1 + lc.ep_recompute) for c in _ep_links(ctx, call, stage)]
    for call in lc.ep_bwd:
        out += _ep_links(ctx, call, stage)
    if lc.cp_kv_bytes:
        cpn = ctx.sc.parallelism.cp
        again = 0.0 if lc.frozen else lc.cp_recompute
        out += priced_link(ctx.net, "cp", "send-recv", lc.cp_kv_bytes, stage, (cpn - 1) * (1 + again))
        if not lc.frozen:
            out += priced_link(ctx.net, "cp", "send-recv", 2 * lc.cp_kv_bytes, stage, cpn - 1)
    return out + fsdp_links(ctx, lc, stage) + (blocking_links(ctx, lc, stage) if lc.edges else [])


def comm_info(ctx: ChunkContext, stage: int) -> dict:
    """The per-layer call of each blocking dimension on ``stage`` as it was priced (what a hover
    and the link summary show): op, bytes, group, algorithm, limiting tier, bus bandwidth, seconds;
    each from the first layer kind that makes such a call."""
    out = {}
    kinds = ctx.spec.kinds
    calls = {"tp": next((k.tp_fwd[:1] for k in kinds if k.tp_fwd), ()),
             "ep": next((k.ep_fwd[:1] for k in kinds if k.ep_fwd), ())}
    kv = next((k.cp_kv_bytes for k in kinds if k.cp_kv_bytes), 0.0)
    if kv:
        calls["cp"] = (Collective("send-recv", kv),)
    for dim, cs in calls.items():
        for c in cs:
            cc = ctx.net.cost(c.op, c.size_bytes, dim, stage)
            sh = ctx.net.shape(dim, stage)
            hier = dispatch_pass(ctx.sc, c.size_bytes, sh) if dim == "ep" and not ctx.net.free else None
            if hier is not None:
                cc = hier[0]                                  # as _ep_time priced it
            out[dim] = {"op": c.op, "bytes": c.size_bytes, "group": cc.n, "algorithm": cc.algorithm,
                        "tier": cc.limited_by, "busbw_GBps": cc.busbw_GBps, "time_s": cc.time_s}
    if any(k.edges for k in kinds):
        out.update(first_calls(ctx, kinds, stage))
    return out


def pp_message_bytes(sc: Scenario) -> float:
    """Bytes of one pipeline transfer (activations of one unit, or their gradients) per GPU."""
    e = BYTES_PER_ELEMENT["bf16" if sc.training.dtype == "fp8" else sc.training.dtype]
    # Scatter/gather optimisation (Narayanan SC21 Sec. 4.1), or a sequence-parallel stage output:
    # each TP rank sends 1/tp of the tensor.  Frameworks without it send the whole (TP-replicated)
    # output from every TP rank (FrameworkProfile.p2p_scatter_gather).
    split = sc.parallelism.tp if (framework_profile(sc.training.framework).p2p_scatter_gather
                                  or sc.parallelism.sequence_parallel) else 1
    return (sc.training.micro_batch * sc.model.seq_len / sc.parallelism.cp / sc.parallelism.token_slices
            * sc.model.hidden * e / split)


def pair_message_bytes(sc: Scenario, spec: WorkloadSpec, counts: tuple[int, ...],
                       layout: Layout) -> tuple[float, ...]:
    """Bytes of one pipeline transfer on each stage pair (layout.pair's index, p of them): the
    output of the last layer of the chunk that sends on it, when the workload knows its layers'
    outputs one by one (WorkloadSpec.boundary_bytes: a CNN's feature maps shrink through the
    network, PipeDream, SOSP 2019, Sec. 3.1), else :func:`pp_message_bytes`.  A pair several chunk
    boundaries use (interleaved chunks, the wrap pair) carries the largest of them."""
    uniform = pp_message_bytes(sc)
    p = layout.p
    out: list[float | None] = [None] * p
    end = 0
    for gc, n in enumerate(counts[:-1]):
        end += n
        got = spec.boundary_bytes(end - 1) if end > 0 else None
        if got is None:
            got = uniform
        a, b = layout.rank_of(gc), layout.rank_of(gc + 1)
        if a == b:
            continue                                   # a V's turn: handed over on the rank
        q = layout.pair(a, b, "forward")
        prev = out[q]
        out[q] = got if prev is None else max(prev, got)
    return tuple(uniform if x is None else x for x in out)

