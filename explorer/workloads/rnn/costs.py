"""What one GPU computes, keeps and sends for each LSTM layer of a GNMT-style model, one micro-batch
of ``b`` sentences of ``T`` tokens (source and target alike): the
:class:`~explorer.workloads.spec.LayerCost` every workload fills, each LSTM layer a pipeline layer of
its own (PipeDream's GNMT stages are runs of LSTM layers: msr-fiddle/pipedream,
runtime/translation/models/gnmt_large/gpus=16/stage*.py).

- GEMMs as cuDNN runs an LSTM (Appleyard, Kocisky & Blunsom, "Optimizing Performance of Recurrent
  Neural Networks on GPUs", arXiv 1604.01946, Sec. 3.1-3.2): the input projection of every time
  step is one GEMM (b T x 4h x input), since it does not depend on the recurrence; the recurrent
  projection W_hh h_{t-1} is one small GEMM per step (b x 4h x h), T of them one after another —
  the sequential dependency: each is priced by its own shape (explorer/physics/kernels.gemm_seconds:
  at b = 64 it reads its 4h x h weights every step and reaches a small share of the peak).  Backward:
  the data gradient of the recurrence runs step by step too (b x h x 4h per step); the weight
  gradients reduce over all steps at once (b T rows), as cudnnRNNBackwardWeights does.  The
  bidirectional first layer runs its two LSTMs one after the other (PipeDream's EmuBidirLSTM).
- Element-wise HBM passes per token and direction: cuDNN's fused pointwise kernel reads the two
  4h pre-activations and c_{t-1}, writes h_t, c_t and the 4h activated gates it keeps (15h); the
  dropout before a layer (p 0.2) reads, writes and writes a one-byte mask of its input; a residual
  add reads two and writes one of h; a concatenated input (2h) is read and written by torch.cat.
  Backward passes are twice the forward's (timing.BACKWARD_STREAM_FACTOR).
- Bahdanau attention after the decoder's first LSTM (seq2seq/models/attention.py): linear_q over
  the b T queries, linear_k over the b T keys (h x h each), the score's b x T x T x h tensor
  (query + key broadcast, + bias, tanh: 5 passes; then a mat-vec with linear_att, priced as a GEMM),
  softmax over the keys, and the context as a batched GEMM (T x h x T, b of them).  It keeps the
  tanh output (b T T h): the attention's activations grow with T^2.
- Activations kept per token and direction: the layer's input (its input GEMM's weight gradient)
  and cuDNN's reserve space (the 4h gates, c_t and h_t), the dropout mask.
- ``out_bytes``: what a pipeline stage ending with the layer sends forward (and receives back as a
  gradient): an encoder layer's output (b T x 2h after the bidirectional layer, else h) plus the
  embedded target sentence (b T h) that PipeDream's stage 0 embeds and the encoder stages pass on
  to the attention; a decoder layer's output and the attention context (2 x b T h).
"""
from __future__ import annotations

from functools import lru_cache

from ...config import Scenario
from ...config.rnn import Rnn
from ...physics.hardware import BYTES_PER_ELEMENT
from ...physics.work import ZERO_WORK, Gemm, Work
from ..spec import EdgeCost, LayerCost
from ..timing import BACKWARD_STREAM_FACTOR, GemmTimer
from . import arch
from .arch import GATES

POINTWISE_PER_H = 15    # cuDNN's fused LSTM cell: read 2 x 4h + h, write 2h + 4h kept gates
DROPOUT_PASSES = 2      # read + write
MASK_BYTES = 1          # dropout's bool mask per element
RESIDUAL_PASSES = 3     # read two, write one
CAT_PASSES = 2          # torch.cat: read + write
SCORE_PASSES = 5        # broadcast add (write), + normalize_bias (read + write), tanh (read + write)
SOFTMAX_PASSES = 3      # write scores, read for max/sum, read + write normalised (fused: 3)
RESERVE_PER_H = 6       # cuDNN reserve space per token: 4h gates, c_t, h_t
LOSS_PASSES = 3         # fp32 logits: write, max/sum read, read (the softmax cross-entropy)


@lru_cache(maxsize=64)
def network(r: Rnn) -> arch.Gnmt:
    """The layer table of ``r`` (cached: a scenario's layers are priced many times)."""
    return arch.build(r.depth, r.hidden, r.vocab)


def _lstm_work(timer: GemmTimer, x: arch.LstmLayer, b: int, t: int) -> tuple[Work, Work, Work]:
    """(forward, dgrad, wgrad) of the layer's LSTM GEMMs, all directions (module docstring)."""
    h4 = GATES * x.hidden
    f_in, d_in, w_in, _, _ = timer.passes([Gemm(b * t, h4, x.inp, fp8=False)])
    f_step, d_step, _, _, _ = timer.passes([Gemm(b, h4, x.hidden, fp8=False)])
    _, _, w_rec, _, _ = timer.passes([Gemm(b * t, h4, x.hidden, fp8=False)])
    k = x.directions
    return ((f_in + f_step.scaled(t)).scaled(k), (d_in + d_step.scaled(t)).scaled(k),
            (w_in + w_rec).scaled(k))


