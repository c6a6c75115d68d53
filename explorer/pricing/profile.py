"""One configuration as the numbers its iteration is assembled from (a :class:`RowProfile`).

The builder (taskgraph/builder.py) gives every stage its chunks, prices them and adds the
transfers, gradient buckets, parameter gathers and the optimizer step.  This module computes the
same quantities for one scenario without building the graph, from pieces memoised on what they
depend on (pricing/keys.py):

- per network key: the shared Network, its stages' classes per dimension (pricing/stages.py) and
  the data-parallel group sizes;
- per chunk layout (the chunk pieces' keys per stage class, the layer split, schedule, p, v): the
  chunks' work (pricing/chunk_basis.py: chunk_work's pieces, keyed by what chunk_work reads of the
  groups, so rows that differ only in the NIC bandwidth or ZeRO 1 vs 2 share them);
- per message size: one send-recv of layer.pp_message_bytes on each stage pair (stages.transfers);
- per network, held parameters and bucket options: the bucket tasks techniques/dp_buckets.dp_tasks
  creates (the same bucket count, merging into at most MAX_BUCKET_TASKS tasks and readiness
  fractions) and the ZeRO 1-2 parameter gathers (at the start under the first forwards, or after
  the step): rows that differ in micro-batch or recompute share them;
- the optimizer step: techniques/optimizer.optimizer_time.

What remains per row is a few dictionary look-ups; the arithmetic over stages happens for many
rows at once (pricing/pipeline.py, pricing/sync.py).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..config import Scenario
from ..config.frameworks import profile as framework_profile
from ..schedules.registry import Schedule
from ..schedules.registry import get as get_schedule
from ..taskgraph import replica_split
from ..taskgraph.builder import IDEAL_ASPECTS
from ..taskgraph.layer import pp_message_bytes
from ..taskgraph.layout import layout_for
from ..taskgraph.techniques.dp_contention import sm_factor
from ..taskgraph.techniques.fsdp import comm_zero, grad_reduce_overlaps
from ..taskgraph.techniques.optimizer import OPTIMIZER_TRAFFIC_BYTES, grad_reduce_bytes, param_bytes
from ..taskgraph.techniques.pair_sync import two_copies
from ..workloads.spec import WorkloadSpec
from .buckets import dp_work
from .chunk_basis import F_IDX, FEATURES, basis, basis_key, chunk_counts, costs
from .keys import RowNetwork, bound_memory, compute_key, intern, memo_table, network_key
from .split import layer_split
from .stages import NetInfo, shared_netinfo, stage_classes, transfers

_BALANCED = [F_IDX[k] for k in FEATURES if k.startswith(("fwd.", "bwd.", "fsdp_hidden"))] + \
    [F_IDX["hw_flops"], F_IDX["model_flops"], F_IDX["fsdp_bytes"]]
_LAYOUTS = memo_table()
_TRANSFERS = memo_table()
_DP = memo_table()
_OPT = memo_table()
_HOLDS = memo_table()


@dataclass(frozen=True)
class Layout:
    """The chunks of one layout: their work, who holds them, what ZeRO and the step read."""

    feat: np.ndarray                 # (p*v, FEATURES) per global chunk
    counts: np.ndarray               # (p*v, ROLES) layers of each kind, ends of each chunk
    layer_bytes: np.ndarray          # (p*v,) largest layer ZeRO-3 gathers per chunk
    holds: np.ndarray                # (p, nch) global chunk of each (stage, local chunk)
    params: np.ndarray               # (p, nch) dense parameters of each held chunk
    expert: np.ndarray               # (p, nch) expert parameters
    key: int
    pkey: int                        # interned held parameters (what the buckets and the step read)
    hw_flops: float                  # FLOPs per unit summed over every chunk (recompute included)
    model_flops: float               # ... without recompute (the MFU numerator)
    # (p*v,) parameters of the largest FP8 layer per chunk (ChunkWork.fp8_layer_params: a max, not
    # the einsum's sum of the feature of that name).
    fp8_layer: np.ndarray


@dataclass(frozen=True)
class RowProfile:
    """What one configuration's iteration is assembled from (arrays over stages and chunks)."""

    sc: Scenario
    schedule: Schedule
    p: int
    v: int
    nch: int                         # chunks per rank
    m: int                           # pipeline units of one iteration
    units: int                       # units simulated (m x iterations simulated)
    blocking: bool                   # pipeline sends on the compute stream
    layout: Layout
    transfer: np.ndarray             # (p,) one pipeline transfer on each stage pair
    sm_factor: float                 # share of a pass slowed per second of hidden communication
    job_frac: np.ndarray             # (p, nch*JOBS) readiness of each reduce bucket task in its pass
    job_dur: np.ndarray              # (p, nch*JOBS) its seconds (0: no task)
    overlap_reduce: bool             # buckets leave during the last backward (else after the stage)
    gates: np.ndarray                # (p, nch) when each chunk's first forward may start
    trailing: np.ndarray             # (p,) ZeRO 1-2 gathers after the optimizer step
    optimizer: np.ndarray            # (p,) optimizer step seconds
    netinfo: NetInfo
    ckey: int
    memory_key: tuple                # what the per-GPU memory depends on (pricing/memory.py)

    @property
    def feat(self) -> np.ndarray:
        return self.layout.feat

    @property
    def counts(self) -> np.ndarray:
        return self.layout.counts

    @property
    def layer_bytes(self) -> np.ndarray:
        return self.layout.layer_bytes

    @property
    def holds(self) -> np.ndarray:
        return self.layout.holds

    @property
    def dp_groups(self) -> np.ndarray:
        return self.netinfo.dp_groups

    @property
    def net(self) -> RowNetwork:
        """The row's network (its own scenario, the shared shapes and calls)."""
        return self.netinfo.for_row(self.sc)


