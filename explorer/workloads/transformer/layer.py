"""What one GPU computes, stores and communicates for one layer and one micro-batch.

Sources, cited at each formula:
- FLOPs: Narayanan et al., SC21 (arXiv 2104.04473), Sec. 5.1 / Eq. 3 — 24*B*s*h^2 + 4*B*s^2*h per
  layer forward, backward twice the forward, logits 2*B*s*h*V.  Each weight GEMM is listed with its
  shape (explorer/workloads/transformer/attention.py for the attention block) so that GQA, MLA, SwiGLU and
  MoE follow,
  and so that each is timed by its shape and dtype (explorer/physics/kernels.py).  ``gemm_flops`` keeps the
  SC21 convention (model FLOPs, the full s x s attention square, backward = 2 x forward), the MFU
  numerator, except that a causal FlashAttention core counts half the square, as the kernel skips
  the masked blocks (Dao, FlashAttention-2, arXiv 2307.08691, Sec. 3.1.1) and as NVIDIA's NeMo /
  Megatron-Bridge FLOPs formulas count it; ``gemm_s`` is the time the kernels take, for the
  FlashAttention backward 2.5x the forward (5 matrix products instead of 2, ibid. Sec. 3.2).
- Activation memory: explorer/workloads/transformer/activations.py.
- Tensor-parallel communication: Shoeybi et al., Megatron-LM (arXiv 1909.08053), Sec. 3: two
  all-reduces forward and two backward per layer; with sequence parallelism (Korthikanti Sec. 4.2.2)
  each becomes an all-gather plus a reduce-scatter of the same total volume.
- Expert parallelism: GShard (Lepikhin et al. 2020) dispatch and combine all-to-all, each moving
  tokens x top_k x hidden elements per GPU; context parallelism: ring attention (Liu et al. 2023)
  passing K and V blocks around the CP ring in cp-1 steps.
- FP8 (Micikevicius et al., "FP8 Formats for Deep Learning", arXiv 2209.05433; NVIDIA Transformer
  Engine): the linear layers' GEMMs run in FP8; the attention core, norms, router, embedding, output
  layer and optimizer stay in bf16/fp32; the casts are priced with the GEMMs, by scaling recipe
  (explorer/workloads/timing.py, explorer/config/fp8_recipes.py).
All byte figures are per GPU and per micro-batch; FLOPs likewise.
"""
from __future__ import annotations

from dataclasses import replace

from ...config import Scenario
from ...config.frameworks import elementwise_factor, profile
from ...physics.attention import (
    attention_seconds,
    causal_cp_imbalance,
    resolve_kernel,
    ring_merge_bytes,
    ring_step_seq,
)
from ...physics.hardware import BYTES_PER_ELEMENT, hbm_efficiency, weight_bytes
from ...physics.work import ZERO_WORK, Gemm, Work
from ..spec import Collective, EdgeCost, LayerCost
from ..timing import (
    BACKWARD_STREAM_FACTOR,
    FP8_UNFUSED_CAST_EXTRA_BYTES,
    GemmTimer,
    tp_overlap_slowdown,
    ub_overlap,
)
from .activations import layer_activation_bytes, offloaded_layer_bytes, recompute_working_bytes
from .activations_recipes import (
    dispatch_recompute_share,
    offload_seconds,
    offload_share,
    recompute_kind,
    recompute_share,
    ring_recompute_share,
)
from .attention import AttentionBlock, attention_block, attention_params, fused, head_dims
from .lora import lora_layer, targeted

