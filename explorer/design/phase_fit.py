"""Which searched layouts a run plan's phases can take, before any is priced.

A scenario with phases (``training.phases``, explorer/run/phases.py) runs each phase on the layout
with the phase's overrides on top; ``run`` refuses a layout any phase cannot take.  The search
checked the plan only on the layouts it priced exactly, after ranking: on llama3-405b-pretraining,
whose phases pin dp 64 on 1,024 nodes and dp 8 with cp 16 on 2,048, the 203 best-ranked layouts
were all refused, and the search called the scenario's own layout the fastest although a layout
1.19x faster takes every phase (a hunt's finding).

This is the plan's arithmetic, cheap enough for every layout: each phase's degrees fill its GPUs
(config/rules.rule_degrees_fill_cluster), its global batch divides into micro-batches over its
data-parallel replicas (rule_batch_divides) and its expert degree divides dp x cp
(rule_ep_divides_dp_cp).  A layout that passes may still be refused by another rule; the
exact-pricing step checks the plan in full (design/search._simulate).
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..config import Scenario
from .space import Layout

FIELD = "training.phases"


def phase_pins(sc: Scenario) -> tuple[tuple[str, Mapping[str, Any]], ...]:
    """(name, dotted overrides) of each phase of ``sc``'s run plan; empty without phases."""
    return tuple((ph.name, ph.override_map()) for ph in sc.training.phases)


def refused_by(pins: tuple[tuple[str, Mapping[str, Any]], ...], sc: Scenario, lay: Layout) -> str | None:
    """The first phase (its name) whose overrides on ``lay`` break the plan's arithmetic (module
    docstring), or None."""
    gpn = sc.cluster.gpus_per_node
    for name, ov in pins:
        get = ov.get
        tp, pp = get("parallelism.tp", lay.tp), get("parallelism.pp", lay.pp)
        cp, ep = get("parallelism.cp", lay.cp), get("parallelism.ep", lay.ep)
        gpus = get("cluster.nodes", sc.cluster.nodes) * get("cluster.gpus_per_node", gpn)
        replica = tp * pp * cp
        dp = get("parallelism.dp", None)
        if dp is None:
            if gpus % replica:
                return name
            dp = gpus // replica
        elif replica * dp != gpus:
            return name
        mb = get("training.micro_batch", lay.micro_batch)
        if get("training.global_batch", sc.training.global_batch) % (mb * dp):
            return name
        if ep > 1 and (dp * cp) % ep:
            return name
    return None
