"""Frozen layers (``training.frozen_layers``): the first N layers of the model, and the embedding
or stem below them, stop training — as PipeTransformer freezes a growing prefix of the model
(He et al., "PipeTransformer: Automated Elastic Pipelining for Distributed Training of Large-scale
Models", ICML 2021, Sec. 3.1) and FreezeOut freezes layers from the first (Brock et al., arXiv
1706.04983, 2017).

A frozen layer runs its forward only: nothing below it trains, so no input gradient is needed
(its ``bwd_input``), its weights take no gradient (``bwd_weight``) and it is not recomputed; its
backward collectives (TP, EP, the ring's backward) and its activations for the backward go with
them.  Its parameters leave ``params`` — what the gradient buffer, the all-reduce, ZeRO's shards
and the optimizer read — for ``held_bytes`` (the bf16 weights, kept in memory, no optimizer
state).  The embedding below a frozen layer has no gradient from above either; with tied
embeddings the output layer still trains the shared matrix, so its parameters keep training there
(only the lookup's backward goes).  Applied once to the family's spec (registry.workload_spec), so
the builder, the memory model and the traffic read frozen layers like any others.
"""
from __future__ import annotations

from dataclasses import replace

from ..physics.hardware import BYTES_PER_ELEMENT
from ..physics.work import ZERO_WORK
from .spec import EdgeCost, LayerCost, WorkloadSpec

PARAM_BYTES = BYTES_PER_ELEMENT["bf16"]     # the weights' bf16 working copy (techniques/optimizer.py)


def frozen_layer(lc: LayerCost, weight: int = PARAM_BYTES) -> LayerCost:
    """``lc`` frozen (module docstring); ``weight``: bytes of a held weight (physics/hardware.
    weight_bytes: 4 when training in fp32)."""
    held = lc.held_bytes + (lc.params + lc.expert_params) * weight
    return replace(lc, bwd_input=ZERO_WORK, bwd_weight=ZERO_WORK, recompute=ZERO_WORK, params=0.0,
                   expert_params=0.0, act_bytes=0.0, tp_bwd=(), tp_recompute=(), ep_bwd=(),
                   recompute_bytes=0.0, offload_s=0.0, offload_share=0.0, held_bytes=held,
                   edges=tuple(e for e in lc.edges if e.phase != "bwd"), frozen=True,
                   cp_recompute=0.0, ep_recompute=0.0)


def frozen_edge(edge: EdgeCost, tied: bool, weight: int = PARAM_BYTES) -> EdgeCost:
    """The embedding or stem below frozen layers: no backward; its weights held (``weight`` bytes
    each), not trained, unless ``tied`` to the output layer, which trains them."""
    if tied:
        params, held = edge.params, edge.held_bytes
    else:
        params, held = 0.0, edge.held_bytes + edge.params * weight
    return replace(edge, bwd_input=ZERO_WORK, bwd_weight=ZERO_WORK, params=params, act_bytes=0.0,
                   held_bytes=held)


def frozen_spec(spec: WorkloadSpec, n: int, tied: bool = False, weight: int = PARAM_BYTES) -> WorkloadSpec:
    """``spec`` with its first ``n`` layers (and its first edge) frozen: each kind of layer that has
    frozen layers gets a frozen twin, appended to ``kinds``, and the runs are split at layer ``n``;
    ``weight``: bytes of a held weight."""
    if n <= 0:
        return spec
    kinds = list(spec.kinds)
    twin: dict[int, int] = {}
    runs: list[tuple[int, int]] = []
    at = 0
    for kind, count in spec.runs:
        cold = min(max(n - at, 0), count)
        if cold:
            if kind not in twin:
                twin[kind] = len(kinds)
                kinds.append(frozen_layer(spec.kinds[kind], weight))
            runs.append((twin[kind], cold))
        if count - cold:
            runs.append((kind, count - cold))
        at += count
    return replace(spec, kinds=tuple(kinds), runs=tuple(runs), first=frozen_edge(spec.first, tied, weight))