# Element-wise passes per token of hidden width in one layer's forward (reads + writes, in
# elements): LayerNorm 2x(1 read + 1 write), residual add 2x(2 reads + 1 write) = 10, plus dropout
# 2x(1 read + 1 write + 0.5 mask) = 5 when the model uses dropout.  This is the part sequence
# parallelism splits across TP ranks.
ELEMENTWISE_PASSES_NORM_RESIDUAL = 10.0
ELEMENTWISE_PASSES_DROPOUT = 5.0
# Their backward, counted from what each backward kernel reads and writes (not 2x the forward):
# LayerNorm/RMSNorm backward reads the input and the output gradient and writes the input gradient
# (Apex/Transformer Engine layer_norm bwd kernels; the saved mean/rstd are per token), 3 passes per
# norm; a residual add's backward accumulates the branch gradient into the trunk's (2 reads + 1
# write); dropout's backward reads the gradient and the 1-byte mask and writes the gradient (2.5).
ELEMENTWISE_BWD_PASSES_NORM_RESIDUAL = 2 * 3.0 + 2 * 3.0
ELEMENTWISE_BWD_PASSES_DROPOUT = 2 * 2.5
# Non-fused attention (no FlashAttention), besides the two batched GEMMs whose own operand traffic
# (scores written by QK^T, probabilities read by PV) kernels.py charges: softmax read+write and
# dropout read+write plus its 1-byte mask -> 4.5 passes over the a*s*s score tensor.
SCORE_PASSES = 4.5
# Backward over the score tensor: softmax backward dx = y * (dy - sum(dy * y)) reads y and dy and
# writes dx (Megatron's scaled_masked_softmax_backward takes output_grads and softmax_results), 3
# passes; dropout backward reads the gradient and the mask and writes the gradient, 2.5: 5.5.
SCORE_BWD_PASSES = 5.5
# MoE token permutation: every token copy's hidden vector is read and written when it is permuted
# into expert order before dispatch and again when it is unpermuted after combine (Megatron-Core's
# ``moe_permute`` / ``moe_unpermute``): 2 x (1 read + 1 write) = 4 passes of h elements.
MOE_PERMUTE_PASSES = 4
# Those gathers/scatters copy whole rows of h elements to expert order and reach a lower share of HBM
# than streaming element-wise kernels: DeepEP's expanded-layout (per-expert) copy on GB200 measures
# 5,195-5,602 GB/s of the 8,000 GB/s HBM3e (deepseek-ai/DeepEP pull request #605, GB200 EP4 test log,
# "expanded dispatch ... copy"), 0.67 on average, against hardware.HBM_EFFICIENCY for streaming kernels:
# the permutation's bytes are charged HBM_EFFICIENCY / PERMUTE_HBM_FRACTION times.
PERMUTE_HBM_FRACTION = 5350 / 8000
# Router: softmax/sigmoid over the expert scores, top-k selection and the auxiliary statistics,
# read + write of tokens x experts fp32 scores a few times (Megatron-Core TopKRouter): 4 passes.
ROUTER_SCORE_PASSES = 4
# FlashAttention kernel work relative to the full-square forward matmul FLOPs: the causal forward
# skips the masked upper triangle (about half), the backward does 5 matmuls to the forward's 2
# (FlashAttention-2, Sec. 3.1-3.2).  Unfused attention multiplies the full square, masked or not.
FLASH_CAUSAL_FRACTION = 0.5
FLASH_BACKWARD_OVER_FORWARD = 2.5


def _mlp_matrices(ffn_kind: str) -> int:
    # GeLU MLP: up and down projections; SwiGLU (Shazeer 2020): gate, up and down.
    return 3 if ffn_kind == "swiglu" else 2


def mlp_gemms(tokens: float, h: float, f: float, mats: int, tp: int, count: float = 1.0,
              ragged: bool = False) -> tuple[Gemm, ...]:
    """Up (gate and up fused for SwiGLU) and down projections of an FFN of width ``f``; ``ragged``:
    ``tokens`` is the mean of routed experts' varying token counts."""
    return (Gemm(tokens, (mats - 1) * f / tp, h, count, ragged=ragged),
            Gemm(tokens, h, f / tp, count, ragged=ragged))


