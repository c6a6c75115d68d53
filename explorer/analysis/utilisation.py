"""How busy each network tier is over the iteration, and the bytes a GPU sends across each tier.

Both read the network calls the task graph carries, as the builder priced them
(:class:`~explorer.engine.records.LinkCall`): the per-unit calls of each chunk (TP, EP, CP and
ZeRO-3 collectives) times the pipeline units the class runs, and the calls of its pipeline
transfers and gradient buckets.  Nothing is priced a second time, so a call the builder priced as
node-limited MoE dispatch loads the fabric as that dispatch, not as a plain all-to-all.

Utilisation of a boundary = bytes crossing it (every domain, every GPU class) / (its achievable
capacity summed over its domains x the iteration time): the average the topology view colours
links by.  It cannot exceed 1, as every call lasts at least its egress over its share of each
boundary (collective_algorithms.base.crossing).
"""
from __future__ import annotations

from .. import dimensions
from ..engine.records import LinkCall
from ..engine.scheduler import Task
from ..network.groups import Network
from ..network.topology import BOUNDARY_NAMES
from ..taskgraph.builder import IterationBuilder
from . import COMM_DIMS


def class_calls(b: IterationBuilder, s: int, mine: list[Task]) -> list[LinkCall]:
    """Every network call GPU class ``s`` makes in one iteration: its chunks' per-unit calls times
    the units each chunk runs, and the calls its transfer and bucket tasks carry."""
    calls = [c.scaled(units) for ch, units in b.rank_chunks(s) for c in ch.link_calls]
    # Tasks of one kind share their calls' tuple (every transfer on a pair): count each once.
    shared: dict[int, list] = {}
    for t in mine:
        if t.links:
            entry = shared.setdefault(id(t.links), [t.links, 0])
            entry[1] += 1
    return calls + [c if n == 1 else c.scaled(n) for links, n in shared.values() for c in links]


# Up to this many WAN links every direction has its key, idle ones at 0 (the wan_links report lists
# them all: analysis/report.py); beyond, only the directions that carry bytes — a mesh of 1,024
# datacenters has 523,776 links, and a key for each idle direction made every measurement of the
# iteration cost about a second.
ALL_WAN_KEYS_UP_TO = 120


def tier_utilisation(b: IterationBuilder, net: Network, by_class: list[list[Task]],
                     T: float, calls: list[list[LinkCall]] | None = None) -> dict:
    """Average utilisation (0..1) of each tier boundary during one iteration of length ``T`` (by
    tier name) and of each direction of each WAN link (by ``("wan", from, to)``; beyond
    :data:`ALL_WAN_KEYS_UP_TO` links, the loaded directions only).  ``calls``: each class's
    :func:`class_calls`, when the caller has them already."""
    sc = b.sc
    per_stage = sc.parallelism.tp * sc.parallelism.cp * sc.dp     # GPUs behaving like one class
    traffic = [0.0] * len(BOUNDARY_NAMES)
    for s, mine in enumerate(by_class):
        for call in (calls[s] if calls is not None else class_calls(b, s, mine)):
            for i in range(len(call.egress)):
                traffic[i] += call.domain_traffic(i, per_stage)
    out: dict = {}
    wan = net.fabric.wan
    loads = wan_link_bytes(b, by_class, calls) if wan is not None else {}
    for i, bd in enumerate(net.fabric.boundaries):
        if wan is not None and bd.name == "scale-across":
            # The WAN's links, not one link a datacenter: a datacenter of a ring or a mesh sends on
            # several at once (a pipeline's forward and backward transfers to its two neighbours),
            # so one link's capacity a datacenter read more than 100 % busy while no link was
            # (a hunt: 1.0 with every link at most 0.67, which raised the iteration); and what
            # they carry, a hub's transit on both of its links.  Two datacenters have one link:
            # the same figure as their egress over it.
            out[bd.name] = sum(loads.values()) / (wan.capacity_Bps * T) if T > 0 else 0.0
            continue
        out[bd.name] = traffic[i] / (net.fabric.tier_capacity_Bps(i, sc.gpus) * T) if T > 0 else 0.0
    if wan is not None:
        # Each WAN link direction under the key ("wan", from, to), as bytes / its capacity too
        # (simulate.assemble turns these into the wan_links report).
        if len(wan.links) <= ALL_WAN_KEYS_UP_TO:
            for link in wan.links:
                for u, v in ((link.a, link.b), (link.b, link.a)):
                    out[("wan", u, v)] = loads.get((u, v), 0.0) / (link.capacity_Bps * T) if T > 0 else 0.0
        else:
            # Looked up, not mapped afresh: a map of 523,776 links per class measured took 5 s.
            for (u, v), load in loads.items():
                if load > 0:
                    cap = wan.link(u, v).capacity_Bps
                    out[("wan", u, v)] = load / (cap * T) if T > 0 else 0.0
    if net.free:
        # The ideal pipeline's free communication (Network(free=True)): every call takes no time,
        # so no link is ever busy — its bytes over a real link's capacity would read up to
        # 693,272 % of an iteration that never waited for them.  (The WAN links' bytes, read from
        # these loads, are 0 too; comm_bytes_by_tier still says what the calls would send.)
        return dict.fromkeys(out, 0.0)
    return out


