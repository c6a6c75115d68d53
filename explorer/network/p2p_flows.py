"""Point-to-point hops priced per flow: how many flows leave one domain at once, and what each one gets.

:meth:`Fabric.shape_of <explorer.network.topology.Fabric.shape_of>` gives a group ``capacity x g / G``
of a domain's egress, as if every GPU of the domain sent out of it at once: right for a collective,
whose groups all span the boundary, and for a ring step, whose G/k groups each send one flow out
(p2p_link.py).  A hop whose members are a *pair* is not like that.  In the pipeline hop from stage s
to stage s+1, every rank of stage s sends its activations to the rank of the same tp/cp/dp
coordinates on stage s+1 (Megatron-LM's ``p2p_communication``: each rank's ``send_forward`` goes to
``get_pipeline_model_parallel_next_rank()``), all at once; only those whose counterpart sits in
another domain send out of theirs: the stage-boundary ranks of every tp/cp/dp replica on that node,
not its G GPUs.  With ``c`` such flows leaving (or entering) one domain, each gets ``capacity / c``
of its egress (an even split of the domain's NICs among the flows that use them, the convention of
the module docstring of topology.py), and out of the NVLink domain no more than its own GPU's NICs:
NCCL's network transport sends a point-to-point flow through the NICs local to the sending GPU
(src/graph/topo.cc ``ncclTopoGetLocalNet``: the GPU's nearest NICs, one per channel), so

    share = min(capacity / c, capacity / min(NICs, GPUs))           (the domain's NICs over its GPUs)

Leaf uplinks are split the same way among the flows that leave a leaf block (``capacity / c``, else
a node with fewer NICs than GPUs would keep ``capacity / G`` on every hop between leaf blocks).  So
is the WAN: Fabric.shape_of gives a group with g of a datacenter's G GPUs ``capacity x g / G / load``
of the slowest WAN link its datacenter ring loads (wan.py), as if all G GPUs sent across at once;
in a pipeline hop only the flows of the stage boundary at the datacenter cut cross.  A WAN link is
shared by every flow routed over it in its direction, and the transfers of different hops can be in
flight at once (an interleaved schedule's wrap-around hop, its backward beside another hop's
forward, a hub's transit), so ``c`` is the most flows any directed link of the hop's routes
carries counting every hop the schedule uses, both ways, each sending stage once (its pp stream
sends one transfer at a time: :func:`wan_link_flows`): no link then carries more than its capacity
whatever overlaps.  Each flow gets ``capacity / load / c``
(the Fabric's figure x G / (g c); cross-region-pp's cut between two regions of 128 GPUs, pp 8 of
32 GPUs a stage, 1F1B: 32 flows each way, not 128; interleaved, whose wrap-around hop crosses the
same cut back, 64).  A node with a NIC or more per GPU
(DGX) is unchanged at its NICs: ``c <= G`` flows each get at least a GPU's NICs, which the second
term gives, and that is what ``capacity / G`` gave; a hop between leaf blocks of an oversubscribed
fabric, where ``capacity / G`` of the uplinks was less than that, now gets up to its NICs.
nccl-tests' sendrecv_perf (every rank to the next, nccl_table.py) is the same count over its ranks.
"""
from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from .p2p_link import one_gpu_nics
from .placement import Placement
from .topology import BOUNDARY_NAMES, Fabric, GroupShape

__all__ = ["flow_shape", "hop_flows", "pipeline_hop_flows", "wan_link_flows"]

# (strides, sizes, domain sizes) -> pipeline_hop_flows; a sweep's rows share their placement.
_HOPS: dict[tuple, tuple[tuple[int, ...], ...]] = {}
HOPS_CACHE = 1 << 10
# The boundary whose flows are counted per directed WAN link (module docstring).
WAN = "scale-across"


