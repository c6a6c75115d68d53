"""What one GPU computes, stores and communicates for one layer and one micro-batch.

Sources, cited at each formula:
- FLOPs: Narayanan et al., SC21 (arXiv 2104.04473), Sec. 5.1 / Eq. 3 — 24*B*s*h^2 + 4*B*s^2*h per
  layer forward, backward twice the forward, logits 2*B*s*h*V.  GQA, SwiGLU and MoE generalise the
  weight GEMM term by counting each matrix 2*tokens*in*out.
- Activation memory: Korthikanti et al., "Reducing Activation Recomputation in Large Transformer
  Models" (arXiv 2205.05198), Sec. 4, Table 2: s*b*h*(34 + 5*a*s/h) bytes per layer, with
  10*s*b*h replicated across tensor-parallel ranks unless sequence parallelism splits it.
- Tensor-parallel communication: Shoeybi et al., Megatron-LM (arXiv 1909.08053), Sec. 3: two
  all-reduces forward and two backward per layer; with sequence parallelism (Korthikanti Sec. 4.2.2)
  each becomes an all-gather plus a reduce-scatter of the same total volume.
- Expert parallelism: GShard (Lepikhin et al. 2020) dispatch and combine all-to-all, each moving
  tokens x top_k x hidden elements per GPU; context parallelism: ring attention (Liu et al. 2023)
  passing K and V blocks around the CP ring in cp-1 steps.
All byte figures are per GPU and per micro-batch; FLOPs likewise.
"""
from __future__ import annotations

from dataclasses import dataclass

from .hardware import BYTES_PER_ELEMENT
from .scenario import Scenario

# Element-wise passes per token of hidden width in one layer's forward (reads + writes, in
# elements): LayerNorm 2x(1 read + 1 write), residual add 2x(2 reads + 1 write), dropout
# 2x(1 read + 1 write + 0.5 mask).  This is the part sequence parallelism splits across TP ranks.
ELEMENTWISE_PASSES_REPLICATED = 15.0
# Non-fused attention (no FlashAttention): scores written, softmax read+write, dropout read+write
# plus mask, probabilities read by the value GEMM -> about 6.5 passes over the a*s*s score tensor.
SCORE_PASSES = 6.5
# Backward element-wise traffic relative to forward: read the saved input and the incoming
# gradient, write the outgoing gradient (twice the forward's read+write).
BACKWARD_STREAM_FACTOR = 2.0
# Activation operands of a layer's weight GEMMs, in tensors of tokens x h/tp elements: the four
# GEMMs (QKV, output projection, MLP up, MLP down) each read an input and write an output.  An
# estimate of their HBM operand traffic for the roofline (GEMMs with h/tp-wide operands on the
# sharded side; the MLP's wider f-side tensors are in the streaming term), not a measured value.
GEMM_ACTIVATION_TENSORS = 8
# MoE token permutation: every token copy's hidden vector is read and written when it is permuted
# into expert order before dispatch and again when it is unpermuted after combine (Megatron-Core's
# ``moe_permute`` / ``moe_unpermute``): 2 x (1 read + 1 write) = 4 passes of h elements.
MOE_PERMUTE_PASSES = 4


@dataclass(frozen=True)
class Work:
    """Work of one kernel group: GEMM FLOPs, GEMM operand bytes and streaming (element-wise) bytes."""

    gemm_flops: float = 0.0
    gemm_bytes: float = 0.0
    stream_bytes: float = 0.0

    def __add__(self, other: Work) -> Work:
        return Work(self.gemm_flops + other.gemm_flops, self.gemm_bytes + other.gemm_bytes,
                    self.stream_bytes + other.stream_bytes)

    def scaled(self, k: float) -> Work:
        return Work(self.gemm_flops * k, self.gemm_bytes * k, self.stream_bytes * k)


ZERO_WORK = Work()


@dataclass(frozen=True)
class Collective:
    """One collective call: operation name and nccl-tests buffer size in bytes."""

    op: str
    size_bytes: float


@dataclass(frozen=True)
class LayerCost:
    """One transformer layer, one micro-batch, one GPU."""

    fwd: Work
    bwd_input: Work            # input gradients (dgrad), incl. the attention core backward
    bwd_weight: Work           # weight gradients (wgrad)
    recompute: Work            # forward work repeated in backward, per the recompute policy
    attn_core_fwd: Work        # the s x s attention part of fwd (what ring attention overlaps with)
    expert_fwd: Work           # the routed-expert GEMMs of fwd (what load imbalance stretches)
    params: float              # parameters held by this GPU (dense part)
    expert_params: float       # parameters held by this GPU that belong to experts
    act_bytes: float           # activation bytes kept from forward to backward
    tp_fwd: tuple[Collective, ...]
    tp_bwd: tuple[Collective, ...]
    tp_recompute: tuple[Collective, ...]
    ep_fwd: tuple[Collective, ...]
    ep_bwd: tuple[Collective, ...]
    cp_kv_bytes: float         # bytes of K and V sent per ring-attention step (forward)


