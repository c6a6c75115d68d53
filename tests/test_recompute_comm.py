"""Recomputation repeats the communication of the forward it re-runs (hunt s19, defect 3): the CP
ring's K/V hand-offs and the MoE dispatch/combine all-to-alls, as it already repeated TP's collectives.

What re-runs what (explorer/workloads/transformer/activations_recipes.py): full recompute (Megatron-Core
TransformerBlock._checkpointed_forward re-runs whole layers) and block recompute of N of a chunk's L
layers repeat the ring and the all-to-alls of those layers; selective ``core_attn``
(Attention._checkpointed_attention_forward) re-runs the core attention, which under CP is Transformer
Engine's AttnFuncWithCPAndKVP2P, its forward the ring: the ring again, no all-to-all; the other modules
(layernorm, mla_up_proj, moe_act, mlp) and torchtitan's op-level selective AC (the attention output is
saved) neither.  Closed forms: a GPU's CP bytes per layer and micro-batch are (cp-1) x kv x (3 + r),
r the recomputed share; its EP bytes per MoE layer and micro-batch (2 forward + 2 backward + 2r) x
the all-to-all buffer x (ep-1)/ep; the recomputed ring's exposed seconds per layer are the forward's,
(cp-1) x max(0, step - a).
"""
from __future__ import annotations

import pytest

from explorer.estimate.many import estimate
from explorer.network.groups import Network
from explorer.physics.hardware import ComputeModel
from explorer.scenario import load
from explorer.simulate import simulate
from explorer.taskgraph.make import iteration_builder
from explorer.workloads.registry import workload_for

from conftest import ROOT