def wan_link_bytes(b: IterationBuilder, by_class: list[list[Task]],
                   calls: list[list[LinkCall]] | None = None) -> dict[tuple[int, int], float]:
    """Bytes per iteration on each directed WAN link (from, to), all GPUs' traffic.

    A call's datacenter ring puts ``load`` shares on a link, a share being the egress[3] one
    datacenter sends per call (explorer/network/wan.py): ``count x groups x load x egress[3]`` for a
    collective, where ``groups`` = the stage's GPUs / the group size; a pipeline transfer (a pair,
    one way per call) puts half of its bytes on each direction of its ring of two, which is exact
    over an iteration when activations and their gradients are the same size."""
    sc = b.sc
    per_stage = sc.parallelism.tp * sc.parallelism.cp * sc.dp
    out: dict[tuple[int, int], float] = {}
    for s, mine in enumerate(by_class):
        for call in (calls[s] if calls is not None else class_calls(b, s, mine)):
            if not call.wan_loads:
                continue
            each = (call.count * per_stage / 2 if call.pairwise else call.count * per_stage / call.group)
            for u, v, x in call.wan_loads:
                out[(u, v)] = out.get((u, v), 0.0) + each * x * call.egress[3]
    return out


def traffic_by_tier(b: IterationBuilder, by_class: list[list[Task]]) -> dict[str, dict[str, float]]:
    """Bytes one GPU sends across each tier boundary per iteration, per dimension (the largest over
    GPU classes).

    A byte counts at every boundary it leaves: ``scale-up`` is what the GPU sends on its scale-up
    link, ``scale-out`` what leaves its node, ``spine`` its leaf block, ``scale-across`` its
    datacenter.  Each call's egress (bytes leaving one domain of the group) is divided by the
    group's members in that domain.  Expert-data-parallel (edp) traffic counts as dp."""
    tiers = BOUNDARY_NAMES
    out = {d: dict.fromkeys(tiers, 0.0) for d in COMM_DIMS}
    for s, mine in enumerate(by_class):
        acc = class_traffic(b, s, mine)
        for d in COMM_DIMS:
            for i, tier in enumerate(tiers):
                out[d][tier] = max(out[d][tier], acc[d][i])
    return out


def class_traffic(b: IterationBuilder, s: int, mine: list[Task],
                  calls: list[LinkCall] | None = None) -> dict[str, list[float]]:
    """Bytes one GPU of class ``s`` sends across each tier boundary per iteration, per dimension
    (traffic_by_tier before its maximum over classes); ``calls``: its :func:`class_calls`, if known."""
    acc = {d: [0.0] * len(BOUNDARY_NAMES) for d in COMM_DIMS}
    for call in (calls if calls is not None else class_calls(b, s, mine)):
        key = dimensions.reported_as(call.dim)
        acc[key] = [a + call.per_gpu(i) for i, a in enumerate(acc[key])]
    return acc
