"""What a search ranks layouts by when the estimator cannot price the scenario itself.

The estimator leaves some features to the full simulation (explorer/variants/registry.py
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
  own, explorer/variants/hetero.py), when the nodes split evenly;
- contention between pipeline sends and gradient buckets on one link (``communication.contention``,
  explorer/engine/sharing.py) is left out whenever it is on, even if the base layout has no such
  pair: the layouts a search enumerates vary pp and dp, and each that has one would otherwise be
  simulated in full; it moves an iteration by well under 1 % on the shipped scenarios, which the
  pool's full simulations price.

Workloads the estimator does not price (explorer/workloads/registry.py ``estimator``: a ResNet)
have no proxy (their whole iteration is what the estimator does not price): their searches
simulate every layout.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..config.loading import to_dict
from ..pricing.scope import LINK_SHARING, workload_priced
from ..scenario import Scenario, ScenarioError
from ..variants.registry import needs_simulation, proxy_features
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
    itself, its workload has no proxy, or the proxy is not a valid scenario."""
    shares = sc.communication.contention          # the layouts may share links (module docstring)
    if not (needs_simulation(sc) or shares) or not workload_priced(sc):
        return None
    raw = to_dict(sc)
    raw.pop("description", None)
    said: list[str] = []
    # Each variant and unpriced feature leaves itself out (variants/registry.py, pricing/scope.py).
    features = proxy_features(sc)
    if shares and LINK_SHARING not in features:
        features = (*features, LINK_SHARING)
    for feature in features:
        phrase = feature.proxy(raw, sc)
        if phrase is None:
            return None
        if phrase not in said:
            said.append(phrase)
    raw = search_raw(raw)
    try:
        proxy = LayoutBuilder(raw).parsed
    except ScenarioError:
        return None
    if needs_simulation(proxy):
        return None
    return Proxy(raw, tuple(said))