def attention_core(sc: Scenario, timer: GemmTimer, blk: AttentionBlock, tokens: float) -> tuple[Work, Work]:
    """Forward and backward Work of the attention core, on the kernel ``training.attention_kernel``
    resolves to (explorer/physics/attention.py; ``none``, flash_attention false or heads too wide
    for a fused kernel, attention.fused: unfused).

    Model FLOPs count what the kernel must multiply: the full s x s square for the unfused
    kernels of 2021 (SC21 Eq. 3, the convention of the Megatron SC21 rows), the causal half
    for FlashAttention (NeMo / Megatron-Bridge FLOPs formulas: ``0.5 if causal_self_attn``),
    backward twice forward.  Time follows the kernel: FlashAttention's backward recomputes the
    scores, 2.5x its forward work.  With context parallelism the core runs as cp ring steps, each
    a kernel on the rank's s/cp queries (its rate is the s/cp point of the kernel's curve), on a
    causally balanced split (the frameworks' default), plus the per-step softmax-correction merges."""
    m, tr, cp = sc.model, sc.training, sc.parallelism.cp
    flash = fused(sc)
    kernel = resolve_kernel(tr.attention_kernel, tr.framework, timer.gpu, timer.base) if flash else "none"
    d_qk, d_v = head_dims(m)
    seq = ring_step_seq(m.seq_len, cp)
    model = blk.core_flops * (FLASH_CAUSAL_FRACTION if flash else 1.0)
    bwd_exec = model * (FLASH_BACKWARD_OVER_FORWARD if flash else 2.0)
    eff = timer.eff[timer.base]
    busiest = causal_cp_imbalance(cp)                     # 1: zig-zag balanced (physics/attention.py)
    t = sc.parallelism.tp
    merge_f, merge_b = ring_merge_bytes(cp, tokens * m.heads * d_v / t, tokens * m.heads * d_qk / t,
                                        blk.kv_elements)
    fwd_s = attention_seconds(model, timer.gpu, eff, False, kernel, d_qk, seq, timer.base) * busiest
    bwd_s = attention_seconds(bwd_exec, timer.gpu, eff, True, kernel, d_qk, seq, timer.base) * busiest
    return Work(model, fwd_s, merge_f), Work(2 * model, bwd_s, merge_b)


def _op_sac_recompute(sc: Scenario, timer: GemmTimer, blk: AttentionBlock, dense_gemms: list[Gemm],
                      tokens: float, elementwise_fwd: float) -> Work:
    """Forward work torchtitan's op-level selective AC repeats (FrameworkProfile.selective_policy
    "every-other-matmul"): the 2nd, 4th, 6th... matmul of the layer in its module order — wq, wk,
    wv, wo, then w1, w3, w2 (SwiGLU: ``w2(silu(w1(x)) * w3(x))``) or up, down (GeLU) — so wk, wo and
    w3 (GeLU: down), and every element-wise op; the attention core's output is saved.  MLA or MoE
    layers have no such fixed order: half of their linear-layer forward is charged."""
    m, t = sc.model, sc.parallelism.tp
    stream = Work(0.0, 0.0, elementwise_fwd)
    if m.mla is not None or len(blk.gemms) != 2 or len(dense_gemms) != 4:
        return timer.passes(dense_gemms)[0].scaled(0.5) + stream
    d = head_dims(m)[0]
    f, kv = m.ffn_hidden, m.kv_heads
    assert f is not None and kv is not None          # filled by the defaults (config/loading.py)
    recomputed = [Gemm(tokens, kv * d / t, m.hidden), blk.gemms[1],
                  Gemm(tokens, f / t, m.hidden) if m.ffn_kind == "swiglu" else Gemm(tokens, m.hidden, f / t)]
    return timer.passes(recomputed)[0] + stream


