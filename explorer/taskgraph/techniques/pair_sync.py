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

Under ZeRO-3/FSDP the gradients are reduce-scattered layer by layer over the dp group after each
micro-batch's backward, inside the passes (techniques/fsdp.py), and each rank accumulates the 1/n
shard it owns across the micro-batches (DeepSpeed ZeRO-3's partitioned fp32 gradients, FSDP's
sharded ``.grad``; Rajbhandari et al. SC20 Sec. 5.3).  The twins' sum is linear, so each rank
all-reduces its accumulated shard with its twin once per step, after the stage's last backward
(the shard is final only then: fsdp.grad_reduce_overlaps), as DualPipe's example sums the copies
once after ``step`` and Chimera once per iteration: bytes per rank = the chunk's gradients / n
(the whole gradient at n = 1), one unit per chunk as ZeRO-3's reduction (dp_buckets.dp_tasks,
:func:`fsdp_paired`).  Exchanging every micro-batch's shard instead
would move m times the bytes for the same sum.  FSDP2 under a pipeline reduces in ZeRO-2's pattern
(fsdp.comm_zero), so it is paired as ZeRO 1-2 are.
"""
from __future__ import annotations

from ...config import Scenario
from ...schedules.registry import get as get_schedule
from .fsdp import comm_zero

PAIR = "pair"                    # the dimension of the two weight copies' group (dimensions.py)
PAIR_OP = "all-reduce"


def pair_synced(sc: Scenario, op: str) -> bool:
    """True when a bucketed gradient reduction ``op`` of ``sc`` is followed by the weight copies'
    pair all-reduce: a two-direction schedule with more than one stage (:func:`two_copies`), a
    gradient reduction (not a parameter gather) and the bucketed reductions of ZeRO below 3
    (fsdp.comm_zero: FSDP2 under a pipeline reduces as ZeRO-2, in buckets; ZeRO-3/FSDP's
    layer-wise reduce-scatters are paired by :func:`fsdp_paired` instead)."""
    return op in ("all-reduce", "reduce-scatter") and comm_zero(sc) != 3 and two_copies(sc)


def two_copies(sc: Scenario) -> bool:
    """A two-direction schedule (registry ``two_directions``) with more than one stage: every stage's
    weights held on pipeline ranks s and p-1-s."""
    return sc.parallelism.pp > 1 and get_schedule(sc.parallelism.schedule).two_directions


def fsdp_paired(sc: Scenario) -> bool:
    """True when ZeRO-3/FSDP (fsdp.comm_zero 3), whose layer-wise reduce-scatters run inside the
    passes, ends the step with each rank's accumulated gradient shard all-reduced with its twin
    (module docstring)."""
    return comm_zero(sc) == 3 and two_copies(sc)


def pair_bytes(size: float, n: int) -> float:
    """Bytes one rank all-reduces with its twin for a bucket of ``size`` bytes reduced over ``n``
    data-parallel ranks: the 1/n shard the dp reduce-scatter leaves it (the reduce-scatter phase of
    a ring all-reduce, or ZeRO 1-2's own; Rajbhandari et al. SC20), the whole bucket when n = 1."""
    return size / max(n, 1)
