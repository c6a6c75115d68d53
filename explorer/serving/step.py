"""One forward pass of a serving replica, per pipeline stage and per GPU: its GEMMs, its attention
over the KV cache, and the collectives between them.

A pass is a set of sequence groups, each ``seqs`` sequences adding ``new`` tokens while attending
to ``context`` earlier tokens on average (a prefill: one group, new = prompt, context = prompt / 2
for causal attention; a decode step: new = 1 over the batch's mean context).

- GEMMs run at max(FLOPs / peak, bytes / HBM bandwidth): the roofline (Williams, Waterman and
  Patterson, "Roofline", CACM 52(4), 2009), as physics/kernels.gemm_seconds prices every GEMM, with
  the weights read once per pass for all its tokens (one GEMM of m = tokens rows) at the weight
  precision, and HBM at its achievable fraction (physics/hardware.hbm_efficiency: 0.8 of the data
  sheet, NVIDIA's CUDA Best Practices effective-bandwidth figures).
- Routed experts read only the experts some token chose: with pairs = tokens x top_k routed
  uniformly over E experts, an expert is touched with probability 1 - (1 - 1/E)^pairs (balls into
  bins), so a small decode batch reads a fraction of the expert weights.
- Attention (paged, FlashAttention/FlashInfer style) reads every attended token's K and V once:
  max(FLOPs at the attention kernel's measured rate, KV bytes / HBM).  MLA decode runs in the
  absorbed form (DeepSeek-V2, arXiv 2405.04434, Sec. 2.1.3: W_UK into the query, W_UV into the
  output), whose per-head dimensions are the latent's: d_qk = kv_lora_rank + rope, d_v = kv_lora_rank.
  A head wider than the fused kernels take (256; FlashMLA's absorbed decode aside) runs unfused,
  as training prices it: two batched GEMMs over the full square and a softmax over its scores.
- Tensor parallelism: two all-reduces per layer of tokens x hidden x 2 bytes (Megatron-LM,
  Shoeybi et al. 2019, Sec. 3; vLLM reduces in the model's 16-bit dtype even with FP8 GEMMs),
  priced by network.groups.Network.cost, whose NCCL model picks LL/LL128 at these sizes.
- Expert parallelism: a dispatch and a combine all-to-all per MoE layer of tokens / tp x top_k x
  hidden (dispatch in the activation precision, combine in 16 bits: DeepSeek-V3 Sec. 3.3.2/3.4),
  each token's top_k copies sent on their own, as NCCL's all-to-all sends them.  DeepSeek decodes
  with DeepEP's low-latency kernels (direct RDMA to each expert's GPU, no per-node deduplication),
  which that price stands for; the per-node deduplication of its normal kernels (training's
  ``communication.moe_dispatcher``) is not modelled here, so a serving file cannot set the
  dispatcher, and node-limited routing (``model.moe.max_nodes``) moves no bytes.  The busiest expert
  rank paces the step, as in training: its routed pairs and its all-to-alls are load x the mean,
  load = the skew's busiest-rank share (workloads/transformer/moe_load.py) x ``model.moe.imbalance``.
- Pipeline parallelism: one send of tokens x hidden x 2 bytes to the next stage.
- Per kernel (serving/overhead.py): every GEMM and attention kernel pays the gap between dependent
  kernels, and each layer runs the small kernels of vLLM's decoder layer (norms, rotary, KV-cache
  write, activation, routing) at max(their floor, their bytes / HBM); FP8 activations are
  quantised inside the kernel that writes them (overhead.py), not by kernels of their own.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

from ..config import Scenario
from ..config.inference import Inference
from ..config.model_parts import first_moe_layer
from ..engine.records import priced_link
from ..network.groups import Network
from ..physics.attention import MAX_FUSED_HEAD_DIM, attention_seconds, resolve_kernel
from ..physics.hardware import BYTES_PER_ELEMENT, gemm_large_efficiency, streaming_bytes_per_s
from ..physics.kernels import gemm_seconds
from ..physics.work import Gemm
from ..workloads.registry import attention_of, expert_load
from . import overhead as oh
from .memory import kv_bytes_per_token_gpu, mlp_matrices

COMM_BYTES = 2          # TP all-reduce, EP combine and PP sends carry 16-bit activations
# An unfused attention's softmax reads and writes the score tensor once each (no dropout when
# serving; the two GEMMs' own score traffic is their roofline's): training's SCORE_PASSES less
# dropout (workloads/transformer/layer.py).
SOFTMAX_PASSES = 2
MATH_ONLY_HBM_GBPS = 1e12     # an HBM bandwidth no kernel notices (the GPU bound's maximum is 1e7)


def wide_head_warning(sc: Scenario) -> str | None:
    """The run's sentence when a head is wider than the fused attention kernels take (priced
    unfused: PassModel._unfused); None otherwise, and for MLA, whose decode FlashMLA runs."""
    m = sc.model
    wide = max(attention_of(m).head_dims(m))
    if wide <= MAX_FUSED_HEAD_DIM:
        return None
    return (f"kernel: a head dimension of {wide:g} is wider than the {MAX_FUSED_HEAD_DIM} the fused "
            "attention kernels take (FlashAttention, FlashInfer); attention runs unfused, two batched GEMMs "
            "over the full square and a softmax over its scores")


@dataclass(frozen=True)
class Group:
    """``seqs`` sequences each adding ``new`` tokens over ``context`` attended tokens (mean)."""

    seqs: float
    new: float
    context: float

    @property
    def tokens(self) -> float:
        return self.seqs * self.new


@dataclass(frozen=True)
class StageCost:
    """One pass on one GPU of one pipeline stage: one layer's parts (in order, the template the
    timeline draws), its layer count, the edge work and what was priced."""

    layers: int
    layer_parts: tuple[tuple[str, float], ...]   # ("compute" | "tp" | "ep", seconds) of one mean layer
    components: dict[str, float]                 # gemm, attention, small_kernels, tp, ep: the stage's seconds
    edge_s: float                                # logits and sampling (last stage), embedding gather (first)
    flops: float
    comm: dict[str, dict]                        # per dimension: its per-layer call as priced
    send: dict | None                            # the send to the next stage (None on the last)
    moe_layers: int = 0                          # of ``layers``, those with routed experts

    @property
    def duration(self) -> float:
        """Seconds of the stage's pass (its send excluded)."""
        return self.layers * sum(v for _, v in self.layer_parts) + self.edge_s


