"""LoRA fine-tuning (``training.lora_rank``): the base weights frozen, low-rank adapters trained.

Hu et al., "LoRA: Low-Rank Adaptation of Large Language Models" (ICLR 2022, arXiv 2106.09685),
Sec. 4.1: a weight W0 (d x k) is frozen and its update is the product B A of B (d x r) and A
(r x k); the forward computes W0 x + B A x.  NeMo 2.0's LoRA puts an adapter on every linear of a
transformer block by default (``target_modules`` linear_qkv, linear_proj, linear_fc1 and
linear_fc2; ``dim`` 32: NVIDIA/NeMo nemo/collections/llm/peft/lora.py), which is what is priced
here: every weight GEMM of the layer but the MoE router.

What changes for one layer (Hu et al. Sec. 4.2, "we do not need to calculate the gradients or
maintain the optimizer states for most parameters"):

- the base GEMMs keep their forward and their input gradients (dgrad: the gradient must reach the
  layers below), but compute no weight gradients (wgrad);
- each adapter runs two skinny GEMMs per pass in bf16 (NeMo's adapters are not FP8 modules): the
  down projection A (k x r on this GPU's shard of the input width) and the up projection B (r x n
  on its shard of the output width), forward, dgrad and wgrad like any linear;
- the trained parameters, and with them the gradient buffer, the data-parallel all-reduce,
  ZeRO's shards and the optimizer state, are the adapters' only; the base weights stay in memory
  in the training dtype (``held_bytes``), as a frozen layer's do (workloads/freezing.py), and in an
  FP8 run keep the FP8 copies the non-LoRA path keeps for them (``fp8_params``: the cast weight
  and, on Hopper, its transpose for the dgrad that still runs; or, under a recipe whose FP8 copy is
  the weight, that copy instead of the bf16 one: taskgraph/techniques/fp8_memory.py), while the
  bf16 adapters have none;
- activations are kept as before: the adapters' weight gradients read each linear's input, and
  the element-wise backward reads what it read;
- the tensor-parallel collectives are unchanged: the backward still gathers and scatters the
  input gradients, and the adapters' A on a row-parallel linear reads the gathered input
  (its (tokens x r) output's all-reduce over TP, r / hidden of a layer's TP bytes, is not drawn).

The embedding and the output layer are frozen too: the embedding has no backward at all (nothing
below it trains), the output layer keeps its dgrad only.

A rank is refused where an adapter would hold as many weights as the matrix it adapts,
r (k + n) >= k n for a targeted (k x n) GEMM on this GPU's shard (Hu et al. Sec. 4.1: "the rank
r << min(d, k)"; a low-rank update that large is no longer low rank, and it would train more
weights than full fine-tuning): :func:`largest_rank`.
"""
from __future__ import annotations

import math
from dataclasses import replace

from ...config import ScenarioError
from ...physics.work import ZERO_WORK, Gemm
from ..freezing import frozen_edge
from ..spec import EdgeCost, LayerCost
from ..timing import GemmTimer


def adapters(targets: list[Gemm], rank: int) -> list[Gemm]:
    """The adapters of ``targets``: per base GEMM (m x k) @ (k x n), A as (m x k) @ (k x r) and B as
    (m x r) @ (r x n), ``count`` times (a grouped GEMM's experts each have their own), in bf16.

    >>> [(g.n, g.k) for g in adapters([Gemm(4096, 1024, 512)], 16)]
    [(16, 512), (1024, 16)]
    """
    out = []
    for g in targets:
        out.append(Gemm(g.m, rank, g.k, g.count, fp8=False, ragged=g.ragged))
        out.append(Gemm(g.m, g.n, rank, g.count, fp8=False, ragged=g.ragged))
    return out


def largest_rank(targets: list[Gemm]) -> int:
    """The largest rank r at which every adapter of ``targets`` holds fewer weights than the
    (k x n) matrix it adapts, r (k + n) < k n (module docstring): ceil(k n / (k + n)) - 1 for the
    narrowest.

    >>> largest_rank([Gemm(4096, 2048, 2048), Gemm(4096, 8192, 2048)])
    1023
    """
    out = math.inf
    for g in targets:
        r = math.ceil(g.k * g.n / (g.k + g.n)) - 1
        while r > 0 and r * (g.k + g.n) >= g.k * g.n:        # a float product on the boundary
            r -= 1
        out = min(out, r)
    return int(out) if out != math.inf else 0


