"""Data-parallel gradient buckets: reduction overlapped with the backward, and P3 priorities.

- Bucketing (Li et al., "PyTorch Distributed: Experiences on Accelerating Data Parallel
  Training", VLDB 2020, Sec. 3.2.3): gradients are reduced in buckets of ``bucket_MB`` as the
  backward produces them, so bucket j of M becomes ready after (j+1)/M of the last backward.
- Priorities (Jayarajan et al., "Priority-based Parameter Propagation for Distributed DNN
  Training" (P3), SysML 2019; Peng et al., ByteScheduler, SOSP 2019): the first layers'
  gradients, produced last by the backward, are reduced first, so the next forward can start on
  them early.
- Bucket size and wire dtype are the framework's defaults (explorer/config/frameworks.py): Megatron-Core
  max(40M, 1M x dp) fp32 elements, DeepSpeed 5e8 elements, PyTorch DDP 25 MB.
- ZeRO-1/2 (Rajbhandari et al. SC20): reduce-scatter instead of all-reduce, then the updated
  parameters all-gathered; ZeRO-3/FSDP reduces one unit (here: the chunk) at a time.
"""
from __future__ import annotations

import math
from typing import cast

from ...config import Scenario
from ...engine.records import BucketInfo, priced_link
from ...engine.scheduler import Task, TaskGraph
from ...network.collectives import bus_factor
from ...network.compression import OVERLAPS_BACKWARD
from ...network.groups import Network
from ...physics.hardware import streaming_bytes_per_s
from ...workloads.registry import compression_plan
from ..chunks import ChunkWork
from .dp_contention import hidden_seconds
from .fsdp import comm_zero
from .link_sharing import flow
from .optimizer import grad_reduce_bytes, param_bytes
from .pair_sync import PAIR, PAIR_OP, fsdp_paired, pair_bytes, pair_synced

# Buckets of one chunk kept as separate engine tasks; more are merged, k per task, so that the
# graph grows with chunks, not with parameters / bucket_MB (a 405B stage has ~1000 buckets of
# 25 MB).  8 groups keep P3's layer order visible at a cost of 8 tasks per chunk and dimension;
# the merged buckets keep their total bytes and time.  A modelling resolution, not a measurement
# (config/budget.py counts with the same value).
MAX_BUCKET_TASKS = 8


def reduce_op(sc: Scenario) -> str | None:
    """The collective of the step's gradient bucket tasks: all-reduce without ZeRO, reduce-scatter
    under ZeRO 1-2 (fsdp.comm_zero); under ZeRO-3 reduce-scatter when its accumulated shards are
    all-reduced with the other weight copy (pair_sync.fsdp_paired: the only bucket tasks, the
    reduce-scatters themselves run in the passes), else none."""
    zero = comm_zero(sc)
    if zero == 3:
        return "reduce-scatter" if fsdp_paired(sc) else None
    return "all-reduce" if zero == 0 else "reduce-scatter"


def reduce_plan(sc: Scenario, op: str, n: int) -> tuple[tuple[str, float], ...] | None:
    """The collectives (and bytes per gradient element) a compressed bucket reduction runs instead
    of ``op`` over ``n`` ranks; None when it is not compressed (communication.compression none, or
    a parameter gather).  Under ZeRO 1-2 a quantiser's reduce-scatter is its all-to-all phase alone
    (each rank keeps its summed shard; ZeRO++ qgZ, Wang et al. 2024)."""
    comp = sc.communication.compression
    if not comp.active or op not in ("all-reduce", "reduce-scatter"):
        return None
    ops = compression_plan(comp, sc.model, sc.parallelism.tp, n).ops
    if op == "reduce-scatter" and ops[0][0] == "all-to-all":
        ops = ops[:1]
    return ops


def wire_seconds(net: Network, op: str, size: float, dim: str, stage: int,
                 ops: tuple[tuple[str, float], ...] | None, nbytes: float) -> float:
    """Seconds on the wire of one bucket's ``op`` on ``size`` bytes: the collective, or a
    compressor's collectives (``ops``: bytes per element of ``size / nbytes`` elements)."""
    if ops is None:
        return net.cost(op, size, dim, stage).time_s
    elements = size / nbytes
    return sum(net.cost(o, elements * per, dim, stage).time_s for o, per in ops)