LC = ROOT / "scenarios" / "long-context-cp.yaml"
ACROSS = {"parallelism.order": "tp-dp-cp-pp", "cluster.scale_out.nic_Gbps": 50}
KV = 2 * 8 * 128 * (131072 // 8) * 2          # 2 x kv_heads x head_dim x s/cp x 2 B = 67.1 MB
LAYERS, MICRO_BATCHES, CP = 32, 1, 8           # long-context-cp: global batch 8 over dp 8

MIXTRAL = """\
name: mixtral 8x7b on 64 H100
model: {preset: mixtral-8x7b}
training: {global_batch: 256, micro_batch: 1, dtype: bf16, recompute: selective}
hardware: {gpu: h100-sxm}
cluster: {gpus_per_node: 8, nodes: 8}
parallelism: {tp: 2, pp: 4, dp: 8, ep: 8, zero: 1, sequence_parallel: true}
"""


def _cp_bytes(rounds: float) -> float:
    """A GPU's ring bytes per iteration: (cp-1) hand-offs of K/V, ``rounds`` of them a layer."""
    return (CP - 1) * KV * rounds * LAYERS * MICRO_BATCHES


# (overrides, rounds of K/V a layer): what re-runs the ring, and beside it what does not.
CP_CASES = (
    ({"training.recompute": "none"}, 3),                       # forward K/V + backward K/V and dK/dV
    ({"training.recompute": "full"}, 4),                       # + the recomputed forward's K/V
    ({"training.recompute": "selective"}, 4),                  # core_attn (the default module): the ring
    ({"training.recompute": "selective", "training.recompute_modules": ["layernorm"]}, 3),
    ({"training.recompute": "none", "training.recompute_layers": 8}, 3 + 8 / 32),     # block: 8 of 32
    ({"training.frozen_layers": 16}, (16 * 1 + 16 * 4) / 32),  # frozen layers: forward only, no recompute
    ({"training.framework": "fsdp", "training.recompute": "selective", "parallelism.zero": 3}, 3),
)


def test_cp_ring_bytes_count_the_recomputed_forward():
    """(cp-1) x kv x (3 + r) per layer and micro-batch: 45.10 GB without recompute, 60.13 GB with full
    recompute or selective core_attn (was 45.10 GB for all), 46.98 GB recomputing 8 layers of 32;
    selective layernorm and torchtitan's op-level AC re-run no ring."""
    for over, rounds in CP_CASES:
        r = simulate(load(LC, over))
        assert r.comm_bytes_per_gpu["cp"] == pytest.approx(_cp_bytes(rounds), rel=1e-12), over


def test_full_recompute_exposes_the_recomputed_ring_across_nodes():
    """long-context-cp with its ring across 50 Gb/s NICs: full recompute adds the forward ring's
    exposed time once more, 32 x 7 x (11.458 - 4.633) ms = 1.529 s (47.8 ms a layer): cp 4.578 ->
    6.107 s, iteration 11.99 -> 13.52 s (was cp 4.578 s either way).  The estimator agrees."""
    none = load(LC, {**ACROSS, "training.recompute": "none"})
    full = load(LC, {**ACROSS, "training.recompute": "full"})
    r_none, r_full = simulate(none), simulate(full)
    step = Network(full).cost("send-recv", KV, "cp", 0).time_s
    lc = workload_for(full.model).spec(full).kinds[0]
    a = ComputeModel.for_scenario(full).time(lc.attn_core_fwd) / CP
    assert step == pytest.approx(KV / (50e9 / 8 * 0.94) + 35e-6, rel=1e-12)       # one NIC + latency
    again = LAYERS * MICRO_BATCHES * (CP - 1) * max(0.0, step - a)
    assert again == pytest.approx(1.5287, rel=1e-4)
    assert r_full.breakdown_s["cp"] == pytest.approx(r_none.breakdown_s["cp"] + again, rel=1e-12)
    assert r_full.breakdown_s["cp"] == pytest.approx(6.1069, rel=1e-4)
    assert r_full.iteration_time_s == pytest.approx(13.518, rel=1e-4)
    assert r_full.comm_bytes_per_gpu["cp"] == pytest.approx(_cp_bytes(4), rel=1e-12)
    for sc, r in ((none, r_none), (full, r_full)):
        est = estimate(sc)
        assert float(est.iteration_time_s[0]) == pytest.approx(r.iteration_time_s, rel=1e-12)
        assert float(est.breakdown_s["cp"][0]) == pytest.approx(r.breakdown_s["cp"], rel=1e-12)


@pytest.fixture(scope="module")
def mixtral(tmp_path_factory):
    path = tmp_path_factory.mktemp("moe") / "mixtral.yaml"
    path.write_text(MIXTRAL, encoding="utf-8")
    return path


def _ep_bytes(passes: int) -> float:
    """A GPU's all-to-all bus bytes per iteration on mixtral: 32 micro-batches x 8 layers a stage x
    ``passes`` x the buffer (2,048 tokens a TP rank x top-2 x 4,096 x 2 B) x 7/8 leaving the GPU."""
    return 32 * 8 * passes * (4096 / 2 * 2 * 4096 * 2) * 7 / 8


# (recompute, modules, all-to-all passes a MoE layer): only re-running the whole layer dispatches again.
EP_CASES = (
    ("none", ["core_attn"], 4),                 # dispatch + combine, forward and backward
    ("selective", ["core_attn"], 4),            # the core attention re-runs no all-to-all
    ("selective", ["moe_act"], 4),              # the experts' activation on the tokens already there
    ("full", ["core_attn"], 6),                 # the recomputed layer dispatches and combines again
)


def test_ep_all_to_alls_count_the_recomputed_forward(mixtral):
    """30.06 GB per GPU without recomputing the MoE layer, 45.10 GB with full recompute (was 30.06)."""
    for recompute, modules, passes in EP_CASES:
        r = simulate(load(mixtral, {"training.recompute": recompute, "training.recompute_modules": modules}))
        assert r.comm_bytes_per_gpu["ep"] == pytest.approx(_ep_bytes(passes), rel=1e-12), (recompute, modules)


def test_full_recompute_charges_the_dispatch_again_in_the_backward(mixtral):
    """Per chunk, the backward's exposed ep is the forward's (dispatch + combine gradients) plus the
    recomputed forward's: 2x the forward's with full recompute, 1x without; the iteration's ep grows
    about 1.5x (0.405 -> 0.608 s), and the estimator prices the same."""
    for recompute, factor in (("none", 1.0), ("full", 2.0)):
        sc = load(mixtral, {"training.recompute": recompute})
        b = iteration_builder(sc, Network(sc), frozenset())
        for ch in b.chunks:
            fwd, bwd = dict(ch.fwd_parts)["ep"], dict(ch.bwd_parts)["ep"]
            assert bwd == pytest.approx(factor * fwd, rel=1e-12)
    r_none = simulate(load(mixtral, {"training.recompute": "none"}))
    full = load(mixtral, {"training.recompute": "full"})
    r_full = simulate(full)
    assert r_full.breakdown_s["ep"] == pytest.approx(1.5 * r_none.breakdown_s["ep"], rel=1e-3)
    assert r_full.breakdown_s["ep"] == pytest.approx(0.6076, rel=1e-3)
    assert float(estimate(full).iteration_time_s[0]) == pytest.approx(r_full.iteration_time_s, rel=1e-12)
