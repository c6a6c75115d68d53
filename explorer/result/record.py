"""The record of one simulation: :class:`Result` (headline figures, breakdown, memory, traffic,
the scheduled tasks and, beyond one iteration, the sync window or the data-parallel exchange) and
its :class:`GPUClass` lanes.  Filled by explorer/simulate.py (``assemble``) and by the scenario
variants (explorer/variants) that simulate an inner scenario and combine; read by every view.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ..analysis.breakdown import MemoryBreakdown
from ..analysis.report import Notice
from ..config import Scenario
from ..config.dormant import dormant_settings
from ..engine.scheduler import Task
from ..fold.steady import FoldInfo
from ..network.compression_quality import convergence_cost
from ..workloads.registry import nouns, workload_for
from .timeline import Timeline, build_timeline
from .windows import STEP_TIERS, Exchange, SyncWindow


@dataclass(frozen=True)
class GPUClass:
    """A set of provably identical GPUs simulated once.  ``label`` is the display text
    (``name`` and the multiplicity); consumers read ``name``, ``stage`` and ``gpus`` instead of
    parsing it."""

    index: int
    label: str
    stage: int
    gpus: int                 # multiplicity: how many GPUs behave like this one
    layers: tuple[int, ...]   # layers of each of its chunks
    datacenter: int
    name: str = ""            # "stage s" (" · DC d" with several datacenters), without the multiplicity


@dataclass(frozen=True)
class Result:
    """Everything one simulation produces (see analysis.py for the conventions)."""

    scenario: Scenario
    iteration_time_s: float
    tokens_per_s: float
    tflops_per_gpu: float
    mfu: float                                 # model FLOPs / (time x GPUs x bf16 dense peak)
    mfu_fp8_peak: float | None                 # FP8 runs: the same over the fp8 dense peak; else None
    bubble_fraction: float                     # idle share of the pipeline, averaged over its stages
    bubble_fraction_busiest: float             # the busiest stage's (the breakdown's) idle share
    bubble_formula: float                      # the schedule's closed form for this p, m, v, F, B, W
    bubble_formula_text: str
    bubble_explanation: str                    # the card next to the formula (explain_bubble() decomposes)
    breakdown_s: dict[str, float]
    breakdown_class: int
    memory: MemoryBreakdown
    memory_by_class: tuple[MemoryBreakdown, ...]
    comm_bytes_per_gpu: dict[str, float]
    comm_bytes_by_tier: dict[str, dict[str, float]]   # dim -> tier -> bytes one GPU sends across it
    bottleneck: str
    warnings: tuple[str, ...]
    warning_kinds: tuple[str, ...]             # parallel to ``warnings``: memory | algorithm | wan | ...
    classes: tuple[GPUClass, ...]
    stage_layers: tuple[int, ...]
    links: dict[str, dict]                     # per dimension: algorithm, tier, busbw of its main call
    utilisation: dict[str, float]              # average busy fraction of each tier boundary
    # Every scheduled task; a folded result's list unfolds only when read (fold_tasks.FoldedTasks).
    tasks: Sequence[Task] = field(repr=False)
    fold: FoldInfo | None = field(default=None, repr=False)   # how the steady state was folded
    # Per WAN link: {a, b, bytes_per_iteration, utilisation, ...} (wan_report); empty in one datacenter.
    wan_links: tuple[dict, ...] = ()
    # Replicas that differ (stragglers; explorer/variants/replicas.py): per variant its name, replicas, own
    # iteration time and wait for the slowest; empty when every replica is alike.
    replicas: tuple[dict, ...] = ()
    # A window of inner steps and its synchronisation (training.sync; explorer/variants/lowcomm); None when
    # every step synchronises.
    sync_window: SyncWindow | None = None
    # Gossip or parameter-server data parallelism (parallelism.dp_kind;
    # explorer/variants/lowcomm/decentral.py).
    exchange: Exchange | None = None
    # A serving scenario's figures (explorer/serving/result.py: ttft_s, tpot_s, tokens/s, requests/s, KV
    # cache, max batch, ...); None for training.
    inference: dict | None = None
    # Per GPU class, the memory (bytes) of the GPU it runs on, when classes run on different GPUs
    # (datacenters of other GPUs: variants/replicas.py); empty: every class on hardware.gpu.
    class_capacity: tuple[float, ...] = ()

    def combined(self, sc: Scenario, notices: Sequence[Notice] | None = None, pace: float = 1.0,
                 groups: float = 1.0, **fields: Any) -> Result:
        """This (inner) result as the Result of the scenario ``sc`` a variant wraps it in
        (explorer/variants): ``notices`` replace the warnings; with each step ``1 / pace`` times as
        long and ``groups`` times as many replicas stepping together, tokens/s scale by
        ``groups x pace`` and TFLOP/s and MFU by ``pace``; ``fields`` are set as given."""
        paced: dict[str, Any] = {}
        if pace != 1.0 or groups != 1.0:
            paced = {"tokens_per_s": self.tokens_per_s * groups * pace,
                     "tflops_per_gpu": self.tflops_per_gpu * pace, "mfu": self.mfu * pace,
                     "mfu_fp8_peak": None if self.mfu_fp8_peak is None else self.mfu_fp8_peak * pace}
        if notices is not None:
            paced["warnings"] = tuple(n.message for n in notices)
            paced["warning_kinds"] = tuple(n.kind for n in notices)
        return replace(self, scenario=sc, **{**paced, **fields})

    @property
    def samples_per_s(self) -> float:
        """Samples (sequences, images, clips) per second: tokens/s over the tokens of one sample
        (model.seq_len; 1 for a convolutional network), so it follows tokens/s through the variants'
        pacing (issue 36's contract: run --json's ``samples_per_s`` for every workload).  A serving
        run's sample is a request: its requests/s (its tokens are output tokens, which model.seq_len
        does not count; a hunt found 1.18 beside 9.69 requests/s)."""
        if self.inference is not None:
            return float(self.inference["requests_per_s"])
        return self.tokens_per_s / self.scenario.model.seq_len

    @property
    def epoch_s(self) -> float | None:
        """Seconds per epoch for a family that has one (a GNN: its training nodes over the seed
        nodes per second; registry's ``samples_per_epoch``), None for the others."""
        per_epoch = workload_for(self.scenario.model).samples_per_epoch
        if per_epoch is None or self.samples_per_s <= 0:
            return None
        return per_epoch(self.scenario.model, self.scenario.dp) / self.samples_per_s

    @property
    def time_per_step_s(self) -> float:
        """Seconds per training step amortised over the simulated window (the iteration time when
        every step synchronises)."""
        return self.sync_window.time_per_step_s if self.sync_window else self.iteration_time_s

    @property
    def bytes_per_step(self) -> dict[str, float]:
        """Tier -> bytes one GPU sends per step across it (``scale-up``: on its scale-up link,
        ``scale-out``: out of its node, ``scale-across``: out of its datacenter), amortised over
        the window; the largest GPU class's, summed over dimensions."""
        return {t: sum(d.get(t, 0.0) for d in self.comm_bytes_by_tier.values()) for t in STEP_TIERS}

    @property
    def notices(self) -> tuple[Notice, ...]:
        """The warnings as typed records (a kind and a message each)."""
        return tuple(Notice(k, m) for k, m in zip(self.warning_kinds, self.warnings, strict=True))

    @property
    def binding_memory(self) -> tuple[MemoryBreakdown, float]:
        """The memory of the GPU class with the least to spare on its own GPU and that GPU's
        capacity in bytes: what "memory per GPU: X of Y" and ``memory_GB``/``memory_capacity_GB``
        report.  On one kind of GPU, the largest class's memory and hardware.gpu's capacity; across
        datacenters of other GPUs, the class nearest (or furthest over) its own board — an H100
        stage at 147.2 GB is reported against 85.9 GB, not the 193.3 GB of a B200 hardware.gpu that
        no datacenter runs."""
        caps = self.class_capacity
        if not caps or len(caps) != len(self.memory_by_class):
            return self.memory, self.scenario.hardware.gpu.capacity_bytes
        i = min(range(len(caps)), key=lambda k: caps[k] - self.memory_by_class[k].total)
        return self.memory_by_class[i], caps[i]

    @property
    def memory_over_capacity(self) -> bool:
        """Whether some GPU class needs more memory than its GPU has (the ``memory`` warning)."""
        return "memory" in self.warning_kinds

    @property
    def timeline(self) -> Timeline:
        return build_timeline(self.tasks, tuple(c.label for c in self.classes))

    def to_json_dict(self) -> dict:
        sc = self.scenario
        par = sc.parallelism
        return {
            "name": sc.name,
            "gpus": sc.gpus,
            "iteration_time_s": self.iteration_time_s,
            "tokens_per_s": self.tokens_per_s,
            "samples_per_s": self.samples_per_s,
            # What tokens_per_s counts for this family (images for a CNN, tokens for an LSTM): the
            # cards' and diff's label.
            "throughput_unit": nouns(sc.model).per_second,
            **({"epoch_s": self.epoch_s} if self.epoch_s is not None else {}),
            "tflops_per_gpu": self.tflops_per_gpu,
            "mfu": self.mfu,
            **({"mfu_fp8_peak": self.mfu_fp8_peak} if self.mfu_fp8_peak is not None else {}),
            "bubble_fraction": self.bubble_fraction,
            "bubble_fraction_busiest": self.bubble_fraction_busiest,
            "bubble_formula": self.bubble_formula,
            "bubble_formula_text": self.bubble_formula_text,
            "bubble_explanation": self.bubble_explanation,
            "breakdown_s": self.breakdown_s,
            "breakdown_class": self.classes[self.breakdown_class].label,
            # The class nearest its own GPU's capacity (binding_memory): the largest on one kind of GPU.
            "memory_GB": self.binding_memory[0].as_GB(),
            "memory_capacity_GB": self.binding_memory[1] / 1e9,   # GB = 1e9 B, as memory_GB
            # A server's budget, what its memory verdict is against: the capacity x
            # inference.memory_utilization (vLLM's gpu_memory_utilization; serving/memory.py).
            **({"memory_budget_GB": sc.hardware.gpu.capacity_bytes * sc.inference.memory_utilization / 1e9}
               if sc.inference is not None else {}),
            "comm_bytes_per_gpu": self.comm_bytes_per_gpu,
            "comm_bytes_by_tier": self.comm_bytes_by_tier,
            "bottleneck": self.bottleneck,
            "warnings": list(self.warnings),
            "warning_kinds": list(self.warning_kinds),
            # Settings given that nothing reads under the others (config/dormant.py).
            "dormant": [{"field": f, "reason": why} for f, why in dormant_settings(sc)],
            **({"compression_convergence": cc.to_json_dict()}
               if (cc := convergence_cost(sc.communication.compression)) is not None else {}),
            "memory_over_capacity": self.memory_over_capacity,
            "micro_batches": sc.micro_batches,
            "stage_layers": list(self.stage_layers),
            # PipeDream's replicas per stage as run (``auto`` resolved by its partitioner); null
            # when every stage has the dp replicas.
            "stage_replicas": list(par.stage_replicas) if par.stage_replicas else None,
            "links": self.links,
            "dp_priority": sc.communication.dp_priority,
            # Tier name -> average busy fraction over the iteration (what the topology view draws);
            # "tier_utilisation" is the same mapping under its first name, kept for compatibility.
            "utilisation": self.utilisation,
            "tier_utilisation": self.utilisation,
            "wan_links": [dict(link) for link in self.wan_links],
            **({"replicas": [dict(row) for row in self.replicas]} if self.replicas else {}),
            "time_per_step_s": self.time_per_step_s,
            "bytes_per_step": self.bytes_per_step,
            **({"sync": self.sync_window.to_json_dict()} if self.sync_window else {}),
            **({"dp_exchange": self.exchange.to_json_dict()} if self.exchange else {}),
            **({"inference": dict(self.inference)} if self.inference is not None else {}),
            "parallelism": {"tp": par.tp, "pp": par.pp, "dp": sc.dp, "cp": par.cp, "ep": par.ep,
                            "vpp": par.vpp, "schedule": par.schedule, "zero": par.zero},
        }
