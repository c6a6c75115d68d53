"""Data-parallel gradient buckets: reduction overlapped with the backward, and P3 priorities.

- Bucketing (Li et al., "PyTorch Distributed: Experiences on Accelerating Data Parallel
  Training", VLDB 2020, Sec. 3.2.3): gradients are reduced in buckets of ``bucket_MB`` as the
  backward produces them, so bucket j of M becomes ready after (j+1)/M of the last backward.
- Priorities (Jayarajan et al., "Priority-based Parameter Propagation for Distributed DNN
  Training" (P3), SysML 2019; Peng et al., ByteScheduler, SOSP 2019): the first layers'
  gradients, produced last by the backward, are reduced first, so the next forward can start on
  them early.
- Bucket size and wire dtype are the framework's defaults (explorer/frameworks.py): Megatron-Core
  max(40M, 1M x dp) fp32 elements, DeepSpeed 5e8 elements, PyTorch DDP 25 MB.
- ZeRO-1/2 (Rajbhandari et al. SC20): reduce-scatter instead of all-reduce, then the updated
  parameters all-gathered; ZeRO-3/FSDP reduces one unit (here: the chunk) at a time.
"""
from __future__ import annotations

import math

from ...collectives import bus_factor
from ...engine import Task, TaskGraph
from ...network import Network
from ...scenario import Scenario
from ..chunks import ChunkWork
from ..records import BucketInfo, priced_link
from .optimizer import PARAM_BYTES, grad_reduce_bytes

# Buckets of one chunk kept as separate engine tasks; more are merged, k per task, so that the
# graph grows with chunks, not with parameters / bucket_MB (a 405B stage has ~1000 buckets of
# 25 MB).  8 groups keep P3's layer order visible at a cost of 8 tasks per chunk and dimension;
# the merged buckets keep their total bytes and time.  A modelling resolution, not a measurement
# (config/budget.py counts with the same value).
MAX_BUCKET_TASKS = 8


def _per_task(buckets: int, tasks: int, j: int) -> int:
    """Buckets merged into task j of ``tasks`` (the first ones take the remainder)."""
    return buckets // tasks + (1 if j < buckets % tasks else 0)


def dp_tasks(g: TaskGraph, sc: Scenario, net: Network, ch: ChunkWork, s: int, c: int, priority_rank: int,
             op: str, deps: list, ready_task: int | None) -> list[int]:
    """Bucketed DP collectives ``op`` of chunk ``ch`` (local chunk ``c``) on class ``s``, dense and
    expert gradients; their task ids.

    When ``ready_task`` is given, bucket j of M becomes ready after (j+1)/M of that task (the
    backward produces gradients progressively); otherwise every bucket depends on ``deps``.
    ``priority_rank`` orders chunks for P3 priorities (the global chunk index)."""
    out: list[int] = []
    # Gradients travel in the framework's reduction dtype (fp32 for Megatron bf16, explorer/
    # frameworks.py); gathered parameters in the bf16 working copy.
    nbytes = grad_reduce_bytes(sc) if op != "all-gather" else PARAM_BYTES
    for dim, params in (("dp", ch.params), ("edp", ch.expert_params)):
        total = params * nbytes
        if total <= 0 or net.group_size(dim, s) <= 1:
            continue
        if sc.parallelism.zero == 3:
            buckets = 1                    # FSDP gathers/reduces one unit (here: the chunk) at a time
        else:
            buckets = max(1, math.ceil(total / (sc.communication.bucket_MB * 1e6)))
        size = total / buckets
        cc = net.cost(op, size, dim, s)
        tasks = min(buckets, MAX_BUCKET_TASKS)
        for j in range(tasks):
            k = _per_task(buckets, tasks, j)
            d = list(deps)
            if ready_task is not None:
                done = sum(_per_task(buckets, tasks, i) for i in range(j + 1))
                d.append((ready_task, done / buckets))
            # Layer order of the group: layer_rank 0 holds the chunk's first layers (produced last).
            info = BucketInfo(c, size * k, size * k * bus_factor(op, cc.n), k, size, cc.n, cc.algorithm,
                              cc.boundary, cc.busbw_GBps, op, dim, tasks - 1 - j, tasks,
                              k / buckets * params / max(ch.params + ch.expert_params, 1.0))
            priority = 1
            if sc.communication.dp_priority and ready_task is not None:
                priority = 1 + priority_rank * MAX_BUCKET_TASKS + (tasks - 1 - j)
            links = tuple(priced_link(net, dim, op, size, s, k))
            out.append(g.add(Task(s, "dp", "dp", k * cc.time_s, d, priority=priority,
                                  parts=(("dp", k * cc.time_s),), info=info, links=links)))
    return out
