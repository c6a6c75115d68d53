"""Direction tests for the memory-side fields of issue 10: dropout and multi-token prediction.

Each test changes one field and asserts the direction the activation accounting demands
(explorer/workloads/transformer/activations.py), strictly, and that what the field must not touch stays equal
(collected by tests/test_controls.py through ``COVERED``)."""
from __future__ import annotations

from functools import cache

import pytest

from explorer.scenario import apply_overrides, from_dict
from explorer.simulate import Result, simulate

COVERED = {
    "model.dropout": "test_dropout_off_lowers_activation_memory_only",
    "model.mtp_depth": "test_mtp_depth_raises_the_last_stage_memory",
}


def _raw() -> dict:
    """A 4-layer GPT-like model on 2 pipeline stages of 4 GPUs (TP 4), two layers per stage (fixed,
    so that a field changing compute cannot move layers between stages)."""
    return {"model": {"layers": 4, "hidden": 2048, "heads": 16, "vocab": 32000, "seq_len": 2048},
            "training": {"global_batch": 8, "micro_batch": 1},
            "hardware": {"gpu": "h100-sxm"}, "cluster": {"gpus_per_node": 8, "nodes": 1},
            "parallelism": {"tp": 4, "pp": 2, "stage_layers": [2, 2]}}


@cache
def _sim(**overrides) -> Result:
    dotted = {k.replace("__", "."): v for k, v in overrides.items()}
    return simulate(from_dict(apply_overrides(_raw(), dotted)))


def test_dropout_off_lowers_activation_memory_only():
    """Korthikanti Sec. 4.1: dropout keeps a 1-byte mask per hidden element twice per layer and,
    without FlashAttention, its s x s mask and output; without dropout these go.  Weights, gradients
    and optimizer state, and the GEMM work, do not depend on dropout."""
    for flash in (True, False):
        on = _sim(model__dropout=True, training__flash_attention=flash)
        off = _sim(model__dropout=False, training__flash_attention=flash)
        for a, b in zip(on.memory_by_class, off.memory_by_class, strict=True):
            assert b.activations < a.activations
            assert (b.params, b.grads, b.optimizer) == (a.params, a.grads, a.optimizer)
        assert off.mfu * off.iteration_time_s == pytest.approx(on.mfu * on.iteration_time_s, rel=1e-12)


def test_mtp_depth_raises_the_last_stage_memory():
    """DeepSeek-V3 Sec. 2.2: each MTP module adds a transformer block, a 2h -> h projection and a
    pass through the output head on the last stage: more parameters and more activations there,
    nothing on the first stage."""
    base = _sim(model__mtp_depth=0)
    one, two = _sim(model__mtp_depth=1), _sim(model__mtp_depth=2)
    last = [r.memory_by_class[-1] for r in (base, one, two)]
    assert last[0].activations < last[1].activations < last[2].activations
    assert last[0].params < last[1].params < last[2].params
    assert base.memory_by_class[0] == one.memory_by_class[0]