def row_profile(sc: Scenario) -> RowProfile:
    """Everything the estimate of ``sc`` needs, from memoised pieces (see module docstring).
    ``parallelism.stage_replicas: auto`` must be resolved by the caller (estimate/many.profile: the
    plan the simulation picks, fold/replica_choice.resolved, which this layer cannot call); an
    unresolved ``auto`` reaching replica_split.resolved here is an internal error."""
    bound_memory()
    # The stage and replica groups of the network exist only once the replicas are counts; the
    # rows that go on to the simulation (pricing/scope.workload_priced) then run the same plan.
    sc = replica_split.resolved(sc)
    par, com, tr = sc.parallelism, sc.communication, sc.training
    sched = get_schedule(par.schedule)
    ideal = IDEAL_ASPECTS if par.ideal_pipeline else frozenset()
    free = par.ideal_pipeline
    ckey = compute_key(sc)
    nkey = network_key(sc, free)
    info = shared_netinfo(sc, free, nkey)
    p, v = par.pp, par.vpp
    layout = _layout_of(sc, sched, ckey, info, ideal)
    msg = pp_message_bytes(sc)
    transfer = _TRANSFERS.get((nkey, msg))
    if transfer is None:
        transfer = _TRANSFERS[(nkey, msg)] = transfers(info, msg, p)
    fw = framework_profile(tr.framework)
    gather_overlap = com.dp_overlap and fw.param_gather_overlaps_forward
    # The buckets read the held parameters (not the chunks' times), the network and ZeRO's options:
    # rows that differ in micro-batch or recompute share them.  dp_work tells ZeRO stages apart only
    # as 0 (all-reduce), 1-2 (reduce-scatter, then gathers) and 3 (no buckets): 1 and 2 share.
    zero = comm_zero(sc)
    # Two copies of the weights (pair_sync.two_copies) add the pair all-reduce to the buckets.
    dkey = (nkey, layout.pkey, min(zero, 1) if zero < 3 else 3, par.zero == 3, com.bucket_MB,
            grad_reduce_bytes(sc), param_bytes(sc), gather_overlap, two_copies(sc))
    dp = _DP.get(dkey)
    if dp is None:
        dp = _DP[dkey] = dp_work(sc, info.for_row(sc), layout.params, layout.expert, gather_overlap,
                                 info.dims, layout.pkey)
    slow = sm_factor(sc, bool(ideal))
    no_step = "optimizer" in ideal
    hbm = costs(sc, ckey).cm.hbm_bytes_per_s
    okey = (layout.pkey, nkey, par.zero >= 1, tr.optimizer, hbm, no_step)     # _optimizer reads zero >= 1
    opt = _OPT.get(okey)
    if opt is None:
        opt = _OPT[okey] = np.zeros(p) if no_step else \
            _optimizer(layout, info.dp_groups, par.zero, tr.optimizer, hbm)
    m = sc.micro_batches * par.token_slices
    units = m * sched.iterations_simulated
    # Memory reads the chunks' bytes (not their times: no network) and the data-parallel sizes, and
    # the layer split (the chunks' layers of each kind, layout.counts): a split chosen by the chunks'
    # priced seconds (split.choose_split) can move with the network, e.g. ZeRO-3's exposed gathers.
    mkey = (ckey, sched.name, v, par.stage_layers, par.pipeline_layout, par.ideal_pipeline, sc.dp, par.cp,
            par.ep, par.zero, com.prefetch_layers, tr.optimizer, units, p, layout.counts.tobytes())
    return RowProfile(sc, sched, p, v, sched.chunks_per_rank(v), m, units, fw.blocking_p2p, layout, transfer,
                      slow, dp[0], dp[1], grad_reduce_overlaps(sc), dp[2],
                      dp[3], opt, info, ckey, mkey)


