"""The recurrent family as the registry sees it (explorer/workloads/registry.py): a scenario whose
model has an ``rnn`` section (or ``model.kind: rnn``).  A GNMT-style LSTM encoder-decoder: every
LSTM layer its own layer kind (costs.py), the embeddings before the first and the classifier and
loss after the last.  Data and pipeline parallelism (PipeDream's hybrid, with per-stage replicas):
the layers differ (the bidirectional layer, the 2h-input layers, the attention), so the stage split
balances their real costs and each stage sends its last layer's output (LayerCost.out_bytes);
sentences as the samples, tokens per second as the rate.
"""
from __future__ import annotations

from ...config import Model, Scenario
from ..family import Nouns
from ..spec import WorkloadSpec
from . import costs


def recognises(m: Model) -> bool:
    """A model with an ``rnn`` section (model.rnn) is a recurrent translation model."""
    return m.rnn is not None


def spec(sc: Scenario) -> WorkloadSpec:
    """One kind per LSTM layer, each a run of one, in forward order, and the two edges."""
    layers = costs.layer_costs(sc)
    return WorkloadSpec(layers, tuple((i, 1) for i in range(len(layers))), costs.input_cost(sc),
                        costs.loss_cost(sc), distinct_layers=True)


def params(sc: Scenario) -> float:
    """Every trainable parameter (arch.Gnmt.params: GNMT-16 277,718,593, GNMT-8 193,766,977)."""
    assert sc.model.rnn is not None
    return float(costs.network(sc.model.rnn).params)


def powersgd_factor(m: Model, tp: int, rank: int) -> float:
    """(P + Q elements + uncompressed vectors) / (gradient elements): each weight matrix sends
    min(r (m + n), m n) elements (Vogels et al., PowerSGD, NeurIPS 2019, Sec. 3); biases and the
    attention's vectors go as they are.  ``tp`` is 1 (no tensor parallelism)."""
    assert m.rnn is not None
    net = costs.network(m.rnn)
    mats = sum(min(rank * (a + b), a * b) for a, b in net.matrices)
    return min(1.0, (mats + net.params - sum(a * b for a, b in net.matrices)) / net.params)


def nouns(m: Model) -> Nouns:
    """Tokens per second, sentences per sample; layers are LSTM layers."""
    assert m.rnn is not None
    return Nouns("tokens", "sentences", f"LSTM layers of a {m.rnn.label}", "embeddings", "classifier")


def caption(m: Model) -> str:
    """What the transformer fields the loader derived are for this model."""
    r = m.rnn
    assert r is not None
    return (f"A {r.label}: {r.per_side} encoder and {r.per_side} decoder LSTM layers of {r.hidden}, "
            f"attention, a {r.vocab}-token vocabulary, {r.seq_len} tokens per sentence; the batch counts "
            "sentences. Trains data- and pipeline-parallel (tp, cp, ep 1).")


CONTROLS = (
    ("model.rnn.depth", "LSTM layers (GNMT-8, GNMT-16)", "int"),
    ("model.rnn.hidden", "LSTM hidden size", "int"),
    ("model.rnn.vocab", "Vocabulary", "int"),
    ("model.rnn.seq_len", "Tokens per sentence", "int"),
)