def _per_task(buckets: int, tasks: int, j: int) -> int:
    """Buckets merged into task j of ``tasks`` (the first ones take the remainder)."""
    return buckets // tasks + (1 if j < buckets % tasks else 0)


def dp_tasks(g: TaskGraph, sc: Scenario, net: Network, ch: ChunkWork, s: int, c: int, priority_rank: int,
             op: str, deps: list[tuple[int, float]], ready_task: int | None,
             sm_factor: float = 0.0) -> list[int]:
    """Bucketed DP collectives ``op`` of chunk ``ch`` (local chunk ``c``) on class ``s``, dense and
    expert gradients; their task ids.

    When ``ready_task`` is given, bucket j of M becomes ready after (j+1)/M of that task (the
    backward produces gradients progressively); otherwise every bucket depends on ``deps``.
    ``priority_rank`` orders chunks for P3 priorities (the global chunk index).  ``sm_factor``: the
    share of the ready task's speed its overlapped buckets take (dp_contention), which lengthens it."""
    if sc.communication.compression.active:
        return _made(g, sc, net, ch, s, c, priority_rank, op, deps, ready_task, sm_factor)
    # Without compression every task this makes is fixed by what the key names but for its chunk
    # index, priority, dependencies and ready task: made once per key and replayed (DeepSeek-V3's
    # 16 stages x 2 chunks x 2 ops call this 64 times with a handful of keys).  Shapes are the
    # network's memoised objects (alike stages share one), so their ids name their groups' costs.
    key = (op, ready_task is None, ch.params, ch.expert_params, ch.grad_curve,
           id(net.shape("dp", s)), id(net.shape("edp", s)), id(net.shape(PAIR, s)))
    memo = net.__dict__.setdefault("_bucket_templates", {})
    plan = memo.get(key)
    if plan is None:
        first = len(g.tasks)
        out = _made(g, sc, net, ch, s, c, priority_rank, op, deps, ready_task, sm_factor)
        made = g.tasks[first:]
        # Each task's own fields, and where its ready fraction sits among its dependencies.
        memo[key] = tuple((t.duration, t.deps[-1][1] if ready_task is not None else None,
                           cast(BucketInfo, t.info)[1:], t.links, t.tier, t.wire) for t in made)
        return out
    rank_priority = sc.communication.dp_priority and ready_task is not None
    out = []
    tasks = g.tasks
    jobs: list[tuple[float, float]] = []
    for t_s, frac, tail, links, tier, wire in plan:
        d = list(deps)
        if ready_task is not None:
            d.append((ready_task, frac))
            jobs.append((frac, t_s))
        # tail[10], tail[11]: the task's layer rank and the chunk's bucket tasks (BucketInfo).
        priority = 1 + priority_rank * MAX_BUCKET_TASKS + tail[10] if rank_priority else 1
        # A tuple of its own: analysis/utilisation.class_calls counts a tuple that tasks share once,
        # scaled, which would round the traffic differently from the tasks made one by one.
        tasks.append(Task(s, "dp", "dp", t_s, d, priority, (("dp", t_s),), BucketInfo(c, *tail), (*links,),
                          tier, wire))
        out.append(len(tasks) - 1)
    _slow_ready_task(g, ready_task, sm_factor, jobs)
    return out


