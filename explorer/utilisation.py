"""How busy each network tier is over the iteration: bytes that cross it / what it could carry.

For every call a GPU class issues (per-layer TP/EP/CP collectives, pipeline transfers, gradient
buckets), the collective model gives the bytes leaving one domain of each boundary
(``CollectiveCost.egress``).  Scaled by how many groups of that dimension the class holds and how
many domains each group spans, this is the traffic through the tier; divided by the tier's
achievable capacity (all its domains) and the iteration time it is the average utilisation the
topology view colours links by.
"""
from __future__ import annotations

from .analysis import COMM_DIMS
from .engine import Task
from .network import Network
from .schedules.iteration import IterationBuilder
from .topology import BOUNDARY_NAMES


def tier_utilisation(b: IterationBuilder, net: Network, tasks: list[Task], T: float) -> dict[str, float]:
    """Average utilisation (0..1+) of each tier boundary during one iteration."""
    sc = b.sc
    per_stage = sc.parallelism.tp * sc.parallelism.cp * sc.dp
    traffic = [0.0] * len(BOUNDARY_NAMES)

    def add(dim: str, stage: int, op: str, size: float, count: float, pairwise: bool = False) -> None:
        if count <= 0 or size <= 0:
            return
        shape = net.shape(dim, stage)
        if shape.n <= 1:
            return
        cc = net.cost(op, size, dim, stage)
        groups = per_stage / shape.n if not pairwise else per_stage
        for i, eg in enumerate(cc.egress):
            # A send crosses a boundary once per pair; a collective's egress is per spanned domain.
            domains = 1 if pairwise else shape.n / shape.per_domain[i]
            traffic[i] += count * groups * domains * eg

    for s in range(b.p):
        for ch, units in b.rank_chunks(s):
            kinds = [(b.dense, ch.layers - ch.moe_layers)] + ([(b.moe, ch.moe_layers)] if b.moe else [])
            for lc, n in kinds:
                k = n * units
                for call in lc.tp_fwd + lc.tp_bwd + lc.tp_recompute:
                    add("tp", s, call.op, call.size_bytes, k)
                for call in lc.ep_fwd + lc.ep_bwd:
                    add("ep", s, call.op, call.size_bytes, k)
                if sc.parallelism.zero == 3:
                    for dim, params in (("dp", lc.params), ("edp", lc.expert_params)):
                        add(dim, s, "all-gather", params * 2, 2 * k)
                        add(dim, s, "reduce-scatter", params * 2, k)
                if lc.cp_kv_bytes:
                    cpn = sc.parallelism.cp
                    add("cp", s, "send-recv", lc.cp_kv_bytes, k * (cpn - 1))
                    add("cp", s, "send-recv", 2 * lc.cp_kv_bytes, k * (cpn - 1))
    for t in tasks:
        if t.kind == "pp":
            pair = t.cls if t.info["direction"] == "forward" else (t.cls - 1) % b.p
            add("pp", pair, "send-recv", t.info["bytes"], b.m / b.m_sim, pairwise=True)
        elif t.kind == "dp" and t.info.get("buckets"):
            add(t.info["dim"], t.cls, t.info["op"], t.info["bucket_bytes"], t.info["buckets"])
    out = {}
    for i, bd in enumerate(net.fabric.boundaries):
        domains = max(sc.gpus / bd.domain_gpus, 1)
        out[bd.name] = traffic[i] / (domains * bd.capacity_Bps * T) if T > 0 else 0.0
    return out