def _most_per_domain(groups: np.ndarray, ids: np.ndarray, n_groups: int) -> np.ndarray:
    """For each of ``n_groups`` groups, the most of its entries that share one domain id."""
    if ids.size == 0:
        return np.zeros(n_groups, dtype=np.int64)
    domains = int(ids.max()) + 1
    counts = np.bincount(groups * domains + ids, minlength=n_groups * domains)
    return counts.reshape(n_groups, domains).max(axis=1)


def hop_flows(fabric: Fabric, senders: np.ndarray, receivers: np.ndarray) -> tuple[int, ...]:
    """Per boundary, the most of the flows ``senders[i] -> receivers[i]`` (all at once) that leave
    one of its domains or enter one: 0 where none crosses it, and 0 for scale-up (index 0), whose
    share stays the shape's.

    >>> from explorer.scenario import Cluster, ScaleUp
    >>> fab = Fabric.for_cluster(Cluster(gpus_per_node=8, nodes=2, scale_up=ScaleUp(bandwidth_GBps=450.0)))
    >>> hop_flows(fab, np.arange(16), (np.arange(16) + 1) % 16)[1]    # 7 -> 8 and 15 -> 0 a node
    1
    >>> hop_flows(fab, np.arange(8) + 4, np.arange(8) + 8)[1]        # 4..7 -> 8..11: four out of node 0
    4
    """
    counts = [0]
    for b, bd in enumerate(fabric.boundaries[1:], start=1):
        a, r = senders // bd.domain_gpus, receivers // bd.domain_gpus
        out = a != r
        if BOUNDARY_NAMES[b] == WAN and fabric.wan is not None:
            # one set of flows all in flight at once: each counts on each link of its route
            counts.append(wan_link_flows(fabric, [[(a[out], r[out], 0)]])[0])
            continue
        counts.append(int(max(np.bincount(a[out]).max(), np.bincount(r[out]).max())) if out.any() else 0)
    return tuple(counts)


def wan_link_flows(fabric: Fabric, hops: list[list[tuple[np.ndarray, np.ndarray, int]]]) -> list[int]:
    """Per hop — its sets of flows, each (datacenters the flows leave, datacenters they enter, the
    sender whose stream sends them) — the most flows on any directed WAN link its flows are routed
    over (wan.Wan.path), counting the flows of every hop: all may be in flight at once (module
    docstring), but one sender's sets one after the other (a stage's pipeline sends share its pp
    stream, first in, first out), so a link counts each sender's largest set on it.  0 for a hop
    that crosses no datacenter boundary.

    >>> from explorer.scenario import Cluster, ScaleUp
    >>> fab = Fabric.for_cluster(Cluster(gpus_per_node=8, nodes=2, datacenters=2,
    ...                                  scale_up=ScaleUp(bandwidth_GBps=450.0)))
    >>> out, back = np.zeros(4, dtype=np.int64), np.ones(4, dtype=np.int64)
    >>> wan_link_flows(fab, [[(out, back, 3), (back, out, 4)]])    # 4 flows each way, two senders
    [4]
    >>> wan_link_flows(fab, [[(out, back, 3), (back, out, 4)], [(back, out, 7), (out, back, 0)]])
    [8, 8]
    >>> wan_link_flows(fab, [[(out, back, 0), (back, out, 1)], [(back, out, 1), (out, back, 0)]])
    [4, 4]
    """
    assert fabric.wan is not None
    wan = fabric.wan
    per_sender: dict[tuple[int, int], dict[int, int]] = {}        # link -> sender -> its largest set
    routes: list[set[tuple[int, int]]] = []
    for sets in hops:
        mine: set[tuple[int, int]] = set()
        for src, dst, sender in sets:
            on: dict[tuple[int, int], int] = {}
            if src.size:
                pairs, n = np.unique(np.stack([src, dst]), axis=1, return_counts=True)
                for (u, v), k in zip(pairs.T.tolist(), n.tolist(), strict=True):
                    for link in wan.path(u, v):
                        on[link] = on.get(link, 0) + k
            for link, k in on.items():
                got = per_sender.setdefault(link, {})
                got[sender] = max(got.get(sender, 0), k)
                mine.add(link)
        routes.append(mine)
    load = {link: sum(got.values()) for link, got in per_sender.items()}
    return [max((load[link] for link in mine), default=0) for mine in routes]


