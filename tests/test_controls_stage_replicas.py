"""Direction of ``parallelism.stage_replicas`` (PipeDream's per-stage replicas, issue 36): more
replicas of the bottleneck stage make the pipeline faster.  Registered in test_controls.py's
coverage through :data:`COVERED`."""
from __future__ import annotations

from explorer.scenario import load
from explorer.simulate import simulate

from conftest import ROOT

SCENARIO = ROOT / "scenarios" / "pipedream-vgg16.yaml"
COVERED = {"parallelism.stage_replicas": "test_more_replicas_of_the_bottleneck_stage_are_faster"}


def test_more_replicas_of_the_bottleneck_stage_are_faster():
    """VGG-16's convolutions (stage 0, 13 layers) bound the pipeline; the fully connected stage
    keeps its one GPU.  11-1 on 3 servers, 15-1 on 4, the same 165 minibatches of 64 per
    iteration (a multiple of both counts): 15 replicas take the convolutions' units round-robin
    15/11 as fast: 4,843 against 6,603 images/s, 1.363x (15/11 = 1.364)."""
    base = {"training.global_batch": 64 * 165, "parallelism.stage_layers": [13, 3]}
    few = simulate(load(SCENARIO, {**base, "cluster.nodes": 3, "parallelism.stage_replicas": [11, 1]}))
    many = simulate(load(SCENARIO, {**base, "cluster.nodes": 4, "parallelism.stage_replicas": [15, 1]}))
    assert many.samples_per_s > few.samples_per_s
    assert 1.25 < many.samples_per_s / few.samples_per_s <= 15 / 11 * (1 + 1e-9)