# Which linears carry adapters (``training.lora_targets``, config/sections.LORA_TARGETS): every one
# (NeMo 2.0's default target_modules linear_qkv, linear_proj, linear_fc1, linear_fc2), the attention
# block's (query/key/value and output projections), or its query/key/value projections only (NeMo
# 1.0's default ``attention_qkv``; Hu et al. Sec. 7.1 adapt W_q and W_v, Hugging Face PEFT's default).


def targeted(targets: str, attention: list[Gemm], mlp: list[Gemm], routed: list[Gemm]) -> tuple[list[Gemm],
                                                                                             list[Gemm]]:
    """(dense, routed) GEMMs that carry adapters for ``targets`` (one of LORA_TARGETS): ``attention`` is
    the attention block's GEMMs, its output projection last (transformer/attention.attention_block);
    ``mlp`` the dense and shared-expert MLP's; ``routed`` the routed experts'.

    >>> qkv, out, up = Gemm(8, 384, 128), Gemm(8, 128, 128), Gemm(8, 512, 128)
    >>> [len(x) for x in targeted("qkv", [qkv, out], [up], [])], len(targeted("all", [qkv, out], [up], [])[0])
    ([1, 0], 3)
    """
    if targets == "qkv":
        return attention[:-1], []
    if targets == "attention":
        return list(attention), []
    return list(attention) + list(mlp), list(routed)


def lora_layer(lc: LayerCost, timer: GemmTimer, dense: list[Gemm], routed: list[Gemm], rank: int,
               weight: int) -> LayerCost:
    """``lc`` fine-tuned with rank-``rank`` adapters on its ``dense`` and ``routed`` weight GEMMs
    (module docstring); ``weight``: bytes of a held base weight (physics/hardware.weight_bytes).
    A ScenarioError naming training.lora_rank and the largest valid rank when an adapter would be
    as large as its matrix (:func:`largest_rank`)."""
    top = largest_rank(dense + routed)
    if rank > top:
        g = min(dense + routed, key=lambda g: largest_rank([g]))       # the matrix that bounds it
        raise ScenarioError("training.lora_rank", f"{rank}: an adapter of the {g.k:g} x {g.n:g} weight "
                            f"on one GPU would hold r (k + n) = {rank * (g.k + g.n):,.0f} weights, not "
                            f"fewer than the {g.k * g.n:,.0f} it adapts (Hu et al., LoRA: r << min(k, n)); "
                            f"use at most {top}")
    dense_ad, routed_ad = adapters(dense, rank), adapters(routed, rank)
    a_f, a_d, a_w, _, _ = timer.passes(dense_ad + routed_ad)
    fwd = lc.fwd + a_f
    # Full recomputation repeats the whole forward, adapters included; a policy that recomputes
    # part of it (selective, block) keeps its own share (the adapters are 1-2 % of a layer).
    recompute = fwd if lc.recompute == lc.fwd else lc.recompute
    base = lc.params + lc.expert_params
    # The base keeps what the non-LoRA path keeps per parameter: the weight, and in an FP8 run its
    # FP8 copies (fp8_params, as many as before: the same base GEMMs run FP8); the adapters are bf16.
    return replace(lc, fwd=fwd, bwd_input=lc.bwd_input + a_d, bwd_weight=a_w, recompute=recompute,
                   params=sum(g.params for g in dense_ad), expert_params=sum(g.params for g in routed_ad),
                   held_bytes=lc.held_bytes + base * weight,
                   fp8_params=base if lc.fp8_params is None else lc.fp8_params)


def lora_first(edge: EdgeCost, weight: int) -> EdgeCost:
    """The embedding under LoRA: frozen, no backward (nothing below it trains), weights held."""
    return frozen_edge(edge, tied=False, weight=weight)


def lora_last(edge: EdgeCost, weight: int) -> EdgeCost:
    """The output layer under LoRA: its input gradient still flows into the last layer; no weight
    gradient; its weights held (``weight`` bytes each), not trained."""
    return replace(edge, bwd_weight=ZERO_WORK, params=0.0, held_bytes=edge.held_bytes + edge.params * weight)