def _call(net: Network, op: str, size: float, dim: str, stage: int) -> dict:
    """One call as priced: ``tier`` what limits it as the pages name it (``pcie`` where the GPUs'
    PCIe links do: CollectiveCost.limited_by), ``boundary`` the tier whose links it shares, and
    ``per_gpu`` the bytes one GPU sends across each boundary (innermost first) per call, as a
    training run's traffic counts them (engine/records.LinkCall.per_gpu)."""
    cc = net.cost(op, size, dim, stage)
    per_gpu = tuple(c.per_gpu(b) for c in priced_link(net, dim, op, size, stage, 1)[:1]
                    for b in range(len(cc.egress)))
    return {"op": op, "bytes": size, "group": cc.n, "algorithm": f"{cc.algorithm}/{cc.protocol}",
            "tier": cc.limited_by, "boundary": cc.boundary, "per_gpu": per_gpu,
            "busbw_GBps": cc.busbw_GBps, "time_s": cc.time_s, "latency_s": cc.latency_s}


def compute_dtype(inf: Inference) -> str:
    """The precision a server's GEMMs run in: fp8 with FP8 weights and activations, else bf16."""
    return "fp8" if inf.weight_dtype == "fp8" and inf.activation_dtype == "fp8" else "bf16"


class PassModel:
    """Prices passes of ``sc``'s model on the layout of ``layout`` (tp, pp, ep, dp of its
    parallelism; its cluster) for the serving precisions of ``sc.inference``."""

    def __init__(self, sc: Scenario, layout: Scenario) -> None:
        assert sc.inference is not None
        self.sc, self.m, self.inf = sc, sc.model, sc.inference
        self.gpu = sc.hardware.gpu
        p = layout.parallelism
        self.tp, self.pp, self.ep = p.tp, p.pp, p.ep
        self.net = Network(layout)
        self.cdtype = compute_dtype(self.inf)
        self.eff = gemm_large_efficiency(sc, self.cdtype)
        # The attention core runs in bf16 whatever the GEMMs' precision (physics/attention.py divides
        # the efficiency it is given by bf16's measured share of peak): with fp8 activations the fp8
        # efficiency made a faster bf16 GEMM rate a slower attention (a hunt: TTFT 34.61 -> 34.88 ms).
        self.attn_eff = gemm_large_efficiency(sc, "bf16" if self.cdtype == "fp8" else self.cdtype)
        self.load = expert_load(self.m, self.ep)   # the busiest expert rank's (module docstring)
        self.hbm = streaming_bytes_per_s(self.gpu)
        # The same GPU with memory too fast to matter: gemm_seconds on it is the math time alone, the
        # bytes being charged here at their own precisions.
        self.math_gpu = replace(self.gpu, hbm_GBps=MATH_ONLY_HBM_GBPS)
        self.wbytes = BYTES_PER_ELEMENT[self.inf.weight_dtype]
        self.abytes = BYTES_PER_ELEMENT[self.inf.activation_dtype]
        self.kernel = resolve_kernel("auto", "megatron", self.gpu)
        self.kv_token = kv_bytes_per_token_gpu(self.m, self.inf.kv_dtype, self.tp, 1) / self.m.layers

    def small(self, nbytes: list[float]) -> float:
        """Seconds of small kernels moving ``nbytes`` each (overhead.small_kernel_s)."""
        return sum(oh.small_kernel_s(b, self.hbm) for b in nbytes)


    # --- GEMMs -----------------------------------------------------------------------------------
    def gemm(self, g: Gemm) -> float:
        """Seconds of ``g`` (count equal GEMMs as one grouped kernel): the roofline's max of the
        kernel model's math time (tiles, waves, at the compute dtype's rate) and the bytes it streams
        once — its weights at the weight precision (an FP8-weight, 16-bit-activation GEMM reads FP8
        weights: vLLM's Marlin/FP8 W8A16 kernels), its input and its 16-bit output."""
        count = max(g.count, 1.0)
        group = max(int(count), 1)
        math_s = count * gemm_seconds(g.m, g.n, g.k, self.cdtype, self.math_gpu, self.eff, group=group)
        moved = g.n * g.k * self.wbytes + g.m * g.k * self.abytes + g.m * g.n * COMM_BYTES
        return max(math_s, count * moved / self.hbm) + oh.KERNEL_GAP_S      # one kernel (overhead.py)

    def _experts(self, tokens: float) -> tuple[float, float, list[float]]:
        """(seconds, FLOPs, small kernels' bytes) of one MoE layer's routed experts on one GPU for
        ``tokens`` tokens of this GPU's replica."""
        moe, m = self.m.moe, self.m
        assert moe is not None
        mats = mlp_matrices(m)
        if self.ep > 1:
            local, width = moe.experts / self.ep, float(moe.expert_ffn_hidden)
            # Routed pairs the EP group brings to the busiest rank (load x its even share).
            pairs = self.ep * tokens / self.tp * moe.top_k * self.load
        else:
            local, width = float(moe.experts), moe.expert_ffn_hidden / self.tp
            pairs = tokens * moe.top_k
        touched_frac = 1.0 - (1.0 - 1.0 / moe.experts) ** pairs
        touched = max(local * touched_frac, 1.0)
        rows = pairs / moe.experts / max(touched_frac, 1e-12)    # tokens of each touched expert
        up = Gemm(rows, (mats - 1) * width, m.hidden, touched)
        down = Gemm(rows, m.hidden, width, touched)
        # The GPU routes its own tokens (tokens / tp of them under expert parallelism) and sums their
        # experts' outputs; its experts activate the rows x touched pairs they receive.
        own = tokens / self.tp if self.ep > 1 else tokens
        small = oh.routing_bytes(own, moe.experts, own * moe.top_k, m.hidden)
        small.append(oh.activation_bytes(rows * touched, width, mats == 3))
        return self.gemm(up) + self.gemm(down), up.flops + down.flops, small

    def _ep_call(self, size: float, stage: int) -> dict:
        """One dispatch or combine of ``size`` bytes (module docstring), its time on the busiest
        expert rank (load x the mean's)."""
        call = _call(self.net, "all-to-all", size, "ep", stage)
        return {**call, "time_s": call["time_s"] * self.load}

    # --- one layer -------------------------------------------------------------------------------
    def _attention(self, groups: tuple[Group, ...]) -> tuple[float, float]:
        """(seconds, FLOPs) of one layer's attention core on one GPU."""
        m = self.m
        a = m.heads / self.tp
        secs = flops_total = 0.0
        for g in groups:
            d_qk, d_v = attention_of(m).head_dims(m)
            absorbed = m.mla is not None and g.new == 1
            if m.mla is not None and absorbed:            # absorbed MLA decode (module docstring)
                d_qk, d_v = m.mla.kv_lora_rank + m.mla.qk_rope_head_dim, m.mla.kv_lora_rank
            kv = g.seqs * (g.context + g.new) * self.kv_token / self.hbm      # read all, write the new
            if d_qk > MAX_FUSED_HEAD_DIM and not absorbed:
                s, f = self._unfused(g, a, d_qk, d_v)
            else:
                flops = 2.0 * g.seqs * g.new * g.context * a * (d_qk + d_v)
                s = max(attention_seconds(flops, self.gpu, self.attn_eff, kernel=self.kernel, head_dim=d_qk,
                                          seq_len=max(g.context, 1.0)), kv)
                f = flops
            secs += s
            flops_total += f
        return secs, flops_total

    def _unfused(self, g: Group, heads: float, d_qk: float, d_v: float) -> tuple[float, float]:
        """(seconds, FLOPs) of one group's attention where the head is wider than the fused kernels
        take (physics/attention.MAX_FUSED_HEAD_DIM; FlashMLA's 576-wide absorbed decode is its own
        kernel): as training's unfused core (workloads/transformer/layer.attention_core), two
        batched GEMMs over every key of the sequence, masked or not (``context`` is the causal
        mean: the square's width is context + new / 2), their operands at the roofline, and between
        them the softmax reading and writing the 16-bit scores (SOFTMAX_PASSES)."""
        keys = g.context + g.new / 2
        flops = 2.0 * g.seqs * g.new * keys * heads * (d_qk + d_v)
        compute = attention_seconds(flops, self.gpu, self.attn_eff, kernel="none", head_dim=d_qk,
                                    seq_len=max(keys, 1.0))
        kv = g.seqs * (g.context + g.new) * self.kv_token / self.hbm
        scores = SOFTMAX_PASSES * COMM_BYTES * g.seqs * heads * g.new * keys / self.hbm
        # Three kernels (QK^T, softmax, PV) where the fused core is one: two more gaps (overhead.py).
        return max(compute, kv) + scores + 2 * oh.KERNEL_GAP_S, flops

    def _attention_small(self, tokens: float, gemms: tuple[Gemm, ...]) -> list[float]:
        """Bytes of the attention block's small kernels for ``tokens`` new tokens (overhead.py): the
        input norm, MLA's latent norms, the rotary embedding of q and k (every served model is taken
        to use RoPE, as the served presets do) and the KV-cache write."""
        m = self.m
        out = [oh.norm_bytes(tokens, m.hidden)]
        if m.mla is not None:
            latents = (m.mla.q_lora_rank, m.mla.kv_lora_rank)
            out += [oh.norm_bytes(tokens, r, residual=False) for r in latents if r]
            rotated = (m.heads / self.tp + 1) * m.mla.qk_rope_head_dim       # q's heads, the shared key
        else:
            kv = m.kv_heads if m.kv_heads is not None else m.heads
            rotated = (m.heads / self.tp + max(kv // self.tp, 1)) * attention_of(m).head_dims(m)[0]
        kv_el = BYTES_PER_ELEMENT[self.inf.kv_dtype]
        out += [oh.rotary_bytes(tokens, rotated), oh.kv_write_bytes(tokens, self.kv_token, kv_el)]
        return out

    def layer(self, groups: tuple[Group, ...], moe_layer: bool, stage: int) -> tuple[list, dict, float, dict]:
        """One layer: (ordered parts, component seconds, FLOPs, priced calls)."""
        m, tp = self.m, self.tp
        tokens = sum(g.tokens for g in groups)
        blk = attention_of(m).block(m, tokens, 1.0, tp)
        proj = sum(self.gemm(g) for g in blk.gemms)
        core, core_flops = self._attention(groups)
        core += oh.KERNEL_GAP_S                       # one attention kernel for every group (overhead.py)
        small_attn = self.small(self._attention_small(tokens, blk.gemms))
        flops = sum(g.flops for g in blk.gemms) + core_flops
        mats = mlp_matrices(m)
        small = [oh.norm_bytes(tokens, m.hidden)]      # the post-attention norm
        if moe_layer and m.moe is not None:
            shared = m.moe.shared_experts * m.moe.expert_ffn_hidden
            ffn, ffn_flops, routed_small = self._experts(tokens)
            small += routed_small
            dense = [Gemm(tokens, m.moe.experts, m.hidden)]                 # the router
            if shared:
                experts = [Gemm(tokens, (mats - 1) * shared / tp, m.hidden),
                           Gemm(tokens, m.hidden, shared / tp)]
                dense += experts
                # The router is a 16-bit linear (vLLM's gate: ReplicatedLinear, quant_config=None).
                small.append(oh.activation_bytes(tokens, shared / tp, mats == 3))
            ffn += sum(self.gemm(g) for g in dense)
            ffn_flops += sum(g.flops for g in dense)
        else:
            assert m.ffn_hidden is not None
            dense = [Gemm(tokens, (mats - 1) * m.ffn_hidden / tp, m.hidden),
                     Gemm(tokens, m.hidden, m.ffn_hidden / tp)]
            ffn = sum(self.gemm(g) for g in dense)
            ffn_flops = sum(g.flops for g in dense)
            small.append(oh.activation_bytes(tokens, m.ffn_hidden / tp, mats == 3))
        small_ffn = self.small(small)
        calls: dict[str, dict] = {}
        ar = 0.0
        if tp > 1:
            calls["tp"] = _call(self.net, "all-reduce", tokens * m.hidden * COMM_BYTES, "tp", stage)
            ar = calls["tp"]["time_s"]
        disp = comb = 0.0
        if moe_layer and self.ep > 1 and m.moe is not None:
            routed = tokens / tp * m.moe.top_k * m.hidden
            calls["ep"] = self._ep_call(routed * self.abytes, stage)
            disp = calls["ep"]["time_s"]
            comb = self._ep_call(routed * COMM_BYTES, stage)["time_s"]
            # The combine's 16-bit bytes beside the dispatch's (FP8 activations: half of them), for
            # the traffic figures (serving/result.py; a hunt found the combine counted at the
            # dispatch's size, a third of the EP bytes missing).
            calls["ep"]["combine_bytes"] = routed * COMM_BYTES
        parts = [("compute", proj + core + small_attn), ("tp", ar), ("ep", disp),
                 ("compute", ffn + small_ffn), ("ep", comb), ("tp", ar)]
        comps = {"gemm": proj + ffn, "attention": core, "small_kernels": small_attn + small_ffn,
                 "tp": 2 * ar, "ep": disp + comb}
        return parts, comps, flops + ffn_flops, calls

    # --- a stage ---------------------------------------------------------------------------------
    def stage_layers(self, stage: int) -> tuple[int, int]:
        """(first layer, layer count) of ``stage``: an even split, the remainder on the first stages."""
        base, extra = divmod(self.m.layers, self.pp)
        first = stage * base + min(stage, extra)
        return first, base + (1 if stage < extra else 0)

    def stage(self, groups: tuple[Group, ...], stage: int, logits_tokens: float) -> StageCost:
        """The pass of ``groups`` on one GPU of ``stage``; the last stage also computes the logits of
        ``logits_tokens`` tokens (vLLM computes them for each sequence's last token only)."""
        first, count = self.stage_layers(stage)
        moe_from = first_moe_layer(self.m.moe, self.m.layers)
        moe_count = max(0, first + count - max(first, moe_from))
        dense_count = count - moe_count
        parts: dict[int, float] = {}
        comps = {"gemm": 0.0, "attention": 0.0, "small_kernels": 0.0, "tp": 0.0, "ep": 0.0}
        flops = 0.0
        calls: dict[str, dict] = {}
        template: list = []
        for n, is_moe in ((dense_count, False), (moe_count, True)):
            if n == 0:
                continue
            lp, lc, lf, lcalls = self.layer(groups, is_moe, stage)
            for i, (_, v) in enumerate(lp):
                parts[i] = parts.get(i, 0.0) + n * v / count
            for k, v in lc.items():
                comps[k] += n * v
            flops += n * lf
            calls.update(lcalls)
            template = lp
        layer_parts = tuple((k, parts[i]) for i, (k, _) in enumerate(template))
        edge = 0.0
        tokens = sum(g.tokens for g in groups)
        small: list[float] = []
        if stage == 0:                                       # the embedding gather (overhead.py)
            small.append(2 * tokens * self.m.hidden * oh.ACT_BYTES)
        if stage == self.pp - 1:
            logits = Gemm(logits_tokens, self.m.vocab / self.tp, self.m.hidden)
            edge = self.gemm(logits)
            flops += logits.flops
            comps["gemm"] += edge
            small += [oh.norm_bytes(tokens, self.m.hidden)] + oh.sampling_bytes(logits_tokens, self.m.vocab)
        comps["small_kernels"] += self.small(small)
        edge += self.small(small)
        send = None
        if stage < self.pp - 1:
            send = _call(self.net, "send-recv", tokens * self.m.hidden * COMM_BYTES, "pp", stage)
        return StageCost(count, layer_parts, comps, edge, flops, calls, send, moe_count)

    def pipeline(self, groups: tuple[Group, ...], logits_tokens: float) -> list[StageCost]:
        """Every stage's pass of ``groups``."""
        return [self.stage(groups, s, logits_tokens) for s in range(self.pp)]


def latency(stages: list[StageCost]) -> float:
    """Seconds from the first stage's start to the last stage's end: the stages and the sends."""
    return sum(s.duration + (s.send["time_s"] if s.send else 0.0) for s in stages)


def decode_context(prompt: int, output: int) -> float:
    """The mean context of a decode step: prompt + output / 2.  A sequence's context grows by one
    token per step from prompt to prompt + output, and attention's cost is linear in it, so the
    mean step costs what the step at the midpoint costs; under continuous batching the running
    sequences are spread over their lives, so the batch's mean context is the same."""
    return prompt + output / 2.0


def chunks(prompt: int, budget: int) -> int:
    """Chunks a prompt of ``prompt`` tokens is prefilled in with a token budget of ``budget`` (0: one)."""
    return 1 if budget <= 0 else math.ceil(prompt / budget)
