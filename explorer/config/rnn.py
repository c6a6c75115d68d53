"""The recurrent translation model section (``model.rnn``, ``model.kind: rnn``): a GNMT-style
LSTM encoder-decoder with attention (Wu et al., "Google's Neural Machine Translation System",
arXiv 1609.08144, Sec. 3), as MLPerf's reference and PipeDream train it (msr-fiddle/pipedream,
runtime/translation/models/gnmt{,_large}/gpus=1/*.py: GNMT-8 and GNMT-16), priced by
explorer/workloads/rnn/.

``depth`` LSTM layers in all, half in the encoder and half in the decoder: the encoder's first is
bidirectional (two LSTMs of h), its second takes the 2h concatenation, the others h with a residual
add; the decoder's first runs Bahdanau attention over the encoder's output, the others take their
input concatenated with the attention context (2h) and add a residual.  Shared source/target
vocabulary, a classifier over it.

The loader derives the transformer fields from it (:func:`derive`): layers = depth (each LSTM layer
a pipeline layer), hidden = hidden, vocab = vocab, seq_len = seq_len (tokens per sentence, so
tokens/s over seq_len counts sentences), one head; :func:`rule_rnn` refuses what the family does
not model.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .model_parts import refuse_parts
from .schema import ScenarioError, build


@dataclass(frozen=True)
class Rnn:
    """A GNMT-style model (defaults: GNMT-8 of MLPerf's reference, PipeDream's "GNMT-8")."""

    depth: int = field(default=8, metadata={"min": 4, "max": 128, "doc": (
        "LSTM layers in all, half encoder and half decoder (even): 8 = GNMT-8 (4 + 4), 16 = GNMT-16 "
        "(8 + 8)")})
    hidden: int = field(default=1024, metadata={"min": 1, "max": 65536, "doc": "LSTM hidden size h"})
    vocab: int = field(default=32320, metadata={
        "min": 1, "max": 10_000_000, "doc": "shared source/target vocabulary (MLPerf's WMT16 BPE: 32,320)"})
    seq_len: int = field(default=50, metadata={
        "min": 1, "max": 100_000,
        "doc": "tokens per sentence, source and target alike (MLPerf's max_length_train: 50)"})

    @property
    def per_side(self) -> int:
        """LSTM layers in the encoder (= in the decoder)."""
        return self.depth // 2

    @property
    def label(self) -> str:
        """What the pages call it: GNMT-8, GNMT-16 (the depth)."""
        return f"GNMT-{self.depth}"


RNN_FIELD = field(default=None, metadata={
    "doc": "a recurrent translation model (GNMT-style LSTM encoder-decoder, model.kind rnn) instead of a "
           "transformer; absent = a transformer"})

# The transformer fields an RNN derives (as a convnet's, loading.CONV_DERIVED): a pipeline layer is
# one LSTM layer, a sample one sentence of seq_len tokens.
RNN_DERIVED = ("layers", "hidden", "heads", "kv_heads", "ffn_hidden", "seq_len", "vocab", "dropout",
               "tied_embeddings")


def derive(model: dict[str, Any]) -> dict[str, Any]:
    """``model`` (a raw mapping with model.kind rnn or a model.rnn section) with its rnn section (the
    defaults when absent) and the transformer fields it derives; a given one that disagrees, an odd
    depth or another family's section is refused, naming the field."""
    if model.get("kind") not in (None, "rnn"):
        raise ScenarioError("model.kind", f"{model['kind']!r} but model.rnn is set; use rnn, or remove "
                                          "model.rnn")
    for part in ("conv", "dlrm", "gnn"):
        if model.get(part) is not None:
            raise ScenarioError(f"model.{part}", "is another family's section; an rnn model has none "
                                                 "(remove it)")
    raw = model.get("rnn") or {}
    r = build(Rnn, raw, "model.rnn")
    if r.depth % 2:
        raise ScenarioError("model.rnn.depth", f"{r.depth} is odd; give an even count (half encoder, "
                                               "half decoder: 8 or 16)")
    values = (r.depth, r.hidden, 1, 1, r.hidden, r.seq_len, r.vocab, False, False)
    derived = dict(zip(RNN_DERIVED, values, strict=True))
    for k, v in derived.items():
        if model.get(k) is not None and model[k] != v:
            raise ScenarioError(f"model.{k}", f"{model[k]!r} does not match model.rnn (it gives {v!r}); "
                                              "leave it out, it is derived from model.rnn")
    return {**model, "kind": "rnn", "rnn": raw, **derived}


def rule_rnn(sc: Any) -> None:
    """An RNN trains data- and pipeline-parallel (PipeDream's hybrid): no tensor, context or expert
    parallelism, no token slices, no transformer parts, no recomputation, no FP8."""
    m, p, tr = sc.model, sc.parallelism, sc.training
    if getattr(m, "rnn", None) is None:
        return
    why = "an RNN (model.rnn) trains data- and pipeline-parallel here"
    for dim in ("tp", "cp", "ep", "token_slices"):
        if getattr(p, dim) != 1:
            raise ScenarioError(f"parallelism.{dim}", f"{getattr(p, dim)}: {why}; set it to 1 (dp, pp "
                                                      "and stage_replicas are the levers)")
    refuse_parts(m, ("moe", "mla", "mtp_depth"), f"is a transformer part; {why} without it (remove it)")
    if tr.recompute != "none":
        raise ScenarioError("training.recompute", f"{tr.recompute!r}: recomputing LSTM layers is not "
                                                  "modelled; use none")
    if tr.dtype == "fp8":
        raise ScenarioError("training.dtype", "'fp8': LSTMs train in fp16/bf16 mixed precision or fp32 "
                                              "here; use bf16, fp16 or fp32")
