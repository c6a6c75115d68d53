"""Full recompute's working set during a layer's backward is its activations but the checkpointed
input (workloads/transformer/activations.recompute_working_bytes).  Found by an invariant hunt: a
one-layer stage held 2.1 MB more with full recompute than with none, one layer input counted twice
(the checkpoint, and again in the re-materialised layer)."""
from __future__ import annotations

import pytest

from explorer.scenario import from_dict
from explorer.simulate import simulate
from explorer.workloads.transformer.activations import (
    ActivationPolicy,
    kept_bytes,
    policy_for,
    recompute_working_bytes,
)

# The hunt's scenario: 32 GPUs, pp 4, dp 8, one micro-batch per pipeline (gbs 8), one layer a stage.
RAW = {"name": "one layer per stage",
       "model": {"layers": 4, "hidden": 1024, "heads": 16, "vocab": 1000, "seq_len": 1024, "dropout": True},
       "training": {"global_batch": 8, "micro_batch": 1, "recompute": "none", "dtype": "bf16",
                    "framework": "deepspeed"},
       "hardware": {"gpu": "a100-80gb"}, "cluster": {"gpus_per_node": 8, "nodes": 4},
       "parallelism": {"tp": 1, "pp": 4, "schedule": "gpipe", "zero": 2, "order": "tp-cp-ep-dp-pp"}}


def _with(recompute: str) -> dict:
    return {**RAW, "training": {**RAW["training"], "recompute": recompute}}


def test_the_working_set_is_the_layer_less_its_checkpoint():
    sc = from_dict(_with("full"))
    tokens = sc.training.micro_batch * sc.model.seq_len
    pol = policy_for(sc)
    everything = kept_bytes(sc, False, tokens, ActivationPolicy(fp8=pol.fp8, fp8_storage=pol.fp8_storage))
    checkpoint = kept_bytes(sc, False, tokens, pol)
    assert checkpoint == pytest.approx(tokens * 1024 * 2, rel=1e-12)      # the layer's bf16 input
    assert recompute_working_bytes(sc, False, tokens) == pytest.approx(everything - checkpoint, rel=1e-12)


def test_full_recompute_never_holds_more_than_none():
    none, full = (simulate(from_dict(_with(r))).memory.activations for r in ("none", "full"))
    assert full <= none