def _made(g: TaskGraph, sc: Scenario, net: Network, ch: ChunkWork, s: int, c: int, priority_rank: int,
          op: str, deps: list[tuple[int, float]], ready_task: int | None, sm_factor: float) -> list[int]:
    """dp_tasks, every task priced and made."""
    out: list[int] = []
    jobs: list[tuple[float, float]] = []       # (ready fraction of ready_task, seconds) per bucket task
    # Gradients travel in the framework's reduction dtype (fp32 for Megatron bf16, explorer/
    # frameworks.py); gathered parameters in the bf16 working copy (fp32 weights trained in fp32).
    nbytes = grad_reduce_bytes(sc) if op != "all-gather" else param_bytes(sc)
    # Two-direction schedules: each bucket then all-reduced with the stage's other weight copy
    # (pair_sync.py), even when the data-parallel group is one GPU.  Under ZeRO-3 the layers'
    # reduce-scatters run inside the passes (fsdp.py); only the accumulated shard's pair all-reduce
    # is a task here (pair_sync.fsdp_paired).
    fsdp = op == "reduce-scatter" and fsdp_paired(sc)
    paired = (pair_synced(sc, op) or fsdp) and net.group_size(PAIR, s) > 1
    for dim, params in (("dp", ch.params), ("edp", ch.expert_params)):
        total = params * nbytes
        n_dim = net.group_size(dim, s)
        if total <= 0 or (n_dim <= 1 and not paired):
            continue
        if sc.parallelism.zero == 3:
            buckets = 1                    # FSDP gathers/reduces one unit (here: the chunk) at a time
        else:
            bucket_MB = sc.communication.bucket_MB
            assert bucket_MB is not None               # filled by the defaults (config/loading.py)
            buckets = max(1, math.ceil(total / (bucket_MB * 1e6)))
        size = total / buckets
        if n_dim <= 1 or fsdp:         # only the weight copies' exchange: a bucket task of its own
            _pair_only(g, sc, net, ch, s, c, priority_rank, deps, ready_task, params,
                       pair_bytes(size, n_dim), buckets, out, jobs)
            continue
        cc = net.cost(op, size, dim, s)
        ops = reduce_plan(sc, op, cc.n)
        seconds = wire_seconds(net, op, size, dim, s, ops, nbytes)
        # The tier that limits the bucket and its seconds beyond latency: it shares that tier with
        # the pipeline sends beside it (link_sharing.py); a compressor's calls, their sum.
        tier, wire = flow(sc, cc)
        if ops is not None:
            calls = [flow(sc, net.cost(o, size / nbytes * per, dim, s)) for o, per in ops]
            tier, wire = calls[0][0], sum(w for _, w in calls)
        # A compressor's encode runs on the compute stream before the bucket leaves, its decode
        # after it returns (PyTorch DDP communication hooks run their kernels in the backward's
        # stream; Vogels et al. 2019 Sec. 5): element-wise HBM passes (explorer/network/compression.py).
        coder = (compression_plan(sc.communication.compression, sc.model, sc.parallelism.tp, cc.n)
                 if ops else None)
        hooked = ready_task is not None and sc.communication.compression.kind in OVERLAPS_BACKWARD
        hbm = streaming_bytes_per_s(sc.hardware.gpu)
        tasks = min(buckets, MAX_BUCKET_TASKS)
        # The pair all-reduce of the bucket (or of its ZeRO shard), after its dp reduction.
        twin = pair_bytes(size, cc.n) if paired else 0.0
        twin_s = net.cost(PAIR_OP, twin, PAIR, s).time_s if paired else 0.0
        for j in range(tasks):
            k = _per_task(buckets, tasks, j)
            d: list[tuple[int, float]] = list(deps)
            if ready_task is not None:
                done = sum(_per_task(buckets, tasks, i) for i in range(j + 1))
                # In proportion for equal layers; a ResNet's gradients by its blocks' sizes.
                d.append((ready_task, ch.ready_fraction(done / buckets)))
                jobs.append((d[-1][1], k * (seconds + twin_s)))
            # Layer order of the group: layer_rank 0 holds the chunk's first layers (produced last).
            if ops is None:
                sent, bus = size * k, size * k * bus_factor(op, cc.n)
            else:                      # the compressed buffers the compressor's collectives move
                elements = size / nbytes
                sent = k * elements * sum(per for _, per in ops)
                bus = k * elements * sum(per * bus_factor(o, cc.n) for o, per in ops)
            sent, bus = sent + k * twin, bus + k * twin * bus_factor(PAIR_OP, 2)
            shown, label = cc, op
            if ops is not None:        # the hover and the bottleneck name what ran: the first call
                shown = net.cost(ops[0][0], elements * ops[0][1], dim, s)
                label = f"{sc.communication.compression.kind} {'+'.join(o for o, _ in ops)}"
            info = BucketInfo(c, sent, bus, k, size, cc.n, shown.algorithm,
                              shown.limited_by, shown.busbw_GBps, label, dim, tasks - 1 - j, tasks,
                              k / buckets * params / max(ch.params + ch.expert_params, 1.0))
            priority = 1
            if sc.communication.dp_priority and ready_task is not None:
                priority = 1 + priority_rank * MAX_BUCKET_TASKS + (tasks - 1 - j)
            if ops is None:
                links = tuple(priced_link(net, dim, op, size, s, k))
            else:                      # what the compressor's collectives put on the wire
                links = tuple(c for o, per in ops for c in priced_link(net, dim, o, elements * per, s, k))
            if paired:
                links += tuple(priced_link(net, PAIR, PAIR_OP, twin, s, k))
            if coder is not None:
                enc = k * elements * coder.encode_bytes / hbm
                enc_id = g.add(Task(s, "compute", "compress", enc, d, parts=(("compute", enc),)))
                # Overlapped with the backward, a DDP communication hook encodes a bucket the
                # moment autograd marks it ready, its kernels interleaved with the backward's in the
                # same stream: the collective leaves then, and the encode's time is charged to the
                # compute stream (drawn after the backward pass that it interleaves with).  Without
                # overlap, or for 1-bit Adam (compressed in the optimizer step), the encode runs
                # after the backward, before the collective (explorer/network/compression.py).
                if not hooked:
                    d = [(enc_id, 1.0)]
            # The tier shared with the pipeline sends stays the dp reduction's (link_sharing.py); the
            # pair exchange's seconds are added at full rate.
            t_s = k * (seconds + twin_s)
            tid = g.add(Task(s, "dp", "dp", t_s, d, priority=priority,
                             parts=(("dp", t_s),), info=info, links=links, tier=tier, wire=k * wire))
            if coder is not None:
                dec = k * elements * coder.decode_bytes / hbm
                after = [(tid, 1.0)] + ([(enc_id, 1.0)] if hooked else [])
                tid = g.add(Task(s, "compute", "compress", dec, after, parts=(("compute", dec),)))
            out.append(tid)
    _slow_ready_task(g, ready_task, sm_factor, jobs)
    return out


