"""Activation accounting (explorer/workloads/transformer/activations.py, activations_terms.py) against the
published
derivations: Korthikanti et al. 2022 Table 2 for GPT, the Llama-style and DeepSeek-V3 (MLA, MoE)
closed forms per token, Transformer Engine's FP8 saved inputs, Megatron's distributed checkpointed
activations, and the in-flight micro-batch counts of every pipeline schedule."""
from __future__ import annotations

import pytest

from explorer.scenario import from_dict
from explorer.schedules import dualpipe, pipeline, zero_bubble
from explorer.workloads.transformer import activations as A

S, H, HEADS = 2048, 4096, 32
SBH = S * H


def _gpt(tp=1, sp=False, recompute="none", flash=False, dtype="bf16", dropout=True):
    return from_dict({"model": {"layers": 8, "hidden": H, "heads": HEADS, "seq_len": S, "dropout": dropout},
                      "training": {"global_batch": 8, "micro_batch": 1, "recompute": recompute,
                                   "flash_attention": flash, "dtype": dtype},
                      "hardware": {"gpu": "a100-80gb"}, "cluster": {"gpus_per_node": 8, "nodes": 1},
                      "parallelism": {"tp": tp, "sequence_parallel": sp}})


def _act(sc, moe=False, tokens=S):
    return A.layer_activation_bytes(sc, moe, tokens)


# Korthikanti et al., MLSys 2023 (arXiv 2205.05198), Table 2: activation bytes per layer.
TABLE_2 = [
    ("no parallelism", {}, SBH * (34 + 5 * HEADS * S / H)),
    ("tensor parallel", {"tp": 8}, SBH * (10 + 24 / 8 + 5 * HEADS * S / (H * 8))),
    ("tensor + sequence parallel", {"tp": 8, "sp": True}, SBH / 8 * (34 + 5 * HEADS * S / H)),
    ("tensor parallel + selective recompute", {"tp": 8, "recompute": "selective"}, SBH * (10 + 24 / 8)),
    ("tensor + sequence parallel + selective recompute", {"tp": 8, "sp": True, "recompute": "selective"},
     SBH * 34 / 8),
]


@pytest.mark.parametrize("row,kw,expected", TABLE_2, ids=[r[0] for r in TABLE_2])
def test_korthikanti_table_2_rows_are_reproduced_for_gpt(row, kw, expected):
    assert _act(_gpt(**kw)) == pytest.approx(expected, rel=1e-12)


def test_full_recompute_keeps_the_layer_input_split_over_tp_with_or_without_sequence_parallelism():
    """Korthikanti Sec. 5: 2sbh per layer; with TP Megatron keeps 1/t of it, by sequence parallelism
    or by distribute_saved_activations (CheckpointFunction keeps its rank's slice of the input)."""
    assert _act(_gpt(recompute="full")) == pytest.approx(2 * SBH)
    assert _act(_gpt(tp=8, recompute="full")) == pytest.approx(2 * SBH / 8)
    assert _act(_gpt(tp=8, sp=True, recompute="full")) == pytest.approx(2 * SBH / 8)


def test_full_recompute_rematerialises_one_whole_layer_in_its_backward():
    """Chen et al. 2016: the recomputed segment's activations are live again in its backward.  With
    TP and no SP the checkpoint is a shard of the replicated input (Megatron's distributed saved
    activations): the backward gathers a new full input beside it, so the whole layer counts."""
    sc = _gpt(tp=8, recompute="full")
    assert A.recompute_working_bytes(sc, False, S) == pytest.approx(_act(_gpt(tp=8)))
    assert A.recompute_working_bytes(_gpt(tp=8), False, S) == 0.0
    selective = _gpt(tp=8, recompute="selective")
    assert A.recompute_working_bytes(selective, False, S) == pytest.approx(SBH * 5 * HEADS * S / (H * 8))


def test_flash_attention_keeps_qkv_output_and_the_log_sum_exp_not_the_scores():
    """FlashAttention-2 (Alg. 1): the s x s terms go, one fp32 log-sum-exp per row and head stays."""
    assert _act(_gpt(flash=True)) == pytest.approx(34 * SBH + 4 * HEADS * S)


def test_without_dropout_gpt_loses_its_masks_and_the_dropout_output():
    """Korthikanti Sec. 4.1: the masks are 2sbh (1 byte each) + as^2b; the dropout output 2as^2b is
    the tensor the PV matmul keeps, which without dropout is the softmax output itself."""
    assert _act(_gpt(dropout=False)) == pytest.approx(SBH * (32 + 2 * HEADS * S / H))


