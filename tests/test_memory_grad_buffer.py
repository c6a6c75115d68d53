"""The gradient buffer in the framework's dtype (issue 34): Megatron-Core keeps every parameter's
main_grad in an fp32 buffer when gradients are reduced in fp32 (bf16 training), whole on every DP
rank even with the distributed optimizer, so model states cost 6 + 12/d bytes per parameter
(Megatron-LM docs/source/api-guide/dist_optimizer.md; megatron/training/theoretical_memory_usage.py)
where the simulator used to count 4 + 12/d; frameworks whose gradients stay in the parameters'
dtype (DeepSpeed's bf16 engine) keep 2 bytes.  And DeepSeek-V3's AdamW with bf16 moments
(report Sec. 3.3.2) keeps 8 bytes of optimizer state, not 12."""
from __future__ import annotations

from typing import Any

import pytest

from explorer.config.frameworks import profile
from explorer.estimate import estimate_many
from explorer.scenario import from_dict
from explorer.simulate import simulate


def _gpt(framework: str = "megatron", dtype: str = "bf16", zero: int = 1, optimizer: str = "adam",
         dp: int = 8) -> dict[str, Any]:
    """A 24-layer 2048-wide GPT on one 8-GPU node, pure data parallelism (every GPU holds the whole
    model: the per-parameter bytes read off directly)."""
    return {"name": "grad buffer", "model": {"layers": 24, "hidden": 2048, "heads": 16, "ffn_kind": "gelu",
                                             "vocab": 50304, "seq_len": 2048},
            "training": {"global_batch": 16, "micro_batch": 1, "dtype": dtype, "recompute": "none",
                         "framework": framework, "optimizer": optimizer},
            "hardware": {"gpu": "h100-sxm"}, "cluster": {"gpus_per_node": 8, "nodes": 1},
            "parallelism": {"tp": 1, "pp": 1, "dp": dp, "zero": zero}}


def _per_param(raw: dict[str, Any]) -> tuple[float, float, float]:
    """(weights, gradients, optimizer state) bytes per parameter the GPU holds."""
    r = simulate(from_dict(raw))
    n = r.memory.params / 2          # bf16 weights: 2 bytes per parameter held
    return r.memory.params / n, r.memory.grads / n, r.memory.optimizer / n


def test_megatron_bf16_with_distributed_optimizer_holds_6_plus_12_over_d():
    """Megatron's table: bf16 parameters, fp32 gradients, distributed optimizer: 6 + 12/d."""
    w, g, o = _per_param(_gpt())
    assert (w, g, o) == pytest.approx((2.0, 4.0, 12.0 / 8), rel=1e-9)
    w0, g0, o0 = _per_param(_gpt(zero=0))           # not distributed: 18 bytes
    assert w0 + g0 + o0 == pytest.approx(18.0, rel=1e-9)


def test_fp8_megatron_runs_keep_fp32_gradients_too():
    """FP8 runs train with --bf16 (Transformer Engine casts in the GEMMs): the same main_grad."""
    fp8 = simulate(from_dict(_gpt(dtype="fp8"))).memory
    bf16 = simulate(from_dict(_gpt())).memory
    assert fp8.grads == pytest.approx(bf16.grads, rel=1e-9) == 2 * bf16.params


def test_fp16_and_deepspeed_keep_two_byte_gradients():
    """fp16 reduces in fp16 (Megatron-LM arguments.py); DeepSpeed reduces bf16 in bf16
    (runtime/engine.py communication_data_type) and keeps the bf16 gradient."""
    assert _per_param(_gpt(dtype="fp16"))[1] == pytest.approx(2.0, rel=1e-9)
    assert _per_param(_gpt(framework="deepspeed"))[1] == pytest.approx(2.0, rel=1e-9)
    assert profile("deepspeed").grad_buffer_bytes("bf16") == 2
    assert profile("megatron").grad_buffer_bytes("bf16") == 4 == profile("megatron").grad_reduce_bytes("bf16")


