"""Scaling curves: iteration time, MFU and exposed communication as the cluster grows.

The model-parallel layout (tp, pp, cp, ep, vpp, schedule, ...) stays the scenario's; the extra GPUs
become data-parallel replicas, whole nodes at a time (explorer/design/base.py
``cluster_overrides``).  Two modes:

- **weak**: the global batch grows with dp (each replica keeps its micro-batches), so every GPU
  processes the same tokens per iteration; ideal scaling keeps the iteration time flat, and what
  rises is the data-parallel reduction over more ranks, more nodes and more leaf blocks;
- **strong**: the global batch is fixed, so each replica gets fewer micro-batches as dp grows;
  compute per GPU falls as 1/GPUs, the pipeline bubble's share grows (fewer micro-batches to fill
  it) and the gradient reduction does not shrink, so MFU falls.  A size that leaves a replica no
  whole micro-batch is reported invalid with the loader's reason.

Each point has the full engine's figures (a handful of variants, scored by scores.score_exact: the
estimator, equal to the simulation to 1e-9, and the simulation for the rows it does not price).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..run.phases import plan
from ..scenario import ScenarioError
from ..vocabulary import COMM_DIMS
from .base import Base, cluster_overrides, share_query
from .capacity import least_capacity_GB
from .progress import Progress, next_phase
from .scores import score_exact

MODES = ("weak", "strong")
DEFAULT_FACTORS = (0.25, 0.5, 1, 2, 4, 8)      # default sizes: the scenario's GPUs times these


@dataclass(frozen=True)
class ScalePoint:
    """One cluster size: its overrides and figures, or why it is invalid."""

    gpus: int
    overrides: dict[str, Any]
    valid: bool
    reason: str | None = None
    dp: int | None = None
    global_batch: int | None = None
    figures: dict[str, Any] = field(default_factory=dict)   # Scores.row() of the full engine
    link: str | None = None

    @property
    def exposed_s(self) -> dict[str, float]:
        """Exposed communication per dimension (tp, cp, ep, pp, dp), seconds."""
        b = self.figures.get("breakdown_s", {})
        return {d: b.get(d, 0.0) for d in COMM_DIMS}

    @property
    def fits(self) -> bool:
        """Whether the size's busiest GPU holds its memory (False for an invalid size): a size that
        does not fit cannot run as laid out, whatever its figures say."""
        return self.valid and bool(self.figures.get("fits", True))

    @property
    def tokens_per_gpu(self) -> float | None:
        """Tokens each GPU processes per iteration (global batch x seq_len / GPUs)."""
        return self.figures.get("tokens_per_gpu")

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"gpus": self.gpus, "overrides": self.overrides, "valid": self.valid}
        if not self.valid:
            return {**out, "reason": self.reason}
        # ``run --set`` with the overrides alone keeps a file's own dp (a hunt): the size's is added.
        return {**out, "dp": self.dp, "global_batch": self.global_batch, **self.figures,
                "exposed_s": self.exposed_s, "link": self.link,
                "run_overrides": {**self.overrides, "parallelism.dp": self.dp}}


def default_sizes(gpus: int, unit: int) -> list[int]:
    """The scenario's GPUs times DEFAULT_FACTORS, kept where they are whole multiples of ``unit``
    (the GPUs of one model replica, rounded up to whole nodes)."""
    sizes = sorted({int(gpus * f) for f in DEFAULT_FACTORS if gpus * f >= unit and int(gpus * f) % unit == 0})
    return sizes or [gpus]


def scaling(base: Base, gpus: Sequence[int] | None = None, mode: str = "weak",
            progress: Progress | None = None) -> list[ScalePoint]:
    """One point per cluster size in ``gpus`` (default :func:`default_sizes`), ascending;
    ``progress`` counts the cluster sizes simulated."""
    if mode not in MODES:
        raise ScenarioError("--mode", f"{mode!r} is not one of {', '.join(MODES)}")
    sc = base.scenario()
    p = sc.parallelism
    # A model replica's GPUs; PipeDream's per-stage replicas make the whole cluster one replicated
    # pipeline (dp 1: a hunt found weak scaling multiply pipedream-vgg16's batch by 8 at its own size).
    replica = sc.gpus if p.stage_replicas else p.tp * p.pp * p.cp
    unit = max(replica, sc.cluster.gpus_per_node) * sc.cluster.datacenters
    sizes = sorted(set(gpus)) if gpus else default_sizes(sc.gpus, unit)
    points: list[ScalePoint] = []
    scenarios, slots = [], []
    for n in sizes:
        ov = cluster_overrides(sc, n)
        if p.stage_replicas and any(p.stage_replicas):
            # PipeDream's replicas grow with the cluster, each stage's in proportion (15-1 on 16 GPUs,
            # 30-2 on 32): the pipeline's shape kept, as extra data-parallel replicas keep a layout's.
            if n % sc.gpus:
                points.append(ScalePoint(n, ov, False, f"parallelism.stage_replicas: "
                                         f"{list(p.stage_replicas)} scales by whole multiples of its "
                                         f"{sc.gpus} GPUs"))
                continue
            ov["parallelism.stage_replicas"] = [r * (n // sc.gpus) for r in p.stage_replicas]
        if mode == "weak":
            if n % replica:
                points.append(ScalePoint(n, ov, False, f"parallelism.dp: {n} GPUs are not a whole number of "
                                         f"tp*pp*cp = {replica}-GPU replicas"))
                continue
            # Each replica keeps its batch (a valid scenario's global batch is a multiple of dp).
            ov["training.global_batch"] = sc.training.global_batch // sc.dp * (n // replica)
        try:
            variant = base.scenario(ov)
            plan(variant)     # a run plan's phases must fit the new size too, as run and sweep check
        except ScenarioError as exc:
            points.append(ScalePoint(n, ov, False, str(exc)))
            continue
        slots.append(len(points))
        scenarios.append(variant)
        points.append(ScalePoint(n, ov, True, dp=variant.dp, global_batch=variant.training.global_batch))
    s, refused = score_exact(scenarios, progress=next_phase(progress, "scoring", "cluster sizes",
                                                          len(scenarios)) or progress)
    for j, (i, variant) in enumerate(zip(slots, scenarios, strict=True)):
        pt = points[i]
        if refused[j] is not None:
            points[i] = ScalePoint(pt.gpus, pt.overrides, False, refused[j])
            continue
        figures = s.row(j)
        figures["tokens_per_gpu"] = variant.training.global_batch * variant.model.seq_len / variant.gpus
        figures["samples_per_s"] = variant.training.global_batch / figures["time_per_step_s"]
        # What ``fits`` was judged against, so that every view can say a size does not fit (a hunt
        # found the CLI's table give a 128-GPU row needing 154.7 of 85.9 GB the best MFU, unmarked).
        figures["memory_capacity_GB"] = least_capacity_GB(variant)
        points[i] = ScalePoint(pt.gpus, pt.overrides, True, None, pt.dp, pt.global_batch, figures,
                               share_query(base, variant))
    return points
