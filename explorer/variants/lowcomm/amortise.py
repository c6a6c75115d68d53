"""How busy each tier is per step when the step is one simulated piece plus traffic beside it: an
inner step and 1/H of its window's synchronisation (window.py), or a replica's step and its gossip
or parameter-server exchange (decentral.py).

The simulated piece (an inner step, a replica step) is a whole scenario of its own: its links'
busy seconds are its utilisation times its iteration (explorer/analysis/utilisation.py, every GPU class
counted), and every group or replica runs it at the same time on links like its own, so each link
of the full cluster is busy as long.  The traffic beside it is given as bytes per GPU averaged over
all GPUs, which times the GPUs over the domains' capacity (topology.Fabric) is its busy seconds.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ...network.topology import BOUNDARY_NAMES, Fabric

if TYPE_CHECKING:
    from ...config import Scenario
    from ...result.record import Result


def step_busy(sc: Scenario, base: Result, extra: dict[str, float]) -> dict[str, float]:
    """Busy seconds per step of each tier of ``sc``: ``base``'s own (its utilisation x its
    iteration) plus ``extra`` (tier -> bytes per GPU per step, the mean over all GPUs).  The ideal
    pipeline's free communication loads no link (utilisation.tier_utilisation)."""
    if sc.parallelism.ideal_pipeline:
        return dict.fromkeys(BOUNDARY_NAMES, 0.0)
    out = {}
    fabric = Fabric.for_cluster(sc.cluster)
    for b, bd in enumerate(fabric.boundaries):
        own = base.utilisation.get(bd.name, 0.0) * base.iteration_time_s
        # (On a hub the extra traffic's transit through datacenter 0 is not counted: its egress.)
        out[bd.name] = own + extra.get(bd.name, 0.0) * sc.gpus / fabric.tier_capacity_Bps(b, sc.gpus)
    return out


def amortised_utilisation(sc: Scenario, busy: dict[str, float], seconds: float) -> dict[str, float]:
    """Average busy share of each tier over ``seconds`` (a step, amortised over its window), from
    its busy seconds :func:`step_busy`."""
    return {k: v / seconds if seconds > 0 else 0.0 for k, v in busy.items()}
