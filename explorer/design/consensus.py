"""How many replicas, and how often to synchronise them, when communication is not free.

The classic question of local SGD (Stich, ICLR 2019; Lin et al., ICLR 2020) and of model
averaging across workers: for each number of replicas D (datacenters, or groups of
``training.sync.replica_nodes`` nodes, each as large as the base scenario's: weak scaling, every
replica with the base's per-group batch) and each
synchronisation period H, the amortised time per step of a scenario with ``training.sync`` of
kind local-sgd or diloco (the base's kind, diloco by default) and the share of it the
synchronisation takes.  The *knee* of each D's curve is the smallest H whose synchronisation
share falls to :data:`KNEE_SHARE` or below: synchronising less often than that buys at most that
share back, while (the papers' point) quality tends to suffer as H grows.

One inner step is simulated per D (the window's inner step does not depend on H); every H is the
window's closed form around it (explorer/variants/lowcomm/window.py).
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..config.loading import apply_overrides
from ..config.schema import ScenarioError
from ..runnable import from_dict  # the simulator's checks too (whole replicas per group)
from ..simulate import simulate
from ..variants.lowcomm.window import inner_scenario, window

KNEE_SHARE = 0.10        # the synchronisation's share of a step at which we call the curve flat
REPLICAS = (2, 4, 8, 16)
PERIODS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000)


@dataclass(frozen=True)
class ConsensusPoint:
    """One (replicas, period) of the curve."""

    replicas: int
    inner_steps: int
    inner_step_s: float
    time_per_step_s: float
    sync_share: float             # of the time per step
    tokens_per_s: float
    fits: bool = True             # the replica count's GPUs hold its memory (its inner step's verdict)

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class ConsensusCurve:
    kind: str
    points: tuple[ConsensusPoint, ...]
    knees: dict[int, int | None]   # replicas -> the knee's period (None: no period in the grid)
    skipped: dict[int, str]        # replicas -> why that count cannot run
    scenario_kind: str = ""        # the scenario's own training.sync.kind, when it is not ``kind``
    # replicas -> (memory, capacity) in GB per GPU where the layout does not fit: no knee is marked
    # there (a knee is a setting to run at; a hunt found them marked at 39.0 of 17.2 GB, unsaid).
    over_memory: dict[int, tuple[float, float]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "knee_share": KNEE_SHARE, "points": [p.to_json() for p in self.points],
                "knees": {str(k): v for k, v in self.knees.items()}, "skipped": dict(self.skipped),
                "scenario_kind": self.scenario_kind or self.kind,
                "over_memory": {str(k): {"memory_GB": m, "memory_capacity_GB": c}
                                for k, (m, c) in self.over_memory.items()}}


def consensus(raw: Mapping[str, Any], replicas: Sequence[int] = REPLICAS,
              periods: Sequence[int] = PERIODS,
              progress: Callable[[int, int], None] | None = None) -> ConsensusCurve:
    """The curve of the scenario mapping ``raw`` (module docstring); ``progress(done, total)`` is
    told after each replica count."""
    base = from_dict(raw)
    kind = base.training.sync.kind if base.training.sync.kind in ("local-sgd", "diloco") else "diloco"
    # The replicas are the datacenters, or (training.sync.replica_nodes) groups of nodes in one.
    groups = base.training.sync.replica_nodes > 0 and base.cluster.datacenters == 1
    D0 = base.sync_groups if groups else base.cluster.datacenters
    if base.cluster.nodes % D0 or base.training.global_batch % D0 or base.dp % D0:
        raise ScenarioError("cluster.datacenters", "the base must split evenly into datacenters")
    per_dc_nodes, per_dc_batch = base.cluster.nodes // D0, base.training.global_batch // D0
    points: list[ConsensusPoint] = []
    knees: dict[int, int | None] = {}
    skipped: dict[int, str] = {}
    over_memory: dict[int, tuple[float, float]] = {}
    for n, D in enumerate(replicas):
        if progress:
            progress(n, len(replicas))
        over = {"cluster.nodes": per_dc_nodes * D,
                "training.global_batch": per_dc_batch * D, "training.sync.kind": kind,
                "parallelism.dp": base.dp // D0 * D}
        if not groups:
            over["cluster.datacenters"] = D
            if base.parallelism.span == "auto" and base.cluster.datacenters == 1:
                # One datacenter's scenario made D of them: its replicas are what the datacenters
                # hold (whole pipelines in each, dp across them), as the windowed kinds need.
                over["parallelism.span"] = "dp"
                over["parallelism.order"] = None       # (span dp places ranks as its own order says)
        try:
            sc = from_dict(apply_overrides(dict(raw), over))
            inner = simulate(inner_scenario(sc))
        except ScenarioError as exc:
            skipped[D] = str(exc)
            continue
        knees[D] = None
        fits = not inner.memory_over_capacity
        if not fits:
            mem, cap = inner.binding_memory
            over_memory[D] = (mem.total / 1e9, cap / 1e9)
        tokens = sc.training.global_batch * sc.model.seq_len
        for H in periods:
            scH = from_dict(apply_overrides(dict(raw), {**over, "training.sync.inner_steps": H}))
            w = window(scH, inner)
            share = 1 - w.inner_step_s / w.time_per_step_s if w.time_per_step_s > 0 else 0.0
            points.append(ConsensusPoint(D, H, w.inner_step_s, w.time_per_step_s, share,
                                         tokens / w.time_per_step_s, fits))
            if fits and knees[D] is None and share <= KNEE_SHARE:
                knees[D] = H
    if progress:
        progress(len(replicas), len(replicas))
    own = base.training.sync.kind
    return ConsensusCurve(kind, tuple(points), knees, skipped, "" if own == kind else own, over_memory)
