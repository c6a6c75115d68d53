"""The scenario's communication groups on its fabric, and the cost of a call on each group.

Binds placement (which GPUs form a group) to topology (what each boundary offers) and collectives
(how long a call takes), with a cache per (dimension, stage), since every micro-batch of a stage
issues the same calls.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np

from .collectives import CollectiveCost, cost
from .placement import Placement
from .scenario import Scenario
from .topology import Fabric, GroupShape


class Network:
    """Group shapes and collective costs for one scenario."""

    def __init__(self, sc: Scenario) -> None:
        self.sc = sc
        self.placement = Placement.for_scenario(sc)
        self.fabric = Fabric.for_cluster(sc.cluster)
        self.algorithm = sc.communication.algorithm
        self.nvls = sc.hardware.gpu.nvlink_sharp and sc.cluster.scale_up.kind == "nvswitch"
        self.cost = lru_cache(maxsize=None)(self._cost)
        self.shape = lru_cache(maxsize=None)(self._shape)

    def members(self, dim: str, stage: int) -> np.ndarray:
        """GPU ids of the representative group of ``dim`` on ``stage``.

        ``pp``: the pair (stage, stage+1), wrapping to stage 0 after the last stage (the hop an
        interleaved schedule makes between virtual chunks).
        """
        pl, p = self.placement, self.sc.parallelism
        if dim == "pp":
            nxt = (stage + 1) % p.pp
            return np.array([pl.gpu(pp=stage), pl.gpu(pp=nxt)], dtype=np.int64)
        if dim in ("ep", "edp"):
            return pl.expert_members(dim, p.ep, stage)
        return pl.members(dim, stage)

    def _shape(self, dim: str, stage: int) -> GroupShape:
        return self.fabric.shape(self.members(dim, stage))

    def _cost(self, op: str, size_bytes: float, dim: str, stage: int) -> CollectiveCost:
        return cost(op, size_bytes, self.shape(dim, stage), self.algorithm, self.nvls)

    def group_size(self, dim: str, stage: int = 0) -> int:
        return self.shape(dim, stage).n
