"""Cross-field rules of low-communication training: ``training.sync`` (replicas that train apart
must be whole datacenters or whole groups of nodes) and ``parallelism.dp_kind`` (gossip and
parameter-server replicas).

Run by ``rules.validate`` after the other rules; one case each in tests/test_lowcomm.py
(``SYNC_RULE_CASES``, checked to cover every entry of :data:`SYNC_RULES`).
"""
from __future__ import annotations

from .schema import ScenarioError
from .sections import Scenario


def rule_sync_needs_datacenters(sc: Scenario) -> None:
    """Replicas that synchronise every H steps are the datacenters, or groups of
    ``replica_nodes`` nodes that do not straddle a datacenter: at least two."""
    sy, c = sc.training.sync, sc.cluster
    n = sy.replica_nodes
    if n and (c.nodes // c.datacenters) % n:
        raise ScenarioError("training.sync.replica_nodes", f"{n} nodes per group do not divide the "
                            f"{c.nodes // c.datacenters} nodes of a datacenter; use a divisor of it")
    if sy.windowed and sc.sync_groups < 2:
        if n:
            raise ScenarioError("training.sync.replica_nodes", f"{n} nodes per group leave one group of "
                                f"the {c.nodes} nodes; {sy.kind} needs at least two (use at most "
                                f"{c.nodes // 2})")
        raise ScenarioError("training.sync.kind", f"{sy.kind} trains one replica per datacenter and needs "
                            f"cluster.datacenters >= 2 (got {c.datacenters}); use every-step, add "
                            "datacenters or set training.sync.replica_nodes")


def rule_sync_fragments(sc: Scenario) -> None:
    """Streaming DiLoCo's fragments: at most one per layer, synchronised in turn within H steps."""
    sy = sc.training.sync
    if sy.kind != "streaming-diloco":        # the other kinds synchronise the whole model: ignored
        return
    if sy.fragments > sc.model.layers:
        raise ScenarioError("training.sync.fragments", f"{sy.fragments} fragments for {sc.model.layers} "
                            f"layers; a fragment holds whole layers (at most {sc.model.layers})")
    if sy.fragments > sy.inner_steps:
        raise ScenarioError("training.sync.fragments", f"{sy.fragments} fragments synchronised in turn need "
                            f"at least as many inner steps (inner_steps = {sy.inner_steps})")
    gap = sy.inner_steps // sy.fragments
    if sy.overlap_steps > gap:
        raise ScenarioError("training.sync.overlap_steps", f"{sy.overlap_steps} inner steps of overlap "
                            f"exceed the {gap} steps between two fragments' synchronisations "
                            f"(inner_steps / fragments); use 0 .. {gap}")


def rule_dp_kind_replicas(sc: Scenario) -> None:
    """Gossip (synchronous or asynchronous) and parameter-server replicas each keep a whole model
    and step every iteration."""
    p = sc.parallelism
    if p.dp_kind == "allreduce":
        return
    field = "parallelism.dp_kind"
    if sc.dp < 2:
        raise ScenarioError(field, f"{p.dp_kind} needs at least 2 data-parallel replicas (dp = {sc.dp}); "
                            "use allreduce or more GPUs")
    if p.zero:
        raise ScenarioError("parallelism.zero", f"{p.zero} shards the optimizer over the replicas, but with "
                            f"{p.dp_kind} each replica keeps its whole model; use 0")
    if p.ep > 1:
        raise ScenarioError(field, f"{p.dp_kind} needs replicas that hold all their experts (ep = {p.ep} "
                            "spreads them over the data-parallel ranks); use allreduce or ep 1")
    if sc.training.sync.windowed:
        raise ScenarioError(field, f"{p.dp_kind} replaces the every-step all-reduce; training.sync.kind "
                            f"{sc.training.sync.kind} replaces it too — choose one (set allreduce)")
    if sc.training.global_batch % sc.dp:
        raise ScenarioError("training.global_batch", f"{sc.training.global_batch} sequences do not split "
                            f"evenly over the {sc.dp} replicas; use a multiple of {sc.dp}")
    if p.dp_kind == "gossip-async" and p.gossip_peers > 1:
        # AD-PSGD's atomic averaging joins two workers (Lian et al., ICML 2018, Alg. 1).
        raise ScenarioError("parallelism.gossip_peers", f"gossip-async averages with one random neighbour "
                            f"per step (AD-PSGD), not {p.gossip_peers}; use 0 or 1, or a synchronous "
                            "gossip kind for more")
    if p.dp_kind == "parameter-server" and sc.cluster.datacenters > 1:
        raise ScenarioError(field, "parameter-server places its servers in one datacenter's fabric: use "
                            f"cluster.datacenters 1 (got {sc.cluster.datacenters}) or gossip")


def rule_one_compressor(sc: Scenario) -> None:
    """The outer gradient is compressed by outer_dtype or by communication.compression, not both."""
    sy, comp = sc.training.sync, sc.communication.compression
    if comp.active and sy.outer_dtype != "fp32" and (sy.windowed or sc.parallelism.dp_kind != "allreduce"):
        raise ScenarioError("training.sync.outer_dtype", f"{sy.outer_dtype} and communication.compression "
                            f"{comp.kind} both compress what the replicas exchange; keep one (outer_dtype "
                            "fp32 with the compressor, or compression none)")


def rule_compression_needs_buckets(sc: Scenario) -> None:
    """Compression acts on data-parallel buckets: ZeRO-3/FSDP reduces layer by layer, uncompressed."""
    comp = sc.communication.compression
    if comp.active and sc.parallelism.zero == 3:
        raise ScenarioError("communication.compression.kind", f"{comp.kind} compresses the gradient buckets "
                            "of ZeRO 0-2; ZeRO-3/FSDP's layer-wise reduce-scatter is not compressed here "
                            "(use parallelism.zero 0-2 or compression none)")


def rule_faults_fit(sc: Scenario) -> None:
    """Failed and degraded nodes exist, and failures are simulated in one datacenter."""
    f, c = sc.cluster.faults, sc.cluster
    if f.failed_nodes >= c.nodes:
        raise ScenarioError("cluster.faults.failed_nodes", f"{f.failed_nodes} of {c.nodes} nodes: some must "
                            f"survive (at most {c.nodes - 1})")
    if f.failed_nodes and c.datacenters > 1:
        raise ScenarioError("cluster.faults.failed_nodes", "dropping replicas would leave the datacenters "
                            f"unequal; failed nodes are simulated in one datacenter (got {c.datacenters})")
    if f.degraded_nodes > c.nodes:
        raise ScenarioError("cluster.faults.degraded_nodes", f"{f.degraded_nodes} of {c.nodes} nodes; at "
                            f"most {c.nodes}")


SYNC_RULES = (rule_faults_fit, rule_one_compressor,
              rule_compression_needs_buckets, rule_sync_needs_datacenters,
              rule_sync_fragments, rule_dp_kind_replicas)
