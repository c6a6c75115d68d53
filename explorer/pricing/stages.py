"""A network key's stages grouped by how their groups sit on the fabric, each group priced once.

Every group of a dimension on stage ``s`` is the one of stage 0 translated by ``s x stride(pp)``
GPUs (placement.Placement: "groups of one dimension are translates of each other"), and
topology.Fabric.shape reads a group only through how many of its members share one domain of each
boundary (members_per_domain; the shares follow from those counts), plus, across datacenters, which
datacenters it spans.  So, per dimension and boundary of ``d`` GPUs, stage ``s`` (offset ``o``) has
the count of a representative stage when:

- the translated group lies inside one domain (its lowest and highest member in one block): the
  count is the group size;
- otherwise, its members are at least ``d`` apart: one per domain, whatever the offset;
- otherwise, ``o mod d`` is the representative's (a translation by whole domains).

With a WAN the offset itself is the key (which datacenters and WAN links the group loads).  Stages
with equal keys on every boundary have equal shapes: each dimension's calls are priced on one
representative per class.  This is finer than grouping by the residues alone (a TP group of one node
sits alike on every stage, whatever the stage's offset inside a leaf block).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..config import Scenario
from .chunk_basis import pricing_signature
from .keys import PASS_DIMS, RowNetwork, intern, memo_table

Classes = tuple[np.ndarray, tuple[int, ...]]       # (p,) class of each stage, first stage of each class
_CLASSES = memo_table()
_DIM_CLASSES = memo_table()
_NETS = memo_table()


@dataclass(frozen=True)
class NetInfo:
    """What a network key gives every row: the network, stage classes per dimension, group sizes."""

    net: RowNetwork
    dims: dict[str, Classes]         # per dimension of PASS_DIMS and "pp" (pairs s, s+1 for s < p-1)
    dp_groups: np.ndarray            # (p, 2) data-parallel and expert data-parallel group sizes
    key: int
    free: bool

    def for_row(self, sc: Scenario) -> RowNetwork:
        """The network as a row sees it: the shared shapes and calls, the row's own scenario."""
        return self.net if self.net.sc is sc else RowNetwork(sc, self.free, self.key)


def _dim_classes(net: RowNetwork, dim: str, stages: int) -> Classes:
    """Classes of ``stages`` stages for ``dim`` by the rule of the module docstring, memoised on
    what the rule reads: the placement (its strides and sizes, and ep for the expert groups), the
    domains' sizes and whether a WAN is there; not the bandwidths, so rows that differ only in a
    link's speed share them."""
    pl, fabric = net.placement, net.net.fabric
    key = (tuple(pl.strides.items()), tuple(pl.sizes.items()), net.sc.parallelism.ep, dim, stages,
           tuple(b.domain_gpus for b in fabric.boundaries), fabric.wan is not None)
    got = _DIM_CLASSES.get(key)
    if got is None:
        got = _DIM_CLASSES[key] = _classify(net, dim, stages)
    return got


def _classify(net: RowNetwork, dim: str, stages: int) -> Classes:
    g = np.sort(net.members(dim, 0))
    stride = net.placement.strides["pp"]
    fabric = net.net.fabric
    offs = np.arange(stages, dtype=np.int64) * stride
    # The spacing rule needs distinct members (members_per_domain counts repeated ids): gap 0 else.
    gap = int(np.diff(g).min()) if len(g) > 1 else 0
    lo, hi = int(g[0]), int(g[-1])
    cols = []
    for b in fabric.boundaries:
        d = b.domain_gpus
        one = (lo + offs) // d == (hi + offs) // d
        cols.append(np.where(one, -1, -2 if 0 < gap and gap >= d else offs % d))
    if fabric.wan is not None:
        cols.append(offs)
    # Classes numbered in stage order (class 0 holds stage 0), each represented by its first stage.
    classes: dict[tuple, int] = {}
    cls = [classes.setdefault(key, len(classes)) for key in map(tuple, np.stack(cols, axis=1).tolist())]
    reps: dict[int, int] = {}
    for s, c in enumerate(cls):
        reps.setdefault(c, s)
    return np.array(cls, dtype=np.int64), tuple(reps[c] for c in range(len(classes)))


def shared_netinfo(sc: Scenario, free: bool, nkey: int) -> NetInfo:
    """:func:`netinfo` of ``nkey``, memoised (every row of the key shares it)."""
    info = _NETS.get(nkey)
    if info is None:
        info = _NETS[nkey] = netinfo(sc, free, nkey)
    return info


def netinfo(sc: Scenario, free: bool, nkey: int) -> NetInfo:
    """The network of ``nkey`` and its stages' classes per dimension (module docstring)."""
    net = RowNetwork(sc, free, nkey)
    p = sc.parallelism.pp
    dims = {d: _dim_classes(net, d, p) for d in PASS_DIMS}
    dims["pp"] = _dim_classes(net, "pp", p - 1) if p > 1 else (np.zeros(0, np.int64), ())
    sizes = [np.array([net.group_size(d, r) for r in dims[d][1]])[dims[d][0]] for d in ("dp", "edp")]
    return NetInfo(net, dims, np.stack(sizes, axis=1), nkey, free)


def transfers(info: NetInfo, msg: float, p: int) -> np.ndarray:
    """(p,) one transfer on each stage pair (s, s+1); pair p-1 wraps to stage 0 (network.members)."""
    if p == 1:
        return np.zeros(1)
    cost = info.net.cost
    cls, reps = info.dims["pp"]
    per_class = np.array([cost("send-recv", msg, "pp", r).time_s for r in reps])
    return np.append(per_class[cls], cost("send-recv", msg, "pp", p - 1).time_s)


def stage_classes(info: NetInfo, fsdp: bool) -> tuple[int, np.ndarray, tuple[int, ...], tuple[int, ...]]:
    """Stages whose pass groups price alike, per network and ``fsdp`` (ZeRO-3: chunk_work then reads
    the dp and edp groups too, else only tp, cp, ep): the interned class pattern, (p,) each stage's
    class, the first stage of each class and its interned pricing signature (memoised).  Stages are
    grouped by their groups' shapes (equal shapes price alike, whatever the dimension classes)."""
    key = (info.key, fsdp)
    got = _CLASSES.get(key)
    if got is None:
        net = info.net
        dims = PASS_DIMS if fsdp else PASS_DIMS[:3]          # PASS_DIMS starts tp, cp, ep
        combo = np.stack([info.dims[d][0] for d in dims], axis=1).tolist()
        sig_of: dict[tuple, tuple] = {}
        classes: dict[tuple, int] = {}
        stage_cls = []
        for c in map(tuple, combo):
            sig = sig_of.get(c)
            if sig is None:
                sig = sig_of[c] = tuple(net.shape(d, info.dims[d][1][k])
                                        for d, k in zip(dims, c, strict=True))
            stage_cls.append(classes.setdefault(sig, len(classes)))
        first: dict[int, int] = {}
        for s, cls in enumerate(stage_cls):
            first.setdefault(cls, s)
        netsigs = tuple(intern(("netsig", pricing_signature(net, sig))) for sig in classes)
        got = _CLASSES[key] = (intern(("classes", tuple(stage_cls))), np.array(stage_cls),
                               tuple(first[c] for c in range(len(classes))), netsigs)
    return got
