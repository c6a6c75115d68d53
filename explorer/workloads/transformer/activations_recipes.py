"""Memory recipes that move or drop a layer's saved activations for only part of a pipeline chunk:
block recomputation of N layers and activation offloading of N layers to host memory.

Both are set per pipeline chunk (``training.recompute_layers``: Megatron-LM ``--recompute-method
block --recompute-num-layers N``, "recompute the input activations of only a set number of
individual transformer layers per pipeline stage", megatron/training/arguments.py;
``training.offload_activations_layers``: Megatron-Core ``cpu_offloading_num_layers``, which
Transformer Engine's ``get_cpu_offload_context`` uses to offload that many of a model chunk's
layers — NeMo's performance recipes set it as ``activation_offload_layers``,
scripts/performance/recommended_model_configs/model_configs_gb200.csv).  The simulator keeps one
cost per layer kind, so a chunk's N of its L layers are spread as the fraction N/L of every layer
(exact in sums over a chunk of L layers: memory, FLOPs and transfer seconds add up per layer).

Offloaded activations leave the HBM peak; what stays is the copy in flight: Transformer Engine
double-buffers (one layer being copied out while the next computes; in the backward one being
brought back while the previous layer's backward runs), so one offloaded layer's activations are
live on top of the rest (:func:`offload_transient_bytes`).
"""
from __future__ import annotations

from ...config import Scenario
from ...config.frameworks import profile
from ...config.recompute import recompute_in_force
from ...physics.host_link import host_link_Bps


def recompute_kind(sc: Scenario) -> str:
    """The recompute policy in force (config/recompute.recompute_in_force: named modules make
    ``recompute: none`` selective, as NeMo's recipes give them)."""
    return recompute_in_force(sc.training)


def chunk_layers(sc: Scenario) -> float:
    """Transformer layers of an average pipeline chunk (a pipeline layout's empty embedding-only
    and loss-only chunks hold none, so they are not counted)."""
    p = sc.parallelism
    given = p.pipeline_layout or p.stage_layers
    chunks = sum(1 for n in given if n > 0) if given else p.pp * p.vpp
    return sc.model.layers / max(chunks, 1)


def _share(n: int, sc: Scenario) -> float:
    """The fraction of a chunk's layers that ``n`` layers per chunk are (at most all of them)."""
    return min(n, chunk_layers(sc)) / chunk_layers(sc) if n > 0 else 0.0


def recompute_share(sc: Scenario) -> float:
    """Share of the layers fully recomputed: N/L under ``recompute_layers`` N, else 1 for full
    recompute and 0 otherwise (selective is a per-module policy of every layer)."""
    if sc.training.recompute_layers > 0:
        return _share(sc.training.recompute_layers, sc)
    return 1.0 if recompute_kind(sc) == "full" else 0.0


def ring_recompute_share(sc: Scenario) -> float:
    """Share of a layer's forward context-parallel ring (its cp-1 K/V hand-offs) that recomputation
    runs again in the backward.  Full recompute (Megatron-Core ``recompute_granularity="full"``:
    TransformerBlock._checkpointed_forward re-runs whole layers) and block recompute of N layers
    repeat the layer's forward, its core attention with it; selective recompute with ``core_attn``
    (Attention._checkpointed_attention_forward, megatron/core/transformer/attention.py) re-runs the core
    attention alone.  Under CP that core is Transformer Engine's DotProductAttention, whose forward is
    the ring (AttnFuncWithCPAndKVP2P.forward: a send to the next CP rank and a receive from the one
    before at each of its cp-1 steps), so either sends the K/V blocks round the ring again.  Other
    modules (layernorm, mla_up_proj, moe_act, mlp) and torchtitan's op-level selective AC (the attention
    output is saved: FrameworkProfile.selective_policy "every-other-matmul") re-run no ring."""
    share = recompute_share(sc)
    tr = sc.training
    modules_policy = profile(tr.framework).selective_policy == "modules"
    if (share == 0.0 and recompute_kind(sc) == "selective" and modules_policy
            and "core_attn" in tr.recompute_modules):
        return 1.0
    return share


def dispatch_recompute_share(sc: Scenario) -> float:
    """Share of a MoE layer's token dispatch and combine all-to-alls that recomputation runs again:
    the recomputed share of whole layers (full or block recompute re-run the layer's forward, the
    MoELayer's token dispatcher included: megatron/core/transformer/moe/moe_layer.py, its dispatch
    and combine all-to-alls in token_dispatcher.py).  Selective modules repeat no all-to-all:
    ``moe_act`` re-runs the experts' activation function on the tokens already received (Megatron-Core
    recompute_modules), ``mlp`` is the dense MLP."""
    return recompute_share(sc)


def offload_share(sc: Scenario) -> float:
    """Share of the layers whose saved activations go to host memory."""
    return _share(sc.training.offload_activations_layers, sc)


def offload_seconds(sc: Scenario, layer_bytes: float) -> float:
    """Seconds to copy one offloaded layer's ``layer_bytes`` over the host link, each way."""
    return layer_bytes / host_link_Bps(sc) if offload_share(sc) > 0 else 0.0
