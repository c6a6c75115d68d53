"""One configuration as the numbers its iteration is assembled from (a :class:`RowProfile`).

The builder (taskgraph/builder.py) gives every stage its chunks, prices them and adds the
transfers, gradient buckets, parameter gathers and the optimizer step.  This module computes the
same quantities for one scenario without building the graph, from memoised pieces:

- chunk work: estimate/chunk_basis.py (chunk_work's pieces, the builder's layer split);
- pipeline transfers: one send-recv of layer.pp_message_bytes on each stage pair (builder's
  _transfer_shape);
- gradient buckets and ZeRO 1-2 gathers: the bucket tasks techniques/dp_buckets.dp_tasks creates
  (the same bucket count, merging into at most MAX_BUCKET_TASKS tasks and readiness fractions);
- the optimizer step: techniques/optimizer.optimizer_time.

What remains per row is a handful of dictionary look-ups and small arrays; the per-row arithmetic
over stages happens later, for many rows at once (estimate/pipeline.py, estimate/sync.py).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..frameworks import profile as framework_profile
from ..scenario import Scenario
from ..schedules.registry import Schedule
from ..schedules.registry import get as get_schedule
from ..taskgraph.builder import IDEAL_ASPECTS
from ..taskgraph.layer import pp_message_bytes
from ..taskgraph.layout import layout_for
from ..taskgraph.techniques.dp_buckets import MAX_BUCKET_TASKS, _per_task
from ..taskgraph.techniques.optimizer import PARAM_BYTES, grad_reduce_bytes, optimizer_time
from .chunk_basis import F_IDX, FEATURES, basis, chunk_counts, costs, layer_split
from .keys import RowNetwork, compute_key, network_key

_BALANCED = [F_IDX[k] for k in FEATURES if k.startswith(("fwd.", "bwd.", "fsdp_hidden"))] + \
    [F_IDX["hw_flops"], F_IDX["model_flops"], F_IDX["fsdp_bytes"]]
JOBS = 2 * MAX_BUCKET_TASKS          # bucket tasks of one chunk: dense and expert gradients


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
    feat: np.ndarray                 # (p*v, FEATURES) per global chunk
    counts: np.ndarray               # (p*v, ROLES) dense layers, MoE layers, ends of each chunk
    layer_bytes: np.ndarray          # (p*v,) largest layer ZeRO-3 gathers per chunk
    holds: np.ndarray                # (p, nch) global chunk of each (stage, local chunk)
    transfer: np.ndarray             # (p,) one pipeline transfer on each stage pair
    sm_factor: float                 # share of a pass slowed per second of hidden communication
    job_frac: np.ndarray             # (p, nch*JOBS) readiness of each reduce bucket task in its pass
    job_dur: np.ndarray              # (p, nch*JOBS) its seconds (0: no task)
    overlap_reduce: bool             # buckets leave during the last backward (else after the stage)
    gates: np.ndarray                # (p, nch) when each chunk's first forward may start
    trailing: np.ndarray             # (p,) ZeRO 1-2 gathers after the optimizer step
    optimizer: np.ndarray            # (p,) optimizer step seconds
    dp_groups: np.ndarray            # (p, 2) data-parallel and expert data-parallel group sizes
    net: RowNetwork
    ckey: tuple


def _ideal(sc: Scenario) -> frozenset[str]:
    return IDEAL_ASPECTS if sc.parallelism.ideal_pipeline else frozenset()


def row_profile(sc: Scenario) -> RowProfile:
    """Everything the estimate of ``sc`` needs, from memoised pieces (see module docstring)."""
    par, com = sc.parallelism, sc.communication
    sched = get_schedule(par.schedule)
    ideal = _ideal(sc)
    free = "comm" in ideal
    ckey = compute_key(sc)
    net = RowNetwork(sc, free, network_key(sc, free))
    p, v = par.pp, par.vpp
    nch = sched.chunks_per_rank(v)
    m = sc.micro_batches * par.token_slices
    tied = sc.model.tied_embeddings and (p == 1 or sched.two_directions)
    split = layer_split(sc, ckey, sched.two_directions)
    counts = chunk_counts(sc, split)
    nchunks = len(split)
    feat = np.empty((nchunks, len(FEATURES)))
    layer_bytes = np.empty(nchunks)
    sigs = [net.stage_signature(s) for s in range(p)]
    by_sig: dict[tuple, tuple[np.ndarray, np.ndarray]] = {}
    for gc in range(nchunks):
        s = gc % p
        sig = sigs[s]
        b = by_sig.get(sig)
        if b is None:
            b = by_sig[sig] = basis(sc, ckey, net, s, ideal, tied, sig)
        feat[gc] = counts[gc] @ b[0]
        present = counts[gc] > 0
        layer_bytes[gc] = float(np.max(np.where(present, b[1], 0.0)))
    if "balance" in ideal:
        feat[:, _BALANCED] = feat[:, _BALANCED].mean(axis=0)
    lay = layout_for(sched, p, v)
    holds = np.array([[lay.chunk_index(s, c) for c in range(nch)] for s in range(p)])
    msg = pp_message_bytes(sc)
    transfer = np.array([net.cost("send-recv", msg, "pp", k).time_s for k in range(p)]) if p > 1 \
        else np.zeros(1)
    gpu = sc.hardware.gpu
    sm_factor = 0.0 if ideal else min(com.comm_sms or 0, (gpu.sms or 132) - 1) / (gpu.sms or 132)
    fw = framework_profile(sc.training.framework)
    dp_groups = np.array([[net.group_size("dp", s), net.group_size("edp", s)] for s in range(p)])
    params = feat[holds, F_IDX["params"]]                    # (p, nch)
    expert = feat[holds, F_IDX["expert_params"]]
    job_frac, job_dur, gates, trailing = _dp_work(sc, net, params, expert, fw)
    if "optimizer" in ideal:
        opt = np.zeros(p)
    else:
        hbm = costs(sc, ckey).cm.hbm_bytes_per_s
        opt = np.array([optimizer_time(params[s].sum(), expert[s].sum(), int(dp_groups[s, 0]),
                                       int(dp_groups[s, 1]), par.zero, sc.training.optimizer, hbm)
                        for s in range(p)])
    return RowProfile(sc, sched, p, v, nch, m, m * sched.iterations_simulated, fw.blocking_p2p, feat,
                      counts, layer_bytes, holds, transfer, sm_factor, job_frac, job_dur,
                      com.dp_overlap and fw.grad_reduce_overlaps_backward, gates, trailing, opt, dp_groups,
                      net, ckey)


def bucket_tasks(sc: Scenario, net: RowNetwork, params: float, expert: float, stage: int,
                 op: str) -> list[tuple[float, float]]:
    """(readiness fraction, seconds) of each bucket task dp_buckets.dp_tasks makes for a chunk
    holding ``params`` dense and ``expert`` expert parameters, dense first."""
    nbytes = grad_reduce_bytes(sc) if op != "all-gather" else PARAM_BYTES
    out: list[tuple[float, float]] = []
    for dim, n_params in (("dp", params), ("edp", expert)):
        total = n_params * nbytes
        if total <= 0 or net.group_size(dim, stage) <= 1:
            continue
        bucket = sc.communication.bucket_MB * 1e6
        buckets = 1 if sc.parallelism.zero == 3 else max(1, math.ceil(total / bucket))
        cc = net.cost(op, total / buckets, dim, stage)
        tasks = min(buckets, MAX_BUCKET_TASKS)
        done = 0
        for j in range(tasks):
            k = _per_task(buckets, tasks, j)
            done += k
            out.append((done / buckets, k * cc.time_s))
    return out


def _dp_work(sc: Scenario, net: RowNetwork, params: np.ndarray, expert: np.ndarray, fw) -> tuple:
    """Reduce bucket tasks per stage, ZeRO 1-2 gathers at the start (gates) or after the step."""
    p, nch = params.shape
    zero, com = sc.parallelism.zero, sc.communication
    frac = np.zeros((p, nch * JOBS))
    dur = np.zeros((p, nch * JOBS))
    gates = np.zeros((p, nch))
    trailing = np.zeros(p)
    if zero == 3:
        return frac, dur, gates, trailing
    op = "all-reduce" if zero == 0 else "reduce-scatter"
    gather_overlap = com.dp_overlap and fw.param_gather_overlaps_forward
    memo: dict[tuple, tuple] = {}
    for s in range(p):
        sig = (net.shape("dp", s), net.shape("edp", s))
        clock = 0.0
        for c in range(nch):
            key = (params[s, c], expert[s, c], sig)
            got = memo.get(key)
            if got is None:
                red = bucket_tasks(sc, net, params[s, c], expert[s, c], s, op)
                gat = (bucket_tasks(sc, net, params[s, c], expert[s, c], s, "all-gather")
                       if zero in (1, 2) else [])
                got = memo[key] = (red, sum(d for _, d in gat), bool(gat))
            red, gather_s, has_gather = got
            for j, (f, d) in enumerate(red):
                frac[s, c * JOBS + j] = f
                dur[s, c * JOBS + j] = d
            if gather_overlap:
                clock += gather_s
                if has_gather:
                    gates[s, c] = clock
            else:
                trailing[s] += gather_s
    return frac, dur, gates, trailing
