"""Gradient synchronisation between the two weight copies of a two-direction pipeline.

DualPipe (DeepSeek-V3 technical report, arXiv 2412.19437, Sec. 3.2.1: "DualPipe requires keeping
two copies of the model parameters") and Chimera (Li & Hoefler SC21, Sec. 3.2) place stage r on
rank r for one direction and on rank p-1-r for the other, so each stage's parameters live on two
pipeline ranks, each copy accumulating the gradients of half the micro-batches.  Before the
optimizer the two copies must sum their gradients: deepseek-ai/DualPipe's
examples/example_dualpipe.py ("Check grads") adds to each copy the gradient of its twin on rank
p-1-r after ``DualPipe.step`` — an all-reduce over the pair; Chimera all-reduces the replicas of a
stage (Sec. 3.2), launched eagerly as soon as a stage's gradients are ready.

Modelled as a two-level (hierarchical) reduction over the 2 x n ranks that hold the stage, bucket
by bucket: the bucket is reduce-scattered in its own data-parallel group of n ranks, each rank's
1/n shard is all-reduced between the two pipeline ranks that hold the stage (the pair group: same
tp/cp/dp coordinates, pipeline ranks s and p-1-s; explorer/network/groups.py), and, without ZeRO,
the shards are all-gathered back.  A ring all-reduce is exactly a reduce-scatter followed by an
all-gather (Patarasuk & Yuan, JPDC 2009; NCCL's ring), so the dp all-reduce is priced as before and
the pair's shard exchange added to it; under ZeRO 1-2 the dp reduce-scatter stays as it is and the
twins with the same dp coordinate all-reduce the shard they both update.  Bytes per rank: ZeRO 0
2(n-1)/n + 1/n = 2(2n-1)/(2n) bucket sizes, exactly one ring all-reduce over all 2n holders
(Chimera's allreduce among a stage's replicas); ZeRO 1-2 (n-1)/n + 1/n, shards kept over the dp
group (the optimizer's).  At n = 1 the pair all-reduces the whole bucket, as DualPipe's example.

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


def pair_bytes(size: float, n: int) -> float:
    """Bytes one rank all-reduces with its twin for a bucket of ``size`` bytes reduced over ``n``
    data-parallel ranks: the 1/n shard the dp reduce-scatter leaves it (the reduce-scatter phase of
    a ring all-reduce, or ZeRO 1-2's own; Rajbhandari et al. SC20), the whole bucket when n = 1."""
    return size / max(n, 1)
