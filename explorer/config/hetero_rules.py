"""Cross-field rules of datacenters that differ in size or GPU type (explorer/variants/hetero.py).

Which dimension crosses datacenters decides how such a cluster can be simulated: with DP across,
every datacenter holds whole pipeline replicas and each datacenter's replicas are one kind; with
PP across (equal sizes only), every datacenter holds whole stages, each at its GPU's speed.  Other
placements would put GPUs of two types, or groups of unequal shape, into one collective group
that the simulator models as alike, so they are refused here with a one-line error naming
``parallelism.span``.  Run by ``rules.validate`` after the WAN rules; one case each in
tests/test_heterogeneous_config.py (``HETERO_RULE_CASES``, checked to cover every entry).
"""
from __future__ import annotations

from ..schedules import registry
from .schema import ScenarioError
from .sections import ORDER_DIMS, Scenario


def outermost(sc: Scenario) -> str:
    """The outermost placement dimension of degree > 1 (``tp`` when every degree is 1): the one
    whose groups cross datacenters when each datacenter holds a contiguous block of GPUs."""
    p = sc.parallelism
    sizes = {"tp": p.tp, "cp": p.cp, "dp": sc.dp, "pp": p.pp}
    dims = [d for d in p.order.split("-") if d in ORDER_DIMS and sizes[d] > 1]
    return dims[-1] if dims else "tp"


def dp_across(sc: Scenario) -> bool:
    """Whether each datacenter holds whole pipeline replicas, DP being what crosses."""
    c, p = sc.cluster, sc.parallelism
    replica = p.tp * p.cp * p.pp
    return outermost(sc) == "dp" and all(c.nodes_of(d) * c.gpus_per_node % replica == 0
                                         for d in range(c.datacenters))


def pp_across(sc: Scenario) -> bool:
    """Whether each datacenter holds whole pipeline stages (of every replica), PP being what crosses."""
    c, p = sc.cluster, sc.parallelism
    return outermost(sc) == "pp" and p.pp % c.datacenters == 0 and not c.datacenter_nodes


def _sizes(sc: Scenario) -> str:
    c = sc.cluster
    return ", ".join(f"{c.datacenter_name(d)} {c.nodes_of(d):,}" for d in range(c.datacenters))


def rule_unequal_sizes_dp_across(sc: Scenario) -> None:
    """Datacenters of different sizes hold whole pipeline replicas (DP across them)."""
    c, p = sc.cluster, sc.parallelism
    if not c.datacenter_nodes:
        return
    replica = p.tp * p.cp * p.pp
    for d in range(c.datacenters):
        g = c.nodes_of(d) * c.gpus_per_node
        if g % replica:
            raise ScenarioError("cluster.datacenters", f"datacenter {c.datacenter_name(d)}'s {g:,} GPUs "
                                f"do not hold whole pipeline replicas of tp*cp*pp = {replica} GPUs; with "
                                "datacenters of different sizes each must hold whole replicas (give it a "
                                f"multiple of {replica} GPUs)")
    if outermost(sc) != "dp":
        raise ScenarioError("parallelism.span", f"datacenters of different sizes (nodes: {_sizes(sc)}) need "
                            "DP across them (span: dp); pp and dp+pp place stages on equal datacenters")
    if p.ep > 1:
        for d in range(c.datacenters):
            data = c.nodes_of(d) * c.gpus_per_node // replica * p.cp
            if data % p.ep:
                raise ScenarioError("parallelism.ep", f"{p.ep} expert groups would straddle datacenter "
                                    f"{c.datacenter_name(d)} ({data} data-parallel ranks x cp); with "
                                    "datacenters of different sizes ep must divide each one's")


def rule_gpu_types_dp_or_pp(sc: Scenario) -> None:
    """Datacenters of different GPU types hold whole replicas (DP across) or whole stages (PP across)."""
    c = sc.cluster
    if c.datacenter_gpus and not (dp_across(sc) or pp_across(sc)):
        kinds = ", ".join(f"{c.datacenter_name(d)} {g}" for d, g in enumerate(c.datacenter_gpus))
        raise ScenarioError("parallelism.span", f"datacenters of different GPUs ({kinds}) need DP across "
                            "them (span: dp, whole replicas per datacenter) or PP across them (span: pp, "
                            "pp a multiple of the datacenters): a stage's group must be of one GPU type")


def rule_no_stragglers_when_heterogeneous(sc: Scenario) -> None:
    """Stragglers are modelled in a cluster of alike datacenters only."""
    if sc.cluster.heterogeneous and sc.cluster.stragglers.active:
        raise ScenarioError("cluster.stragglers", "stragglers in datacenters that differ in size or GPU are "
                            "not modelled; set count: 0 or make the datacenters alike")


def rule_pp_across_one_direction(sc: Scenario) -> None:
    """PP across datacenters of different GPUs: a schedule whose ranks each hold one stage's chunks.
    A two-direction schedule (DualPipe) gives each rank a stage from each end of the model, so one
    stage would run on two GPU types; its per-stage factor cannot say which."""
    p = sc.parallelism
    if sc.cluster.datacenter_gpus and pp_across(sc) and registry.get(p.schedule).two_directions:
        raise ScenarioError("parallelism.schedule", f"{p.schedule} runs each stage on two ranks (one per "
                            "direction), here in datacenters of different GPUs; with PP across different "
                            "GPUs use a one-direction schedule (valid: " + ", ".join(
                                n for n in registry.names() if not registry.get(n).two_directions) + ")")


HETERO_RULES = (rule_pp_across_one_direction, rule_unequal_sizes_dp_across, rule_gpu_types_dp_or_pp,
                rule_no_stragglers_when_heterogeneous)
