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
from ..taskgraph.layer import pp_message_bytes
from ..taskgraph.techniques.fsdp import comm_zero
from ..taskgraph.techniques.link_sharing import may_share
from ..taskgraph.techniques.pair_sync import PAIR, two_copies
from ..vocabulary import TIERS
from ..workloads.registry import problem, workload_for
from .keys import network_key, shared_network

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


def links_may_meet(sc: Scenario) -> bool:
    """Whether the engine may pool a pipeline send and a data-parallel call of one stage on one
    link (engine/sharing.py pools calls limited by the same tier): link_sharing.may_share, and some
    stage whose sends (to either neighbour, the wrap pair included) are limited by a tier its
    dense or expert data-parallel group may be limited by — any tier that group crosses, or the
    node's when the PCIe links bound it (collectives.pcie_boundary); under a two-direction
    schedule its pair group's too (the weight copies' all-reduce, pair_sync.py), and under ZeRO-3
    that group's alone (the layers' reduce-scatters run inside the passes).  Exact in one direction
    only: False guarantees no pool; True may be a pair that never meets."""
    if not may_share(sc):
        return False
    net = shared_network(sc, network_key(sc, False), False)
    p, msg = sc.parallelism.pp, pp_message_bytes(sc)
    sends = [{net.cost("send-recv", msg, "pp", q).boundary} for q in range(p)]
    dims = (("dp", "edp") if comm_zero(sc) != 3 else ()) + ((PAIR,) if two_copies(sc) else ())
    for s in range(p):
        mine = sends[s] | sends[(s - 1) % p]
        for dim in dims:
            sh = net.shape(dim, s)
            if sh.n <= 1:
                continue
            reach = set(TIERS[:sh.outer + 1]) | ({TIERS[max(sh.outer, 1)]} if sh.outer else set())
            if mine & reach:
                return True
    return False


def _no_contention(raw: Raw, sc: Scenario) -> str:
    raw["communication"]["contention"] = False
    return "no contention between pipeline sends and gradient buckets"


def _unfrozen(raw: Raw, sc: Scenario) -> str:
    raw["training"]["frozen_layers"] = 0
    return "every layer training"


# The engine's fair share of a link between the pp and dp streams (engine/sharing.py).
LINK_SHARING = Unpriced("link sharing between dimensions", links_may_meet, _no_contention)
UNPRICED: tuple[Unpriced, ...] = (
    Unpriced("degraded nodes", lambda sc: sc.cluster.faults.degraded, no_faults),
    Unpriced("compressed gradients", lambda sc: sc.communication.compression.active, _uncompressed),
    LINK_SHARING,
    # Frozen layers (workloads/freezing.py) are kinds of layers beyond the two the arrays count.
    Unpriced("frozen layers", lambda sc: sc.training.frozen_layers > 0, _unfrozen),
)


def workload_priced(sc: Scenario) -> bool:
    """Whether the pricing model prices ``sc``'s workload: its family's registry entry says the
    estimator describes it (explorer/workloads/registry.py ``estimator``: a ResNet's blocks differ
    one by one, so it does not) and the row asks nothing of it that the family refuses
    (registry.problem: the simulation then says why).  A serving scenario is not a training step:
    its prefill and decode come from explorer/serving (simulate dispatches there)."""
    if sc.inference is not None:
        return False
    w = workload_for(sc.model)
    # PipeDream's per-stage replicas (taskgraph/replicas.py) run on streams the arrays do not price.
    replicas = bool(sc.parallelism.stage_replicas)
    return not replicas and w.estimator and (w.models_everything or problem(sc, w) is None)


def prices(sc: Scenario) -> bool:
    """Whether the pricing model prices one iteration of ``sc`` (its workload, none of
    :data:`UNPRICED`); variants that wrap the iteration are the caller's (variants/registry.py)."""
    return workload_priced(sc) and not any(f.applies(sc) for f in UNPRICED)