def _selective_recompute(sc: Scenario, timer: GemmTimer, blk: AttentionBlock, attn_core: Work, tokens: float,
                         mats: int, moe_layer: bool, e: float, sp: bool) -> Work:
    """Forward work that ``training.recompute_modules`` repeats in the backward (Megatron-Core's
    recompute_modules; DeepSeek-V3 report Sec. 3.2.3): the attention core; the two norms (read and
    write their input, 4 passes of h); MLA's up-projections (its query and key/value up GEMMs); the
    routed experts' activation function (read and write their intermediates)."""
    m, t = sc.model, sc.parallelism.tp
    modules = set(sc.training.recompute_modules)
    work = ZERO_WORK
    if "core_attn" in modules:
        work = work + attn_core
    if "layernorm" in modules:
        work = work + Work(0.0, 0.0, 4 * tokens * m.hidden / (t if sp else 1) * e)
    if "mla_up_proj" in modules and m.mla is not None:
        ups = [g for g in blk.gemms if g.k in (m.mla.q_lora_rank, m.mla.kv_lora_rank) and g.n != m.hidden]
        work = work + timer.passes(ups)[0]
    if "mlp" in modules and not moe_layer and m.ffn_hidden:
        # Megatron-Core "mlp": the dense MLP's GEMMs and activation function run again.
        work = work + timer.passes(mlp_gemms(tokens, m.hidden, m.ffn_hidden, mats, t))[0] \
            + Work(0.0, 0.0, tokens * mats * m.ffn_hidden / t * e)
    if "moe_act" in modules and moe_layer:
        moe = m.moe
        assert moe is not None  # a routed layer: the model has experts
        work = work + Work(0.0, 0.0, tokens * moe.top_k * mats * moe.expert_ffn_hidden / t * e)
    return work


def _dense_passes(sc: Scenario, timer: GemmTimer, gemms: list[Gemm]) -> tuple[Work, Work, Work, float, float]:
    """GemmTimer.passes of a layer's dense (TP-split) GEMMs, with two costs the plain shapes miss:

    - TP comm-GEMM overlap (timing.tp_overlap_slowdown): the row-parallel GEMMs (output width h:
      attention output projection, FFN down projection) run their forward beside the pipelined
      reduce-scatter, the column-parallel ones their dgrad and wgrad beside the bulk all-gather and
      reduce-scatter, on the SMs the communication kernel leaves them (Transformer Engine's
      userbuffers "pipeline" and "bulk" methods; the "ring_exchange" GEMMs keep every SM);
      each overlapped GEMM is cut into chunks run one after another (GemmTimer.split_passes);
    - FP8: the attention output projection's input is cast by a separate kernel
      (timing.FP8_UNFUSED_CAST_EXTRA_BYTES: its read of the bf16 tensor, which no recipe shares with
      another pass — current scaling's amax read is a pass of its own, fp8_recipes.cast_bytes)."""
    h, t = sc.model.hidden, sc.parallelism.tp
    k = tp_overlap_slowdown(sc)
    row = [g for g in gemms if g.n == h and t > 1]
    col = [g for g in gemms if not (g.n == h and t > 1)]
    r_f, r_d, r_w, rc_f, rc_b = timer.passes(row)
    c_f, c_d, c_w, cc_f, cc_b = timer.passes(col)
    if ub_overlap(sc):
        # Chunked: ring_exchange cuts the column-parallel forward and the row-parallel dgrad into
        # one GEMM per TP rank, the pipelined reduce-scatter the row-parallel forward into
        # tp_overlap_rs_splits (frameworks.py); bulk overlaps leave their GEMMs whole.
        splits = profile(sc.training.framework).tp_overlap_rs_splits or t
        r_f = timer.split_passes(row, splits)[0]
        r_d = timer.split_passes(row, t)[1]
        c_f = timer.split_passes(col, t)[0]
    out_proj = [g for g in gemms if g.n == h and g.fp8 and timer.dtype(g) == "fp8"][:1]
    extra = sum(FP8_UNFUSED_CAST_EXTRA_BYTES * g.m * g.k * g.count for g in out_proj)
    return (_slower(r_f, k) + c_f, r_d + _slower(c_d, k), r_w + _slower(c_w, k),
            rc_f + cc_f + extra, rc_b + cc_b)


