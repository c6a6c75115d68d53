"""The two search dimensions beyond uniform degrees: rank placement and per-stage layer splits.

Pipette (Yim et al. 2024, "Pipette: Automatic Fine-grained Large Language Model Training
Configurator for Real-World Clusters", Sec. 4) and Galvatron (Miao et al., VLDB 2023, Sec. 4)
search, besides the parallel degrees, *where* each dimension's ranks sit (which one is innermost,
on NVLink) and *how many layers* each pipeline stage holds.  This module lists the candidates of
both for one layout; explorer/design/refine.py scores them.

Placements (``parallelism.order``, innermost first, explorer/network/placement.py): every
permutation of tp, cp, dp and pp (ep is carved out of cp x dp and does not move ranks, so it stays
beside dp).  Two orders whose representative groups sit identically on the fabric's boundaries —
for every dimension the same members per NVLink domain, per leaf block and per datacenter, and
every pipeline hop the same — are priced identically (network/topology.py ``Fabric.shape`` reads
only those counts in one datacenter), so one of them is kept: the scenario's own order first,
then the permutations in a fixed order.  Orders are searched in one datacenter only: across
datacenters ``parallelism.span`` and the placement advisor (``advise``) choose them.

Layer splits (``parallelism.pipeline_layout``, layers per chunk, pp x vpp entries): the
simulator's default already balances each chunk's seconds per unit (taskgraph/split.py).  The
candidates here are the layouts people write by hand: Megatron-LM's uniform split, its
``account_for_embedding_in_pipeline_split`` / ``account_for_loss_in_pipeline_split`` (the edge
chunks one layer short: the embedding and the loss each count as a layer) and their uneven
``decoder_first/last_pipeline_num_layers`` (edge chunks TRIMS layers short), down to Llama 3's
embedding-only first and loss-only last chunk (Llama Team 2024, Sec. 3.3.2).  Two-direction
schedules (DualPipe: rank r holds chunks r and c-1-r) keep their pair split.
"""
from __future__ import annotations

import itertools
from functools import lru_cache

import numpy as np

from ..network.placement import members_per_domains
from ..scenario import Scenario
from ..schedules import registry

DIMS = ("tp", "cp", "dp", "pp")
TRIMS = (0, 1, 2, 3)          # layers the first / last chunk hold fewer than the others (and "all": 0 left)


def order_string(dims: tuple[str, ...]) -> str:
    """A placement order of the four dimensions with ep beside dp (before it), as Megatron writes
    its default ``tp-cp-ep-dp-pp``."""
    out: list[str] = []
    for d in dims:
        out += ["ep", d] if d == "dp" else [d]
    return "-".join(out)


def _strides(order: str, sizes: dict[str, int]) -> dict[str, int]:
    # placement.Placement.for_scenario: each dimension's stride is the product of those inside it.
    strides, stride = {}, 1
    for d in (x for x in order.split("-") if x in sizes):
        strides[d], stride = stride, stride * sizes[d]
    return strides


def _signature(order: str, sizes: dict[str, int], ep: int, domains: tuple[int, ...]) -> tuple:
    """How ``order``'s representative groups sit on boundaries of ``domains`` GPUs: members per
    domain of the tp, cp and dp groups (cp x dp for dp, as placement.Placement.members), of the
    expert groups and of every pipeline hop (stage s to s + 1, wrapping; network/groups.py)."""
    st = _strides(order, sizes)
    cp, dp = sizes["cp"], sizes["dp"]

    def data(j: np.ndarray) -> np.ndarray:        # placement.Placement._data_rank_to_gpu
        return (j % cp) * st["cp"] + (j // cp) * st["dp"]

    groups = [st[d] * np.arange(sizes[d], dtype=np.int64) for d in ("tp", "cp")]
    groups.append(data(np.arange(cp * dp, dtype=np.int64)))
    if ep > 1:
        groups += [data(np.arange(ep, dtype=np.int64)), data(np.arange(0, cp * dp, ep, dtype=np.int64))]
    pp = sizes["pp"]
    # Each stage's groups (a translate need not sit on the domains as stage 0's does) and hops.
    out = [members_per_domains(g + s * st["pp"], domains) for s in range(pp) for g in groups]
    if pp > 1:
        out += [members_per_domains(np.array([s * st["pp"], ((s + 1) % pp) * st["pp"]], dtype=np.int64),
                                    domains) for s in range(pp)]
    return tuple(out)


@lru_cache(maxsize=4096)
def _distinct_orders(own: str, tp: int, cp: int, dp: int, pp: int, ep: int,
                     domains: tuple[int, ...]) -> tuple[str, ...]:
    sizes = {"tp": tp, "cp": cp, "dp": dp, "pp": pp}
    seen: set[tuple] = set()
    out: list[str] = []
    for order in (own, *(order_string(p) for p in itertools.permutations(DIMS))):
        sig = _signature(order, sizes, ep, domains)
        if sig not in seen:
            seen.add(sig)
            out.append(order)
    return tuple(out)


def distinct_orders(sc: Scenario) -> tuple[str, ...]:
    """The placements of ``sc``'s degrees that the network prices differently (module docstring),
    ``sc``'s own order first; just the own order across datacenters, with a span set, or with
    faulty nodes (whose degraded stages follow the placement)."""
    from ..network.topology import Fabric  # deferred: the network model is only needed here

    c, p = sc.cluster, sc.parallelism
    if c.datacenters > 1 or p.span != "auto" or c.faults.degraded or c.faults.failed_nodes:
        return (p.order,)
    domains = tuple(b.domain_gpus for b in Fabric.for_cluster(c).boundaries)
    return _distinct_orders(p.order, p.tp, p.cp, sc.dp, p.pp, p.ep, domains)


def _spread(n: int, k: int) -> list[int]:
    """``n`` layers over ``k`` chunks, counts differing by at most one, the larger in the middle
    (the edge chunks carry the embedding and the loss)."""
    base, extra = divmod(n, k)
    out = [base] * k
    # Middle-out: the chunks nearest the centre take the extra layers.
    for i in sorted(range(k), key=lambda i: (abs(2 * i - (k - 1)), i))[:extra]:
        out[i] += 1
    return out


def layer_splits(layers: int, pp: int, vpp: int, schedule: str) -> tuple[tuple[int, ...], ...]:
    """Candidate pipeline layouts (module docstring) for ``layers`` over pp x vpp chunks: the
    uniform split and the edge chunks trimmed by TRIMS layers each, or emptied (embedding-only /
    loss-only); () for one stage or a two-direction schedule.  Each candidate is valid for
    ``parallelism.pipeline_layout`` (every middle chunk at least one layer)."""
    chunks = pp * vpp
    if pp < 2 or registry.get(schedule).two_directions or layers < chunks:
        return ()
    u = layers // chunks
    out: dict[tuple[int, ...], None] = {tuple(_spread(layers, chunks)): None}
    trims = sorted({t for t in (*TRIMS, u) if 0 <= t <= u})
    if chunks == 2:
        # Two chunks: one edge holds what the other leaves.
        for t in trims:
            out.setdefault((u - t, layers - u + t), None)
            out.setdefault((layers - u + t, u - t), None)
        return tuple(out)
    for a, b in itertools.product(trims, trims):
        first, last = u - a, u - b
        rest, middle = layers - first - last, chunks - 2
        if rest < middle:
            continue
        out.setdefault((first, *_spread(rest, middle), last), None)
    return tuple(out)
