"""The ``training.sync`` section: how often, and how much of, the model is synchronised.

``every-step`` is synchronous training (the data-parallel gradients are reduced every iteration,
the default).  The other kinds let every datacenter train its own replica for ``inner_steps``
steps with its in-datacenter parallelism and synchronise the replicas over the WAN only then:

- ``local-sgd``: model averaging every H steps (Stich, "Local SGD Converges Fast and Communicates
  Little", ICLR 2019; Lin et al., "Don't Use Large Mini-Batches, Use Local SGD", ICLR 2020);
- ``diloco``: the same all-reduce of the outer gradient (the replica's parameter change) with an
  outer Nesterov optimizer (Douillard et al., "DiLoCo: Distributed Low-Communication Training of
  Language Models", arXiv 2311.08105, 2023);
- ``streaming-diloco``: the model cut into ``fragments`` synchronised in a staggered way, each
  overlapped with the next ``overlap_steps`` inner steps, optionally in 4 bits (Douillard et al.,
  "Streaming DiLoCo with overlapping communication", arXiv 2501.18512, 2025);
- ``independent``: no synchronisation at all — each datacenter trains its own expert model and
  they are merged once at the end (c-BTM: Gururangan et al., "Scaling Expert Language Models with
  Unsupervised Domain Discovery", arXiv 2303.14177, 2023).

How a window of H inner steps is timed is :mod:`explorer.variants.lowcomm`.
"""
from __future__ import annotations

from dataclasses import dataclass, field

# parallelism.dp_kind (explorer/variants/lowcomm/decentral.py); values are only ever added, never renamed.
DP_KINDS = ("allreduce", "gossip-ring", "gossip-torus", "gossip-exponential", "gossip-async",
            "parameter-server")
SYNC_KINDS = ("every-step", "local-sgd", "diloco", "streaming-diloco", "independent")
# Bytes per parameter of the outer synchronisation's payload.  int4 is Streaming DiLoCo's 4-bit
# (E3M0) outer gradient (arXiv 2501.18512, Sec. 2.3); scales are one per large block, not counted.
OUTER_DTYPE_BYTES = {"fp32": 4.0, "bf16": 2.0, "fp8": 1.0, "int4": 0.5}


@dataclass(frozen=True)
class Sync:
    """What crosses the WAN and when: every step, or every ``inner_steps`` steps."""

    kind: str = field(default="every-step", metadata={
        "choices": SYNC_KINDS,
        "doc": "every-step = synchronous; local-sgd / diloco = each datacenter (or group of "
               "replica_nodes nodes) trains alone for inner_steps steps, then the groups all-reduce "
               "(over the WAN between datacenters); streaming-diloco = "
               "fragments synchronised staggered and overlapped; independent = never (c-BTM)"})
    inner_steps: int = field(default=100, metadata={
        "min": 1, "max": 1_000_000,
        "why": "1 (every step) up to a million; DiLoCo uses 500",
        "doc": "inner steps H between two synchronisations of a fragment (DiLoCo: 500)"})
    fragments: int = field(default=1, metadata={
        "min": 1, "max": 1024,
        "why": "1 (the whole model at once) up to 1,024 fragments",
        "doc": "streaming-diloco: fragments the layers are cut into, synchronised H/fragments steps "
               "apart; the other kinds synchronise the whole model and ignore it"})
    overlap_steps: int = field(default=1, metadata={
        "min": 0, "max": 1_000_000,
        "why": "0 (blocking) up to a million inner steps",
        "doc": "streaming-diloco: inner steps a fragment's synchronisation may run behind before its "
               "result is needed (Streaming DiLoCo's tau; 0 = blocking); ignored by the other kinds"})
    replica_nodes: int = field(default=0, metadata={
        "min": 0, "max": 10_000_000,
        "why": "0 (each datacenter is one replica group) or the nodes of a group",
        "doc": "nodes of each group that trains apart: 0 = a datacenter (the replicas are the "
               "datacenters); N = groups of N nodes, local SGD inside a datacenter too (Lin et al., "
               "ICLR 2020), their synchronisation over the links that join them"})
    outer_dtype: str = field(default="fp32", metadata={
        "choices": tuple(OUTER_DTYPE_BYTES),
        "doc": "precision of the outer gradient (and of gossip / parameter-server exchanges) on the wire "
               "(Streaming DiLoCo: int4, 4-bit E3M0); communication.compression is the alternative"})

    @property
    def windowed(self) -> bool:
        """Whether the replicas train apart between synchronisations (not every-step)."""
        return self.kind != "every-step"

    @property
    def payload_bytes(self) -> float:
        """Bytes per parameter of one outer synchronisation."""
        return OUTER_DTYPE_BYTES[self.outer_dtype]
