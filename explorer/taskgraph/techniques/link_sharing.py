"""Which link a stream's call loads, for the engine's fair share between dimensions.

Pipeline sends (the ``pp`` stream, or the compute stream when sends block) and data-parallel
buckets and gathers (the ``dp`` stream) of one GPU run side by side; where both cross the same
tier — a GPU's NIC when the pipeline and the data-parallel groups both leave the node, its NVLink
ports when both stay inside — they divide its bandwidth while both are on the wire
(explorer/engine/sharing.py: processor sharing on the tier that sets each call's time).  A call's
latency part is not shared.

Not shared (weaker than the fabric): calls made inside compute passes (Megatron TP, ring-attention
CP, MoE all-to-all, FSDP gathers drawn under passes) are parts of those passes, not flows, so a DP
bucket beside an EP all-to-all on one NIC still runs at its full share; two calls that both load a
tier but are limited by different ones do not share either.

The array fold and the estimator replicate the engine without pools: a graph where two streams of
one class may load one tier (:func:`may_share`) is left to the task fold / the simulation, which
run the engine (pricing/scope.py: the array fold and the estimator decline it; the search ranks it
with contention off and simulates its best layouts in full).
"""
from __future__ import annotations

from ...config import Scenario
from ...network.collectives import CollectiveCost
from .fsdp import comm_zero
from .pair_sync import two_copies


def flow(sc: Scenario, cost: CollectiveCost) -> tuple[str, float]:
    """(tier, wire seconds) of a call priced as ``cost``: the boundary whose bandwidth set its time
    and the seconds beyond its latency (Hockney's alpha-beta split: time = latency + bytes /
    bandwidth); ("", 0) when it moves nothing across a link (a one-GPU group) or
    ``communication.contention`` is off (every call at its full share, the idealisation)."""
    if not sc.communication.contention or cost.boundary == "none" or cost.time_s <= 0:
        return "", 0.0
    return cost.boundary, max(0.0, cost.time_s - cost.latency_s)


def may_share(sc: Scenario) -> bool:
    """Whether the engine may put two streams' calls on one link of a GPU: contention on, pipeline
    transfers (pp > 1) and data-parallel buckets or gathers on the dp stream (a dense or expert
    data-parallel group of several GPUs; ZeRO-3 reduces inside the passes instead), or the
    two weight copies' pair all-reduce there (a two-direction schedule, any ZeRO stage and dp
    group: pair_sync.py).  An upper bound — the engine pools only calls limited by the same tier —
    that the array fold and the estimator, which replicate the engine without pools, decline on
    (pricing/scope.py)."""
    par = sc.parallelism
    buckets = comm_zero(sc) != 3 and ((par.dp or 1) > 1 or par.cp > 1)
    return sc.communication.contention and par.pp > 1 and (buckets or two_copies(sc))
