"""Direction tests for the memory recipes of issue 34: activation offloading, block recomputation of
N layers, Megatron-Core's ``mlp`` recompute module and custom pipeline layouts.

Each test changes one field and asserts the direction physics demands, strictly (collected by
tests/test_controls.py through ``COVERED``)."""
from __future__ import annotations

import pytest
from test_estimator import assert_agrees

from explorer.config import ScenarioError
from explorer.estimate import estimate_many
from explorer.physics import host_link
from explorer.scenario import apply_overrides, from_dict, load_raw
from explorer.simulate import Result, simulate
from explorer.taskgraph.make import iteration_builder

from conftest import ROOT

COVERED = {
    "training.offload_activations_layers": "test_offloading_layers_frees_memory_and_costs_host_link_time",
    "training.recompute_layers": "test_recomputing_n_layers_trades_memory_for_flops_in_proportion",
    "parallelism.pipeline_layout": "test_an_embedding_only_first_stage_moves_memory_and_time",
}


def _raw(**training) -> dict:
    """A 8-layer Llama-like model on one 2-stage pipeline of H100s, 4K tokens."""
    return {"model": {"layers": 8, "hidden": 4096, "heads": 32, "kv_heads": 8, "vocab": 32000,
                      "seq_len": 4096, "ffn_kind": "swiglu", "ffn_hidden": 14336, "dropout": False},
            "training": {"global_batch": 8, "micro_batch": 1, **training},
            "hardware": {"gpu": "h100-sxm"}, "cluster": {"gpus_per_node": 2, "nodes": 1},
            "parallelism": {"tp": 1, "pp": 2}}


def _run(raw: dict, **over) -> Result:
    return simulate(from_dict(apply_overrides(raw, over)))


def test_offloading_layers_frees_memory_and_costs_host_link_time():
    """Offloading 2 of a chunk's 4 layers halves what the layers keep (plus one layer in flight);
    over PCIe (53 GB/s) a 4K-token layer's ~1 GB copy outlasts its ~3 ms forward, so the iteration
    grows; over a link 100x faster the copy hides and the time is the plain run's."""
    base = _run(_raw())
    off = _run(_raw(offload_activations_layers=2))
    assert off.memory.activations < 0.75 * base.memory.activations
    assert off.iteration_time_s > base.iteration_time_s
    fast = _run(apply_overrides(_raw(offload_activations_layers=2), {"hardware.gpu.pcie_GBps": 5300}))
    assert fast.iteration_time_s == pytest.approx(base.iteration_time_s, rel=1e-9)
    everything = _run(_raw(offload_activations_layers=4))
    assert everything.memory.activations < off.memory.activations


def test_recomputing_n_layers_trades_memory_for_flops_in_proportion():
    """Block recompute of N of a chunk's 4 layers: the extra FLOPs are N/4 of full recompute's,
    and the memory lies between none and full (Megatron recompute_num_layers)."""
    none, full = _run(_raw()), _run(_raw(recompute="full"))
    two = _run(_raw(recompute_layers=2))
    assert full.memory.activations < two.memory.activations < none.memory.activations
    assert none.iteration_time_s < two.iteration_time_s < full.iteration_time_s
    flops = {k: sum(c.hw_flops for c in iteration_builder(from_dict(_raw(**tr))).chunks)
             for k, tr in (("none", {}), ("full", {"recompute": "full"}), ("two", {"recompute_layers": 2}))}
    assert flops["two"] - flops["none"] == pytest.approx((flops["full"] - flops["none"]) / 2, rel=1e-9)
    assert _run(_raw(recompute_layers=4)).memory.activations == pytest.approx(
        full.memory.activations, rel=1e-9)


def test_mlp_recompute_drops_the_mlp_intermediates_and_repeats_its_gemms():
    """Megatron-Core's "mlp" module: the SwiGLU input (2f) and output (f) are not kept, and the
    MLP's forward runs again in the backward."""
    none = _run(_raw())
    mlp = _run(_raw(recompute="selective", recompute_modules=["mlp"]))
    assert mlp.memory.activations < 0.6 * none.memory.activations
    assert mlp.iteration_time_s > none.iteration_time_s


def test_an_embedding_only_first_stage_moves_memory_and_time():
    """[0, 4, 4, 0] with vpp 2 puts the embedding alone on stage 0's first chunk: stage 0 then
    holds 4 layers instead of the balanced split's, so the layout is the one simulated."""
    raw = apply_overrides(_raw(), {"parallelism.vpp": 2, "parallelism.schedule": "interleaved"})
    plain = _run(raw)
    lay = _run(raw, **{"parallelism.pipeline_layout": [0, 4, 4, 0]})
    assert tuple(lay.stage_layers) == (0, 4, 4, 0)
    assert lay.stage_layers != plain.stage_layers
    assert lay.iteration_time_s != plain.iteration_time_s


@pytest.mark.parametrize("over, field", [
    ({"training.offload_activations_layers": -1}, "training.offload_activations_layers"),
    ({"training.recompute_layers": -2}, "training.recompute_layers"),
    ({"parallelism.pipeline_layout": [8]}, "parallelism.pipeline_layout"),
    ({"parallelism.pipeline_layout": [0, 7]}, "parallelism.pipeline_layout"),
])
def test_bad_values_name_their_field_in_one_line(over, field):
    with pytest.raises(ScenarioError) as info:
        from_dict(apply_overrides(_raw(), over))
    assert info.value.field == field and "\n" not in str(info.value)


def test_host_link_defaults_to_pcie_and_to_nvlink_c2c_on_grace():
    """The GPU's PCIe link when its preset gives one (H100 SXM: 52.8 GB/s), else PCIe Gen5's ~53
    GB/s; Grace-Blackwell's NVLink-C2C 450 GB/s per direction."""
    sc = from_dict(_raw())
    assert host_link.host_link_Bps(sc) == 52.8e9
    bare = from_dict(apply_overrides(_raw(), {"hardware.gpu": {"name": "x", "peak_tflops": 989,
                                                               "memory_GB": 80, "hbm_GBps": 3350}}))
    assert host_link.host_link_Bps(bare) == 53e9
    assert host_link.HOST_LINK_GBPS["gb200"] == 450.0


@pytest.mark.parametrize("name, over", [
    # A 5 GB/s host link: the copies outlast the layers' compute, so part of them is exposed.
    ("teaching-8gpu", {"training.offload_activations_layers": 2, "hardware.gpu.pcie_GBps": 5}),
    ("teaching-8gpu", {"training.recompute_layers": 1}),
    ("teaching-8gpu", {"training.recompute": "selective",
                       "training.recompute_modules": ["mlp", "layernorm"]}),
    ("teaching-8gpu", {"parallelism.vpp": 2, "parallelism.schedule": "interleaved",
                       "parallelism.pipeline_layout": [0, 4, 4, 4, 4, 4, 4, 0]}),
    ("deepseek-v3", {"training.offload_activations_layers": 1}),
    # 22 layers on 4 x 6 chunks: the default split's embedding-only and loss-only chunks.
    ("teaching-8gpu", {"model.layers": 22, "parallelism.vpp": 6, "parallelism.schedule": "interleaved"}),
])
def test_the_estimator_prices_the_memory_recipes_as_the_simulation(name, over):
    """The fields act where both the engine and the estimator read them (the workload's LayerCost,
    the layer split, NCCL's buffers): the exact estimate equals the simulation."""
    sc = from_dict(apply_overrides(load_raw(ROOT / "scenarios" / f"{name}.yaml"), over))
    assert_agrees([sc], estimate_many([sc]))
