"""The host side of a mini-batch GNN step: the CPU neighbour sampler that builds each mini-batch
(sampling + slicing the sampled nodes' features out of host memory) and the copy of the sliced
mini-batch to the GPU over the host link.

SALIENT (Kaler et al., "Accelerating Training and Inference of Graph Neural Networks with Fast
Sampling and Pipelining", MLSys 2022, Sec. 3-4) names these two — mini-batch preparation and
transfer — as the bottlenecks of mini-batch GNN training besides the GPU's own work, and pipelines
them: worker threads sample and slice batch k+2 while batch k+1 is copied and batch k trains.

- **Sampler** (per mini-batch, one GPU): the sampled edges of every hop (sampling.sampled_edges)
  over ``cpu_workers / gpus_per_node`` worker threads (the machine's sampler threads are shared by
  its GPUs) at ``sampler_edges_per_core_s`` each.  The default rate is read off SALIENT's own
  single-GPU epoch (artifact README, github.com/MITIBMxGraph/SALIENT_artifact: SAGE on
  ogbn-papers100M, fan-outs 15, 10, 5, batch 1,024, 20 workers, V100): 16,513 ms for 1,179
  mini-batches, of which 14,109 ms "Train", 2,373 ms "Sampling + Slicing" and 19 ms "Data
  Transfer".  Those columns are the training loop's consecutive regions (fast_trainer's
  runtime_stats_cuda): "Sampling + Slicing" is the time the loop waits in ``next()`` for a
  prepared batch, not the workers' time.  A loop that waits about 2 ms on every one of 1,179
  batches is paced by its sampler, so 20 workers prepare one mini-batch per 16,513 / 1,179 =
  14.0 ms (the pipeline's fill, one batch's preparation, about 1.6 % of the epoch, is neglected);
  our closed form samples 1,079,517 edges per such mini-batch, so one worker prepares
  1,079,517 / (20 x 14.0 ms) = 3.85M sampled edges (sampling and slicing together) per second.
  (An earlier default, 26.8M, read the waiting time as the workers' time.)
- **Host copy** (per mini-batch, one GPU): the input frontier's features (frontier nodes x feature
  width x bytes per stored feature) and the blocks' int64 edge indices, at the host link's rate
  (explorer/physics/host_link.py: hardware.gpu.pcie_GBps).
- **Pipelined** (``model.gnn.pipelined``, SALIENT's default): the sampler, the copy and the GPU's
  step run side by side on different batches, so a step takes the longest of the three — the GPU's
  step being all of it, its all-reduce, feature fetch and optimizer included, which the host's
  threads and copy engine run beside as well (analysis/steady_state.py paces the iteration).
  Not pipelined (PyG's loop with a blocking ``.to(device)``): the step waits for both, one after
  the other.
A full-graph step samples nothing and keeps its partition on the GPU: no host work.
"""
from __future__ import annotations

from dataclasses import dataclass

from ...config import Scenario
from ...physics.host_link import host_link_Bps
from . import sampling
from .costs import INDEX_BYTES


@dataclass(frozen=True)
class HostWork:
    """One mini-batch's host-side work on one GPU: sampler seconds, bytes copied to the GPU and
    their seconds."""

    sampler_s: float
    copy_bytes: float
    copy_s: float


def workers_per_gpu(sc: Scenario) -> float:
    """Sampler threads one GPU's mini-batches get: the machine's ``cpu_workers`` shared by its GPUs."""
    g = sc.model.gnn
    assert g is not None
    return g.cpu_workers / sc.cluster.gpus_per_node


def copy_bytes(sc: Scenario, seeds: float) -> float:
    """Bytes one mini-batch copies to the GPU: input-frontier nodes x features x feature bytes, plus
    an int64 index per sampled edge (the blocks' adjacency)."""
    g = sc.model.gnn
    assert g is not None
    return (sampling.frontiers(g, seeds)[-1] * g.features * g.feature_bytes
            + sum(sampling.sampled_edges(g, seeds)) * INDEX_BYTES)


def host_work(sc: Scenario, seeds: float) -> HostWork:
    """The sampler's and the copy's seconds for one mini-batch of ``seeds`` seed nodes on one GPU
    (module docstring); nothing for a full-graph pass."""
    g = sc.model.gnn
    assert g is not None
    if g.mode == "fullgraph":
        return HostWork(0.0, 0.0, 0.0)
    edges = sum(sampling.sampled_edges(g, seeds))
    sampler = edges / (g.sampler_edges_per_core_s * workers_per_gpu(sc))
    nbytes = copy_bytes(sc, seeds)
    return HostWork(sampler, nbytes, nbytes / host_link_Bps(sc))


def stall_s(sc: Scenario, hw: HostWork) -> float:
    """Seconds the GPU waits for its next mini-batch before each step in the graph: not pipelined,
    the sampler and the copy in full, one after the other; pipelined, nothing here — the host keeps
    the pace of the whole step instead (workload.host_input; analysis/steady_state.py: an
    iteration lasts at least its mini-batches' host time, max(sampler, copy) each)."""
    g = sc.model.gnn
    assert g is not None
    if g.pipelined:
        return 0.0
    return hw.sampler_s + hw.copy_s
