"""Rules on a model's sections that were accepted and then changed nothing: half a mixture-of-experts
section on a dense model, a transformer layer's recipes on another family (explorer/config/rules.py
lists them in RULES)."""
from __future__ import annotations

import dataclasses

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
    """Recomputing N layers per chunk and offloading N layers' activations are a transformer
    layer's recipes (Megatron's recompute_num_layers, Transformer Engine's activation offloading):
    another family's layers do not read them, so they are refused, not ignored."""
    m, tr = sc.model, sc.training
    if m.kind == "transformer":
        return
    for name in ("recompute_layers", "offload_activations_layers"):
        n = getattr(tr, name)
        if n:
            raise ScenarioError(f"training.{name}", f"{n}: a {m.kind} model's layers are not recomputed or "
                                                    "offloaded here (a transformer's recipe); set it to 0")
