"""A scenario the simulator can run: the configuration's own rules (explorer/config, which imports
nothing of the simulator) and, on top, the checks that need the simulator's model — run by
``from_dict``, ``load`` and ``validate`` here, which :mod:`explorer.scenario` (the facade every
caller imports) re-exports, and by :func:`explorer.simulate.simulate` itself.

====================================  ==========================================================
check                                 needs
====================================  ==========================================================
rule_sync_whole_replicas              the rank placement (network/placement.py)
rule_failures_leave_survivors         the survivors' cluster (variants/faults.py)
rule_speed_split_whole                the kinds' speeds (variants/hetero.py)
rule_work_budget                      the budget (fold/budget.py; joined kinds per the registry)
rule_serving_layouts                  a serving scenario's pools and load (serving/deploy.py, load.py)
rule_frozen_within_layers             the workload's layer count, LoRA's GEMMs (workloads/registry.py)
rule_pair_split_layers                DualPipe's pair split search (taskgraph/dualpipe_split.py)
rule_family_models_it                 what the workload family prices (workloads/registry.py)
====================================  ==========================================================
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from .config import ScenarioError, apply_overrides, load_raw
from .config import from_dict as config_from_dict
from .config import validate as config_validate
from .config.hetero_rules import dp_across
from .config.sections import Scenario
from .fold.admit import check_budget
from .fold.budget import MAX_WORK, WorkEstimate, joined_estimate, refuse
from .network.placement import Placement
from .schedules import registry as schedule_registry
from .schedules.registry import get as get_schedule
from .taskgraph.split import given_split
from .variants.faults import surviving_scenario
from .variants.hetero import variants as hetero_variants
from .variants.registry import VARIANTS
from .workloads.registry import problem, workload_for, workload_spec


def rule_sync_whole_replicas(sc: Scenario) -> None:
    """Each group training apart holds whole pipelines (DP is what crosses) and an equal share of
    the batch."""
    sy, c, p = sc.training.sync, sc.cluster, sc.parallelism
    if not sy.windowed:
        return
    D = sc.sync_groups
    what = "datacenters" if sy.replica_nodes == 0 else f"groups of {sy.replica_nodes} nodes"
    dc_gpus = c.gpus // D
    pl = Placement.for_scenario(sc)
    home = {pl.gpu(pp=s) // dc_gpus for s in range(p.pp)} | {pl.gpu(tp=p.tp - 1, cp=p.cp - 1) // dc_gpus}
    if sc.dp % D or len(home) > 1:
        fix = "set parallelism.span: dp" if sy.replica_nodes == 0 else \
            "use larger groups (training.sync.replica_nodes) or place dp outermost"
        raise ScenarioError("training.sync.kind", f"{sy.kind} needs whole model replicas in every "
                            f"group (dp = {sc.dp} a multiple of the {D} {what}, pipelines inside one); "
                            f"{fix}")
    if sc.training.global_batch % D:
        raise ScenarioError("training.global_batch", f"{sc.training.global_batch} sequences do not split "
                            f"evenly over the {D} {what} training apart; use a multiple of {D}")


def rule_failures_leave_survivors(sc: Scenario) -> None:
    """Failed nodes leave replicas that can train: one whole at least, filling whole nodes, able to
    run the layout with the batch they carry (variants/faults.surviving_scenario, the cluster the
    simulation then runs)."""
    if sc.cluster.faults.failed_nodes:
        surviving_scenario(sc)


def rule_speed_split_whole(sc: Scenario) -> None:
    """``batch_split: speed`` over GPU types finds whole micro-batches adding up to the global batch,
    and each kind of replica's count is one its pipeline schedule runs (Chimera's whole units of pp:
    a fuzz helper found a speed split of 1 micro-batch a replica validated, then refused when
    simulated, a ValueError on every route)."""
    if sc.parallelism.batch_split == "speed" and sc.cluster.datacenter_gpus and dp_across(sc):
        for v in hetero_variants(sc):       # (their counts: micro_batches_per_kind, which refuses a split)
            problem = schedule_registry.validate(v.sc)
            if problem is not None:
                m = v.sc.micro_batches
                raise ScenarioError("parallelism.batch_split",
                                    f"speed gives the replicas of {v.tag or 'one kind'} {m} micro-batch"
                                    f"{'es' if m != 1 else ''} each, which the {sc.parallelism.schedule} "
                                    "schedule cannot run; use even, or a global batch whose split it runs")


def replicas_estimate(sc: Scenario) -> tuple[WorkEstimate, int] | None:
    """The work of ``sc`` when a variant joins the simulations of its kinds of replica
    (variants/registry.py ``kinds``: stragglers, datacenters that differ) and how many kinds it
    has; None when no variant joins kinds."""
    joins = next((v.kinds for v in VARIANTS if v.kinds is not None and v.applies(sc)), None)
    if joins is None:
        return None
    kinds = list(joins(sc))
    return joined_estimate(kinds), len(kinds)


def rule_work_budget(sc: Scenario) -> None:
    """The simulation fits the work budget (fold/budget.py): the scenario's own, and when a variant
    joins the simulations of its kinds of replica, theirs added (:func:`replicas_estimate`)."""
    joined = replicas_estimate(sc)
    check_budget(sc, joined=joined is not None)
    if joined is not None and joined[0].work > MAX_WORK:
        refuse(sc, joined[0], f" for its {joined[1]} kinds of replica, each simulated")


def rule_serving_layouts(sc: Scenario) -> None:
    """A serving scenario's disaggregated pools are layouts the configuration accepts and fit the
    cluster (serving/deploy.layouts), and an arrival rate is one the deployment can serve without
    its queues growing without bound (serving/load.under_load, a few ms); a serving scenario
    simulates no training step, so the training budget does not apply."""
    if sc.inference is not None:
        from .serving.deploy import layouts
        from .serving.load import under_load
        faults, slow = sc.cluster.faults, sc.cluster.stragglers
        # The variants that model them wrap a training step; serving prices none (a knob that would
        # change nothing is refused, not ignored).
        if faults.failed_nodes or faults.degraded_nodes:
            raise ScenarioError("cluster.faults", "failed or degraded nodes are modelled for training steps; "
                                "a serving scenario does not read them: remove cluster.faults")
        if slow.count:
            raise ScenarioError("cluster.stragglers", "straggler replicas are modelled for training steps; a "
                                "serving scenario does not read them: remove cluster.stragglers")
        layouts(sc)
        if sc.inference.arrival_rate is not None:
            under_load(sc)


def rule_frozen_within_layers(sc: Scenario) -> None:
    """At least one layer must train: ``training.frozen_layers`` below the workload's layer count,
    which only the workload's spec knows (a CNN's or a GNN's layers are not model.layers), and
    ``training.lora_rank`` below the largest rank of the layer's GEMMs on one GPU
    (workloads/transformer/lora.py); checked here, at load, rather than when a variant, a sweep's
    estimate or a search's worker first builds the spec."""
    if sc.training.frozen_layers or sc.training.lora_rank:
        workload_spec(sc)


