"""How busy each network tier is over the iteration: bytes that cross it / what it could carry.

For every call a GPU class issues (per-layer TP/EP/CP collectives, pipeline transfers, gradient
buckets), the collective model gives the bytes leaving one domain of each boundary
(``CollectiveCost.egress``).  Scaled by how many groups of that dimension the class holds and how
many domains each group spans, this is the traffic through the tier; divided by the tier's
achievable capacity (all its domains) and the iteration time it is the average utilisation the
topology view colours links by.
"""
from __future__ import annotations

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