@dataclass(frozen=True)
class EdgeCost:
    """Embedding (first pipeline chunk) or output layer + loss (last chunk) on one GPU."""

    fwd: Work
    bwd_input: Work
    bwd_weight: Work
    params: float
    act_bytes: float


def _mlp_matrices(ffn_kind: str) -> int:
    # GeLU MLP: up and down projections; SwiGLU (Shazeer 2020): gate, up and down.
    return 3 if ffn_kind == "swiglu" else 2


def layer_cost(sc: Scenario, moe_layer: bool) -> LayerCost:
    """Cost of one (dense or MoE) transformer layer for one micro-batch on one GPU."""
    m, p, tr = sc.model, sc.parallelism, sc.training
    t, cp = p.tp, p.cp
    e = BYTES_PER_ELEMENT["bf16" if tr.dtype == "fp8" else tr.dtype]  # fp8 GEMMs keep bf16 activations
    we = BYTES_PER_ELEMENT[tr.dtype]
    b, s, h, a = tr.micro_batch, m.seq_len, m.hidden, m.heads
    r = m.kv_heads / m.heads
    # Tokens of one pipeline unit on this GPU: the sequence shard (cp), cut into token slices
    # (TeraPipe) when asked; attention still spans the whole sequence s (the slices' KV cache).
    tokens = b * s / cp / p.token_slices
    mats = _mlp_matrices(m.ffn_kind)
    sp = p.sequence_parallel and t > 1

    # Weight GEMMs, forward: 2 * tokens * in * out each (Narayanan SC21 Sec. 5.1).
    attn_params = (h * (h + 2 * h * r) + h * h) / t         # QKV (GQA-shrunk K,V) + output projection
    if moe_layer:
        moe = m.moe
        expert_params_one = mats * h * moe.expert_ffn_hidden / t
        local_experts = moe.experts / p.ep
        mlp_params_held = moe.shared_experts * expert_params_one + h * moe.experts  # shared + router
        expert_params = local_experts * expert_params_one
        # Balanced routing: every EP rank processes tokens*top_k token-expert pairs (GShard).
        mlp_flops = (2 * tokens * (moe.top_k + moe.shared_experts) * expert_params_one
                     + 2 * tokens * h * moe.experts)
        routed_flops = 2 * tokens * moe.top_k * expert_params_one
        mlp_stream = tokens * moe.top_k * (mats * moe.expert_ffn_hidden / t + MOE_PERMUTE_PASSES * h) \
            + tokens * moe.shared_experts * mats * moe.expert_ffn_hidden / t
        mlp_act_sbh = 3 + (moe.top_k + moe.shared_experts) * (2 * mats) * moe.expert_ffn_hidden / h
    else:
        mlp_params_held = mats * h * m.ffn_hidden / t
        expert_params = 0.0
        mlp_flops = 2 * tokens * mlp_params_held
        mlp_stream = tokens * (mats * m.ffn_hidden / t)      # activation function reads and writes
        mlp_act_sbh = 3 + 2 * mats * m.ffn_hidden / h        # Korthikanti: 19 for GeLU, f = 4h
        routed_flops = 0.0
    weight_flops = 2 * tokens * attn_params + mlp_flops
    # Attention core QK^T and PV: 4*s*h FLOPs per token (full causal square, the SC21 convention).
    core_flops = 4 * tokens * s * h / t
    norm_params = 4 * h                  # two LayerNorms, gain + bias of h each, replicated over TP
    params = attn_params + mlp_params_held + norm_params
    weight_bytes = (attn_params + mlp_params_held + expert_params) * we   # each weight read once
    act_io = tokens * h * e * GEMM_ACTIVATION_TENSORS / t

    replicated = ELEMENTWISE_PASSES_REPLICATED * tokens * h / (t if sp else 1)
    scores = 0.0 if tr.flash_attention else SCORE_PASSES * a * tokens * s / t
    fwd_stream = (replicated + mlp_stream + scores) * e
    fwd = Work(weight_flops + core_flops, weight_bytes + act_io, fwd_stream)
    attn_core = Work(core_flops, 0.0, scores * e)
    weight_fwd = Work(weight_flops, weight_bytes + act_io, 0.0)
    bwd_input = Work(weight_flops + 2 * core_flops, weight_bytes + act_io,
                     BACKWARD_STREAM_FACTOR * fwd_stream)
    bwd_weight = weight_fwd

    # Activation memory (Korthikanti Table 2), bytes = sbh-coefficients x tokens x h x e/2
    # (the paper's coefficients are for 2-byte activations).
    attn_act_sbh = 7 + 4 * r
    total_sbh = attn_act_sbh + mlp_act_sbh + 4
    score_act = 0.0 if tr.flash_attention else 5 * a * s / h   # coefficient of sbh, before /t
    if tr.recompute == "full":
        act = 2 * tokens * h / (t if sp else 1)
    else:
        keep_scores = tr.recompute == "none" and not tr.flash_attention
        if sp:
            act = tokens * h / t * (total_sbh + (score_act if keep_scores else 0))
        else:
            act = tokens * h * (10 + (total_sbh - 10) / t + (score_act / t if keep_scores else 0))
    act *= e / 2

    if tr.recompute == "full":
        recompute = fwd
    elif tr.recompute == "selective":
        recompute = attn_core
    else:
        recompute = ZERO_WORK

    size = tokens * h * e                      # one full activation tensor of this GPU's tokens
    if t == 1:
        tp_fwd: tuple[Collective, ...] = ()
    elif sp:
        tp_fwd = (Collective("all-gather", size), Collective("reduce-scatter", size)) * 2
    else:
        tp_fwd = (Collective("all-reduce", size),) * 2
    tp_bwd = tp_fwd
    tp_recompute = tp_fwd if tr.recompute == "full" else ()
    if moe_layer and p.ep > 1:
        # Dispatch + combine; with TP the tokens are split over the TP ranks first (Megatron-Core
        # requires sequence parallelism with TP x EP).
        a2a = Collective("all-to-all", tokens / t * m.moe.top_k * h * e)
        ep_fwd: tuple[Collective, ...] = (a2a, a2a)
    else:
        ep_fwd = ()
    kv_bytes = 2 * tokens * h * r / t * e if cp > 1 else 0.0
    return LayerCost(fwd, bwd_input, bwd_weight, recompute, attn_core, Work(routed_flops), params,
                     expert_params, act, tp_fwd, tp_bwd, tp_recompute, ep_fwd, ep_fwd, kv_bytes)


