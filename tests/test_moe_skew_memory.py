"""Routing skew and imbalance fill the busiest expert rank's memory as they slow it (a verdicts hunt,
report section 2: deepseek-v3 at ``model.moe.skew: 0.5`` took 15.9 -> 28.9 s but kept 84.2 of
85.9 GB, shown as fitting; Mixtral at ``model.moe.imbalance: 2`` kept 16.9 GB of activations where
top_k 4, the same routed copies per rank, keeps 30.3).

Routing is dropless (Megatron-Core's default strategy drops and pads no token; only
``--moe-expert-capacity-factor`` caps an expert's tokens, GShard / Switch Transformer Sec. 2.2), so
the busiest rank keeps every routed copy it receives: the per-copy activations (the permuted expert
input, the expert FFN intermediates) scale with the busiest rank's load, the same factor its time
uses (workloads/transformer/moe_load.py); the router, norms, shared experts and attention do not.
"""
from __future__ import annotations

from dataclasses import replace

import pytest

from explorer.config import Scenario
from explorer.design import open_base, search
from explorer.design.space import Space
from explorer.estimate import estimate_many
from explorer.scenario import from_dict, load
from explorer.simulate import simulate
from explorer.workloads.registry import workload_for
from explorer.workloads.spec import LayerCost
from explorer.workloads.transformer.activations import layer_terms
from explorer.workloads.transformer.moe_load import busiest_rank_factor

from conftest import ROOT

DS = ROOT / "scenarios" / "deepseek-v3.yaml"
# Mixtral 8x7B on 64 H100s (the hunt's mixtral.yaml): h 4096, expert width 14336, top-2 of 8, SwiGLU,
# bf16, TP 2 with sequence parallelism, EP 8, 1F1B over 4 stages of 8 layers, selective recompute.
MIXTRAL = {"name": "mixtral 8x7b on 64 H100", "model": {"preset": "mixtral-8x7b"},
           "training": {"global_batch": 256, "micro_batch": 1, "dtype": "bf16", "recompute": "selective"},
           "hardware": {"gpu": "h100-sxm"}, "cluster": {"gpus_per_node": 8, "nodes": 8},
           "parallelism": {"tp": 2, "pp": 4, "dp": 8, "ep": 8, "zero": 1, "sequence_parallel": True}}
TOKENS = 4096                  # seq_len x micro_batch on one GPU
H, F, E, TP, K = 4096, 14336, 2, 2, 2
# Bytes one routed copy keeps per token (activations_terms.moe_mlp_terms): the permuted token as
# the expert FC1 input (h, replicated over TP), the SwiGLU inputs (2f) and its output (f), split.
COPY = H * E + 2 * F * E / TP + F * E / TP                     # 51,200
# Everything else an MoE layer keeps per token under core_attn recompute (FlashAttention's LSE
# dropped): norm + QKV inputs, Q, GQA K and V (8 heads), the output projection input, the MLP norm
# input, the router input and its fp32 scores over 8 experts, split by TP with SP.
OTHER = (3 * H * E + 2 * 8 * 128 * E + 2 * H * E) / TP + H * E / TP + 8 * 4 / TP       # 26,640
BALANCED = TOKENS * (OTHER + K * COPY)                          # 528,547,840 bytes per layer, as before
STAGE0_LAYER_MBS = 4 * 8       # 1F1B stage 0 of 4 holds 4 micro-batches of its 8 layers


def mixtral(**moe: float) -> Scenario:
    """The Mixtral scenario with ``model.moe`` fields overridden."""
    raw = {**MIXTRAL, "model": {"preset": "mixtral-8x7b", "moe": moe}} if moe else MIXTRAL
    return from_dict(raw)


def moe_layer(sc: Scenario) -> LayerCost:
    """The MoE LayerCost of ``sc`` (kind 1 of the transformer spec)."""
    return workload_for(sc.model).spec(sc).kinds[1]


def test_mixtral_moe_layer_keeps_the_closed_form_bytes_at_the_busiest_load():
    """act_bytes = tokens x (other + top_k x load x copy); load 1 is the balanced figure, bit for bit."""
    assert moe_layer(mixtral()).act_bytes == BALANCED == 528_547_840
    assert moe_layer(mixtral(imbalance=2.0)).act_bytes == BALANCED + (2 - 1) * TOKENS * K * COPY
    assert moe_layer(mixtral(imbalance=2.0)).act_bytes == 947_978_240
    f = busiest_rank_factor(8, 8, 2, 1.0)                      # 2.943: Zipf 1 over 8 experts
    skewed = moe_layer(mixtral(skew=1.0)).act_bytes
    assert skewed == pytest.approx(BALANCED + (f - 1) * TOKENS * K * COPY, rel=1e-12)
    assert skewed == pytest.approx(1_343_708_893, rel=1e-9)


def test_only_the_routed_copies_scale_and_one_expert_rank_holds_them_all():
    """The expert terms double at imbalance 2; the router, norms and attention terms are unchanged.
    With EP 1 a GPU receives every copy whichever expert it goes to: nothing scales."""
    even = {t.name: t.bytes for t in layer_terms(mixtral(), True)}
    busy = {t.name: t.bytes for t in layer_terms(mixtral(imbalance=2.0), True)}
    routed = {"expert_fc1_in", "expert_act_in", "expert_fc2_in"}
    assert {n: busy[n] / even[n] for n in routed} == {n: 2.0 for n in routed}
    assert {n: busy[n] for n in busy if n not in routed} == {n: even[n] for n in even if n not in routed}
    assert "router_scores" in busy and "q" in busy
    one = replace(mixtral(imbalance=2.0), parallelism=replace(mixtral().parallelism, ep=1, dp=8))
    assert {t.name: t.bytes for t in layer_terms(one, True)} == even
    assert moe_layer(mixtral(imbalance=2.0)).act_bytes > moe_layer(mixtral()).act_bytes


