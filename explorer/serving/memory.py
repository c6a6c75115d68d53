"""Memory of a serving GPU: its share of the weights, the KV cache per token, the activation
workspace, and the largest batch whose KV cache fits beside them.

KV cache (Kwon et al., "Efficient Memory Management for LLM Serving with PagedAttention", SOSP
2023, Sec. 2.2: every token keeps its key and value vectors in every layer):
- multi-head / grouped-query attention: layers x kv_heads x head_dim x 2 (K and V) x bytes per
  token; tensor parallelism splits the KV heads, and when tp exceeds them each rank keeps one head
  (vLLM replicates KV heads: ``get_num_kv_heads`` = max(1, kv_heads // tp));
- multi-head latent attention (DeepSeek-V2, arXiv 2405.04434, Sec. 2.1.2, Table 1): the compressed
  latent of kv_lora_rank elements plus the decoupled rope key of qk_rope_head_dim per token and layer,
  shared by all heads, so every tensor-parallel rank keeps it whole (why SGLang and DeepSeek's own
  system run MLA with data-parallel attention, DeepSeek-V3 arXiv 2412.19437 Sec. 3.4).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ..config import Scenario
from ..config.sections import Model
from ..physics.hardware import BYTES_PER_ELEMENT
from ..workloads.registry import attention_of
from . import mix


def mlp_matrices(m: Model) -> int:
    """Weight matrices of one FFN: gate, up and down for SwiGLU (Shazeer 2020), up and down for GeLU."""
    return 3 if m.ffn_kind == "swiglu" else 2


def kv_elements_per_token_layer(m: Model) -> float:
    """K and V elements one token keeps in one layer, the whole model (all heads)."""
    if m.mla is not None:
        return float(m.mla.kv_lora_rank + m.mla.qk_rope_head_dim)
    kv = m.kv_heads if m.kv_heads is not None else m.heads
    return 2.0 * kv * attention_of(m).head_dims(m)[0]


def kv_bytes_per_token(m: Model, kv_dtype: str) -> float:
    """KV-cache bytes of one token across the whole model (every layer, every head)."""
    return m.layers * kv_elements_per_token_layer(m) * BYTES_PER_ELEMENT[kv_dtype]


def kv_bytes_per_token_gpu(m: Model, kv_dtype: str, tp: int, pp: int) -> float:
    """KV-cache bytes of one token on one GPU of a tp x pp replica (the busiest stage's layers)."""
    layers = math.ceil(m.layers / pp)
    if m.mla is not None:
        per_layer = kv_elements_per_token_layer(m)           # the latent is not split over heads
    else:
        kv = m.kv_heads if m.kv_heads is not None else m.heads
        per_layer = 2.0 * max(kv // tp, 1) * attention_of(m).head_dims(m)[0]
    return layers * per_layer * BYTES_PER_ELEMENT[kv_dtype]


@dataclass(frozen=True)
class Params:
    """Parameters of the served model, split by how a replica shards them."""

    dense: float        # attention, norms, dense FFNs, shared experts, routers: split over tp x pp
    routed: float       # routed experts: split over ep (over tp when ep is 1) x pp
    embeddings: float   # input embedding and output layer: split over tp, on the edge stages


def params(m: Model) -> Params:
    """The served model's parameters (multi-token-prediction modules excluded: a server loads them
    only for speculative decoding)."""
    assert m.ffn_hidden is not None                       # filled by the loader's defaults
    mats = mlp_matrices(m)
    attn = attention_of(m).params(m) + 4 * m.hidden            # + the two RMSNorm gains (and biases' order)
    dense_layers = m.layers - m.moe_layers
    dense = dense_layers * (attn + mats * m.hidden * m.ffn_hidden)
    routed = 0.0
    if m.moe is not None and m.is_moe:
        e = m.moe
        dense += m.moe_layers * (attn + e.shared_experts * mats * m.hidden * e.expert_ffn_hidden
                                 + m.hidden * e.experts)
        routed = m.moe_layers * e.experts * mats * m.hidden * e.expert_ffn_hidden
    emb = m.vocab * m.hidden * (1 if m.tied_embeddings else 2)
    return Params(dense, routed, emb)


def weight_bytes_gpu(m: Model, wdtype: str, tp: int, pp: int, ep: int) -> float:
    """Weight bytes on one GPU of the first stage (it holds the input embedding; the last stage's
    output layer is the same size): dense weights over tp x pp, routed experts over ep x pp
    (over tp x pp when ep is 1: experts then split by columns like a dense FFN)."""
    p = params(m)
    shards = ep if ep > 1 else tp
    one = m.vocab * m.hidden / tp                   # the input embedding's share (vocab-parallel)
    edge = one if pp > 1 else p.embeddings / tp     # one stage: the output layer too, unless tied
    return (p.dense / (tp * pp) + p.routed / (shards * pp) + edge) * BYTES_PER_ELEMENT[wdtype]


# Activation workspace per token of the largest pass, in hidden-size vectors: the residual stream,
# the normed input, the attention output and the QKV / FFN intermediates that live at once (vLLM sizes
# it by a dummy forward of max_num_batched_tokens, ``profile_run``; here the tensors of one layer).
WORKSPACE_HIDDEN_VECTORS = 4


def workspace_bytes(sc: Scenario, tokens: float, tp: int, batch: int) -> float:
    """Activation workspace of a pass over ``tokens`` tokens on one GPU: one layer's live tensors in
    the activation dtype plus fp32 logits of the batch's last tokens (vocab / tp columns each)."""
    m = sc.model
    inf = sc.inference
    assert inf is not None and m.ffn_hidden is not None
    a = BYTES_PER_ELEMENT[inf.activation_dtype]
    ffn = (m.moe.expert_ffn_hidden * max(m.moe.top_k, 1) if m.is_moe and m.moe else m.ffn_hidden)
    per_token = (WORKSPACE_HIDDEN_VECTORS * m.hidden + mlp_matrices(m) * ffn / tp) * a
    return tokens * per_token + batch * m.vocab / tp * 4


@dataclass(frozen=True)
class ServingMemory:
    """One GPU of a decode replica: what it holds and the batch its KV cache allows."""

    weights: float            # bytes
    workspace: float          # bytes
    kv_per_token: float       # bytes of one token's KV on this GPU
    kv_batch: float           # bytes of the configured batch at full context
    usable: float             # bytes the server may use (capacity x memory_utilization)
    max_batch: int            # sequences of prompt + output tokens whose KV fits


def serving_memory(sc: Scenario, tp: int, pp: int, ep: int, pass_tokens: float) -> ServingMemory:
    """Memory of one GPU of a tp x pp (ep) replica serving ``sc``'s requests, the largest pass being
    ``pass_tokens`` tokens.  ``max_batch`` = (usable - weights - workspace) // (KV of one sequence at
    prompt + output tokens), vLLM's KV block budget (gpu_memory_utilization x capacity - weights - peak
    activations) turned into whole sequences; 0 when the weights alone do not fit."""
    inf = sc.inference
    assert inf is not None
    m = sc.model
    weights = weight_bytes_gpu(m, inf.weight_dtype, tp, pp, ep)
    work = workspace_bytes(sc, pass_tokens, tp, inf.batch)
    per_token = kv_bytes_per_token_gpu(m, inf.kv_dtype, tp, pp)
    # A running sequence's full context, over the running batch (serving/mix.py: one kind, P + O).
    context = mix.batch_mean(inf, lambda prompt, output: float(prompt + output))
    usable = sc.hardware.gpu.capacity_bytes * inf.memory_utilization
    free = usable - weights - work
    max_batch = max(int(free // (per_token * context)), 0) if per_token > 0 else 0
    return ServingMemory(weights, work, per_token, inf.batch * context * per_token, usable, max_batch)
