"""What the pricing model covers: one iteration of alike replicas of a workload whose passes it
prices, without the features below, which the one task graph simulates but the estimator's arrays
do not price (their rows come from the simulation: explorer/estimate/many.py; the array fold
declines them: explorer/fold/arrays/fold.py).  Variants that wrap the iteration (sync windows,
failed nodes, gossip, replicas that differ) are listed in explorer/variants/registry.py.

Each feature carries what the search's ranking proxy (explorer/design/proxy.py) does to leave it
out, and the phrase that says so.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..config import Scenario
from ..taskgraph.techniques.link_sharing import may_share
from ..workloads.registry import problem, workload_for

Raw = dict[str, Any]


@dataclass(frozen=True)
class Unpriced:
    """A feature simulated inside the task graph that the pricing model does not price.
    ``proxy`` edits the raw scenario to leave it out and returns the phrase that says so."""

    name: str
    applies: Callable[[Scenario], bool]
    proxy: Callable[[Raw, Scenario], str | None]


def no_faults(raw: Raw, sc: Scenario) -> str:
    raw["cluster"].pop("faults", None)
    return "no failed or degraded nodes"


def _uncompressed(raw: Raw, sc: Scenario) -> str:
    raw["communication"]["compression"] = {"kind": "none"}
    return "uncompressed gradients"


def _no_contention(raw: Raw, sc: Scenario) -> str:
    raw["communication"]["contention"] = False
    return "no contention between pipeline sends and gradient buckets"


# The engine's fair share of a link between the pp and dp streams (engine/sharing.py).
LINK_SHARING = Unpriced("link sharing between dimensions", may_share, _no_contention)
UNPRICED: tuple[Unpriced, ...] = (
    Unpriced("degraded nodes", lambda sc: sc.cluster.faults.degraded, no_faults),
    Unpriced("compressed gradients", lambda sc: sc.communication.compression.active, _uncompressed),
    LINK_SHARING,
)


def workload_priced(sc: Scenario) -> bool:
    """Whether the pricing model prices ``sc``'s workload: its family's registry entry says the
    estimator describes it (explorer/workloads/registry.py ``estimator``: a ResNet's blocks differ
    one by one, so it does not) and the row asks nothing of it that the family refuses
    (registry.problem: the simulation then says why)."""
    w = workload_for(sc.model)
    return w.estimator and (w.models_everything or problem(sc, w) is None)


def prices(sc: Scenario) -> bool:
    """Whether the pricing model prices one iteration of ``sc`` (its workload, none of
    :data:`UNPRICED`); variants that wrap the iteration are the caller's (variants/registry.py)."""
    return workload_priced(sc) and not any(f.applies(sc) for f in UNPRICED)