def test_a_recomputed_expert_activation_returns_at_the_busiest_load():
    """``moe_act`` recompute drops the SwiGLU output (f per copy); in the layer's backward it is live
    again, for every copy the busiest rank received."""
    def transient(**moe) -> float:
        raw = {**MIXTRAL, "model": {"preset": "mixtral-8x7b", "moe": moe},
               "training": {**MIXTRAL["training"], "recompute_modules": ["core_attn", "moe_act"]}}
        return moe_layer(from_dict(raw)).recompute_bytes
    lse = 32 * 4 / TP                                          # FlashAttention's fp32 LSE, per token
    assert transient() == TOKENS * (lse + K * F * E / TP)
    assert transient(imbalance=2.0) == TOKENS * (lse + 2 * K * F * E / TP)


def test_mixtral_imbalance_2_holds_what_top_k_4_holds():
    """Stage 0 of 1F1B keeps 4 micro-batches of 8 layers: 16.9 GB balanced, plus one more top_k's
    worth of copies at imbalance 2, 13.4 GB: 30.3 GB, what top_k 4 keeps; simulation and estimator
    agree on it."""
    even, busy, top4 = simulate(mixtral()), simulate(mixtral(imbalance=2.0)), simulate(mixtral(top_k=4))
    extra = STAGE0_LAYER_MBS * (2 - 1) * TOKENS * K * COPY
    assert busy.memory.activations == pytest.approx(even.memory.activations + extra, rel=1e-12)
    assert [f"{r.memory.activations / 1e9:.1f}" for r in (even, busy, top4)] == ["16.9", "30.3", "30.3"]
    assert busy.memory.activations == pytest.approx(top4.memory.activations, rel=1e-12)
    est = estimate_many([mixtral(imbalance=2.0)])
    assert est.memory_GB_total[0] == pytest.approx(busy.memory.as_GB()["total"], rel=1e-9)


def test_deepseek_v3_at_skew_half_does_not_fit_and_says_so():
    """DeepSeek-V3's busiest of 64 expert ranks takes 2.69x the mean at skew 0.5 (28.9 s): it keeps
    2.69x the routed copies, 126.6 of 85.9 GB, and the run warns; skew 0 stays at 84.2 GB.  The
    MoE layer's bytes follow the closed form (FP8 expert input h and SwiGLU inputs 2f per copy,
    the SwiGLU output recomputed: moe_act)."""
    even, skew = load(DS), load(DS, {"model.moe.skew": 0.5})
    f = busiest_rank_factor(256, 64, 8, 0.5)
    assert f == pytest.approx(2.688, abs=1e-3)
    copy = 7168 * 1 + 2 * 2048 * 1                              # FP8 (1 byte), TP 1
    assert moe_layer(skew).act_bytes == pytest.approx(moe_layer(even).act_bytes + (f - 1) * 8 * 4096 * copy,
                                                      rel=1e-12)
    r0, r = simulate(even), simulate(skew)
    assert not r0.memory_over_capacity and f"{r0.memory.total / 1e9:.1f}" == "84.2"
    assert r.memory_over_capacity and "memory" in r.warning_kinds
    assert f"{r.memory.total / 1e9:.1f}" == "126.6"
    est = estimate_many([skew, even])
    assert list(map(bool, est.fits)) == [False, True]
    assert est.memory_GB_total[0] == pytest.approx(r.memory.as_GB()["total"], rel=1e-9)


def test_the_memory_limited_split_and_the_estimator_see_the_busiest_ranks_bytes():
    """At imbalance 1.5 the time-balanced split needs 96.7 GB: the split moves layers off the ranks
    holding many micro-batches and fits (83.2 GB), and the estimator prices that same answer."""
    sc = load(DS, {"model.moe.imbalance": 1.5})
    r = simulate(sc)
    assert not r.memory_over_capacity and f"{r.memory.total / 1e9:.1f}" == "83.2"
    assert tuple(r.stage_layers) != tuple(simulate(load(DS)).stage_layers)
    est = estimate_many([sc])
    assert bool(est.fits[0]) and est.iteration_time_s[0] == pytest.approx(r.iteration_time_s, rel=1e-9)
    assert est.memory_GB_total[0] == pytest.approx(r.memory.as_GB()["total"], rel=1e-9)


def test_a_search_at_skew_half_ranks_only_layouts_that_fit():
    """``search deepseek-v3 --set model.moe.skew=0.5``: the scenario's own layout does not fit, and
    every layout ranked fits when simulated."""
    base = open_base("deepseek-v3", {"model.moe.skew": 0.5})
    res = search(base, top=3, space=Space(schedules=("dualpipe",), zero=(1,), recompute=("selective",),
                                          vpp=(1,), sequence_parallel=(True,), max_micro_batch=1))
    assert res.baseline is not None and not res.baseline.memory.fits
    assert "does not fit" in res.verdict()
    assert res.top
    for c in res.top:
        r = simulate(load(DS, {"model.moe.skew": 0.5, **c.to_json()["overrides"]}))
        assert not r.memory_over_capacity
        assert r.memory.total / 1e9 == pytest.approx(c.figures["memory_GB_total"], rel=1e-9)
