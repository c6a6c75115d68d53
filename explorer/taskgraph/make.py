"""The builder a scenario needs: :class:`~explorer.taskgraph.builder.IterationBuilder`, or its
subclass :class:`~explorer.taskgraph.replicas.ReplicaBuilder` when the scenario gives its pipeline
stages their own replica counts (``parallelism.stage_replicas``, PipeDream's hybrid).  Every place
that builds an iteration's task graph asks this function, so none of them tests the field."""
from __future__ import annotations

from ..config import Scenario
from ..network.groups import Network
from .builder import IterationBuilder
from .replicas import ReplicaBuilder


def iteration_builder(sc: Scenario, net: Network | None = None, ideal: frozenset[str] | None = None,
                      split: tuple[int, ...] | None = None,
                      balanced_split: tuple[int, ...] | None = None) -> IterationBuilder:
    """A builder of ``sc``'s iteration (arguments as :class:`IterationBuilder`'s)."""
    cls = ReplicaBuilder if sc.parallelism.stage_replicas else IterationBuilder
    return cls(sc, net, ideal, split, balanced_split)