def _layout_of(sc: Scenario, sched: Schedule, ckey: int, info: NetInfo, ideal: frozenset[str]) -> Layout:
    """The row's Layout, shared by every row whose chunks are priced alike: the same split, the same
    pieces per stage class (chunk_basis.basis_key) and the same schedule shape (p, v)."""
    par = sc.parallelism
    p, v = par.pp, par.vpp
    tied = sc.model.tied_embeddings and layout_for(sched, p, v).ends_on_one_rank
    pattern, cls, first, netsigs = stage_classes(info, par.zero == 3)
    bkeys = tuple(basis_key(sc, ckey, ns, ideal, tied) for ns in netsigs)
    # The split prices stage 0 without ideal aspects on the real network: this row's key for it
    # unless the row is an ideal pipeline.
    split = layer_split(sc, ckey, sched.pair_split, None if ideal else bkeys[int(cls[0])])
    lkey = intern(("layout", bkeys, pattern, split, sched.name, p, v, "balance" in ideal))
    layout = _LAYOUTS.get(lkey)
    if layout is None:
        net = info.for_row(sc)
        pieces = [basis(sc, ckey, net, s, ideal, tied, k) for s, k in zip(first, bkeys, strict=True)]
        layout = _LAYOUTS[lkey] = _layout(sc, sched, split, cls, pieces, ideal, lkey, costs(sc, ckey).spec)
    return layout


def _layout(sc: Scenario, sched: Schedule, split: tuple[int, ...], stage_cls: np.ndarray,
            pieces: list[tuple[np.ndarray, np.ndarray]], ideal: frozenset[str], lkey: int,
            spec: WorkloadSpec) -> Layout:
    """The chunks of ``sc``: the builder's split, each chunk priced as chunk_work prices it (from the
    ``pieces`` of its stage's class: chunk_basis.basis; ``spec``: the workload's runs of layers)."""
    par = sc.parallelism
    p, v = par.pp, par.vpp
    counts = chunk_counts(spec, split)
    lay = layout_for(sched, p, v)       # the builder prices chunk gc on the rank holding it (layout)
    cls = stage_cls[np.array([lay.rank_of(gc) for gc in range(len(split))], dtype=np.int64)]
    roles = np.stack([b[0] for b in pieces])[cls]         # (chunks, ROLES, FEATURES)
    feat = np.einsum("cr,crf->cf", counts, roles)
    layer_bytes = np.where(counts > 0, np.stack([b[1] for b in pieces])[cls], 0.0).max(axis=1)
    fp8_layer = np.where(counts > 0, roles[:, :, F_IDX["fp8_layer_params"]], 0.0).max(axis=1)
    if "balance" in ideal:
        feat[:, _BALANCED] = feat[:, _BALANCED].mean(axis=0)
    holds = _holds(sched, p, v)
    params, expert = feat[holds, F_IDX["params"]], feat[holds, F_IDX["expert_params"]]
    pkey = intern(("params", params.shape, params.tobytes(), expert.tobytes()))
    return Layout(feat, counts, layer_bytes, holds, params, expert, lkey, pkey,
                  float(feat[:, F_IDX["hw_flops"]].sum()), float(feat[:, F_IDX["model_flops"]].sum()),
                  fp8_layer)


def _holds(sched: Schedule, p: int, v: int) -> np.ndarray:
    """(p, chunks per rank) the global chunk of each (stage, local chunk): layout_for (memoised)."""
    key = (sched.name, p, v)
    got = _HOLDS.get(key)
    if got is None:
        lay = layout_for(sched, p, v)
        got = _HOLDS[key] = np.array([[lay.chunk_index(s, c) for c in range(sched.chunks_per_rank(v))]
                                      for s in range(p)])
    return got


def _optimizer(layout: Layout, groups: np.ndarray, zero: int, optimizer: str, hbm: float) -> np.ndarray:
    """techniques/optimizer.optimizer_time for every stage: ZeRO >= 1 steps each GPU's shard only."""
    dense = layout.params.sum(axis=1)
    expert = layout.expert.sum(axis=1)
    if zero >= 1:
        dense = dense / groups[:, 0]
        expert = expert / np.maximum(groups[:, 1], 1)
    return (dense + expert) * OPTIMIZER_TRAFFIC_BYTES[optimizer] / hbm


__all__ = ["Layout", "NetInfo", "RowProfile", "row_profile"]