def traffic_by_tier(b: IterationBuilder, net: Network, by_class: list[list[Task]]) -> dict[str, dict[str, float]]:
    """Bytes one GPU sends across each tier boundary per iteration, per dimension (the largest over
    GPU classes).

    A byte counts at every boundary it leaves: ``scale-up`` is everything the GPU sends,
    ``scale-out`` what leaves its node, ``spine`` its leaf block, ``scale-across`` its datacenter.
    Each call's ``CollectiveCost.egress`` (bytes leaving one domain of the group) is divided by the
    group's members in that domain.  Calls: the per-layer TP, CP (ring attention), EP and ZeRO-3
    gathers/reduce-scatters that the compute tasks of each chunk make, and the pipeline transfers
    and gradient buckets the pp/dp tasks carry.  Expert-data-parallel (edp) traffic counts as dp."""
    sc = b.sc
    tiers = BOUNDARY_NAMES

    def per_gpu(dim: str, stage: int, op: str, size: float, count: float) -> list[float]:
        if count <= 0 or size <= 0:
            return [0.0] * len(tiers)
        shape = net.shape(dim, stage)
        if shape.n <= 1:
            return [0.0] * len(tiers)
        cc = net.cost(op, size, dim, stage)
        return [count * (cc.egress[i] / shape.per_domain[i] if i < len(cc.egress) else 0.0)
                for i in range(len(tiers))]

    out = {d: dict.fromkeys(tiers, 0.0) for d in COMM_DIMS}
    for s, mine in enumerate(by_class):
        acc = {d: [0.0] * len(tiers) for d in COMM_DIMS}

        def add(dim: str, vals: list[float]) -> None:
            key = "dp" if dim == "edp" else dim
            acc[key] = [a + v for a, v in zip(acc[key], vals)]

        for ch, units in b.rank_chunks(s):
            kinds = [(b.dense, ch.layers - ch.moe_layers)] + ([(b.moe, ch.moe_layers)] if b.moe else [])
            for lc, n in kinds:
                k = n * units
                for call in lc.tp_fwd + lc.tp_bwd + lc.tp_recompute:
                    add("tp", per_gpu("tp", s, call.op, call.size_bytes, k))
                for call in lc.ep_fwd + lc.ep_bwd:
                    add("ep", per_gpu("ep", s, call.op, call.size_bytes, k))
                if lc.cp_kv_bytes:
                    # Ring attention (Liu et al. 2023): cp-1 K/V hand-offs forward, K/V and dK/dV backward.
                    cpn = sc.parallelism.cp
                    add("cp", per_gpu("cp", s, "send-recv", lc.cp_kv_bytes, k * (cpn - 1)))
                    add("cp", per_gpu("cp", s, "send-recv", 2 * lc.cp_kv_bytes, k * (cpn - 1)))
                if sc.parallelism.zero == 3:
                    # ZeRO-3 (Rajbhandari et al. SC20 Sec. 5.3): two gathers and one reduce-scatter
                    # of each layer per micro-batch.
                    for dim, params in (("dp", lc.params), ("edp", lc.expert_params)):
                        add(dim, per_gpu(dim, s, "all-gather", params * 2, 2 * k))
                        add(dim, per_gpu(dim, s, "reduce-scatter", params * 2, k))
            if sc.parallelism.zero == 3:
                edge = (b.emb.params if ch.index == 0 else 0.0) + \
                    (b.logits.params if ch.index == b.p * b.v - 1 else 0.0)
                if edge and "edges" not in b.ideal:
                    add("dp", per_gpu("dp", s, "all-gather", edge * 2, 2 * units))
                    add("dp", per_gpu("dp", s, "reduce-scatter", edge * 2, units))
        for t in mine:
            if t.kind == "pp":
                pair = t.info.get("pair", t.cls if t.info["direction"] == "forward" else (t.cls - 1) % b.p)
                add("pp", per_gpu("pp", pair, "send-recv", t.info["bytes"], b.m / b.m_sim))
            elif t.kind == "dp" and t.info.get("buckets"):
                add(t.info["dim"], per_gpu(t.info["dim"], s, t.info["op"], t.info["bucket_bytes"], t.info["buckets"]))
        for d in COMM_DIMS:
            for i, tier in enumerate(tiers):
                out[d][tier] = max(out[d][tier], acc[d][i])
    return out
