"""What a run adds beyond its one iteration, as records: the window of steps that replicas train
apart and its synchronisation (training.sync; filled by explorer/variants/lowcomm/window.py), and
the gossip or parameter-server exchange of data parallelism (parallelism.dp_kind; filled by
explorer/variants/lowcomm/decentral.py).  Both are read by the Result, the CLI and the app.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

# The per-step traffic tiers of ``run --json`` "bytes_per_step" (the boundary a byte crosses:
# the GPU's scale-up link, its node, its datacenter; BOUNDARY_NAMES also has the spine).
STEP_TIERS = ("scale-up", "scale-out", "scale-across")

@dataclass(frozen=True)
class SyncWindow:
    """One window of ``inner_steps`` steps and its synchronisation (module docstring)."""

    kind: str
    inner_steps: int
    fragments: int
    overlap_steps: int
    outer_dtype: str
    replicas: int                  # groups training apart (datacenters, or replica_nodes nodes)
    inner_step_s: float            # one inner step (the Gantt)
    sync_s: float                  # one synchronisation of the whole model (all fragments together)
    fragment_sync_s: float         # one fragment's synchronisation
    exposed_sync_s: float          # synchronisation time not hidden, per window
    update_s: float                # outer optimizer / averaging, per window
    window_s: float
    wan_bytes_per_sync: float      # bytes one datacenter sends over the WAN per whole-model sync
    sync_bytes_per_gpu: dict[str, float]   # tier -> bytes one GPU sends per whole-model sync
    bytes_per_step: dict[str, float]       # tier -> bytes one GPU sends per step, amortised
    peak_wan_Gbps: float           # one datacenter's WAN egress while a synchronisation runs
    # Streaming DiLoCo's peak bandwidth: a fragment's WAN bytes over its tau inner steps (1/F of
    # the whole model's); None for blocking kinds, which have no such deadline.
    wan_Gbps_needed: float | None
    wan_Gbps_to_hide: float | None  # WAN bandwidth at which the sync hides (None: it never does)
    quality: str
    slice_params: float = 0.0      # parameters one GPU reduces, updates and keeps outer state for
    group_nodes: int = 0           # training.sync.replica_nodes: 0 = the groups are datacenters
    # The same scenario synchronising every step (training.sync.kind every-step): its time per step,
    # None when that scenario is not valid.  What the window buys per step, beside what it costs in loss.
    every_step_s: float | None = None
    # DiLoCo's loss against data-parallel training from its scaling laws (DilocoLoss.to_json_dict,
    # explorer/variants/lowcomm/loss_law.py: an estimate from the literature); None for the other kinds.
    loss: dict[str, Any] | None = None

    @property
    def speedup(self) -> float | None:
        """Time per step synchronising every step over the window's: how much faster per step."""
        return None if self.every_step_s is None else self.every_step_s / self.time_per_step_s

    @property
    def groups(self) -> str:
        """What trains apart, for sentences: "datacenters" or "groups of N nodes"."""
        return "datacenters" if self.group_nodes == 0 else f"groups of {self.group_nodes} node(s)"

    @property
    def link(self) -> str:
        """What the synchronisation crosses: the WAN between datacenters, or the fabric."""
        return "WAN" if self.group_nodes == 0 else "fabric"

    @property
    def time_per_step_s(self) -> float:
        """The window over its H steps: the inner step plus 1/H of what the window adds to it."""
        return self.inner_step_s + (self.exposed_sync_s + self.update_s) / self.inner_steps

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> SyncWindow:
        """The window back from :meth:`to_json_dict`'s mapping (the app keeps the run as JSON)."""
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})

    def to_json_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "inner_steps": self.inner_steps, "fragments": self.fragments,
                "overlap_steps": self.overlap_steps, "outer_dtype": self.outer_dtype,
                "replicas": self.replicas, "inner_step_s": self.inner_step_s, "sync_s": self.sync_s,
                "fragment_sync_s": self.fragment_sync_s, "exposed_sync_s": self.exposed_sync_s,
                "update_s": self.update_s, "window_s": self.window_s,
                "time_per_step_s": self.time_per_step_s, "wan_bytes_per_sync": self.wan_bytes_per_sync,
                "sync_bytes_per_gpu": dict(self.sync_bytes_per_gpu),
                "bytes_per_step": dict(self.bytes_per_step),
                "peak_wan_Gbps": self.peak_wan_Gbps, "wan_Gbps_needed": self.wan_Gbps_needed,
                "wan_Gbps_to_hide": self.wan_Gbps_to_hide,
                "quality": self.quality, "slice_params": self.slice_params,
                "replica_nodes": self.group_nodes, "group_nodes": self.group_nodes,
                "every_step_s": self.every_step_s, "speedup_per_step": self.speedup, "loss": self.loss}



@dataclass(frozen=True)
class Exchange:
    """What the replicas exchange per step and what it costs (module docstring)."""

    kind: str
    replicas: int
    peers: int                       # neighbours per step (gossip); server nodes (parameter server)
    payload_dtype: str
    # The reference replica's own step (compute, TP/PP, bubble, optimizer): the slowest kind's, which
    # sets every replica's pace, or under gossip-async the fastest kind's.
    step_s: float
    exchange_s: float                # the exchange alone
    exposed_s: float                 # what the exchange adds to that step
    bytes_per_gpu: dict[str, float]  # tier -> bytes one GPU sends per step
    server_nic_bytes: float          # parameter server: bytes through one server NIC per step, each way
    server_nic_utilisation: float    # of the step
    quality: str
    # Replicas that differ (cluster.stragglers): each replica's own cycle alone — its step plus what
    # the exchange exposes to it — for the fastest and the slowest kind (equal without stragglers),
    # and the sequences per second all replicas process together.
    fastest_replica_step_s: float = 0.0
    slowest_replica_step_s: float = 0.0
    samples_per_s: float = 0.0
    global_batch: int = 0            # sequences per step of all replicas together
    # tier -> bytes per step averaged over every GPU of every stage (``bytes_per_gpu`` is the
    # busiest stage's): times the GPUs, the exchange's whole load on each boundary.
    mean_bytes_per_gpu: dict[str, float] = field(default_factory=dict)
    # Bytes one GPU of the busiest stage sends per step over every tier together: each of its
    # point-to-point messages once, over its scale-up link to a peer of its node or out of its node
    # (network/p2p_link.py), never both.  0: not known (a run written before it): the busiest tier's.
    sent_per_gpu: float = 0.0

    @property
    def sent(self) -> float:
        """Bytes one GPU of the busiest stage sends per step (``sent_per_gpu``, else the most it puts
        on one tier, as runs written before it counted every message on scale-up)."""
        return self.sent_per_gpu or max(self.bytes_per_gpu.values(), default=0.0)

    @property
    def asynchronous(self) -> bool:
        """Whether no replica waits for another (gossip-async, AD-PSGD)."""
        return self.kind == "gossip-async"

    def to_json_dict(self) -> dict[str, Any]:
        return {k: (dict(v) if isinstance(v, dict) else v) for k, v in self.__dict__.items()}