def pipeline_hop_flows(fabric: Fabric, placement: Placement, wrap: bool) -> tuple[tuple[int, ...], ...]:
    """:func:`hop_flows` of each pipeline hop, stage s to stage s+1 (the last to stage 0, the hop of
    an interleaved schedule: Network.members), its senders every GPU of stage s; the WAN's count per
    directed link over every hop the schedule uses, both ways (:func:`wan_link_flows`; ``wrap``:
    whether it uses the last one, stage p-1 to 0).  Memoised per placement, domain sizes, WAN and
    ``wrap``: a sweep's rows share them."""
    key = (tuple(placement.strides.items()), tuple(placement.sizes.items()),
           tuple(b.domain_gpus for b in fabric.boundaries),
           None if fabric.wan is None else (fabric.wan.dcs, fabric.wan.topology), wrap)     # its routes
    got = _HOPS.get(key)
    if got is not None:
        return got
    stride, p = placement.strides["pp"], placement.sizes["pp"]
    every = np.arange(math.prod(placement.sizes.values()), dtype=np.int64)
    stage = (every // stride) % p
    partner = every + ((stage + 1) % p - stage) * stride
    per = np.zeros((p, len(fabric.boundaries)), dtype=np.int64)
    for b, bd in enumerate(fabric.boundaries[1:], start=1):
        a, r = every // bd.domain_gpus, partner // bd.domain_gpus
        out = a != r
        if BOUNDARY_NAMES[b] == WAN and fabric.wan is not None:
            # Pair s: stage s's forward sends to s+1, and stage s+1's backward sends back.
            used = range(p if wrap else p - 1)
            hops = [[(a[out & (stage == s)], r[out & (stage == s)], s),
                     (r[out & (stage == s)], a[out & (stage == s)], (s + 1) % p)] for s in used]
            per[list(used), b] = wan_link_flows(fabric, hops)
            continue
        per[:, b] = np.maximum(_most_per_domain(stage[out], a[out], p),
                               _most_per_domain(stage[out], r[out], p))
    got = tuple(tuple(int(x) for x in row) for row in per)
    if len(_HOPS) >= HOPS_CACHE:
        _HOPS.pop(next(iter(_HOPS)))                    # oldest first: a bounded memo
    _HOPS[key] = got
    return got


def flow_shape(fabric: Fabric, sh: GroupShape, flows: tuple[int, ...], nics: int, gpus: int) -> GroupShape:
    """``sh``, the shape of a pair (one member in each domain it spans), with each boundary above
    scale-up that it spans priced for one flow among ``flows[b]`` (:func:`hop_flows`): the domain's
    egress over them, the NVLink domain's at most one GPU's NICs (p2p_link.one_gpu_nics of its
    ``nics`` and ``gpus``), the WAN's slowest loaded link over them (module docstring).  Below the
    WAN never less than ``sh``'s share: ``flows[b]`` is at most the domain's GPUs, and one GPU's NICs
    at least 1/G of them; on the WAN less where hops that may overlap load one directed link with
    more flows than a datacenter has GPUs (the link carries at most its capacity)."""
    shares = list(sh.shares)
    for b in range(1, len(shares)):
        if not sh.spans(b) or flows[b] <= 0:
            continue
        bd = fabric.boundaries[b]
        if BOUNDARY_NAMES[b] == WAN:
            # wan.Wan.limit's capacity x g / G / load, for one of flows[b] instead of g of G GPUs.
            shares[b] = sh.shares[b] * bd.domain_gpus / (sh.per_domain[b] * flows[b])
            continue
        shares[b] = bd.capacity_Bps / flows[b]
        if b == 1:
            shares[b] = min(shares[b], one_gpu_nics(bd.capacity_Bps, nics, gpus))
    return replace(sh, shares=tuple(shares))