def _slower(w: Work, k: float) -> Work:
    """``w`` with its kernels ``k`` times as long (same FLOPs and bytes)."""
    return replace(w, gemm_s=w.gemm_s * k)


def layer_cost(sc: Scenario, moe_layer: bool) -> LayerCost:
    """Cost of one (dense or MoE) transformer layer for one micro-batch on one GPU."""
    m, p, tr = sc.model, sc.parallelism, sc.training
    t, cp = p.tp, p.cp
    timer = GemmTimer(sc)
    e = BYTES_PER_ELEMENT[timer.base]             # activations stay in the bf16 (or fp16/fp32) dtype
    b, s, h, a = tr.micro_batch, m.seq_len, m.hidden, m.heads
    # Tokens of one pipeline unit on this GPU: the sequence shard (cp), cut into token slices
    # (TeraPipe) when asked; attention still spans the whole sequence s (the slices' KV cache).
    tokens = b * s / cp / p.token_slices
    mats = _mlp_matrices(m.ffn_kind)
    sp = p.sequence_parallel and t > 1
    elementwise = elementwise_factor(tr.framework, m.ffn_kind)   # 1 = fused kernels (Megatron)

    blk = attention_block(m, tokens, s, t)
    dense_gemms = list(blk.gemms)
    routed: tuple[Gemm, ...] = ()
    router_stream = 0.0
    if moe_layer:
        moe = m.moe
        assert moe is not None  # a routed layer: the model has experts
        local = moe.experts / p.ep
        # Balanced routing: every EP rank receives tokens*top_k token copies over its local experts.
        per_expert = tokens * moe.top_k / local
        # Routed experts: a grouped GEMM whose experts' token counts vary around the mean (ragged).
        routed = mlp_gemms(per_expert, h, moe.expert_ffn_hidden, mats, t, local, ragged=local > 1)
        if moe.shared_experts:
            dense_gemms += mlp_gemms(tokens, h, moe.shared_experts * moe.expert_ffn_hidden, mats, t)
        adapted = list(dense_gemms)       # LoRA's targets: every weight GEMM but the router (lora.py)
        dense_gemms.append(Gemm(tokens, moe.experts, h, fp8=False, shared=t))   # router, bf16 (replicated)
        router_stream = ROUTER_SCORE_PASSES * tokens * moe.experts * 4 / e   # fp32 scores, in elements
        # Permutation copies run at PERMUTE_HBM_FRACTION of the HBM peak; streams are charged at
        # hbm_efficiency(gpu), so their bytes are scaled by the ratio.
        permute = MOE_PERMUTE_PASSES * h * hbm_efficiency(sc.hardware.gpu) / PERMUTE_HBM_FRACTION
        permute_stream = tokens * moe.top_k * permute
        mlp_stream = tokens * moe.top_k * (mats * moe.expert_ffn_hidden / t + permute) \
            + tokens * moe.shared_experts * mats * moe.expert_ffn_hidden / t
        expert_params = sum(g.params for g in routed)
    else:
        f = m.ffn_hidden
        assert f is not None                              # filled by the defaults
        dense_gemms += mlp_gemms(tokens, h, f, mats, t)
        adapted = list(dense_gemms)
        mlp_stream = tokens * (mats * f / t)      # activation function reads and writes
        permute_stream = 0.0
        expert_params = 0.0
    d_f, d_d, d_w, cast_f, cast_b = _dense_passes(sc, timer, dense_gemms)
    r_f, r_d, r_w, rcast_f, rcast_b = timer.passes(routed)
    core_f, core_b = attention_core(sc, timer, blk, tokens)

    norm_params = 4 * h                  # two LayerNorms, gain + bias of h each, replicated over TP
    params = sum(g.params for g in dense_gemms) + norm_params + blk.latent_norm_params

    passes = ELEMENTWISE_PASSES_NORM_RESIDUAL + (ELEMENTWISE_PASSES_DROPOUT if m.dropout else 0.0)
    bwd_passes = ELEMENTWISE_BWD_PASSES_NORM_RESIDUAL + (ELEMENTWISE_BWD_PASSES_DROPOUT if m.dropout else 0.0)
    replicated = passes * tokens * h / (t if sp else 1)
    flash = fused(sc)
    scores = 0.0 if flash else SCORE_PASSES * a * tokens * s / t
    fwd_stream = (replicated + mlp_stream + router_stream + scores) * e * elementwise
    # Backward element-wise traffic kernel by kernel (the *_BWD_PASSES above); the activation's
    # backward reads its inputs and the output gradient and writes the input gradients (GeLU: x, dy
    # -> dx, 3 passes of f; SwiGLU: gate, up, dy -> dgate, dup, 5): 2 x mats - 1 passes of f for the
    # forward's mats; MoE permutation and the router keep BACKWARD_STREAM_FACTOR (timing.py).
    act_bwd = (2 * mats - 1) / mats
    bwd_stream = (bwd_passes * tokens * h / (t if sp else 1) + act_bwd * (mlp_stream - permute_stream)
                  + BACKWARD_STREAM_FACTOR * (router_stream + permute_stream)
                  + (0.0 if flash else SCORE_BWD_PASSES * a * tokens * s / t)) * e * elementwise
    cast_fwd, cast_bwd = cast_f + rcast_f, cast_b + rcast_b
    attn_core = core_f + Work(0.0, 0.0, scores * e * elementwise)
    fwd = d_f + r_f + attn_core + Work(0.0, 0.0, fwd_stream - scores * e * elementwise + cast_fwd)
    bwd_input = d_d + r_d + core_b + Work(0.0, 0.0, bwd_stream + cast_bwd)
    bwd_weight = d_w + r_w

    act = layer_activation_bytes(sc, moe_layer, tokens)
    kind = recompute_kind(sc)
    if tr.recompute_layers > 0:
        recompute = fwd.scaled(recompute_share(sc))    # N of a chunk's L layers (activations_recipes)
    elif kind == "full":
        recompute = fwd
    elif kind == "selective" and profile(tr.framework).selective_policy == "every-other-matmul":
        recompute = _op_sac_recompute(sc, timer, blk, dense_gemms, tokens,
                                      fwd_stream - scores * e * elementwise + cast_fwd)
    elif kind == "selective":
        recompute = _selective_recompute(sc, timer, blk, attn_core, tokens, mats, moe_layer,
                                         e * elementwise, sp)
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
    tp_recompute = tp_fwd if kind == "full" and not tr.recompute_layers else ()
    if tr.recompute_layers > 0 and tp_fwd:     # the recomputed share's collectives, as bytes
        tp_recompute = tuple(Collective(c.op, c.size_bytes * recompute_share(sc)) for c in tp_fwd)
    if moe_layer and p.ep > 1 and m.moe is not None:
        # Dispatch + combine; with TP the tokens are split over the TP ranks first (Megatron-Core
        # requires sequence parallelism with TP x EP).
        a2a = Collective("all-to-all", tokens / t * m.moe.top_k * h * e)
        ep_fwd: tuple[Collective, ...] = (a2a, a2a)
    else:
        ep_fwd = ()
    kv_bytes = blk.kv_elements * e if cp > 1 else 0.0
    lc = LayerCost(fwd, bwd_input, bwd_weight, recompute, attn_core, r_f, params,
                     expert_params, act, tp_fwd, tp_bwd, tp_recompute, ep_fwd, ep_fwd, kv_bytes,
                     recompute_working_bytes(sc, moe_layer, tokens),
                     offload_seconds(sc, offloaded_layer_bytes(sc, moe_layer, tokens)), offload_share(sc),
                     cp_recompute=ring_recompute_share(sc) if kv_bytes else 0.0,
                     ep_recompute=dispatch_recompute_share(sc) if ep_fwd else 0.0)
    if tr.lora_rank:
        na = len(blk.gemms)                    # adapted: the attention block's GEMMs, then the MLP's
        dense, experts = targeted(tr.lora_targets, adapted[:na], adapted[na:], list(routed))
        return lora_layer(lc, timer, dense, experts, tr.lora_rank, weight_bytes(tr.dtype))
    return lc


