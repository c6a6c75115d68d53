"""Gradient synchronisation between the two weight copies of a two-direction pipeline.

DualPipe (DeepSeek-V3 technical report, arXiv 2412.19437, Sec. 3.2.1: "DualPipe requires keeping
two copies of the model parameters") and Chimera (Li & Hoefler SC21, Sec. 3.2) place stage r on
rank r for one direction and on rank p-1-r for the other, so each stage's parameters live on two
pipeline ranks, each copy accumulating the gradients of half the micro-batches.  Before the
optimizer the two copies must sum their gradients: deepseek-ai/DualPipe's
examples/example_dualpipe.py ("Check grads") adds to each copy the gradient of its twin on rank
p-1-r after ``DualPipe.step`` — an all-reduce over the pair; Chimera all-reduces the replicas of a
stage (Sec. 3.2), launched eagerly as soon as a stage's gradients are ready.

Modelled hierarchically, bucket by bucket: each gradient bucket is first reduced in its own
data-parallel group as before (all-reduce, or reduce-scatter under ZeRO 1-2), then all-reduced
between the two pipeline ranks that hold the stage (the pair group: same tp/cp/dp coordinates,
pipeline ranks s and p-1-s; explorer/network/groups.py).  Under ZeRO 1-2 each rank then holds its
1/n shard of the bucket, and the twins with the same data-parallel coordinate hold the same shard,
so the pair all-reduces the shard.  The sum over the 2 x dp ranks that hold the stage is the same
as one all-reduce over all of them (Chimera's 2W replicas); the hierarchical route moves
2(n-1)/n + 1 bucket sizes per rank instead of 2(2n-1)/(2n), an upper side by at most one bucket
size, and it keeps ZeRO's shards over the dp group (the optimizer's).

The pair exchange runs right after its bucket's dp reduction on the same stream (eager: it overlaps
the backward as the buckets do), so it is priced as part of the bucket's task.  Both schedules are
mirror-symmetric (rank r's direction 0 is rank p-1-r's direction 1), so the twin's copy of a
bucket is ready when this copy's is; a straggler rank breaks that symmetry, which is not modelled.
The pair exchange is never compressed (communication.compression applies to the dp reduction).
"""
from __future__ import annotations

from ...config import Scenario
from ...schedules.registry import get as get_schedule

PAIR = "pair"                    # the dimension of the two weight copies' group (dimensions.py)
PAIR_OP = "all-reduce"


def pair_synced(sc: Scenario, op: str) -> bool:
    """True when a gradient reduction ``op`` of ``sc`` is followed by the weight copies' pair
    all-reduce: a two-direction schedule (registry ``two_directions``) with more than one stage, a
    gradient reduction (not a parameter gather) and ZeRO below 3 (ZeRO-3/FSDP reduces layer by
    layer without buckets: techniques/fsdp.py, not paired here)."""
    return (op in ("all-reduce", "reduce-scatter") and sc.parallelism.pp > 1
            and sc.parallelism.zero != 3 and get_schedule(sc.parallelism.schedule).two_directions)


def pair_bytes(size: float, op: str, n: int) -> float:
    """Bytes one rank all-reduces with its twin for a bucket of ``size`` bytes reduced by ``op``
    over ``n`` data-parallel ranks: the whole bucket after an all-reduce, its 1/n shard after a
    reduce-scatter (ZeRO 1-2: each rank keeps the shard it updates; Rajbhandari et al. SC20)."""
    return size / n if op == "reduce-scatter" and n > 1 else size