# DualPipe's exact pair split (taskgraph/dualpipe_pairs.py) keeps, per pair of ranks, every
# undominated (front, back) state with every run length: its time and memory grow with the square
# of the layers — measured on deepseek-v3: 512 layers 0.55 s and 0.28 GB, 1,024 layers 5.8 s and
# 1.2 GB, 2,048 layers 73 s and 12.7 GB (fuzzed model.layers up to 100,000 ran out of memory).
MAX_PAIR_SPLIT_LAYERS = 512


def rule_pair_split_layers(sc: Scenario) -> None:
    """A schedule whose layer split pairs ranks (DualPipe, registry ``pair_split``) searches it for
    at most :data:`MAX_PAIR_SPLIT_LAYERS` layers; beyond, the split must be given."""
    par = sc.parallelism
    if not get_schedule(par.schedule).pair_split or given_split(par) is not None:
        return
    # A transformer's layers are its model's (cheap: a search validates every layout); another
    # family's only its spec knows.
    n = sc.model.layers if workload_for(sc.model).name == "transformer" else workload_spec(sc).layers
    if n > MAX_PAIR_SPLIT_LAYERS:
        raise ScenarioError("model.layers", f"{n:,} layers with parallelism.schedule {par.schedule}: its "
                            f"layer split search grows with the square of the layers and takes at most "
                            f"{MAX_PAIR_SPLIT_LAYERS}; give parallelism.pipeline_layout, or use another "
                            "schedule")


def rule_family_models_it(sc: Scenario) -> None:
    """The workload family prices what the scenario asks of it: no parallel dimension it does not
    use, no gradient compression it has no factor for (a DLRM's or a GNN's; found by bench/fuzz.py:
    a link with ``communication.compression.kind=int4`` on dlrm-dcnv2 loaded and was refused only
    when simulated)."""
    bad = problem(sc)
    if bad is not None:
        raise ScenarioError(*bad)


def _training_only(rule: Callable[[Scenario], None]) -> Callable[[Scenario], None]:
    """``rule`` skipped for a serving scenario (its training section is a placeholder)."""
    def checked(sc: Scenario) -> None:
        if sc.inference is None:
            rule(sc)
    checked.__name__, checked.__doc__ = rule.__name__, rule.__doc__
    return checked


RUNNABLE_RULES: tuple[Callable[[Scenario], None], ...] = (
    rule_sync_whole_replicas, _training_only(rule_failures_leave_survivors), rule_speed_split_whole,
    _training_only(rule_work_budget), rule_serving_layouts, _training_only(rule_frozen_within_layers),
    _training_only(rule_pair_split_layers), _training_only(rule_family_models_it))


def check(sc: Scenario) -> Scenario:
    """``sc`` (validated by explorer/config) once every check of :data:`RUNNABLE_RULES` passes; the
    first that fails raises its one-line ScenarioError."""
    for rule in RUNNABLE_RULES:
        rule(sc)
    return sc


def validate(sc: Scenario) -> None:
    """Every rule: the configuration's (config.rules.validate), then :data:`RUNNABLE_RULES`."""
    config_validate(sc)
    check(sc)


def from_dict(raw: Mapping[str, Any]) -> Scenario:
    """Validate a raw mapping into a :class:`Scenario` the simulator can run (raises ScenarioError).

    >>> from_dict({"model": {"preset": "llama3-8b"}, "training": {"global_batch": 8}}).dp
    8
    """
    return check(config_from_dict(raw))


def load(path: str | Path, overrides: Mapping[str, Any] | None = None) -> Scenario:
    """Load, override (dotted keys) and validate a scenario file the simulator can run."""
    return from_dict(apply_overrides(load_raw(path), overrides or {}))