def _llama8b(dtype="bf16", tp=1, sp=False):
    return from_dict({"model": {"preset": "llama3-8b"}, "training": {"global_batch": 8, "dtype": dtype},
                      "hardware": {"gpu": "h100-sxm"}, "cluster": {"gpus_per_node": 8, "nodes": 1},
                      "parallelism": {"tp": tp, "sequence_parallel": sp}})


def test_llama_layer_follows_the_derivation():
    """Llama 3 8B (h 4096, 32 heads, 8 KV heads, SwiGLU f 14336, no dropout, FlashAttention), bytes
    per token: two RMSNorm inputs 2h each, QKV and FC1 inputs 2h each, Q 2h, K and V 2*h*g/a each,
    O 2h, log-sum-exp 4a, gate and up 2f each, the down projection's input 2f:
    12h + 4h*g/a + 4a + 6f."""
    h, a, g, f = 4096, 32, 8, 14336
    per_token = 12 * h + 4 * h * g / a + 4 * a + 6 * f
    assert _act(_llama8b(), tokens=8192) == pytest.approx(8192 * per_token)
    # With TP 8 + SP everything splits except K/V, whose 8 heads split over min(8, 8) = 8 ranks.
    assert _act(_llama8b(tp=8, sp=True), tokens=8192) == pytest.approx(8192 * per_token / 8)


def test_fp8_keeps_linear_inputs_as_one_byte():
    """Transformer Engine FP8: the QKV, FC1 and FC2 inputs are kept as 1-byte FP8 copies instead
    of 2-byte tensors (saving h + h + f bytes per token); the output projection's FP8 copy is kept
    beside FlashAttention's bf16 O (costing h): bf16 - fp8 = (h + f) bytes per token."""
    h, f = 4096, 14336
    assert _act(_llama8b(), tokens=8192) - _act(_llama8b("fp8"), tokens=8192) == pytest.approx(8192 * (h + f))


def _v3(dtype="bf16", recompute="none"):
    return from_dict({"model": {"preset": "deepseek-v3"},
                      "training": {"global_batch": 8, "dtype": dtype, "recompute": recompute},
                      "hardware": {"gpu": "h800"}, "cluster": {"gpus_per_node": 8, "nodes": 1}})


# DeepSeek-V3 dimensions (report Sec. 4.2): h 7168, 128 heads, q/kv LoRA ranks 1536/512, rope 64,
# nope 128, value 128; 256 routed experts of 2048, top-8, 1 shared; dense FFN 18432.
V3 = {"h": 7168, "a": 128, "rq": 1536, "rkv": 512, "dr": 64, "dqk": 192, "dv": 128, "E": 256, "k": 8,
      "fe": 2048, "f": 18432}


def _v3_attention_bf16() -> float:
    """MLA per token, bf16, no recompute (DeepSeek-V2 Eq. 9-19): norm input and down-projection
    input 2h each, c_Q before and after its norm 2*rq each, [c_KV, k_rope] 2(rkv + dr), normed c_KV
    2*rkv, Q and K 2*a*dqk each, V and O 2*a*dv each, log-sum-exp 4a."""
    v = V3
    return (4 * v["h"] + 4 * v["rq"] + 2 * (v["rkv"] + v["dr"]) + 2 * v["rkv"]
            + 4 * v["a"] * v["dqk"] + 4 * v["a"] * v["dv"] + 4 * v["a"])


def test_deepseek_v3_dense_and_moe_layers_follow_the_derivation():
    v = V3
    attn = _v3_attention_bf16()
    dense_mlp = 4 * v["h"] + 6 * v["f"]
    assert _act(_v3(), tokens=4096) == pytest.approx(4096 * (attn + dense_mlp))
    # MoE: norm input and router input 2h each, fp32 scores 4E, per routed copy its FC1 input 2h,
    # gate and up 4fe and the down projection's input 2fe; the shared expert as a dense FFN of fe.
    moe_mlp = 4 * v["h"] + 4 * v["E"] + v["k"] * (2 * v["h"] + 6 * v["fe"]) + 6 * v["fe"]
    assert _act(_v3(), moe=True, tokens=4096) == pytest.approx(4096 * (attn + moe_mlp))


