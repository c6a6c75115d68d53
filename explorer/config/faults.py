"""The ``cluster.faults`` section: nodes that failed and nodes whose NICs run degraded.

- ``failed_nodes``: nodes out of service (the last ones of the cluster).  Synchronous training
  restarts without them, as Llama 3's training did after its interruptions (arXiv 2407.21783,
  Sec. 3.3.4): every data-parallel replica that held a GPU on a failed node is dropped, the
  remaining replicas carry the whole global batch (more micro-batches each), and the dropped
  replicas' surviving GPUs idle.  How it is simulated: explorer/variants/faults.py.
- ``degraded_nodes`` with ``nic_factor``: nodes whose network interfaces run at ``nic_factor`` of
  their speed (a link retrained at a lower rate, a flapping port).  Every data-parallel group with
  a member on such a node is limited by it (a ring is as fast as its slowest link), so those
  stages' gradient reductions slow; pipeline transfers and tensor-parallel collectives are not
  affected (the latter stay on NVLink; the former touch one replica only).
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Faults:
    """Failed and degraded nodes."""

    failed_nodes: int = field(default=0, metadata={
        "min": 0, "max": 1_000_000, "why": "0 (none) up to a million nodes",
        "doc": "nodes out of service (the last ones): the data-parallel replicas holding them are dropped "
               "and the others carry the global batch (explorer/variants/faults.py)"})
    degraded_nodes: int = field(default=0, metadata={
        "min": 0, "max": 1_000_000, "why": "0 (none) up to a million nodes",
        "doc": "nodes whose NICs run at nic_factor of their speed: every data-parallel group through them "
               "is limited by them"})
    nic_factor: float = field(default=1.0, metadata={
        "min": 0.01, "max": 1.0, "why": "a share of the NIC's speed, 0.01 to 1",
        "doc": "speed of a degraded node's NICs relative to the fabric's (0.5 = a 400 Gb/s port at 200)"})

    @property
    def degraded(self) -> bool:
        return self.degraded_nodes > 0 and self.nic_factor < 1.0