def test_zero2_shards_the_fp32_buffer():
    assert _per_param(_gpt(zero=2))[1] == pytest.approx(4.0 / 8, rel=1e-9)


def test_adam_with_bf16_moments_keeps_8_bytes_and_streams_fewer():
    """fp32 master + bf16 m and v = 8 bytes; the step reads and writes 20 bytes, not 28."""
    _, _, o = _per_param(_gpt(zero=0, optimizer="adam-bf16"))
    assert o == pytest.approx(8.0, rel=1e-9)
    fast = simulate(from_dict(_gpt(zero=0, optimizer="adam-bf16"))).breakdown_s["optimizer"]
    slow = simulate(from_dict(_gpt(zero=0))).breakdown_s["optimizer"]
    assert fast == pytest.approx(slow * 20 / 28, rel=1e-9)


@pytest.mark.parametrize("framework,zero", [("megatron", 1), ("megatron", 2), ("deepspeed", 1), ("fsdp", 3)])
def test_the_estimator_counts_the_same_gradients(framework, zero):
    """pricing/memory.stage_memory_rows equals analysis/memory.class_memory."""
    sc = from_dict(_gpt(framework=framework, zero=zero))
    est = estimate_many([sc])
    assert est.memory_GB_total[0] == pytest.approx(simulate(sc).memory.as_GB()["total"], rel=1e-9)


@pytest.mark.parametrize(("framework", "optimizer", "state"), [
    ("megatron", "adam", 8), ("deepspeed", "adam", 8), ("fsdp", "sgd", 4), ("megatron", "adam-bf16", 4)])
def test_fp32_training_holds_fp32_weights_and_no_master_copy(framework, optimizer, state):
    """Training in fp32 keeps no bf16 working copy: the weights are the fp32 master (4 bytes), the
    gradients fp32 (4), the optimizer its moments alone (Adam 8, SGD's momentum 4, bf16 moments 4)
    — 16 bytes per parameter with Adam, where the simulator counted bf16 weights and a master copy
    (2 + 4 + 12).  Per parameter with ZeRO 0 (nothing sharded)."""
    r = simulate(from_dict(_gpt(framework, "fp32", zero=0, optimizer=optimizer)))
    n = r.memory.params / 4
    assert (r.memory.params / n, r.memory.grads / n, r.memory.optimizer / n) == pytest.approx((4, 4, state))


def test_fp32_zero_gathers_move_four_byte_weights():
    """ZeRO-1's parameter all-gather after the step moves the weights as held: 4 bytes each in fp32,
    twice bf16's; the gradients' reduce-scatter is 4 bytes either way (fsdp reduces in fp32)."""
    rs_ag = {d: simulate(from_dict(_gpt("megatron", d, zero=1))).comm_bytes_per_gpu["dp"]
             for d in ("bf16", "fp32")}
    n = simulate(from_dict(_gpt("megatron", "bf16", zero=0))).memory.params / 2      # parameters held
    # Ring reduce-scatter and all-gather each send (d - 1)/d of the buffer (d = 8).
    assert rs_ag["bf16"] == pytest.approx(n * 7 / 8 * (4 + 2), rel=1e-6)
    assert rs_ag["fp32"] == pytest.approx(n * 7 / 8 * (4 + 4), rel=1e-6)


def test_frozen_fp32_weights_stay_four_bytes():
    """Freezing drops gradients and optimizer state, not the weights: under fp32 a frozen layer's
    weights counted 2 bytes (params 5.657 GB whole, 4.243 GB with half the layers frozen)."""
    raw = _gpt("megatron", "fp32", zero=0)
    whole = simulate(from_dict(raw)).memory
    half = simulate(from_dict({**raw, "training": {**raw["training"], "frozen_layers": 12}})).memory
    assert half.params == pytest.approx(whole.params, rel=1e-12)
    assert half.grads < whole.grads and half.optimizer < whole.optimizer