def embedding_cost(sc: Scenario) -> EdgeCost:
    """Input embedding (vocabulary-parallel over TP): a gather, memory bound."""
    m, p, tr = sc.model, sc.parallelism, sc.training
    e = BYTES_PER_ELEMENT["bf16" if tr.dtype == "fp8" else tr.dtype]
    tokens = tr.micro_batch * m.seq_len / p.cp / p.token_slices
    lookup = Work(0.0, 0.0, 2 * tokens * m.hidden * e)
    return EdgeCost(lookup, ZERO_WORK, lookup, m.vocab * m.hidden / p.tp, 0.0)


def logits_cost(sc: Scenario) -> EdgeCost:
    """Output projection 2*tokens*h*V FLOPs (SC21 Eq. 3) and the fp32 softmax cross-entropy."""
    m, p, tr = sc.model, sc.parallelism, sc.training
    tokens = tr.micro_batch * m.seq_len / p.cp / p.token_slices
    flops = 2 * tokens * m.hidden * m.vocab / p.tp
    loss_stream = 3 * tokens * m.vocab / p.tp * 4               # fp32 logits: write, max/sum read, read
    fwd = Work(flops, m.vocab * m.hidden / p.tp * 2, loss_stream)
    act = tokens * m.vocab / p.tp * 4                          # fp32 logits kept for the backward
    return EdgeCost(fwd, Work(flops, 0.0, loss_stream), Work(flops, 0.0, 0.0), m.vocab * m.hidden / p.tp, act)


def model_params(sc: Scenario) -> float:
    """Total parameters of the model (embeddings counted once when tied)."""
    m = sc.model
    r = m.kv_heads / m.heads
    attn = m.hidden * (m.hidden + 2 * m.hidden * r) + m.hidden ** 2 + 4 * m.hidden
    mats = _mlp_matrices(m.ffn_kind)
    dense = attn + mats * m.hidden * m.ffn_hidden
    total = (m.layers - m.moe_layers) * dense
    if m.is_moe:
        moe = m.moe
        experts = (moe.experts + moe.shared_experts) * mats * m.hidden * moe.expert_ffn_hidden
        total += m.moe_layers * (attn + experts + m.hidden * moe.experts)
    emb = m.vocab * m.hidden
    return total + (emb if m.tied_embeddings else 2 * emb)