def test_deepseek_v3_memory_recipe(monkeypatch):
    """DeepSeek-V3 Sec. 3.2.3 and 3.3.3: RMSNorm outputs and MLA up-projections recomputed, the
    MoE SwiGLU output recomputed from FP8-cached inputs, FP8 linear inputs, the attention output
    cached once in E5M6 (1.5 bytes).  Per token of a MoE layer:
    attention 2h (norm in) + h (FP8 down-proj in) + 2rq + rq + 2(rkv+dr) + rkv + 1.5*a*dv + 4a;
    MoE 2h + 4E + k(h + 2fe) (FP8 copies and SwiGLU inputs) + h + 4fe + fe (shared expert)."""
    monkeypatch.setattr(A, "selective_modules", lambda sc: A.DEEPSEEK_V3_RECOMPUTE)
    monkeypatch.setattr(A, "fp8_storage", lambda sc: "deepseek")
    v = V3
    attn = (3 * v["h"] + 3 * v["rq"] + 2 * (v["rkv"] + v["dr"]) + v["rkv"] + 1.5 * v["a"] * v["dv"]
            + 4 * v["a"])
    moe = 2 * v["h"] + 4 * v["E"] + v["k"] * (v["h"] + 2 * v["fe"]) + v["h"] + 5 * v["fe"]
    assert _act(_v3("fp8", "selective"), moe=True, tokens=4096) == pytest.approx(4096 * (attn + moe))
    # The recipe keeps well under half of what the plain bf16 layer keeps.
    assert _act(_v3("fp8", "selective"), moe=True) < 0.5 * _act(_v3(), moe=True)


def test_mla_up_projection_recompute_drops_q_k_and_v(monkeypatch):
    monkeypatch.setattr(A, "selective_modules", lambda sc: frozenset({"mla_up_proj"}))
    v = V3
    dropped = 2 * v["a"] * (2 * v["dqk"] + v["dv"])
    assert _act(_v3()) - _act(_v3(recompute="selective")) == pytest.approx(S * dropped)


def test_unknown_recompute_module_is_an_error(monkeypatch):
    monkeypatch.setattr(A, "selective_modules", lambda sc: frozenset({"everything"}))
    with pytest.raises(ValueError, match="unknown recompute modules"):
        A.policy_for(_gpt(recompute="selective"))


# ------------------------------------------------------------------------------------------------
# In-flight micro-batches of each schedule: the replay of the real order (peak_activations with
# unit activations per chunk) against the published counts.
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("p,m", [(4, 8), (8, 24), (16, 16)])
def test_1f1b_stage_holds_p_minus_stage_micro_batches(p, m):
    """PipeDream-Flush (Narayanan et al. SC21 Sec. 2.2.1): stage s holds min(p - s, m)."""
    got = [pipeline.peak_activations(pipeline.one_f_one_b(s, p, m), [1.0]) for s in range(p)]
    assert got == [min(p - s, m) for s in range(p)]


@pytest.mark.parametrize("p,m,v", [(4, 16, 2), (8, 16, 2), (16, 16, 2), (4, 8, 3), (8, 64, 5)])
def test_interleaved_stage_holds_megatrons_warmup_plus_one(p, m, v):
    """Megatron-LM forward_backward_pipelining_with_interleaving: warm-up (p - s - 1)*2 + (v - 1)*p
    chunk-micro-batches (all m*v when that is more), plus the one of the first steady step."""
    got = [pipeline.peak_activations(pipeline.interleaved(s, p, m, v), [1.0] * v) for s in range(p)]
    assert got == [min((p - s - 1) * 2 + (v - 1) * p + 1, m * v) for s in range(p)]


@pytest.mark.parametrize("p,m", [(4, 12), (8, 24)])
def test_zero_bubble_schedules_hold_p_and_2p_minus_1(p, m):
    """Qi et al., ICLR 2024, Sec. 3.1 / Table 1: ZB-H1 keeps 1F1B's p micro-batches (freed at W),
    ZB-H2 2p - 1, on every stage."""
    h1 = [pipeline.peak_activations(zero_bubble.zb_h1(s, p, m), [1.0]) for s in range(p)]
    h2 = [pipeline.peak_activations(zero_bubble.zb_h2(s, p, m), [1.0]) for s in range(p)]
    assert h1 == [p] * p and h2 == [2 * p - 1] * p


@pytest.mark.parametrize("p,m", [(4, 16), (8, 20), (16, 120)])
def test_dualpipe_ranks_hold_pp_plus_one_micro_batches(p, m):
    """DeepSeek-V3 report Table 2: DualPipe keeps the activations of PP + 1 micro-batches (one
    stage's worth each).  The replay of the reference order reaches it on every rank."""
    got = [dualpipe.peak_activations(dualpipe.dualpipe_order(r, p, m), [1.0, 1.0]) for r in range(p)]
    assert max(got) == p + 1
    assert got == [p + 1] * p
