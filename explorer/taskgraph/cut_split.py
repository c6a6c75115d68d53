"""Layer splits that weigh where a stage boundary falls: PipeDream's partitioner (Narayanan et al.,
"PipeDream: Generalized Pipeline Parallelism for DNN Training", SOSP 2019, Sec. 3.1).

A transformer sends the same micro-batch x s x h tensor across every boundary, so its split only
balances compute (partition.py).  A CNN's feature maps shrink through the network: VGG-16's first
convolution outputs 3.2M elements per image, its last pool 25,088, so on a slow network a
boundary placed by compute alone can cost more than the stage it ends.  PipeDream's dynamic
programme picks the contiguous split minimising the slowest stage, where a stage's time per
micro-batch is the larger of its compute and the transfer of the activations and gradients
across its boundaries (its A(j, m) recurrence: max(A(i, m-1), 2 C_i, T(i+1 -> j)), the
transfers running beside compute, as the engine's pp stream does).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..config import Scenario
from ..network.groups import Network
from ..workloads.spec import WorkloadSpec


@dataclass(frozen=True)
class Memory:
    """What a stage holds: per layer (weights, gradients and optimizer state as the ZeRO stage
    shards them; activations per unit in flight), the same for the first and last edge, and the
    GPU's capacity (split_cost.SplitCosts.held, first_held, last_held, capacity)."""

    held: np.ndarray                 # (layers, 2)
    first: np.ndarray                # (2,)
    last: np.ndarray                 # (2,)
    capacity: float

    def fits(self, stages: int) -> Callable[[int, int, int], bool]:
        """Whether layers [i, j) fit on stage c: their state plus their activations times the
        units stage c holds in flight under 1F1B, stages - c (Narayanan et al., SC21, Sec. 2.2.1:
        "at most p micro-batches in flight" on the first stage; PipeDream's weight stashing holds
        as many versions, counted here as activations only)."""
        w = np.concatenate(([0.0], np.cumsum(self.held[:, 0])))
        a = np.concatenate(([0.0], np.cumsum(self.held[:, 1])))
        n = len(self.held)

        def ok(i: int, j: int, c: int) -> bool:
            state = w[j] - w[i] + (self.first[0] if i == 0 else 0.0) + (self.last[0] if j == n else 0.0)
            act = a[j] - a[i] + (self.first[1] if i == 0 else 0.0) + (self.last[1] if j == n else 0.0)
            return bool(state + (stages - c) * act <= self.capacity)
        return ok


def cut_seconds(sc: Scenario, net: Network, spec: WorkloadSpec) -> np.ndarray | None:
    """(layers - 1, pp - 1) seconds of one unit's activations sent forward and their gradient sent
    back across pair q (stage q to q + 1) when a stage ends after layer i; None when the workload's
    stage outputs are all alike (WorkloadSpec.boundary_bytes) or there is no pipeline."""
    p, n = sc.parallelism.pp, spec.layers
    if p <= 1 or n < 2:
        return None
    got = [spec.boundary_bytes(i) for i in range(n - 1)]
    sizes = [b for b in got if b is not None]
    if len(sizes) < len(got):
        return None
    # Forward activation and backward gradient: the same bytes each way (PipeDream's 2 C_i).
    return np.array([[2.0 * net.cost("send-recv", float(b), "pp", q).time_s for q in range(p - 1)]
                     for b in sizes])


def min_max_cut_split(per: list[float], first: float, last: float, cuts: np.ndarray,
                      chunks: int, memory: Memory | None = None, blocking: bool = False) -> tuple[int, ...]:
    """Layers per stage (``chunks`` stages, one chunk each, >= 1 layer each) minimising the slowest
    stage: max over stages of its compute ``per`` (``first`` on stage 0, ``last`` on the last) and
    the transfers ``cuts[i, q]`` of the boundary after layer i on pair q.  PipeDream's dynamic
    programme, O(chunks x layers^2); ties keep the earliest boundary.  With ``memory``, only
    stages that fit the GPU are taken (ParDNN's objective: Qararyah et al., "A Computational-Graph
    Partitioning Method for Training Memory-Constrained DNNs", Parallel Computing 2021), unless no
    split fits, when the memory is ignored (the memory check then reports it).  ``blocking``: the
    framework's sends hold the sender's compute stream (DeepSpeed's PipelineEngine,
    config/frameworks.py), so a stage also spends the one-way transfer of its output and of its
    input's gradient, half of each boundary's ``cuts``, in its own time.

    >>> min_max_cut_split([1.0, 1.0, 1.0, 1.0], 0.0, 0.0, np.array([[0.1], [5.0], [0.1]]), 2)
    (1, 3)
    """
    n = len(per)
    prefix = np.concatenate(([0.0], np.cumsum(per)))

    fits = memory.fits(chunks) if memory is not None else None

    def stage(i: int, j: int, c: int) -> float:     # layers [i, j) on stage c
        if fits is not None and not fits(i, j, c):
            return float("inf")
        t = prefix[j] - prefix[i] + (first if i == 0 else 0.0) + (last if j == n else 0.0)
        if blocking:
            t += (cuts[i - 1, c - 1] / 2 if c > 0 else 0.0) + (cuts[j - 1, c] / 2 if j < n else 0.0)
        return t

    inf = float("inf")
    slowest = _programme(n, chunks, stage, lambda i, c: float(cuts[i - 1, c - 2]))[0][chunks][n]
    if slowest == inf:
        return min_max_cut_split(per, first, last, cuts, chunks, None, blocking) if memory is not None else \
            tuple([1] * (chunks - 1) + [n - chunks + 1])
    # Among the splits whose slowest stage is that one, the one whose slowest compute is least:
    # when a boundary's transfer sets the pace, every split under it ties, and "the earliest
    # boundary" piled the layers on the last stage (GNMT-16 over 8 stages on 10 GbE: 1, ..., 1, 9
    # ran 676 ms against 520 for 2 a stage): the fill and drain still pass through each stage's
    # compute.
    bound = slowest * (1 + 1e-9)

    def within(i: int, j: int, c: int) -> float:
        t = stage(i, j, c)
        return t if t <= bound else inf
    best, back = _programme(n, chunks, within, lambda i, c: 0.0 if cuts[i - 1, c - 2] <= bound else inf)
    counts, j = [], n
    for c in range(chunks, 1, -1):
        i = back[c][j]
        counts.append(j - i)
        j = i
    counts.append(j)
    return tuple(reversed(counts))


def _programme(n: int, chunks: int, stage: Callable[[int, int, int], float],
               cut: Callable[[int, int], float]) -> tuple[list[list[float]], list[list[int]]]:
    """The dynamic programme: ``best[c][j]`` the least slowest of ``stage(i, j, c)`` (layers
    [i, j) on stage c) and ``cut(i, c)`` (the boundary before layer i, into stage c - 1 + 1) over
    the first c stages holding layers [0, j), and ``back[c][j]`` where its last stage starts;
    ties keep the earliest boundary."""
    inf = float("inf")
    best = [[inf] * (n + 1) for _ in range(chunks + 1)]
    back = [[0] * (n + 1) for _ in range(chunks + 1)]
    for j in (range(1, n + 1) if chunks > 1 else (n,)):
        best[1][j] = stage(0, j, 0)
    for c in range(2, chunks + 1):
        for j in (range(c, n + 1) if c < chunks else (n,)):     # the last stage ends the model
            for i in range(c - 1, j):
                got = max(best[c - 1][i], cut(i, c), stage(i, j, c - 1))
                if got < best[c][j] * (1 - 1e-12):
                    best[c][j], back[c][j] = got, i
    return best, back
