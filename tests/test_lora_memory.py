"""LoRA's memory (``training.lora_rank``, explorer/workloads/transformer/lora.py): the frozen base
weights are held (LayerCost/EdgeCost.held_bytes) and counted by the estimator as by the
simulation; in an FP8 run they keep the FP8 copies the non-LoRA path keeps (the same base GEMMs
run FP8) while the bf16 adapters keep none; tied embeddings on one GPU hold the shared matrix once.
Closed forms on teaching-8gpu without a pipeline (pp 1, dp 8): one stage holds the whole model."""
from __future__ import annotations

import json

import pytest

from explorer.cli import load_scenario, main
from explorer.estimate import estimate
from explorer.simulate import simulate
from explorer.taskgraph.techniques.optimizer import param_bytes
from explorer.workloads.registry import workload_spec

FLAT = ["parallelism.pp=1", "parallelism.dp=8"]


def _trained(spec) -> float:
    """Parameters the spec trains (the adapters under LoRA), per GPU of a one-stage pipeline."""
    return (sum(n * (spec.kinds[k].params + spec.kinds[k].expert_params) for k, n in spec.runs)
            + spec.first.params + spec.last.params)


# Shipped scenarios (their own layouts: 1F1B, interleaved, DualPipe with FP8 and MTP) and pipelines
# whose ends share a GPU (pp 1, ZB-V's V, DualPipe's edge ranks) with tied embeddings.
CASES = [
    ("teaching-8gpu", []),
    ("teaching-8gpu", [*FLAT, "model.tied_embeddings=true"]),
    ("teaching-8gpu", ["model.tied_embeddings=true"]),
    ("teaching-8gpu", ["model.tied_embeddings=true", "parallelism.schedule=zb-v"]),
    ("teaching-8gpu", ["model.tied_embeddings=true", "parallelism.schedule=dualpipe"]),
    ("teaching-8gpu", ["parallelism.schedule=interleaved", "parallelism.vpp=2"]),
    ("teaching-8gpu", ["parallelism.ideal_pipeline=true"]),
    ("teaching-8gpu", [*FLAT, "hardware.gpu=b200", "training.dtype=fp8", "training.fp8_recipe=current"]),
    ("megatron-gpt3-175b", []),
    ("llama3-405b-16k", []),
    ("deepseek-v3", []),
]


@pytest.mark.parametrize(("name", "sets"), CASES)
def test_the_estimators_memory_is_the_simulations_under_lora(name, sets):
    """pricing/memory.stage_memory_rows adds the held base weights as analysis/memory.class_memory
    does (before: megatron-gpt3-175b 3.5 GB estimated, 9.0 GB simulated)."""
    sc = load_scenario(name, [*sets, "training.lora_rank=16"])
    r = simulate(sc)
    assert estimate(sc).memory_GB_total[0] == pytest.approx(r.memory.total / 1e9, rel=1e-9)
    # The base weights dominate what is held: far more than the adapters' gradients.
    assert r.memory.params > 10 * r.memory.grads


def test_a_sweep_calls_fitting_what_the_simulation_calls_fitting(capsys):
    """The review's sweep: tp 1 x pp 4 was 10.2 GB "fits yes" estimated, 98.5 GB NO simulated."""
    args = ["sweep", "megatron-gpt3-175b", "--set", "training.lora_rank=16", "--vary",
            "parallelism.tp=1,2", "--vary", "parallelism.pp=4,8", "--json"]
    rows = []
    for full in ([], ["--full"]):
        assert main([*args, *full]) == 0
        rows.append(json.loads(capsys.readouterr().out))
    est, sim = rows
    assert [r["overrides"] for r in est] == [r["overrides"] for r in sim]
    for e, s in zip(est, sim, strict=True):
        assert e["memory_GB_total"] == pytest.approx(s["memory_GB_total"], rel=1e-9)
        assert e["fits"] == s["fits"]
    assert [r["fits"] for r in est] == [False, True, True, True]          # tp 1 x pp 4: 98.5 GB


@pytest.mark.parametrize(("gpu", "recipe"), [("b200", "current"), ("h100-sxm", "blockwise"),
                                             ("h100-sxm", "delayed")])
def test_fp8_base_weights_keep_their_fp8_copies_and_the_adapters_add_bf16(gpu, recipe):
    """Per parameter the frozen base holds what the non-LoRA FP8 path holds (its weight and FP8
    copies; under current and delayed scaling the FP8 copy is the weight); the adapters add
    their bf16 weights and no FP8 copy.  Before: b200/current 1.62 GB -> 2.84 GB at rank 16."""
    sets = [*FLAT, f"hardware.gpu={gpu}", "training.dtype=fp8", f"training.fp8_recipe={recipe}"]
    full, lora = (load_scenario("teaching-8gpu", [*sets, f"training.lora_rank={r}"]) for r in (0, 16))
    adapters = _trained(workload_spec(lora))
    grown = simulate(lora).memory.params - simulate(full).memory.params
    assert grown == pytest.approx(param_bytes(lora) * adapters, rel=1e-9)


def test_the_fp8_copies_are_the_base_layers_under_lora():
    """DeepSeek-V3 (FP8 blockwise): each LoRA layer keeps the FP8 copies of every base parameter
    the full fine-tuning layer has (before: of its adapters only, params 13.09 -> 9.94 GB)."""
    full = workload_spec(load_scenario("deepseek-v3", []))
    lora = workload_spec(load_scenario("deepseek-v3", ["training.lora_rank=16"]))
    for a, b in zip(full.kinds, lora.kinds, strict=True):
        assert a.fp8_params is None
        assert b.fp8_params == a.params + a.expert_params
        assert b.params + b.expert_params < 0.01 * b.fp8_params


def test_tied_embeddings_hold_the_shared_matrix_once_on_one_gpu():
    """pp 1: the embedding and the output layer share one V x h matrix (held frozen under LoRA),
    V h bf16 bytes less than untied (before: 2.854 GB both).  A pipeline whose last stage is
    another GPU keeps a copy there, as Megatron-LM does: the same bytes tied or not."""
    m = load_scenario("teaching-8gpu", []).model
    for lay, less in ((FLAT, m.vocab * m.hidden * 2), ([], 0.0)):
        untied, tied = (simulate(load_scenario("teaching-8gpu", [*lay, f"model.tied_embeddings={t}",
                                                                   "training.lora_rank=16"]))
                        for t in ("false", "true"))
        assert untied.memory.params - tied.memory.params == pytest.approx(less, abs=1.0)
