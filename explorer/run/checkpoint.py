"""The checkpoint: its size from the model and optimiser state, and what writing and reading it costs.

A checkpoint holds what a restart needs: the bf16 weights and the optimiser state (fp32 master
weights and Adam's two moments: K = 12 bytes per parameter, Rajbhandari et al., "ZeRO", SC20,
Sec. 3.1; SGD with momentum 8), the terms of explorer/analysis/memory.py's per-GPU sum taken over
the whole model once (data-parallel replicas hold copies; one copy is written).  Gradients are not
saved (they are recomputed by the next step).
"""
from __future__ import annotations

from ..config.sections import Scenario
from ..physics.host_link import host_link_Bps
from ..taskgraph.techniques.optimizer import optimizer_state_bytes, param_bytes
from ..workloads.registry import workload_for


def checkpoint_bytes(sc: Scenario) -> float:
    """Bytes of one checkpoint: parameters x (weight + optimiser state bytes per parameter: a bf16
    weight and fp32 master and moments, or under fp32 training the fp32 weight and moments)."""
    params = workload_for(sc.model).params(sc)
    return params * (param_bytes(sc) + optimizer_state_bytes(sc))


def write_s(sc: Scenario) -> float:
    """Seconds to write one checkpoint at the job's aggregate storage bandwidth."""
    return checkpoint_bytes(sc) / (sc.reliability.checkpoint_write_GBps * 1e9)


def read_s(sc: Scenario) -> float:
    """Seconds a restart spends reading the checkpoint back (read bandwidth, default the write's)."""
    r = sc.reliability
    return checkpoint_bytes(sc) / ((r.checkpoint_read_GBps or r.checkpoint_write_GBps) * 1e9)


def snapshot_s(sc: Scenario) -> float:
    """Seconds an asynchronous checkpoint stalls training: each GPU copies its share of the checkpoint
    (the state is sharded over all GPUs, as torch.distributed.checkpoint saves it) to host memory over
    its host link (explorer/physics/host_link.py) before training resumes; storage then absorbs it in
    the background (PyTorch DCP ``async_save``: "the checkpoint is first copied to CPU memory")."""
    return checkpoint_bytes(sc) / sc.gpus / host_link_Bps(sc)


def stall_s(sc: Scenario) -> float:
    """What one checkpoint costs the training: the whole write when synchronous, the snapshot when
    asynchronous (never more than the write itself)."""
    w = write_s(sc)
    return min(snapshot_s(sc), w) if sc.reliability.async_checkpoint else w
