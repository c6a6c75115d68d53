"""A window of H inner steps and the synchronisation that ends it (``training.sync``).

Every datacenter holds whole model replicas (``parallelism.span: dp``) and trains them with its
in-datacenter parallelism, unchanged: the *inner step* is the scenario restricted to one datacenter
with 1/D of the global batch (:func:`inner_scenario`), simulated once — all D datacenters run it
at the same time, so one inner step still processes the whole global batch.  Every H inner steps
the replicas all-reduce their outer gradient over the WAN.  With ``replica_nodes`` the groups are
N nodes each instead of datacenters (local SGD inside one datacenter, Lin et al., ICLR 2020): the
same window, the synchronisation over the node NICs and the fabric that join the groups:

- the payload is every parameter a GPU holds, in ``outer_dtype`` (fp32 = 4 bytes, int4 = 0.5);
- it is priced as the data-parallel group's all-reduce of the full scenario (the network model's
  hierarchical all-reduce: inside the node, inside the datacenter, across, and back; Thakur et al.
  2005), every stage's groups at once, as in the outer step every GPU synchronises together;
- local-sgd / diloco block: the window is ``H x inner + sync + outer update``
  (Stich 2019; Douillard et al. 2023, Algorithm 1);
- streaming-diloco cuts the model into F fragments synchronised H/F steps apart, each allowed to
  run ``overlap_steps`` (tau) inner steps behind (Douillard et al. 2025, Sec. 2.2): a fragment's
  sync is exposed only by what exceeds tau inner steps, ``max(0, sync/F - tau x inner)``;
- independent (c-BTM) never synchronises; its one final merge is outside the steady state.

Reported (:class:`SyncWindow`): the amortised time per step, the bytes each GPU sends per step on
each tier, the WAN rate one datacenter needs while a synchronisation runs, and — for overlapped
synchronisation — the WAN bandwidth at which it hides completely.  Not modelled: contention of the
synchronisation with the inner steps' own traffic (it rides the WAN, which the inner step does not
use) and the SMs its kernels take; the quality of the result (the simulator times, it does not
train: :mod:`explorer.variants.lowcomm.quality` cites what each paper measured).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from ...analysis.breakdown import MemoryBreakdown
from ...analysis.report import memory_notice
from ...config.loading import from_dict, to_dict
from ...config.schema import ScenarioError
from ...network.collectives import CollectiveCost, cost
from ...network.groups import Network
from ...network.topology import BOUNDARY_NAMES, GroupShape
from ...physics.hardware import streaming_bytes_per_s
from ...result.windows import STEP_TIERS, SyncWindow
from ...taskgraph.make import iteration_builder
from ...workloads.registry import compression_plan, workload_for
from .amortise import amortised_utilisation, step_busy
from .loss_law import DilocoLoss, diloco_loss
from .quality import quality_note

if TYPE_CHECKING:
    from ...config import Scenario
    from ...result.record import Result

# HBM bytes per parameter of the outer update, fp32: DiLoCo's Nesterov step reads the snapshot,
# the averaged outer gradient and the momentum and writes the momentum, the snapshot and the
# parameters (Douillard et al. 2023, Algorithm 1: 3 reads + 3 writes of 4 bytes); model averaging
# reads the average and writes the parameters (2 x 4 bytes).
UPDATE_BYTES = {"local-sgd": 8.0, "diloco": 24.0, "streaming-diloco": 24.0, "independent": 0.0}
# Extra state per parameter, fp32: DiLoCo keeps the last synchronised parameters (the snapshot
# the outer gradient is taken against) and the outer momentum (Algorithm 1); model averaging keeps
# nothing; independent models keep nothing.
OUTER_STATE_BYTES = {"local-sgd": 0.0, "diloco": 8.0, "streaming-diloco": 8.0, "independent": 0.0}


def inner_raw(raw: dict[str, Any], sc: Scenario) -> None:
    """Edit ``raw`` (``to_dict(sc)``) into one group of ``sc`` training alone: nodes / D, global
    batch / D, dp / D, synchronised every step inside, no stragglers; with degraded nodes, the last
    group (the slowest).  The search's ranking proxy makes the same edit (variants/registry.py)."""
    c, D = sc.cluster, sc.sync_groups
    cl = raw["cluster"]
    cl.update(nodes=c.nodes // D, datacenters=1)
    cl.pop("stragglers", None)
    # Degraded nodes are the cluster's last (cluster.faults), so the last group holds the most of
    # them, at its end: the group the synchronisation barrier waits for is that one.
    if c.faults.degraded_nodes:
        cl["faults"]["degraded_nodes"] = min(c.faults.degraded_nodes, c.nodes // D)
    raw["training"]["global_batch"] = sc.training.global_batch // D
    raw["training"]["sync"] = {"kind": "every-step"}
    par = raw["parallelism"]
    if sc.parallelism.dp is not None:          # a search's parsed base leaves dp to the layout
        par["dp"] = sc.parallelism.dp // D
    par["span"] = "auto"


def inner_scenario(sc: Scenario) -> Scenario:
    """One group of ``sc`` (a datacenter, or replica_nodes nodes) training its replicas alone
    (:func:`inner_raw`).  Raises a ScenarioError on ``training.sync.kind`` when that group cannot
    run the layout (the message says why)."""
    c, D = sc.cluster, sc.sync_groups
    raw = to_dict(sc)
    raw.pop("description", None)
    inner_raw(raw, sc)
    try:
        return from_dict(raw)
    except ScenarioError as e:
        raise ScenarioError("training.sync.kind", f"{sc.training.sync.kind}: one group alone "
                            f"({c.nodes // D} nodes, global batch {sc.training.global_batch // D}) "
                            f"cannot run this layout: {e}") from None


@dataclass(frozen=True)
class _Priced:
    sync_s: float
    fragment_s: float
    cross_s: float                 # the WAN all-reduce alone (what the WAN rate is measured over)
    per_gpu: dict[str, float]      # tier -> bytes per GPU per whole sync (max over stages)
    wan_bytes: float               # one datacenter's WAN egress per whole sync
    slice_params: float            # largest parameter slice one GPU reduces and updates


def sent_per_boundary(cc: CollectiveCost, shape: GroupShape) -> list[float]:
    """Bytes one member sends across each boundary in call ``cc`` (its domain's egress shared by
    the group's members in that domain)."""
    return [e / shape.per_domain[b] for b, e in enumerate(cc.egress)] + [0.0] * (
        len(BOUNDARY_NAMES) - len(cc.egress))


def _price(sc: Scenario, inner: Scenario) -> _Priced:
    """One whole-model and one one-fragment outer synchronisation, every stage at once.

    The dp_in replicas inside a datacenter hold identical outer gradients (they synchronised every
    inner step), so nothing is reduced inside it: each GPU all-reduces 1/dp_in of its parameters
    with its counterparts in the other datacenters (a ring of D, one GPU per datacenter: WAN egress
    2(D-1)/D of the slice; Patarasuk & Yuan 2009), applies the outer update to that slice (so it
    keeps the outer state of its slice only, as ZeRO-1 shards an optimizer; Rajbhandari et al.
    2020), then the replicas all-gather the slices back inside the datacenter (not needed under
    ZeRO-3, whose GPUs keep their shard)."""
    sy = sc.training.sync
    net, inner_net = Network(sc), Network(inner)
    b = iteration_builder(sc, net, ideal=frozenset())      # parameter counts only: the real chunks
    D = sc.sync_groups
    dc_gpus = sc.cluster.gpus // D
    per = dict.fromkeys(BOUNDARY_NAMES, 0.0)
    wan = sync = frag = cross = most = 0.0
    comp = sc.communication.compression
    pl = compression_plan(comp, sc.model, sc.parallelism.tp, D)
    hbm = streaming_bytes_per_s(sc.hardware.gpu)
    stage_gpus_per_dc = sc.parallelism.tp * sc.parallelism.cp * inner.dp
    for s in range(sc.parallelism.pp):
        chunks = [ch for ch, _ in b.rank_chunks(s)]
        dense = sum(ch.params for ch in chunks)
        expert = sum(ch.expert_params for ch in chunks)
        inner_groups = {dim: inner_net.shape(dim, s).n for dim in ("dp", "edp")}
        most = max(most, dense / inner_groups["dp"] + (expert / inner_groups["edp"] if expert else 0.0))
        first = int(net.placement.gpu(pp=s))
        across = net.fabric.shape(np.array([first + k * dc_gpus for k in range(D)], dtype=np.int64))
        t_all = t_frag = t_cross = 0.0
        sent = [0.0] * len(BOUNDARY_NAMES)
        for dim, count in (("dp", dense), ("edp", expert)):
            size = count * sy.payload_bytes
            if size <= 0:
                continue
            gather = inner_net.shape(dim, s)
            elements = count / gather.n              # this GPU's slice
            if comp.active:                          # the compressor's collectives on the slice
                calls = [(op, elements * per, across) for op, per in pl.ops]
                coding = pl.seconds(elements, hbm)
            else:
                calls = [("all-reduce", size / gather.n, across)]
                coding = 0.0
            if sc.parallelism.zero < 3 and gather.n > 1:
                calls.append(("all-gather", size, gather))
            t_all += coding
            t_frag += coding / sy.fragments
            for op, nbytes, shape in calls:
                whole = cost(op, nbytes, shape, net.algorithm, net.nvls, net.options)
                t_all += whole.time_s
                if shape is across:
                    t_cross += whole.time_s
                t_frag += cost(op, nbytes / sy.fragments, shape, net.algorithm, net.nvls, net.options).time_s
                sent = [a + x for a, x in zip(sent, sent_per_boundary(whole, shape), strict=True)]
        sync, frag, cross = max(sync, t_all), max(frag, t_frag), max(cross, t_cross)
        for i, tier in enumerate(BOUNDARY_NAMES):
            per[tier] = max(per[tier], sent[i])
        wan += sent[BOUNDARY_NAMES.index("scale-across")] * stage_gpus_per_dc
    if sc.parallelism.ideal_pipeline:
        # The ideal pipeline's communication is free (Network(free=True)): the synchronisation too.
        sync = frag = cross = 0.0
    return _Priced(sync, frag, cross, per, wan, most)


def window(sc: Scenario, inner: Result) -> SyncWindow:
    """The window of ``sc``'s ``training.sync`` around the simulated inner step ``inner``."""
    sy = sc.training.sync
    H, F, tau = sy.inner_steps, sy.fragments, sy.overlap_steps
    t_in = inner.iteration_time_s
    steps_bytes = {t: sum(d[t] for d in inner.comm_bytes_by_tier.values()) for t in STEP_TIERS}
    if sy.kind == "independent":
        return SyncWindow(sy.kind, H, F, tau, sy.outer_dtype, sc.sync_groups, t_in, 0.0, 0.0, 0.0,
                          0.0, H * t_in, 0.0, dict.fromkeys(STEP_TIERS, 0.0), steps_bytes, 0.0, None,
                          None, quality_note(sy.kind), 0.0, sy.replica_nodes)
    pr = _price(sc, inner.scenario)
    hbm = streaming_bytes_per_s(sc.hardware.gpu)
    update = UPDATE_BYTES[sy.kind] * pr.slice_params / hbm
    if sy.kind == "streaming-diloco":
        # F staggered fragment syncs per window, each exposed beyond tau inner steps of cover.
        exposed = F * max(0.0, pr.fragment_s - tau * t_in)
        frag_wan = pr.wan_bytes / F
        # Hidden when the fragment's WAN transfer fits in tau inner steps less the part of its
        # sync that no WAN bandwidth shortens (the in-datacenter all-gather).
        fixed = max(0.0, pr.fragment_s - pr.cross_s / F)
        room = tau * t_in - fixed
        hide = frag_wan * 8 / room / 1e9 if room > 0 else None
        needed = frag_wan * 8 / (tau * t_in) / 1e9 if tau > 0 and t_in > 0 else None
        peak = frag_wan * 8 / (pr.cross_s / F) / 1e9 if pr.cross_s > 0 else 0.0
    else:
        exposed = pr.sync_s
        hide = needed = None         # a blocking synchronisation never hides
        peak = pr.wan_bytes * 8 / pr.cross_s / 1e9 if pr.cross_s > 0 else 0.0
    per_gpu = {t: pr.per_gpu[t] for t in STEP_TIERS}
    per_step = {t: steps_bytes[t] + per_gpu[t] / H for t in STEP_TIERS}
    return SyncWindow(sy.kind, H, F, tau, sy.outer_dtype, sc.sync_groups, t_in, pr.sync_s,
                      pr.fragment_s, exposed, update, H * t_in + exposed + update, pr.wan_bytes, per_gpu,
                      per_step, peak, needed, hide, quality_note(sy.kind), pr.slice_params, sy.replica_nodes)


def every_step_scenario(sc: Scenario) -> Scenario | None:
    """``sc`` synchronising every step (the baseline the window is faster than), or None when that
    scenario is not valid (e.g. its outer-gradient precision has no every-step meaning)."""
    raw = to_dict(sc)
    raw["training"]["sync"] = {"kind": "every-step"}
    try:
        return from_dict(raw)
    except ScenarioError:
        return None


def diloco_estimate(sc: Scenario) -> DilocoLoss | None:
    """DiLoCo's published loss against data-parallel training for ``sc``'s model and replicas
    (loss_law.py), for the DiLoCo kinds; None for the others (no published law)."""
    sy = sc.training.sync
    if sy.kind not in ("diloco", "streaming-diloco"):
        return None
    family = workload_for(sc.model)
    if family.name != "transformer":
        return None                     # the law is a language model's
    n = family.params(sc)
    total = sc.training.total_tokens
    law = diloco_loss(n, sc.sync_groups, sy.inner_steps, None if total is None else total / n,
                      moe=sc.model.is_moe)
    if sy.kind == "streaming-diloco":
        law = replace(law, caveats=(*law.caveats, "the law is plain DiLoCo's; Streaming DiLoCo reports "
                                    "matching its quality (Douillard et al. 2025, abstract)"))
    return law


def link_paced(w: SyncWindow, busy: dict[str, float]) -> SyncWindow:
    """``w`` with its steps no shorter than the busiest tier's seconds per step (``busy``: the
    inner step's own and 1/H of the synchronisation's, amortise.step_busy).  A synchronisation
    counted as hidden under the inner steps needs their links' spare capacity: where the inner step
    already fills a link, what does not fit is exposed, as analysis/link_bound.py raises an
    iteration to its busiest link (found by an invariant hunt: Streaming DiLoCo on a 0.01 GB/s
    scale-up read that link 100.65 % busy)."""
    need = max(busy.values(), default=0.0)
    if need <= w.time_per_step_s:
        return w
    more = w.inner_steps * (need - w.time_per_step_s)
    return replace(w, exposed_sync_s=w.exposed_sync_s + more, window_s=w.window_s + more)


def simulate_window(sc: Scenario, simulate_inner: Callable[[Scenario], Result]) -> Result:
    """The Result of a windowed ``sc``: its inner step's timeline and breakdown, with throughput,
    MFU and per-step bytes amortised over the window and the outer state in the memory; beside it
    the time per step of the same scenario synchronising every step, and DiLoCo's published loss."""
    inner = simulate_inner(inner_scenario(sc))
    w = window(sc, inner)
    base = every_step_scenario(sc) if w.kind != "independent" else None
    law = diloco_estimate(sc)
    w = replace(w, every_step_s=None if base is None else simulate_inner(base).time_per_step_s,
                loss=None if law is None else law.to_json_dict())
    sync_dp = {t: w.sync_bytes_per_gpu.get(t, 0.0) / w.inner_steps for t in BOUNDARY_NAMES}
    w = link_paced(w, step_busy(sc, inner, sync_dp))
    slow = w.inner_step_s / (w.time_per_step_s or 1.0)
    by_tier = {d: dict(t) for d, t in inner.comm_bytes_by_tier.items()}
    for t in BOUNDARY_NAMES:
        by_tier["dp"][t] = by_tier["dp"].get(t, 0.0) + sync_dp.get(t, 0.0)
    comm = dict(inner.comm_bytes_per_gpu)
    comm["dp"] = comm.get("dp", 0.0) + sync_dp["scale-up"]
    # The outer state of the slice, and a compressor's error-feedback residual for it.
    ef = compression_plan(sc.communication.compression, sc.model, sc.parallelism.tp, sc.sync_groups).ef_bytes
    extra = (OUTER_STATE_BYTES[sc.training.sync.kind] + (ef if w.kind != "independent" else 0.0)) \
        * w.slice_params
    mem = inner.memory
    memory = MemoryBreakdown(mem.params, mem.grads, mem.optimizer + extra, mem.activations, mem.reserved)
    notices = inner.notices
    over = memory_notice(sc, memory)
    if over is not None and "memory" not in inner.warning_kinds:
        notices = (*notices, over)
    story = inner.bottleneck
    per_step = (w.exposed_sync_s + w.update_s) / w.inner_steps
    others = [v for k, v in inner.breakdown_s.items() if k not in ("compute", "recompute")]
    if per_step > max(others, default=0.0):
        story = (f"The {w.link} synchronisation every {w.inner_steps} steps adds {per_step:.3g} s per step "
                 f"({per_step / w.time_per_step_s:.1%}) to the {w.inner_step_s:.3g} s inner step: its "
                 f"{w.exposed_sync_s:.3g} s per window are not hidden.")
    # The D groups step together: D times the inner scenario's tokens, per-GPU rates unchanged.
    # Each link's busy seconds per step: the inner step's own, and 1/H of the synchronisation's.
    util = amortised_utilisation(sc, step_busy(sc, inner, sync_dp), w.time_per_step_s)
    return inner.combined(sc, notices, pace=slow, groups=sc.sync_groups, bottleneck=story, utilisation=util,
                          comm_bytes_per_gpu=comm, comm_bytes_by_tier=by_tier, memory=memory, sync_window=w)
