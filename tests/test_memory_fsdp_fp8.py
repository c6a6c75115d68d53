"""Memory recipes that ran (issue 34): what FSDP2 under a pipeline and FP8 recipes keep in HBM.

FSDP2 under a pipeline (taskgraph/techniques/fsdp.py zero3_working_set): torchtitan does not
reshard after the forward when pp > 1 and the pipeline stage runs its backwards without resharding
or gradient sync, so the stage's bf16 parameters stay gathered for the whole step and its gradients
accumulate unsharded in the reduce dtype (fp32 in torchtitan; pytorch FSDPParam.
to_accumulated_grad_if_needed) until the stage's last backward.  FSDP1 (framework ``fsdp``) keeps
ZeRO-3's per-layer working set.

FP8 recipes (taskgraph/techniques/fp8_memory.py, config/fp8_recipes.py): the FP8 weight copies
(Hopper: the weight and its transpose, 1 byte each; Blackwell's per-tensor recipes: no transpose),
the block scales (blockwise 4 B per 128x128 block, MXFP8 1 B per 32 in both layouts) and the
delayed recipe's amax history (1024 + 2 fp32 per FP8 tensor, 5 tensors per GEMM, TE's
set_meta_tensor); where the recipe keeps FP8 parameters (Megatron-Bridge presets: delayed,
current, MXFP8) they replace the bf16 copy, blockwise keeps both.
"""
from __future__ import annotations

from typing import Any

import pytest

from explorer.config.fp8_recipes import AMAX_HISTORY_LEN
from explorer.estimate.fast import estimate_many
from explorer.scenario import apply_overrides, from_dict, load
from explorer.simulate import simulate
from explorer.taskgraph.make import iteration_builder

from conftest import ROOT

# Llama 3 8B (Dubey et al. 2024, Table 3): 32 layers, h 4096, 8 KV heads of 128, FFN 14336.
H, KV, FFN, LAYERS = 4096, 1024, 14336, 32
LINEAR = LAYERS * (H * (2 * H + 2 * KV) + 3 * H * FFN)    # the layers' FP8 linears' weights
GEMMS = LAYERS * 4                                          # QKV, output projection, fc1, fc2


def _llama70b(framework: str, pp: int = 4, zero: int = 3) -> dict[str, Any]:
    """Llama 3 70B on 64 H100s, TP 8 x PP ``pp`` x DP (64 / 8 / pp), full recomputation."""
    return {"name": "70B", "model": {"preset": "llama3-70b", "seq_len": 8192},
            "training": {"global_batch": 64, "micro_batch": 1, "dtype": "bf16", "recompute": "full",
                         "framework": framework},
            "hardware": {"gpu": "h100-sxm"}, "cluster": {"gpus_per_node": 8, "nodes": 8},
            "parallelism": {"tp": 8, "pp": pp, "zero": zero, "sequence_parallel": True, "schedule": "1f1b"}}


def _held(raw: dict[str, Any], stage: int) -> tuple[float, float]:
    """(parameters, bf16 bytes of the largest gathered layer) of ``stage``'s chunks."""
    chunks = [ch for ch, _ in iteration_builder(from_dict(raw)).rank_chunks(stage)]
    return sum(c.params + c.expert_params for c in chunks), max(c.fsdp_layer_bytes for c in chunks)


@pytest.mark.parametrize("framework", ["fsdp2", "torchtitan"])
def test_fsdp2_under_a_pipeline_keeps_the_stage_gathered_and_its_gradients_unsharded(framework):
    """Per stage: parameters = the bf16 shard + every held parameter gathered (2 B each); gradients
    = the bf16 shard + one layer's bf16 gradients + every held parameter's fp32 accumulated
    gradient (4 B).  Llama 3 70B, TP8 PP4 DP2: about 35.6 GB on the busiest GPU, where the ZeRO-3
    accounting said 22.4 GB."""
    raw = _llama70b(framework)
    r = simulate(from_dict(raw))
    dp = 2
    for s, mem in enumerate(r.memory_by_class):
        n, layer = _held(raw, s)
        assert mem.params == pytest.approx(2 * n / dp + 2 * n, rel=1e-12)
        assert mem.grads == pytest.approx(2 * n / dp + layer + 4 * n, rel=1e-12)
    assert 35e9 < r.memory.total < 36.5e9
    assert estimate_many([from_dict(raw)]).memory_GB_total[0] == pytest.approx(r.memory.total / 1e9, rel=1e-9)


def test_fsdp1_and_fsdp2_without_a_pipeline_keep_zero3s_working_set():
    """FSDP1 under the same pipeline, and FSDP2 without one, gather layer by layer: the shard plus
    the gathered layer and the ones prefetched, one layer's gradients."""
    for raw in (_llama70b("fsdp"), _llama70b("torchtitan", pp=1)):
        sc = from_dict(raw)
        r = simulate(sc)
        n, layer = _held(raw, 0)
        dp = sc.dp
        mem = r.memory_by_class[0]
        ahead = 1 + sc.communication.prefetch_layers
        assert mem.params == pytest.approx(2 * n / dp + layer * ahead, rel=1e-12)
        assert mem.grads == pytest.approx(2 * n / dp + layer, rel=1e-12)


def _llama8b(dtype: str, gpu: str = "h100-sxm", recipe: str | None = None, zero: int = 1) -> dict[str, Any]:
    raw = {"name": "8B", "model": {"preset": "llama3-8b", "seq_len": 4096},
           "training": {"global_batch": 8, "micro_batch": 1, "dtype": dtype, "recompute": "full"},
           "hardware": {"gpu": gpu}, "cluster": {"gpus_per_node": 8, "nodes": 1},
           "parallelism": {"tp": 1, "pp": 1, "zero": zero}}
    return apply_overrides(raw, {"training.fp8_recipe": recipe}) if recipe else raw


