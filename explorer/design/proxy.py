"""What a search ranks layouts by when the estimator cannot price the scenario itself.

The estimator leaves some features to the full simulation (explorer/estimate/many.py
``needs_simulation``): stragglers, faults, compressed gradients, gossip and parameter servers,
replicas that train apart (local SGD, DiLoCo, c-BTM), datacenters of different GPUs or sizes and
workloads it does not describe.  A search of such a scenario would simulate every layout in full —
straggler-16k's 65,076 layouts take hours.  Instead its layouts are ranked by the estimator on a
*proxy* of the scenario with those features taken out — each layout still checked against the
scenario's own rules (gossip refuses ZeRO, ...) — and the best :data:`POOL` of them are simulated
in full with the features (explorer/design/search.py): the answer is exact for every layout it
reports, the ranking that chose them approximate.

- stragglers and faults (failed or degraded nodes) are left out: they slow every layout, so its
  trade-offs (compute, memory, tp/pp/cp communication) rank alike without them;
- replicas that train apart are ranked on one group training alone (as explorer/variants/lowcomm/window.py
  ``inner_scenario`` does: nodes / groups, global batch / groups, synchronised every step inside):
  their step is that group's, and the outer synchronisation adds about the same to every layout;
- compressed gradients and gossip or parameter-server data parallelism are ranked as an
  uncompressed all-reduce: the pool's full simulations then price what they save;
- datacenters of different GPUs or sizes are ranked as equal datacenters of ``hardware.gpu``
  (the layout's trade-offs on one GPU type; the pool's simulations run each datacenter on its
  own, explorer/variants/hetero.py), when the nodes split evenly.

Workloads the estimator does not price (explorer/workloads/registry.py ``estimator``: a ResNet)
have no proxy (their whole iteration is what the estimator does not price): their searches
simulate every layout.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..config.loading import to_dict
from ..scenario import Scenario, ScenarioError
from ..workloads.registry import workload_for
from .space import LayoutBuilder, search_raw

POOL = 32          # layouts simulated in full from a proxy's ranking (at least 2 x top)


@dataclass(frozen=True)
class Proxy:
    """The raw scenario a search ranks by, and what it leaves out (one phrase each)."""

    raw: Mapping[str, Any]
    left_out: tuple[str, ...]

    def phrase(self) -> str:
        return ", ".join(self.left_out)


def ranking_proxy(sc: Scenario) -> Proxy | None:
    """The :class:`Proxy` of ``sc`` (module docstring), or None when the estimator prices ``sc``
    itself, the features have no proxy, or the proxy is not a valid scenario."""
    from ..estimate.many import needs_simulation  # deferred: the estimator is optional

    if not needs_simulation(sc) or not workload_for(sc.model).estimator:
        return None
    raw = to_dict(sc)
    raw.pop("description", None)
    cl, tr, par, com = raw["cluster"], raw["training"], raw["parallelism"], raw["communication"]
    said = []
    c = sc.cluster
    if c.heterogeneous:
        D = len(cl["datacenters"])
        if c.nodes % D:
            return None
        cl["datacenters"] = D
        said.append(f"{D} equal datacenters of {sc.hardware.gpu.name}")
    if sc.training.sync.windowed:
        groups = sc.sync_groups
        cl.update(nodes=sc.cluster.nodes // groups, datacenters=1)
        tr["global_batch"] = sc.training.global_batch // groups
        tr["sync"] = {"kind": "every-step"}
        par["span"] = "auto"
        said.append(f"one of its {groups} {sc.training.sync.kind} groups trained alone")
    if sc.cluster.stragglers.active:
        cl.pop("stragglers", None)
        said.append("no stragglers")
    f = sc.cluster.faults
    if f.failed_nodes or f.degraded:
        cl.pop("faults", None)
        said.append("no failed or degraded nodes")
    if sc.communication.compression.active:
        com["compression"] = {"kind": "none"}
        said.append("uncompressed gradients")
    if sc.parallelism.dp_kind != "allreduce":
        said.append(f"an all-reduce for {sc.parallelism.dp_kind}")
        par["dp_kind"] = "allreduce"
    raw = search_raw(raw)
    try:
        proxy = LayoutBuilder(raw).parsed
    except ScenarioError:
        return None
    if needs_simulation(proxy):
        return None
    return Proxy(raw, tuple(said))
