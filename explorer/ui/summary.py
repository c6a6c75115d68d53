"""The figures of one run that the views show, as a typed record built once per cached run.

The cache (explorer/ui/cache.py) keeps a run's JSON summary (``Result.to_json_dict``: what the CLI
prints and the Compare view diffs); the views read this record, built once from that dict, by
attribute — a renamed or missing field fails here, in one place, not as a KeyError in a view.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from ..variants.lowcomm import SyncWindow
from ..variants.lowcomm.decentral import Exchange


@dataclass(frozen=True)
class Layout:
    """The run's parallel layout: degrees, virtual stages, schedule and ZeRO stage."""

    tp: int
    pp: int
    dp: int
    cp: int
    ep: int
    vpp: int
    schedule: str
    zero: int


@dataclass(frozen=True)
class LinkCall:
    """The main call of one dimension (analysis/report.link_summary): its operation, size, group,
    algorithm, the tier that limits it and the bus bandwidth it achieved."""

    op: str
    bytes: float
    group: int
    algorithm: str
    tier: str
    busbw_GBps: float


class WanLink(NamedTuple):
    """One loaded WAN link (analysis/report.wan_report): datacenters ``a`` and ``b`` by name, the
    bytes of its busier direction per iteration and that direction's utilisation, both directions'
    bytes, and the link's bandwidth and latency."""

    a: str
    b: str
    bytes_per_iteration: float
    utilisation: float
    bytes_a_to_b: float
    bytes_b_to_a: float
    bandwidth_Gbps: float
    latency_ms: float


@dataclass(frozen=True)
class Summary:
    """What the views show of one run (see ``Result`` in explorer/simulate.py for each figure)."""

    iteration_time_s: float
    time_per_step_s: float
    tokens_per_s: float
    mfu: float
    tflops_per_gpu: float
    bubble_fraction: float
    bubble_fraction_busiest: float | None
    bubble_explanation: str
    bottleneck: str
    warnings: tuple[str, ...]
    breakdown_s: Mapping[str, float]
    memory_GB: float                                   # per GPU, in total (Result.memory)
    memory_capacity_GB: float
    comm_bytes_per_gpu: Mapping[str, float]
    comm_bytes_by_tier: Mapping[str, Mapping[str, float]]   # dim -> tier -> bytes
    links: Mapping[str, LinkCall]
    wan_links: tuple[WanLink, ...]
    stage_layers: tuple[int, ...]
    micro_batches: int
    dp_priority: bool
    layout: Layout
    sync: SyncWindow | None                            # training.sync's window, if any
    exchange: Exchange | None                          # gossip / parameter-server exchange, if any
    # The regime's published runs (explorer/fidelity/band.py): validation mean |error|, None when no
    # published run is like this one, and the sentence that says which runs and how many.
    expected_error: float | None = None
    expected_error_label: str = ""
    epoch_s: float | None = None                       # a family with an epoch (a GNN's), else None
    warning_kinds: tuple[str, ...] = ()                # parallel to ``warnings`` (analysis/report.Notice)
    dormant: tuple[tuple[str, str], ...] = ()          # (field, why) given and not read (config/dormant.py)
    mfu_fp8_peak: float | None = None                  # an FP8 run's MFU against the FP8 dense peak

    @classmethod
    def from_json(cls, j: Mapping[str, Any]) -> Summary:
        """The record of a run's JSON summary (``Result.to_json_dict``)."""
        par = j["parallelism"]
        return cls(
            iteration_time_s=j["iteration_time_s"], time_per_step_s=j["time_per_step_s"],
            tokens_per_s=j["tokens_per_s"], mfu=j["mfu"], tflops_per_gpu=j["tflops_per_gpu"],
            bubble_fraction=j["bubble_fraction"], bubble_fraction_busiest=j.get("bubble_fraction_busiest"),
            bubble_explanation=j["bubble_explanation"], bottleneck=j["bottleneck"],
            warnings=tuple(j["warnings"]), breakdown_s=j["breakdown_s"],
            memory_GB=j["memory_GB"]["total"], memory_capacity_GB=j["memory_capacity_GB"],
            comm_bytes_per_gpu=j["comm_bytes_per_gpu"], comm_bytes_by_tier=j.get("comm_bytes_by_tier") or {},
            links={d: LinkCall(c["op"], c["bytes"], c["group"], c["algorithm"], c["tier"], c["busbw_GBps"])
                   for d, c in j["links"].items()},
            wan_links=tuple(WanLink(**{f: w[f] for f in WanLink._fields}) for w in j.get("wan_links", ())),
            stage_layers=tuple(j["stage_layers"]), micro_batches=j["micro_batches"],
            dp_priority=bool(j.get("dp_priority")),
            layout=Layout(**{f: par[f] for f in ("tp", "pp", "dp", "cp", "ep", "vpp", "schedule", "zero")}),
            sync=SyncWindow.from_json(j["sync"]) if j.get("sync") else None,
            exchange=Exchange(**j["dp_exchange"]) if j.get("dp_exchange") else None,
            expected_error=j.get("expected_error"), expected_error_label=j.get("expected_error_label", ""),
            epoch_s=j.get("epoch_s"), warning_kinds=tuple(j.get("warning_kinds", ())),
            dormant=tuple((d["field"], d["reason"]) for d in j.get("dormant", ())),
            mfu_fp8_peak=j.get("mfu_fp8_peak"))