# Bytes an FP8 run keeps beyond the bf16 run's weights, per FP8 linear parameter and per GEMM.
PER_TENSOR_STATE = 5 * (AMAX_HISTORY_LEN + 2) * 4
CASES = {
    # Hopper: FP8 parameter + its transpose replace the 2-byte bf16 weight; the amax history.
    ("h100-sxm", "delayed"): (0.0, PER_TENSOR_STATE),
    ("h100-sxm", "current"): (0.0, 5 * 2 * 4),
    # bf16 weights kept, FP8 weight and transpose cast from them, one fp32 scale per 128x128 block.
    ("h100-sxm", "blockwise"): (2 + 4 / 128**2, 0.0),
    # Blackwell per-tensor: no transpose, a byte less than bf16.
    ("b200", "delayed"): (-1.0, PER_TENSOR_STATE),
    # MXFP8 parameters: both layouts and an E8M0 scale per 32 elements in each.
    ("b200", "mxfp8"): (2 / 32, 0.0),
}


@pytest.mark.parametrize("gpu,recipe", list(CASES), ids=[f"{g}-{r}" for g, r in CASES])
def test_fp8_weights_and_scaling_state_closed_form(gpu, recipe):
    per_param, per_gemm = CASES[(gpu, recipe)]
    bf16 = simulate(from_dict(_llama8b("bf16", gpu)))
    fp8 = simulate(from_dict(_llama8b("fp8", gpu, recipe)))
    extra = fp8.memory.params - bf16.memory.params
    # The layers' norm weights (a few per million) are counted with the FP8 linears' parameters.
    assert extra == pytest.approx(per_param * LINEAR + per_gemm * GEMMS, rel=1e-4, abs=1e3)
    assert fp8.memory.grads == bf16.memory.grads and fp8.memory.optimizer == bf16.memory.optimizer
    est = estimate_many([from_dict(_llama8b("fp8", gpu, recipe))])
    assert est.memory_GB_total[0] == pytest.approx(fp8.memory.total / 1e9, rel=1e-9)


def test_blockwise_copies_under_zero3_are_the_gathered_layers_only():
    """Under ZeRO-3 a layer's FP8 copies exist while it is gathered: (2 + 4/128^2) B per parameter
    of the gathered transformer layers (one, prefetch_layers more; the bf16 embedding, the largest
    piece ZeRO-3 gathers here, has none), not of the whole model; blockwise keeps no per-tensor
    scaling state."""
    bf16 = from_dict(_llama8b("bf16", zero=3))
    fp8 = simulate(from_dict(_llama8b("fp8", recipe="blockwise", zero=3)))
    extra = fp8.memory.params - simulate(bf16).memory.params
    layer = H * (2 * H + 2 * KV) + 3 * H * FFN
    gathered = layer * (1 + bf16.communication.prefetch_layers)
    assert extra == pytest.approx((2 + 4 / 128**2) * gathered, rel=1e-4)


def test_the_memory_weighing_split_counts_fsdp2s_gathered_stage():
    """The split that weighs memory (DualPipe's) reads the bytes per parameter the report counts:
    under FSDP2 with a pipeline, 2 + 2 + 12 bytes over DP plus the gathered bf16 weight and its fp32
    accumulated gradient (6 bytes); FSDP1 only the shards."""
    from explorer.taskgraph.split_cost import held_bytes_per_param
    for framework, whole in (("torchtitan", 2 + 4), ("fsdp", 0)):
        sc = from_dict(_llama70b(framework))
        dense, _ = held_bytes_per_param(sc, iteration_builder(sc).net)
        assert dense == pytest.approx((2 + 2 + 12) / sc.dp + whole, rel=1e-12)


@pytest.mark.parametrize("name,fp8", [("zero-bubble-8gpu", False), ("fsdp-llama3-8b", False),
                                      ("zero-bubble-8gpu", True)])
def test_zero3_on_one_rank_holds_what_zero2_holds(name, fp8):
    """A hunt found ZeRO-3 on zero-bubble-8gpu (dp 1) at 15.38 GB against 14.90 GB for ZeRO 0-2: the
    gathered layers were counted although one rank's parameters are whole (PyTorch FSDP switches to
    NO_SHARD at world size 1).  On one data-parallel rank every stage holds the same bytes; with
    more ranks ZeRO-3 still counts its working set."""
    one = {"parallelism.dp": 1}
    if name == "fsdp-llama3-8b":
        one = {"parallelism.dp": 1, "cluster.nodes": 1, "parallelism.tp": 8, "training.global_batch": 8}
    if fp8:
        # MXFP8 on a B200: its FP8 weight copies were capped at the gathered layers (a regression
        # hunt: 13.865 GB at ZeRO-3 against 13.880 at ZeRO-2, and prefetch_layers moved it).
        one = {**one, "training.dtype": "fp8", "hardware.gpu": "b200"}
    path = ROOT / "scenarios" / f"{name}.yaml"
    z2 = simulate(load(path, {**one, "parallelism.zero": 2}))
    z3 = simulate(load(path, {**one, "parallelism.zero": 3}))
    assert z3.memory.total == pytest.approx(z2.memory.total, rel=1e-12)
    est = estimate_many([load(path, {**one, "parallelism.zero": 3})])
    assert est.memory_GB_total[0] == pytest.approx(z3.memory.total / 1e9, rel=1e-9)