def _slow_ready_task(g: TaskGraph, ready_task: int | None, sm_factor: float,
                     jobs: list[tuple[float, float]]) -> None:
    """Lengthen the pass the buckets overlap by the SM share they take (dp_contention.py)."""
    if ready_task is not None and sm_factor > 0 and jobs:
        task = g.tasks[ready_task]
        slow = sm_factor * hidden_seconds(task.duration, jobs)
        if slow > 0:
            task.duration += slow
            task.parts = task.parts + (("compute", slow),)


def _pair_only(g: TaskGraph, sc: Scenario, net: Network, ch: ChunkWork, s: int, c: int, priority_rank: int,
               deps: list[tuple[int, float]], ready_task: int | None, params: float, size: float,
               buckets: int, out: list[int], jobs: list[tuple[float, float]]) -> None:
    """The bucket tasks of a data-parallel group of one GPU, or of ZeRO-3's accumulated shards
    (``size``: the bytes each rank exchanges per bucket), under a two-direction schedule: each
    only the pair all-reduce of its buckets with the stage's other weight copy (pair_sync.py), cut
    and released as dp_tasks cuts and releases the buckets."""
    cc = net.cost(PAIR_OP, size, PAIR, s)
    tier, wire = flow(sc, cc)
    tasks = min(buckets, MAX_BUCKET_TASKS)
    for j in range(tasks):
        k = _per_task(buckets, tasks, j)
        d: list[tuple[int, float]] = list(deps)
        if ready_task is not None:
            done = sum(_per_task(buckets, tasks, i) for i in range(j + 1))
            d.append((ready_task, ch.ready_fraction(done / buckets)))
            jobs.append((d[-1][1], k * cc.time_s))
        info = BucketInfo(c, size * k, size * k * bus_factor(PAIR_OP, cc.n), k, size, cc.n, cc.algorithm,
                          cc.limited_by, cc.busbw_GBps, f"{PAIR_OP} (weight copies)", PAIR, tasks - 1 - j,
                          tasks, k / buckets * params / max(ch.params + ch.expert_params, 1.0))
        priority = 1
        if sc.communication.dp_priority and ready_task is not None:
            priority = 1 + priority_rank * MAX_BUCKET_TASKS + (tasks - 1 - j)
        out.append(g.add(Task(s, "dp", "dp", k * cc.time_s, d, priority=priority,
                              parts=(("dp", k * cc.time_s),), info=info,
                              links=tuple(priced_link(net, PAIR, PAIR_OP, size, s, k)), tier=tier,
                              wire=k * wire)))
