"""The declaration of ``parallelism.stage_replicas`` (PipeDream's per-stage replica counts): its
metadata, read by config/sections.py, and the schedules it runs with, read by its rules
(config/replica_rules.py) — apart from the rules so that sections.py imports no rule module."""
from __future__ import annotations

from ..schedules import registry

FIELD = "parallelism.stage_replicas"
# The field's metadata (config/sections.py, Parallelism.stage_replicas); 10,000,000 = MAX_GPUS.
STAGE_REPLICAS_FIELD = {
    "min": 0, "max": 10_000_000, "max_items": 4096,
    "doc": "PipeDream's hybrid: GPUs per pipeline stage (pp entries, sum x tp x cp = the GPUs, dp 1); "
           "a stage's replicas take micro-batches round-robin and all-reduce their gradients among "
           "themselves (1f1b, pipedream-async); all 0 or 'auto': PipeDream's partitioner proposes "
           "plans and the one the simulation runs fastest is taken (with stage_layers when not "
           "given); default: every stage has dp replicas"}
# The schedules whose order the replicas follow: PipeDream's 1F1B-RR, asynchronous (weight
# stashing) or with a flush per step (taskgraph/replicas.py builds their per-replica orders).
SCHEDULES = tuple(n for n in registry.names() if registry.get(n).stage_replicas)
