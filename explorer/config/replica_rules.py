"""Rules of ``parallelism.stage_replicas``: PipeDream's hybrid of pipeline and data parallelism,
each stage with its own replica count (Narayanan et al., "PipeDream: Generalized Pipeline
Parallelism for DNN Training", SOSP 2019, Sec. 3.1-3.2; its VGG-16 configuration "15-1").

Run by ``rules.validate`` after :data:`explorer.config.rules.RULES` (``rule_degrees_fill_cluster``
calls :func:`rule_replicas_fill_cluster` in place of its own product when the field is set, so
that no later rule meets a scenario whose GPUs do not add up).  Cases: tests/test_stage_replicas.py.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from .frameworks import profile
from .replica_field import FIELD, SCHEDULES
from .schema import ScenarioError, excerpt
from .sections import Scenario

# Above this many transitions the partitioner's search (taskgraph/replica_split.py) is refused.
MAX_STATES_WORK = 2_000_000


def search_work(layers: int, slots: int, pp: int) -> int:
    """Transitions PipeDream's search makes, roughly: (layers x slots)^2 per stage between the
    first and the last (the last stage's end and replicas are fixed by the others)."""
    return max(pp - 2, 0) * (layers * slots) ** 2 + layers * slots


def auto_replicas(raw: Mapping[str, Any]) -> Mapping[str, Any]:
    """``raw`` with ``parallelism.stage_replicas: auto`` written as pp zeros (the partitioner's
    choice, taskgraph/replica_split.py); unchanged otherwise."""
    par = raw.get("parallelism")
    if not isinstance(par, Mapping) or not isinstance(par.get("stage_replicas"), str) or \
            par["stage_replicas"].strip().lower() != "auto":
        return raw
    pp = par.get("pp", 1)
    if isinstance(pp, bool) or not isinstance(pp, int) or not 1 <= pp <= 4096:
        return raw                                  # the pp field's own check reports it
    return {**raw, "parallelism": {**par, "stage_replicas": [0] * pp}}


def active(sc: Scenario) -> bool:
    """Whether the scenario gives its stages their own replica counts."""
    return bool(sc.parallelism.stage_replicas)


def rule_replicas_fill_cluster(sc: Scenario) -> None:
    """One entry per stage, sum x tp x cp = the cluster's GPUs, and dp 1 (the replicas are the
    data parallelism)."""
    p, gpus = sc.parallelism, sc.cluster.gpus
    r = p.stage_replicas
    if r is None:
        return
    if not r:          # an empty list had read as no replicas, and the GPU count was blamed on dp
        raise ScenarioError(FIELD, f"[] is empty; give one replica count per pipeline stage "
                            f"(parallelism.pp = {p.pp}), all 0 for PipeDream's partitioner, or null for none")
    if len(r) != p.pp:
        raise ScenarioError(FIELD, f"{excerpt(list(r))} has {len(r)} entries; give one per pipeline stage "
                            f"(parallelism.pp = {p.pp})")
    if 0 in r and max(r) > 0:
        raise ScenarioError(FIELD, f"{excerpt(list(r))} mixes 0 and replica counts; give every stage >= 1 "
                            "replica, or all 0 (auto: PipeDream's partitioner chooses)")
    # First: the counts below read the micro-batches of a pipeline with dp 1 (a hunt found auto's
    # count of replicas against dp 2's micro-batches: "1920 gives 15 micro-batches ...; at least 1024").
    if sc.dp != 1:
        raise ScenarioError(FIELD, f"is set with parallelism.dp = {sc.dp}; the stage replicas replace the "
                            "data-parallel degree: set parallelism.dp to 1 (or leave it out)")
    if max(r) == 0:
        slots, n = gpus // (p.tp * p.cp), sc.model.layers
        if gpus % (p.tp * p.cp) or slots < p.pp or n < p.pp:
            raise ScenarioError(FIELD, f"auto needs at least pp = {p.pp} replicas of tp*cp GPUs and "
                                f"layers; the cluster has {slots} and the model {n} layers")
        if slots > sc.micro_batches * p.pp:
            m = sc.micro_batches
            raise ScenarioError("training.global_batch", f"{sc.training.global_batch} gives {m} micro-batch"
                                f"{'es' if m != 1 else ''} of {sc.training.micro_batch}: too few for "
                                f"stage_replicas auto to place {slots} replicas on {p.pp} stages, each "
                                f"replica with a micro-batch; at least "
                                f"{-(-slots // p.pp) * sc.training.micro_batch}")
        if search_work(n, slots, p.pp) > MAX_STATES_WORK:
            raise ScenarioError(FIELD, f"auto searches {n} layers x {slots} replica slots over {p.pp} "
                                "stages, beyond the partitioner's budget; give the replica counts")
    elif sum(r) * p.tp * p.cp != gpus:
        raise ScenarioError(FIELD, f"{excerpt(list(r))} sums to {sum(r)} GPUs x tp {p.tp} x cp {p.cp} = "
                            f"{sum(r) * p.tp * p.cp}, but the cluster has {gpus}; make the entries add up "
                            f"to {gpus // (p.tp * p.cp) if gpus % (p.tp * p.cp) == 0 else 'GPUs / (tp*cp)'}")
    # 1F1B-RR hands micro-batch j to replica j mod r (Narayanan et al., SOSP 2019, Sec. 3.2): with
    # fewer micro-batches than replicas some replicas of a stage would get none, hold no gradients
    # to all-reduce and never step.
    m, most = sc.micro_batches, max(r)
    if most > 0 and m < most:
        mb, es = sc.training.micro_batch, "es" if m != 1 else ""
        raise ScenarioError("training.global_batch", f"{sc.training.global_batch} gives {m} micro-batch{es} "
                            f"of {mb}, fewer than the {most} replicas of a stage (parallelism.stage_replicas "
                            f"{excerpt(list(r))}), each of which needs one: at least {mb * most}")


def rule_replicas_schedule(sc: Scenario) -> None:
    """Only PipeDream's 1F1B schedules, one chunk per stage, dense, no ZeRO sharding, no token
    slices: what the per-replica program orders and the per-stage gradient groups model."""
    p = sc.parallelism
    if not p.stage_replicas:
        return
    if p.schedule not in SCHEDULES:
        raise ScenarioError(FIELD, f"needs parallelism.schedule {' or '.join(SCHEDULES)} (PipeDream's "
                            f"1F1B-RR), not {p.schedule!r}; remove stage_replicas or change the schedule")
    bad = [(f, v, ok) for f, v, ok in (("parallelism.vpp", p.vpp, 1), ("parallelism.ep", p.ep, 1),
                                       ("parallelism.zero", p.zero, 0), ("parallelism.token_slices",
                                                                         p.token_slices, 1))
           if v != ok]
    if bad:
        f, v, ok = bad[0]
        raise ScenarioError(f, f"{v} is not modelled with parallelism.stage_replicas (PipeDream's "
                            f"replicas): set {f}: {ok} or remove stage_replicas")
    if profile(sc.training.framework).blocking_p2p:
        raise ScenarioError("training.framework", f"{sc.training.framework!r} sends pipeline transfers on "
                            "the compute stream, which parallelism.stage_replicas does not model; choose a "
                            "framework with asynchronous sends (megatron, fsdp) or remove stage_replicas")
    if sc.cluster.datacenters > 1 or sc.cluster.stragglers.stage_slowdown:
        raise ScenarioError(FIELD, "is modelled on one datacenter without stragglers; remove "
                            "cluster.datacenters / cluster.stragglers or stage_replicas")


REPLICA_RULES: tuple[Callable[[Scenario], None], ...] = (rule_replicas_fill_cluster, rule_replicas_schedule)
