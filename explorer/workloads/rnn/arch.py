"""The layer table of a GNMT-style model (Wu et al., "Google's Neural Machine Translation System",
arXiv 1609.08144, Sec. 3, Fig. 1) as MLPerf's reference and PipeDream build it
(msr-fiddle/pipedream, runtime/translation/models/gnmt_large/gpus=1/gnmt_large.py for GNMT-16,
.../gnmt/gpus=1/gnmt.py for GNMT-8; seq2seq/models/{encoder,decoder,attention}.py): pure arithmetic
on the architecture, per token; the costs are in :mod:`explorer.workloads.rnn.costs`.

Encoder (depth/2 LSTM layers): layer 1 bidirectional (EmuBidirLSTM: two LSTMs of h over the
embedding, outputs concatenated to 2h), layer 2 LSTM(2h -> h), layers 3.. LSTM(h -> h) with a residual
add.  Decoder (depth/2): layer 1 LSTM(h -> h) followed by Bahdanau attention over the encoder's
output (RecurrentAttention), layers 2.. LSTM(2h -> h) on their input concatenated with the attention
context, residual from layer 3 on.  Dropout (p = 0.2) before every LSTM layer but the first.
Embeddings (source and target) and the classifier (h -> vocab) are the edges.

One LSTM (torch.nn.LSTM, one layer, its documentation): weights W_ih (4h x input) and W_hh (4h x h),
two bias vectors b_ih and b_hh (4h each): 4h (input + h) + 8h parameters; per token and step the
four gates take 4h (input + h) multiply-accumulates = 2 x 4h x (input + h) FLOPs.
Bahdanau attention with normalisation (attention.py): linear_q and linear_k (h x h, no bias),
linear_att, normalize_bias (h each) and normalize_scalar (1): 2h^2 + 2h + 1 parameters.
"""
from __future__ import annotations

from dataclasses import dataclass

GATES = 4                     # input, forget, cell, output (Hochreiter & Schmidhuber 1997)
BIAS_VECTORS = 2              # torch.nn.LSTM keeps b_ih and b_hh


def lstm_params(inp: int, h: int) -> int:
    """Parameters of one single-direction LSTM layer: 4h (input + h) + 2 x 4h (torch.nn.LSTM)."""
    return GATES * h * (inp + h) + BIAS_VECTORS * GATES * h


def lstm_flops_per_token(inp: int, h: int) -> int:
    """Forward FLOPs of one LSTM step for one token: 2 x 4h x (input + h) (the gate GEMMs)."""
    return 2 * GATES * h * (inp + h)


def attention_params(h: int) -> int:
    """Bahdanau attention's parameters (normalised): linear_q, linear_k, linear_att, bias, scalar."""
    return 2 * h * h + 2 * h + 1


@dataclass(frozen=True)
class LstmLayer:
    """One pipeline layer: ``directions`` LSTMs of ``hidden`` over ``inp`` features per token,
    on the source side (encoder) or the target side (decoder); ``attention`` when the layer runs
    Bahdanau attention after its LSTM (the decoder's first); ``residual`` when its input is added to
    its output; ``dropout`` when a dropout precedes it."""

    name: str
    encoder: bool
    inp: int
    hidden: int
    directions: int
    attention: bool
    residual: bool
    dropout: bool

    @property
    def params(self) -> int:
        """Its LSTMs' parameters, and the attention's."""
        extra = attention_params(self.hidden) if self.attention else 0
        return self.directions * lstm_params(self.inp, self.hidden) + extra

    @property
    def lstm_flops_per_token(self) -> int:
        """Forward FLOPs of its LSTM gates per token (both directions)."""
        return self.directions * lstm_flops_per_token(self.inp, self.hidden)

    @property
    def out_width(self) -> int:
        """Features per token of its output: 2h after the bidirectional layer, else h."""
        return self.directions * self.hidden


@dataclass(frozen=True)
class Gnmt:
    """The whole model: its LSTM layers in order (encoder then decoder), vocabulary, hidden size."""

    depth: int
    hidden: int
    vocab: int
    layers: tuple[LstmLayer, ...]

    @property
    def embedding_params(self) -> int:
        """Source and target embeddings (not shared: two torch.nn.Embedding of vocab x h)."""
        return 2 * self.vocab * self.hidden

    @property
    def classifier_params(self) -> int:
        """The classifier, a Linear(h, vocab) with bias."""
        return self.hidden * self.vocab + self.vocab

    @property
    def params(self) -> int:
        """Every trainable parameter (GNMT-16 at h 1024, vocab 32,320: 277,718,593; GNMT-8: 193,766,977)."""
        return sum(x.params for x in self.layers) + self.embedding_params + self.classifier_params

    @property
    def matrices(self) -> tuple[tuple[int, int], ...]:
        """Every weight matrix (rows, columns), as PowerSGD compresses them (Vogels et al., NeurIPS
        2019, Sec. 3); biases and vectors are not."""
        out: list[tuple[int, int]] = [(self.vocab, self.hidden)] * 2 + [(self.vocab, self.hidden)]
        for x in self.layers:
            out += [(GATES * x.hidden, x.inp), (GATES * x.hidden, x.hidden)] * x.directions
            if x.attention:
                out += [(x.hidden, x.hidden)] * 2
        return tuple(out)


def build(depth: int, hidden: int, vocab: int) -> Gnmt:
    """The layer table of GNMT-``depth`` (depth/2 encoder and depth/2 decoder LSTM layers)."""
    h, side = hidden, depth // 2
    layers = [LstmLayer("enc1 (bidirectional)", True, h, h, 2, False, False, False)]
    for i in range(2, side + 1):
        layers.append(LstmLayer(f"enc{i}", True, 2 * h if i == 2 else h, h, 1, False, i > 2, True))
    layers.append(LstmLayer("dec1 (attention)", False, h, h, 1, True, False, False))
    for i in range(2, side + 1):
        layers.append(LstmLayer(f"dec{i}", False, 2 * h, h, 1, False, i > 2, True))
    return Gnmt(depth, hidden, vocab, tuple(layers))
