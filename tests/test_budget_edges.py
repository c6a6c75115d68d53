"""The work budget (fold/budget.estimate) bounds the task graphs of the features it once left out:
a workload's overlapped edges (one task per unit, chunk and dimension-phase on the edge's stream:
taskgraph/edges.py) and PipeDream's per-stage replicas (more units simulated, each stage's
replicas all-reduced: taskgraph/replicas.py)."""
from __future__ import annotations

import pytest

from explorer.fold.budget import estimate
from explorer.scenario import load, resolve_scenario_path
from explorer.taskgraph.make import iteration_builder

CASES = [
    ("gnn-sage-papers100m", {"model.gnn.overlap": True, "training.micro_batch": 128}),
    ("dlrm-dcnv2", {}),
    ("pipedream-vgg16", {}),
    ("pipedream-vgg16", {"parallelism.schedule": "1f1b"}),
]


@pytest.mark.parametrize(("name", "ov"), CASES)
def test_the_estimate_bounds_the_graph_of_edges_and_replicas(name, ov):
    sc = load(resolve_scenario_path(name), ov)
    real = len(iteration_builder(sc).build().tasks)
    assert real <= estimate(sc).tasks <= 3 * real