def embedding_cost(sc: Scenario) -> EdgeCost:
    """Input embedding (vocabulary-parallel over TP): a gather, memory bound."""
    m, p, tr = sc.model, sc.parallelism, sc.training
    e = BYTES_PER_ELEMENT["bf16" if tr.dtype == "fp8" else tr.dtype]
    tokens = tr.micro_batch * m.seq_len / p.cp / p.token_slices
    lookup = Work(0.0, 0.0, 2 * tokens * m.hidden * e)
    return EdgeCost(lookup, ZERO_WORK, lookup, m.vocab * m.hidden / p.tp, 0.0)


def logits_cost(sc: Scenario) -> EdgeCost:
    """Output projection 2*tokens*h*V FLOPs (SC21 Eq. 3), in bf16 also for FP8 runs, and the fp32
    softmax cross-entropy; with multi-token prediction (DeepSeek-V3 Sec. 2.2) each of the
    ``mtp_depth`` modules adds a 2h -> h projection and another pass through the shared output head
    (its transformer block is priced as an extra layer of the last stage, explorer/taskgraph)."""
    m, p, tr = sc.model, sc.parallelism, sc.training
    timer = GemmTimer(sc)
    tokens = tr.micro_batch * m.seq_len / p.cp / p.token_slices
    heads = 1 + m.mtp_depth
    gemms = [Gemm(tokens, m.vocab / p.tp, m.hidden, heads, fp8=False)]
    if m.mtp_depth:
        gemms.append(Gemm(tokens, m.hidden, 2 * m.hidden / p.tp, m.mtp_depth))
    f, d, w, cast_f, cast_b = timer.passes(gemms)
    loss_stream = heads * 3 * tokens * m.vocab / p.tp * 4        # fp32 logits: write, max/sum read, read
    fwd = f + Work(0.0, 0.0, loss_stream + cast_f)
    act = heads * tokens * m.vocab / p.tp * 4                    # fp32 logits kept for the backward
    params = m.vocab * m.hidden / p.tp + m.mtp_depth * 2 * m.hidden * m.hidden / p.tp
    return EdgeCost(fwd, d + Work(0.0, 0.0, loss_stream + cast_b), w, params, act)


def model_params(sc: Scenario) -> float:
    """Total parameters of the model (embeddings counted once when tied; MTP modules included)."""
    m = sc.model
    attn = attention_params(m) + 4 * m.hidden
    mats = _mlp_matrices(m.ffn_kind)
    assert m.ffn_hidden is not None                       # filled by the defaults
    dense = attn + mats * m.hidden * m.ffn_hidden
    total = (m.layers - m.moe_layers) * dense
    moe_layer = dense
    moe = m.moe
    if moe is not None and m.is_moe:
        experts = (moe.experts + moe.shared_experts) * mats * m.hidden * moe.expert_ffn_hidden
        moe_layer = attn + experts + m.hidden * moe.experts
        total += m.moe_layers * moe_layer
    # An MTP module: the block of the model's last layer kind plus its 2h -> h projection.
    total += m.mtp_depth * (moe_layer + 2 * m.hidden * m.hidden)
    emb = m.vocab * m.hidden
    return total + (emb if m.tied_embeddings else 2 * emb)
