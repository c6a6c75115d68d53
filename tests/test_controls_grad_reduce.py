"""``communication.grad_reduce_dtype``: the dtype of the data-parallel gradient reduction and of
Megatron-Core's gradient buffer (main_grad), which Megatron-LM allocates in fp32 under bf16 unless
--grad-reduce-in-bf16 (megatron/training/arguments.py; Megatron-Core
distributed/distributed_data_parallel.py: ``torch.float if grad_reduce_in_fp32 else param.dtype``).
NeMo's FP8 performance recipes reduce in bf16; a held-out style check found its rows' memory and
exposed dp time unreachable without this field (Mixtral 8x7B on B200: 0.48 s of fp32 dp).

Closed forms on teaching-8gpu (Megatron, bf16, ZeRO-1, dp 2): the gradient buffer is 4 or 2 bytes
per parameter held, the reduce-scatter and all-gather move 4 or 2 bytes per gradient element."""
from __future__ import annotations

import pytest

from explorer.scenario import load
from explorer.simulate import simulate
from explorer.taskgraph.make import iteration_builder

from conftest import ROOT

TEACH = ROOT / "scenarios" / "teaching-8gpu.yaml"
COVERED = {"communication.grad_reduce_dtype": "test_bf16_reduction_halves_the_gradient_buffer_and_dp_bytes"}


def _run(value: str, **extra):
    return simulate(load(TEACH, {"communication.grad_reduce_dtype": value, **extra}))


def test_bf16_reduction_halves_the_gradient_buffer_and_dp_bytes():
    auto, fp32, bf16 = _run("auto"), _run("fp32"), _run("bf16")
    # Megatron reduces bf16 training in fp32 by default: auto is fp32.
    assert auto.memory.grads == fp32.memory.grads
    assert auto.comm_bytes_per_gpu["dp"] == fp32.comm_bytes_per_gpu["dp"]
    held = sum(c.params + c.expert_params for c, _ in iteration_builder(load(TEACH)).rank_chunks(0))
    assert fp32.memory_by_class[0].grads == pytest.approx(4 * held, rel=1e-12)
    assert bf16.memory_by_class[0].grads == pytest.approx(2 * held, rel=1e-12)
    assert bf16.comm_bytes_per_gpu["dp"] == pytest.approx(fp32.comm_bytes_per_gpu["dp"] / 2, rel=1e-12)
    assert bf16.iteration_time_s <= fp32.iteration_time_s


def test_a_framework_without_a_reduce_dtype_buffer_keeps_bf16_gradients():
    """FSDP/DeepSpeed hold the bf16 gradient whatever the wire carries: fp32 doubles the bytes only."""
    bf16 = _run("bf16", **{"training.framework": "fsdp"})
    fp32 = _run("fp32", **{"training.framework": "fsdp"})
    assert fp32.memory.grads == bf16.memory.grads
    assert fp32.comm_bytes_per_gpu["dp"] == pytest.approx(2 * bf16.comm_bytes_per_gpu["dp"], rel=1e-12)