def _attention(timer: GemmTimer, h: int, b: int, t: int, e: int) -> tuple[Work, Work, Work, float]:
    """(forward, dgrad, wgrad, kept bytes) of Bahdanau attention over ``t`` keys for ``t`` queries."""
    proj = [Gemm(b * t, h, h, fp8=False), Gemm(b * t, h, h, fp8=False)]       # linear_q, linear_k
    f, d, w, _, _ = timer.passes(proj)
    cube = b * t * t * h                     # the score's query x key x unit tensor
    fs, ds, _, _, _ = timer.passes([Gemm(b * t * t, 1, h, fp8=False),          # tanh(...) @ linear_att
                                    Gemm(t, h, t, count=b, fp8=False)])        # context = softmax @ keys
    stream = SCORE_PASSES * cube * e + SOFTMAX_PASSES * b * t * t * e
    fwd = f + fs + Work(0.0, 0.0, stream)
    dgrad = d + ds.scaled(2) + Work(0.0, 0.0, BACKWARD_STREAM_FACTOR * stream)  # bmm: both operands
    kept = cube * e + b * t * t * e + 2 * b * t * h * e                       # tanh out, probs, q, k
    return fwd, dgrad, w, kept


def layer_costs(sc: Scenario) -> tuple[LayerCost, ...]:
    """Every LSTM layer's cost for one micro-batch on one GPU, encoder then decoder."""
    r = sc.model.rnn
    assert r is not None
    net = network(r)
    timer = GemmTimer(sc)
    e = BYTES_PER_ELEMENT[sc.training.dtype]
    b, t, h = sc.training.micro_batch, r.seq_len, r.hidden
    out = []
    for x in net.layers:
        fwd, dgrad, wgrad = _lstm_work(timer, x, b, t)
        per_tok = x.directions * POINTWISE_PER_H * h * e
        kept_tok = x.directions * (x.inp + RESERVE_PER_H * h) * e
        if x.dropout:
            per_tok += DROPOUT_PASSES * x.inp * e + x.inp * MASK_BYTES
            kept_tok += x.inp * MASK_BYTES
        if x.residual:
            per_tok += RESIDUAL_PASSES * h * e
        if x.directions == 2 or (not x.encoder and x.inp == 2 * h):
            per_tok += CAT_PASSES * 2 * h * e      # the two directions' outputs, or [x, context]
        kept = float(b * t * kept_tok)
        if x.attention:
            af, ad, aw, akept = _attention(timer, h, b, t, e)
            fwd, dgrad, wgrad, kept = fwd + af, dgrad + ad, wgrad + aw, kept + akept
        stream = b * t * per_tok
        sent = (x.out_width + h) if x.encoder else 2 * h
        out.append(LayerCost(
            fwd=fwd + Work(0.0, 0.0, stream),
            bwd_input=dgrad + Work(0.0, 0.0, BACKWARD_STREAM_FACTOR * stream),
            bwd_weight=wgrad, recompute=ZERO_WORK, attn_core_fwd=ZERO_WORK, expert_fwd=ZERO_WORK,
            params=float(x.params), expert_params=0.0, act_bytes=float(kept),
            tp_fwd=(), tp_bwd=(), tp_recompute=(), ep_fwd=(), ep_bwd=(), cp_kv_bytes=0.0,
            out_bytes=float(b * t * sent * e)))
    return tuple(out)


def input_cost(sc: Scenario) -> EdgeCost:
    """Before the first LSTM on the first chunk: the source and target embedding lookups (read a
    row, write it: b T h each); backward: their dense weight gradients (torch.nn.Embedding's
    default: a vocab x h gradient zeroed and scattered into, per table)."""
    r = sc.model.rnn
    assert r is not None
    e = BYTES_PER_ELEMENT[sc.training.dtype]
    b, t, h = sc.training.micro_batch, r.seq_len, r.hidden
    lookups = 2 * 2 * b * t * h * e
    grads = 2 * (r.vocab * h * e + 2 * b * t * h * e)
    net = network(r)
    return EdgeCost(Work(0.0, 0.0, lookups), ZERO_WORK, Work(0.0, 0.0, grads),
                    float(net.embedding_params), 0.0)


def loss_cost(sc: Scenario) -> EdgeCost:
    """After the last LSTM on the last chunk: the classifier (b T x vocab x h GEMM) and the fp32
    softmax cross-entropy over the vocabulary; keeps its input and the fp32 logits."""
    r = sc.model.rnn
    assert r is not None
    e = BYTES_PER_ELEMENT[sc.training.dtype]
    b, t, h, v = sc.training.micro_batch, r.seq_len, r.hidden, r.vocab
    f, d, w, _, _ = GemmTimer(sc).passes([Gemm(b * t, v, h, fp8=False)])
    loss = LOSS_PASSES * b * t * v * 4
    kept = b * t * (h * e + v * 4)
    return EdgeCost(f + Work(0.0, 0.0, loss), d + Work(0.0, 0.0, loss), w,
                    float(network(r).classifier_params), float(kept))
