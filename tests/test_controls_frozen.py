"""Frozen layers (``training.frozen_layers``, explorer/workloads/freezing.py): the first N layers
and the embedding below them run forward only.  Closed forms on teaching-8gpu without a pipeline
(pp 1, dp 8, 2 micro-batches per GPU, untied embeddings): freezing removes exactly the frozen
layers' and the embedding's backward (input and weight gradients), their gradient bytes from the
all-reduce and their gradients and optimizer state from memory, and keeps their weights."""
from __future__ import annotations

import json

import pytest

from explorer.cli import load_scenario, main
from explorer.physics.hardware import ComputeModel
from explorer.simulate import simulate
from explorer.workloads.registry import workload_spec

FLAT = ["parallelism.pp=1", "parallelism.dp=8"]
COVERED = {"training.frozen_layers":
           "test_a_frozen_prefix_in_a_pipeline_lightens_its_stages_and_speeds_the_iteration"}


def _sc(k: int, extra=()):
    return load_scenario("teaching-8gpu", [*FLAT, f"training.frozen_layers={k}", *extra])


def _trainable(spec) -> float:
    return (sum(n * spec.kinds[kind].params for kind, n in spec.runs) + spec.first.params
            + spec.last.params)


@pytest.mark.parametrize("k", [1, 6, 23])
def test_freezing_removes_exactly_the_backward_and_the_gradient_bytes(k):
    base, cold = _sc(0), _sc(k)
    spec = workload_spec(base)
    cm = ComputeModel.for_scenario(base)
    lc, emb = spec.kinds[0], spec.first
    per_unit = k * (cm.time(lc.bwd_input) + cm.time(lc.bwd_weight)) + cm.time(emb.bwd_input) + \
        cm.time(emb.bwd_weight)
    r0, r1 = simulate(base), simulate(cold)
    units = base.micro_batches
    assert r0.breakdown_s["compute"] - r1.breakdown_s["compute"] == pytest.approx(units * per_unit, rel=1e-9)
    # The gradient all-reduce carries the trainable parameters only: the frozen layers' and the
    # untied embedding's leave it (ring all-reduce bytes are linear in the size).
    left = _trainable(spec) - k * lc.params - emb.params
    assert _trainable(workload_spec(cold)) == pytest.approx(left, rel=1e-12)
    assert r1.comm_bytes_per_gpu["dp"] / r0.comm_bytes_per_gpu["dp"] == pytest.approx(
        left / _trainable(spec), rel=1e-9)
    # Memory: the weights stay, their gradients and optimizer state go.
    m0, m1 = r0.memory, r1.memory
    assert m1.params == pytest.approx(m0.params, rel=1e-12)
    assert m1.grads / m0.grads == pytest.approx(left / _trainable(spec), rel=1e-9)
    assert m1.optimizer / m0.optimizer == pytest.approx(left / _trainable(spec), rel=1e-9)
    assert m1.activations < m0.activations
    # The model FLOPs of an iteration drop by the backward's GEMMs.
    assert r1.mfu * r1.iteration_time_s < r0.mfu * r0.iteration_time_s


def test_a_frozen_prefix_in_a_pipeline_lightens_its_stages_and_speeds_the_iteration(capsys):
    runs = []
    for k in (0, 3, 12):
        assert main(["run", "teaching-8gpu", "--json", "--set", f"training.frozen_layers={k}"]) == 0
        runs.append(json.loads(capsys.readouterr().out))
    times = [r["iteration_time_s"] for r in runs]
    assert times[0] > times[1] > times[2]
    assert runs[0]["comm_bytes_per_gpu"]["dp"] > runs[1]["comm_bytes_per_gpu"]["dp"] > \
        runs[2]["comm_bytes_per_gpu"]["dp"]


@pytest.mark.parametrize(("sets", "field", "says"), [
    (["training.frozen_layers=24"], "training.frozen_layers", "nothing would train"),
    (["training.frozen_layers=2", "parallelism.zero=3"], "training.frozen_layers", "FSDP"),
])
def test_impossible_freezing_is_one_line(capsys, sets, field, says):
    assert main(["run", "teaching-8gpu", *[x for s in sets for x in ("--set", s)]]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and field in err and says in err


def test_the_estimator_leaves_frozen_layers_to_the_simulation():
    from explorer.estimate import estimate
    sc = _sc(6)
    assert estimate(sc).iteration_time_s[0] == pytest.approx(simulate(sc).iteration_time_s, rel=1e-12)
