"""Cross-field rules of ``training.sync``: replicas that train apart must be whole datacenters.

Run by ``rules.validate`` after the other rules; one case each in tests/test_lowcomm.py
(``SYNC_RULE_CASES``, checked to cover every entry of :data:`SYNC_RULES`).
"""
from __future__ import annotations

from .schema import ScenarioError
from .sections import Scenario


def rule_sync_needs_datacenters(sc: Scenario) -> None:
    """Replicas that synchronise every H steps are the datacenters: at least two."""
    sy = sc.training.sync
    if sy.windowed and sc.cluster.datacenters < 2:
        raise ScenarioError("training.sync.kind", f"{sy.kind} trains one replica per datacenter and needs "
                            f"cluster.datacenters >= 2 (got {sc.cluster.datacenters}); use every-step "
                            "or add datacenters")


def rule_sync_whole_replicas(sc: Scenario) -> None:
    """Each datacenter holds whole pipelines (DP is what crosses) and an equal share of the batch."""
    sy, c, p = sc.training.sync, sc.cluster, sc.parallelism
    if not sy.windowed:
        return
    from ..placement import Placement  # placement reads the validated scenario's degrees

    D = c.datacenters
    dc_gpus = c.gpus // D
    pl = Placement.for_scenario(sc)
    home = {pl.gpu(pp=s) // dc_gpus for s in range(p.pp)} | {pl.gpu(tp=p.tp - 1, cp=p.cp - 1) // dc_gpus}
    if sc.dp % D or len(home) > 1:
        raise ScenarioError("training.sync.kind", f"{sy.kind} needs whole model replicas in every "
                            f"datacenter (dp = {sc.dp} a multiple of the {D} datacenters, pipelines "
                            "inside one); set parallelism.span: dp")
    if sc.training.global_batch % D:
        raise ScenarioError("training.global_batch", f"{sc.training.global_batch} sequences do not split "
                            f"evenly over the {D} datacenters training apart; use a multiple of {D}")


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


SYNC_RULES = (rule_sync_needs_datacenters, rule_sync_whole_replicas, rule_sync_fragments)
