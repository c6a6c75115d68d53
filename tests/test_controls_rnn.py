"""Direction tests for the GNMT fields (``model.rnn.*``, explorer/workloads/rnn/): each moves the
GPU's work, the data-parallel gradient bytes or the pipeline's activation bytes the way the closed
forms say (more layers or a wider hidden size: more parameters to reduce and more LSTM FLOPs; a
bigger vocabulary: bigger embeddings and classifier; longer sentences: more tokens sent between
stages and attention growing as T^2).  Collected by tests/test_controls.py through ``COVERED``."""
from __future__ import annotations

from functools import cache

from explorer.scenario import apply_overrides, from_dict
from explorer.simulate import Result, simulate

COVERED = {
    "model.rnn.depth": "test_more_lstm_layers_more_work_and_more_gradient_bytes",
    "model.rnn.hidden": "test_a_wider_hidden_size_more_flops_gradients_and_activations",
    "model.rnn.vocab": "test_a_bigger_vocabulary_more_gradient_bytes_and_classifier_work",
    "model.rnn.seq_len": "test_longer_sentences_send_more_between_stages",
}


def _raw() -> dict:
    """GNMT-8 on 4 A100s in one node: 2 stages x 2 replicas, 32 sentences a micro-batch."""
    return {"model": {"kind": "rnn"}, "training": {"global_batch": 256, "micro_batch": 32, "dtype": "bf16"},
            "hardware": {"gpu": "a100-80gb"}, "cluster": {"gpus_per_node": 4, "nodes": 1},
            "parallelism": {"pp": 2, "dp": 2}}


@cache
def _sim(items: tuple = ()) -> Result:
    return simulate(from_dict(apply_overrides(_raw(), dict(items))))


def sim(**kv) -> Result:
    return _sim(tuple(sorted((k.replace("__", "."), v) for k, v in kv.items())))


def test_more_lstm_layers_more_work_and_more_gradient_bytes():
    base, deep = sim(), sim(model__rnn__depth=16)
    assert deep.comm_bytes_per_gpu["dp"] > base.comm_bytes_per_gpu["dp"]
    assert deep.breakdown_s["compute"] > 1.5 * base.breakdown_s["compute"]
    assert deep.iteration_time_s > base.iteration_time_s


def test_a_wider_hidden_size_more_flops_gradients_and_activations():
    base, wide = sim(), sim(model__rnn__hidden=2048)
    assert wide.comm_bytes_per_gpu["dp"] > 3 * base.comm_bytes_per_gpu["dp"] / 2
    assert wide.comm_bytes_per_gpu["pp"] == 2 * base.comm_bytes_per_gpu["pp"]      # b T 2h x bytes
    assert wide.breakdown_s["compute"] > base.breakdown_s["compute"]
    assert wide.memory.as_GB()["activations"] > base.memory.as_GB()["activations"]


def test_a_bigger_vocabulary_more_gradient_bytes_and_classifier_work():
    base, big = sim(), sim(model__rnn__vocab=64000)
    assert big.comm_bytes_per_gpu["dp"] > base.comm_bytes_per_gpu["dp"]
    assert big.comm_bytes_per_gpu["pp"] == base.comm_bytes_per_gpu["pp"]           # activations alike
    assert big.breakdown_s["compute"] > base.breakdown_s["compute"]


def test_longer_sentences_send_more_between_stages():
    base, long = sim(), sim(model__rnn__seq_len=100)
    assert long.comm_bytes_per_gpu["pp"] == 2 * base.comm_bytes_per_gpu["pp"]      # b T 2h x bytes
    assert long.comm_bytes_per_gpu["dp"] == base.comm_bytes_per_gpu["dp"]          # same weights
    assert long.breakdown_s["compute"] > 2 * base.breakdown_s["compute"]           # attention ~ T^2
    assert long.memory.as_GB()["activations"] > 2 * base.memory.as_GB()["activations"]
