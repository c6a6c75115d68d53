"""The scenario variants, one record each, in the style of the schedule registry: every module
that must know about them — the simulation's dispatch (explorer/simulate.py), the estimator's
rows left to the simulation (explorer/estimate/many.py), the search's ranking proxy
(explorer/design/proxy.py) and the work budget (explorer/runnable.py) — loops over
:data:`VARIANTS` and never tests a feature by name.

A variant *wraps* the iteration: it derives the scenario(s) simulated inside, simulates them with
the function it is given, and combines their results into the scenario's own (``run``).  Adding
one is one entry here (and its module).  Features simulated inside the one task graph that the
estimator does not price (degraded nodes, compressed gradients) are listed in
explorer/pricing/scope.py.

==========================  =====================================================================
replicas train apart        training.sync windowed: one group's inner step, then the window
                            (lowcomm/window.py)
failed nodes                cluster.faults.failed_nodes: the survivors' cluster (faults.py)
gossip / parameter server   parallelism.dp_kind: one replica's step, then the exchange
                            (lowcomm/decentral.py)
replicas that differ        stragglers or datacenters that differ: one simulation per kind of
                            replica, joined (replicas.py, hetero.py)
==========================  =====================================================================
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..config import Scenario
from ..pricing.scope import UNPRICED, Unpriced, no_faults, prices
from ..result.record import Result
from .faults import simulate_survivors
from .lowcomm.decentral import simulate_exchange
from .lowcomm.window import inner_raw, simulate_window
from .replicas import simulate_kinds, variants

Simulate = Callable[[Scenario], Result]
Raw = dict[str, Any]


@dataclass(frozen=True)
class ScenarioVariant:
    """One scenario variant (module docstring).

    ``applies``: whether ``sc`` has it.  ``run``: the Result of ``sc`` from inner simulations made
    with the given function (the estimator prices one iteration, so none is estimated: its rows
    come from the simulation).  ``proxy``: edits the
    raw scenario a search ranks layouts by (design/proxy.py) to leave the variant out, and returns
    the phrase that says so, or None when it has no proxy.  ``kinds``: the scenarios whose
    simulations are joined, whose work adds up in the budget (None: the scenario's own work)."""

    name: str
    applies: Callable[[Scenario], bool]
    run: Callable[[Scenario, Simulate], Result]
    proxy: Callable[[Raw, Scenario], str | None]
    kinds: Callable[[Scenario], Sequence[Scenario]] | None = None


def _proxy_window(raw: Raw, sc: Scenario) -> str:
    inner_raw(raw, sc)
    return f"one of its {sc.sync_groups} {sc.training.sync.kind} groups trained alone"


def _proxy_exchange(raw: Raw, sc: Scenario) -> str:
    raw["parallelism"]["dp_kind"] = "allreduce"
    return f"an all-reduce for {sc.parallelism.dp_kind}"


def _proxy_differ(raw: Raw, sc: Scenario) -> str | None:
    D = sc.cluster.datacenters
    if sc.cluster.nodes % D:
        return None
    if isinstance(raw["cluster"]["datacenters"], list):     # not already one group (_proxy_window)
        raw["cluster"]["datacenters"] = D
    return f"{D} equal datacenters of {sc.hardware.gpu.name}"


def _proxy_stragglers(raw: Raw, sc: Scenario) -> str:
    raw["cluster"].pop("stragglers", None)
    return "no stragglers"


def _kinds(sc: Scenario) -> list[Scenario]:
    return [v.sc for v in variants(sc)]


# In dispatch order: the first that applies wraps the others (a window's inner group may have
# failed nodes; a survivor cluster may gossip; a gossiping replica may straggle).
VARIANTS: tuple[ScenarioVariant, ...] = (
    ScenarioVariant("replicas train apart", lambda sc: sc.training.sync.windowed, simulate_window,
                    _proxy_window),
    ScenarioVariant("failed nodes", lambda sc: sc.cluster.faults.failed_nodes > 0, simulate_survivors,
                    no_faults),
    ScenarioVariant("gossip or parameter servers", lambda sc: sc.parallelism.dp_kind != "allreduce",
                    simulate_exchange, _proxy_exchange),
    ScenarioVariant("datacenters that differ", lambda sc: sc.cluster.heterogeneous, simulate_kinds,
                    _proxy_differ, _kinds),
    ScenarioVariant("stragglers", lambda sc: sc.cluster.stragglers.active, simulate_kinds,
                    _proxy_stragglers, _kinds),
)


def wrapping(sc: Scenario) -> ScenarioVariant | None:
    """The first variant of ``sc`` (simulate.py runs it), or None when ``sc`` is one iteration."""
    return next((v for v in VARIANTS if v.applies(sc)), None)


def needs_simulation(sc: Scenario) -> bool:
    """Whether the estimator leaves ``sc`` to the full simulation, exact by construction: a variant
    wraps its iteration, or the pricing model does not price it (pricing/scope.py)."""
    return wrapping(sc) is not None or not prices(sc)


def proxy_features(sc: Scenario) -> tuple[ScenarioVariant | Unpriced, ...]:
    """Every variant and unpriced feature ``sc`` has, in the order the ranking proxy leaves them
    out (design/proxy.py)."""
    features: tuple[ScenarioVariant | Unpriced, ...] = (*VARIANTS, *UNPRICED)
    return tuple(f for f in features if f.applies(sc))
