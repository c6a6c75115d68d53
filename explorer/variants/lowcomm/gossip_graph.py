"""Gossip graphs (``parallelism.dp_kind`` gossip-*): which replicas a replica exchanges its model
with, and what one turn of that exchange costs on the fabric when every GPU sends at once.

D-PSGD (Lian et al., "Can Decentralized Algorithms Outperform Centralized Algorithms?", NeurIPS
2017, Alg. 1) has every replica send its model to each neighbour and average what it receives; a
replica's next step needs every neighbour's model.  Replica r's neighbours are r + o (mod n) for
the offsets of :func:`peer_offsets`; the exchange goes one offset at a time (:func:`phase`), the
NIC sending the models in turn (explorer/variants/lowcomm/decentral.py adds the turns up).
"""
from __future__ import annotations

import math
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from ...network.collectives import cost
from ...network.groups import Network
from ...network.topology import BOUNDARY_NAMES
from .window import sent_per_boundary

if TYPE_CHECKING:
    from ...config import Scenario


def peer_offsets(kind: str, n: int, peers: int = 0) -> list[int]:
    """DP-rank offsets of replica 0's neighbours on ``kind``'s graph of ``n`` replicas.

    >>> peer_offsets("gossip-ring", 8), peer_offsets("gossip-exponential", 8)
    ([1, 7], [1, 2, 4])
    >>> peer_offsets("gossip-torus", 12), peer_offsets("gossip-exponential", 8, 1)
    ([1, 3, 4, 8], [1])
    >>> peer_offsets("gossip-async", 8)      # the candidates; one of them per step
    [1, 7]
    """
    if kind in ("gossip-ring", "gossip-async"):
        out = [1, n - 1]
    elif kind == "gossip-torus":
        rows = max(d for d in range(1, math.isqrt(n) + 1) if n % d == 0)
        cols = n // rows
        out = [1 % cols, (cols - 1) % cols, cols % n, (n - cols) % n]
    else:
        out = [2 ** i % n for i in range(math.ceil(math.log2(n)))]
    out = sorted({o for o in out if o % n})
    return out[:peers] if peers else out


def phase(net: Network, sc: Scenario, stage: int, offset: int, nbytes: float) -> tuple[float, list[float]]:
    """One gossip phase: every GPU sends ``nbytes`` to its counterpart ``offset`` replicas on, all at
    once.  Returns the time of the slowest GPU of pipeline stage ``stage`` and the bytes a GPU of
    that stage sends across each boundary, averaged over the stage's GPUs.

    A domain's egress is shared by the GPUs of the domain whose counterpart lies outside it, not by
    all of its GPUs as for a collective whose groups all span the boundary: on a ring of replicas
    one GPU apart, only the last GPU of a node sends out of it (at offset +1), and it has the node's
    egress to itself as far as one flow can use it: its own GPU's NICs (NCCL sends a point-to-point
    flow through the NICs local to its GPU: network/p2p_link.py), all of them on a node with one NIC;
    the other seven stay on NVLink.  Which GPU crosses differs with its position,
    so every GPU of the stage is priced (vectorised, one network call per distinct situation: its
    crossing boundaries and how many GPUs of its domain cross them) and the slowest sets the phase:
    D-PSGD's step needs every neighbour's model (Lian et al. 2017, Alg. 1), so the last transfer to
    arrive gates its replica, and through the graph every replica.  A GPU whose own or whose peer's
    node is degraded (``cluster.faults``) crosses the scale-out fabric at ``nic_factor`` of its share."""
    pl, dp, fabric = net.placement, sc.dp, net.fabric
    o = net.options
    # One GPU's NICs: the NVLink domain's egress over min(its NICs, its GPUs) (p2p_link.one_flow_share).
    one_gpu_nics = fabric.boundaries[1].capacity_Bps / max(1, min(o.nics_per_node, o.gpus_per_node))
    stride = pl.strides["dp"]
    every = np.arange(int(np.prod(list(pl.sizes.values()))), dtype=np.int64)
    d = (every // stride) % dp
    peers = every + ((d + offset) % dp - d) * stride
    mine = every[(every // pl.strides["pp"]) % pl.sizes["pp"] == stage]
    # Per boundary above scale-up: how many GPUs of a domain send out of it in this phase, and for
    # each GPU of the stage that count if it is one of them (0 if its peer shares its domain).
    situation = np.zeros((len(mine), len(fabric.boundaries) - 1), dtype=np.int64)
    for i, bound in enumerate(fabric.boundaries[1:], start=1):
        dom = every // bound.domain_gpus
        out = peers // bound.domain_gpus != dom
        crossers = np.bincount(dom[out], minlength=int(dom[-1]) + 1)
        situation[:, i - 1] = np.where(out[mine], crossers[dom[mine]], 0)
    # Last column: whether the GPU or its peer sits on a degraded node (cluster.faults: the
    # cluster's last nodes), whose NICs run at nic_factor of their rate — a transfer through them
    # is that slow (as a data-parallel group through one is, network/groups.Network.shape).
    f = sc.cluster.faults
    first_slow = (sc.cluster.nodes - f.degraded_nodes) * sc.cluster.gpus_per_node if f.degraded else None
    slow = np.zeros(len(mine), dtype=np.int64) if first_slow is None else \
        ((mine >= first_slow) | (peers[mine] >= first_slow)).astype(np.int64)
    situation = np.column_stack([situation, slow])
    kinds, first, counts = np.unique(situation, axis=0, return_index=True, return_counts=True)
    worst, sent = 0.0, [0.0] * len(BOUNDARY_NAMES)
    for row, k, n in zip(kinds, first, counts, strict=True):
        a = int(mine[k])
        shape = fabric.shape(np.array([a, int(peers[a])], dtype=np.int64))
        # The pair's share of a domain's egress is 1/domain_gpus of it (one member, every GPU
        # sending); only ``crossers`` of them send out, so each gets 1/crossers, and out of its
        # node no more than its own GPU's NICs (p2p_link.one_flow_share: a flow leaves by them).
        shares = [sh if i == 0 or not row[i - 1] else sh * fabric.boundaries[i].domain_gpus / row[i - 1]
                  for i, sh in enumerate(shape.shares)]
        if row[0]:
            shares[1] = min(shares[1], one_gpu_nics)
        if row[-1] and shape.spans(1):
            shares[1] *= f.nic_factor
        shape = replace(shape, shares=tuple(shares))
        cc = cost("send-recv", nbytes, shape, net.algorithm, net.nvls, net.options)
        worst = max(worst, cc.time_s)
        sent = [x + y * int(n) / len(mine) for x, y in zip(sent, sent_per_boundary(cc, shape), strict=True)]
    return worst, sent
