"""Rank placement: which GPUs form the communication groups of each parallel dimension.

GPU ids count node by node (a node's GPUs are consecutive), datacenter by datacenter.  A rank's
coordinates (tp, cp, dp, pp) are the digits of its GPU id in a mixed radix whose order is
``parallelism.order``, innermost (fastest-varying) first — Megatron-LM's ``RankGenerator``
convention.  Expert-parallel groups are carved out of the cp x dp sub-grid, cp innermost, as
Megatron-Core does, so ``ep`` in the order string marks intent but does not move ranks.

Groups of one dimension are translates of each other, so one representative group per dimension
(the one containing GPU 0) tells how many members share a node, a leaf block and a datacenter.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from math import gcd

import numpy as np

from ..config import ORDER_DIMS, Scenario


@dataclass(frozen=True)
class Placement:
    """Strides of each dimension in GPU-id space and the degree of each dimension."""

    strides: dict[str, int]
    sizes: dict[str, int]

    @classmethod
    def for_scenario(cls, sc: Scenario) -> Placement:
        p = sc.parallelism
        sizes = {"tp": p.tp, "cp": p.cp, "dp": sc.dp, "pp": p.pp}
        strides, stride = {}, 1
        for dim in (d for d in p.order.split("-") if d in ORDER_DIMS):
            strides[dim] = stride
            stride *= sizes[dim]
        return cls(strides, sizes)

    def gpu(self, tp: int = 0, cp: int = 0, dp: int = 0, pp: int = 0) -> int:
        s = self.strides
        return tp * s["tp"] + cp * s["cp"] + dp * s["dp"] + pp * s["pp"]

    def _data_rank_to_gpu(self, j: np.ndarray) -> np.ndarray:
        # Data sub-grid index j over cp x dp with cp innermost (Megatron-Core expert groups).
        cp = self.sizes["cp"]
        return (j % cp) * self.strides["cp"] + (j // cp) * self.strides["dp"]

    def members(self, dim: str, stage: int = 0) -> np.ndarray:
        """GPU ids of the representative group of ``dim`` on pipeline stage ``stage``.

        dims: tp, cp, pp (the whole pipeline), dp (dense gradient group: dp x cp ranks),
        expert groups: see :meth:`expert_members`.
        """
        base = stage * self.strides["pp"]
        sz = self.sizes
        if dim in ("tp", "cp", "pp"):
            return base + self.strides[dim] * np.arange(sz[dim], dtype=np.int64)
        data = sz["dp"] * sz["cp"]
        if dim == "dp":
            return base + self._data_rank_to_gpu(np.arange(data, dtype=np.int64))
        raise KeyError(dim)

    def expert_members(self, dim: str, ep: int, stage: int = 0) -> np.ndarray:
        """Expert-parallel (``ep``) or expert data-parallel (``edp``) group on ``stage``."""
        base = stage * self.strides["pp"]
        data = self.sizes["dp"] * self.sizes["cp"]
        if dim == "ep":
            j = np.arange(ep, dtype=np.int64)
        else:
            j = np.arange(0, data, ep, dtype=np.int64)
        return base + self._data_rank_to_gpu(j)


# Groups up to this size are counted in Python (members_per_domain).
SMALL_GROUP = 256


def members_per_domains(members: np.ndarray, domains: tuple[int, ...]) -> tuple[int, ...]:
    """:func:`members_per_domain` for each domain size of ``domains``.  The groups of tp, cp and pp,
    and those of dp and the expert groups without cp, are arithmetic progressions of GPU ids: their
    counts follow from the first id, the step and the size (:func:`_progression_count`) without
    counting ids."""
    n = len(members)
    if n >= 2:
        a, step = int(members[0]), int(members[1] - members[0])
        if step > 0 and int(members[-1]) == a + (n - 1) * step and \
                (n == 2 or bool((members[1:] - members[:-1] == step).all())):
            return tuple(_progression_count(a, step, n, d) for d in domains)
    return tuple(members_per_domain(members, d) for d in domains)


def _progression_count(a: int, step: int, n: int, d: int) -> int:
    """Largest number of the ids ``a + k step`` (0 <= k < n) inside one block ``[q d, (q + 1) d)``.

    Ids ``step >= d`` apart never share a block; a progression inside one block has all n there.
    Otherwise the count of block q is ceil(((q + 1) d - a) / step) - ceil((q d - a) / step), cut to
    0..n.  A block between the first and the last holds ids over its whole width, so its count
    depends on (q d - a) mod step only, which repeats with period step / gcd(step, d) in q; the
    last block is cut short, so holds no more than a whole one of its phase.  The first block and
    one period after it hold the largest."""
    if d <= 1 or step >= d:
        return 1
    q0, q1 = a // d, (a + (n - 1) * step) // d
    if q0 == q1:
        return n
    blocks = range(q0, min(q1, q0 + step // gcd(step, d) + 1) + 1)
    best = 0
    for q in blocks:
        lo = max(0, -((a - q * d) // step))                 # ceil((q d - a) / step)
        hi = min(n, -((a - (q + 1) * d) // step))           # ceil(((q + 1) d - a) / step)
        best = max(best, hi - lo)
    return best


def members_per_domain(members: np.ndarray, domain_gpus: int) -> int:
    """Largest number of group members inside one domain of ``domain_gpus`` consecutive GPUs."""
    if len(members) <= 1:
        return len(members)
    if domain_gpus <= 1:
        return 1                          # members are distinct GPUs: one per one-GPU domain
    if len(members) <= SMALL_GROUP:
        # A sweep prices thousands of group shapes, most of a few members: counting in Python costs
        # ~1.5 us where numpy's calls cost ~10 us whatever the size.
        return max(Counter((members // domain_gpus).tolist()).values())
    # The longest run of equal domain ids once sorted (np.unique's counts, without its bookkeeping).
    d = np.sort(members // domain_gpus)
    edges = np.flatnonzero(d[1:] != d[:-1])
    if edges.size == 0:
        return len(d)
    runs = np.diff(edges, prepend=-1, append=len(d) - 1)
    return int(runs.max())
