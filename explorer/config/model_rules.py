"""Rules on a model's sections that were accepted and then changed nothing: half a mixture-of-experts
section on a dense model, a transformer layer's recipes on another family (explorer/config/rules.py
lists them in RULES)."""
from __future__ import annotations

import dataclasses
from typing import Any

from .model_parts import MoE
from .schema import ScenarioError
from .sections import Scenario


def rule_moe_section_routes(sc: Scenario) -> None:
    """A ``model.moe`` section routes tokens (experts and top_k both set) or keeps its defaults:
    experts without a top_k, a top_k without experts, or any other MoE field on a dense model
    would be accepted and change nothing (Model.is_moe is then False)."""
    moe = sc.model.moe
    if moe is None or moe.routed:
        return
    if moe.experts and not moe.top_k:
        raise ScenarioError("model.moe.top_k", f"0 with model.moe.experts = {moe.experts}: a mixture of "
                            "experts routes each token to top_k >= 1 of them; set top_k (e.g. 2), or "
                            "experts 0 for a dense model")
    if moe.top_k and not moe.experts:
        raise ScenarioError("model.moe.experts", f"0 with model.moe.top_k = {moe.top_k}: set the routed "
                            "experts (e.g. 8), or top_k 0 for a dense model")
    default = MoE()
    for f in dataclasses.fields(MoE):
        value = getattr(moe, f.name)
        if value != getattr(default, f.name):
            raise ScenarioError(f"model.moe.{f.name}", f"{value!r} on a dense model (model.moe.experts "
                                "and top_k are 0): no experts to route; set experts and top_k first")


def rule_layer_recipes_need_a_transformer(sc: Scenario) -> None:
    """Recomputing N layers per chunk, offloading N layers' activations and LoRA's adapters are a
    transformer layer's recipes (Megatron's recompute_num_layers, Transformer Engine's activation offloading):
    another family's layers do not read them, so they are refused, not ignored.  LoRA's gradients
    are the adapters', whose (k x r) and (r x n) matrices PowerSGD, top-k or quantisation would
    compress, not the base's (k x n) that network/compression.py prices: the pair is refused."""
    m, tr = sc.model, sc.training
    if m.kind == "transformer":
        kind = sc.communication.compression.kind
        if tr.lora_rank and kind != "none":
            raise ScenarioError("communication.compression.kind", f"{kind!r} with training.lora_rank "
                                f"{tr.lora_rank}: compressing LoRA adapters' gradients is not modelled "
                                "(it is priced on the base weights); use kind none or lora_rank 0")
        if m.head_dim is not None and m.mla is not None:
            raise ScenarioError("model.head_dim", f"{m.head_dim} on a model with multi-head latent "
                                "attention, whose widths are model.mla's (qk_nope_head_dim, "
                                "qk_rope_head_dim, v_head_dim): set those, or leave head_dim out")
        # The defaults fill kv_heads with heads; another value was given, and MLA reads none (its
        # K and V come from the kv latent per query head: a hunt found kv_heads 1 changing nothing).
        if m.mla is not None and m.kv_heads is not None and m.kv_heads != m.heads:
            raise ScenarioError("model.kv_heads", f"{m.kv_heads} on a model with multi-head latent "
                                "attention, whose keys and values come from the kv latent "
                                "(model.mla.kv_lora_rank) for every query head: leave kv_heads out")
        return
    if tr.lora_rank:
        raise ScenarioError("training.lora_rank", f"{tr.lora_rank}: LoRA adapters are priced on a "
                            f"transformer's linears (workloads/transformer/lora.py), not a {m.kind} "
                            "model's; set it to 0")
    for name in ("recompute_layers", "offload_activations_layers"):
        n = getattr(tr, name)
        if n:
            raise ScenarioError(f"training.{name}", f"{n}: a {m.kind} model's layers are not recomputed or "
                                                    "offloaded here (a transformer's recipe); set it to 0")
    # The other attention, FP8 and tensor-parallel recipes of a transformer layer: no other family's
    # layers read them (found by an invariant hunt: each gave byte-identical results on every family).
    for key, value, unset in _transformer_only(sc):
        if value != unset:
            # A list as a link or --set writes it, not a Python tuple.
            shown = f"[{', '.join(value)}]" if isinstance(value, tuple) else repr(value)
            raise ScenarioError(key, f"{shown}: a model of kind {m.kind} has no attention or "
                                     "tensor-parallel layers that read it; leave it out")


def rule_heads_divide_hidden(sc: Scenario) -> None:
    """Without ``model.head_dim`` each head is hidden / heads wide, so heads divide hidden (Megatron-LM
    asserts it unless kv_channels is given; found by an invariant hunt: 4,096 heads of a 2,048 hidden
    ran with heads half an element wide).  A model that decouples the width sets head_dim."""
    m = sc.model
    if m.kind != "transformer" or m.head_dim is not None or m.mla is not None or not m.heads:
        return
    if m.hidden % m.heads:
        valid = [d for d in range(1, m.hidden + 1) if m.hidden % d == 0 and d <= 4 * m.heads][-6:]
        raise ScenarioError("model.heads", f"{m.heads} does not divide model.hidden={m.hidden} (each head "
                            f"would be {m.hidden / m.heads:.4g} wide): choose heads that divide it "
                            f"(e.g. {', '.join(map(str, valid))}) or set model.head_dim")


def _transformer_only(sc: Scenario) -> tuple[tuple[str, object, object], ...]:
    """(field, value, its default) of the transformer-layer settings refused on other families."""
    tr, m = sc.training, sc.model
    default: dict[str, Any] = {f.name: f.default for f in dataclasses.fields(tr)}
    return (("model.head_dim", m.head_dim, None),
            ("training.attention_kernel", tr.attention_kernel, "auto"),
            ("training.flash_attention", tr.flash_attention, True),
            ("training.recompute_modules", tuple(tr.recompute_modules), tuple(default["recompute_modules"])),
            ("training.fp8_recipe", tr.fp8_recipe, None),
            ("training.fp8_storage", tr.fp8_storage, "te"),
            ("parallelism.sequence_parallel", sc.parallelism.sequence_parallel, False),
            ("communication.tp_overlap", sc.communication.tp_overlap, False))
