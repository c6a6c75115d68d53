"""A new workload family is one module of its own plus one registry entry (issue 33, point 3):
the toy MLP of tests/toy_mlp.py, registered here and nowhere else, runs through the simulation
and the estimator, and both give its closed-form FLOPs, parameters and memory."""
from __future__ import annotations

import math

import pytest
import toy_mlp

from explorer.estimate import estimate
from explorer.estimate.many import estimate_profiles
from explorer.pricing.profile import row_profile
from explorer.scenario import ScenarioError, from_dict, model_presets
from explorer.simulate import simulate
from explorer.taskgraph.techniques.optimizer import OPTIMIZER_STATE_BYTES, PARAM_BYTES
from explorer.workloads import registry

N, H = toy_mlp.FIELDS["layers"], toy_mlp.FIELDS["hidden"]
B, BATCH, PP, DP = 8, 128, 2, 4
RAW = {"model": {"preset": toy_mlp.PRESET},
       "training": {"global_batch": BATCH, "micro_batch": B, "optimizer": "sgd"},
       "hardware": {"gpu": "h100-sxm"}, "cluster": {"nodes": 1, "gpus_per_node": 8},
       "parallelism": {"pp": PP, "dp": DP, "zero": 1}}
MICRO_BATCHES = BATCH // (DP * B)           # per data-parallel replica


@pytest.fixture
def toy(monkeypatch):
    """The toy family registered (one entry) and its preset in the model table, for this test only."""
    monkeypatch.setitem(model_presets(), toy_mlp.PRESET, dict(toy_mlp.FIELDS))
    monkeypatch.setitem(registry.WORKLOADS, toy_mlp.WORKLOAD.name, toy_mlp.WORKLOAD)
    return from_dict(RAW)


def _model_flops_per_gpu() -> float:
    """Forward x W (2 B H^2) and backward dX, dW (2 B H^2 each) per layer and micro-batch; a GPU
    runs its stage's N / PP layers for every micro-batch (PaLM App. B's model FLOPs)."""
    return 6 * B * H * H * (N / PP) * MICRO_BATCHES


def test_the_registry_selects_the_toy_family_by_its_preset(toy):
    assert registry.workload_for(toy.model) is toy_mlp.WORKLOAD
    spec = registry.workload_spec(toy)
    assert spec.layers == N and spec.model_flops == 6 * B * H * H * N
    assert toy_mlp.WORKLOAD.params(toy) == N * H * H
    assert registry.nouns(toy.model).per_second == "samples"


def test_the_toy_family_simulates_to_its_closed_forms(toy):
    r = simulate(toy)
    peak = toy.hardware.gpu.peak_tflops * 1e12
    assert r.stage_layers == (N // PP,) * PP
    assert r.mfu * r.iteration_time_s * peak == pytest.approx(_model_flops_per_gpu(), rel=1e-12)
    assert r.tokens_per_s == pytest.approx(BATCH / r.iteration_time_s, rel=1e-12)    # samples/s
    held = (N / PP) * H * H                  # weights of one stage
    assert r.memory.params == pytest.approx(PARAM_BYTES * held, rel=1e-12)
    # Megatron's bf16 run keeps its main_grad in fp32 (config/frameworks.py grad_buffer_in_reduce_dtype).
    assert r.memory.grads == pytest.approx(4 * held, rel=1e-12)
    assert r.memory.optimizer == pytest.approx(OPTIMIZER_STATE_BYTES["sgd"] * held / DP, rel=1e-12)  # ZeRO-1
    # 1F1B's first stage holds PP micro-batches in flight, each its layers' inputs (B x H x 2 bytes).
    assert r.memory.activations == pytest.approx(PP * (N / PP) * B * H * 2, rel=1e-12)


def test_the_estimator_prices_the_toy_family_as_the_simulation(toy):
    est, r = estimate(toy), simulate(toy)
    peak = toy.hardware.gpu.peak_tflops * 1e12
    assert est.mfu[0] * est.iteration_time_s[0] * peak == pytest.approx(_model_flops_per_gpu(), rel=1e-12)
    assert est.iteration_time_s[0] == pytest.approx(r.iteration_time_s, rel=1e-9)
    assert est.memory_GB_total[0] * 1e9 == pytest.approx(r.memory.total, rel=1e-9)


def test_a_family_refuses_what_it_does_not_model(toy):
    """The toy registers no PowerSGD factor: gradient compression is refused with a one-line
    error naming the field, not priced as if it were a transformer's — at load
    (runnable.rule_family_models_it), and by the simulation for a scenario that skipped it."""
    from explorer import config
    raw = {**RAW, "communication": {"compression": {"kind": "fp16"}}}
    with pytest.raises(ScenarioError) as at_load:
        from_dict(raw)
    sc = config.from_dict(raw)                  # the configuration's own rules only
    with pytest.raises(ScenarioError) as info:
        simulate(sc)
    assert str(at_load.value) == str(info.value)
    assert info.value.field == "communication.compression.kind" and "toy-mlp" in str(info.value)
    assert "\n" not in str(info.value)
    # The estimator leaves the row to the simulation, whose refusal is the row's reason (NaN row).
    est, why = estimate_profiles([row_profile(sc)])
    assert math.isnan(est.iteration_time_s[0]) and why == [str(info.value)]


@pytest.mark.parametrize(("sets", "field", "words"), [
    # A section no family reads was dropped in silence: the DLRM ran as if model.gnn were absent.
    (["model.gnn.features=10"], "model.gnn", "a dlrm model has none"),
    (["model.kind=gnn"], "model.kind", "but model.dlrm is set"),
])
def test_another_familys_section_is_refused_by_name(sets, field, words, capsys):
    from explorer.cli import main
    args = ["run", "dlrm-dcnv2"]
    for s in sets:
        args += ["--set", s]
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: {field}:") and words in err and "\n" not in err


def test_a_transformer_kind_with_a_gnn_section_names_the_section():
    from explorer.config.schema import ScenarioError
    from explorer.scenario import from_dict
    with pytest.raises(ScenarioError) as info:
        from_dict({"model": {"kind": "transformer", "preset": "llama3-8b", "gnn": {}},
                   "training": {"global_batch": 64}})
    assert info.value.field == "model.kind" and "model.gnn" in str(info.value)
