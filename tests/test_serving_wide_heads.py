"""Serving with heads wider than the fused attention kernels take (physics/attention.MAX_FUSED_HEAD_DIM:
FlashAttention-2/3 and FlashInfer stop at 256): the core runs unfused, as training prices it
(workloads/transformer/layer.attention_core) — two batched GEMMs over the full square, masked or not,
and a softmax that reads and writes the 16-bit scores (serving/step.PassModel._unfused).  Found as a
known gap: a 512-wide head was served at the fused kernel's 256-wide rate, silently."""
from __future__ import annotations

import pytest

from explorer.config import shipped_scenarios
from explorer.physics.attention import attention_seconds
from explorer.scenario import load
from explorer.serving import overhead as oh
from explorer.serving.step import SOFTMAX_PASSES, Group, PassModel
from explorer.simulate import simulate

LLAMA = shipped_scenarios()["serve-llama3-70b-tp8"]


def model(head_dim: int) -> PassModel:
    sc = load(LLAMA, {"parallelism.tp": 1, "model.head_dim": head_dim})
    return PassModel(sc, sc)


def test_a_wide_prefill_is_the_full_square_at_the_gemm_rate_plus_the_softmax_bytes():
    """A 4,096-token prompt (context = 2,048, the causal mean) on 64 heads of 512: the square is
    4,096 wide, 2 x 4096 x 4096 x 64 x 1024 = 2.2e12 FLOPs, the softmax 2 passes x 2 bytes x
    64 x 4096^2 = 4.29 GB over HBM, three kernels."""
    pm = model(512)
    g = Group(1, 4096, 2048)
    secs, flops = pm._attention((g,))
    assert flops == 2.0 * 4096 * 4096 * 64 * 1024 == pytest.approx(2.199e12, rel=1e-3)
    gemms = attention_seconds(flops, pm.gpu, pm.attn_eff, kernel="none", head_dim=512, seq_len=4096)
    scores = SOFTMAX_PASSES * 2 * 64 * 4096 * 4096 / pm.hbm
    assert scores == pytest.approx(4.295e9 / pm.hbm, rel=1e-3)
    kv = 4096 * pm.kv_token / pm.hbm
    assert secs == pytest.approx(max(gemms, kv) + scores + 2 * oh.KERNEL_GAP_S, rel=1e-12)


def test_a_256_wide_head_stays_fused_and_a_wider_one_costs_more_than_its_fused_price():
    """At 256 the fused kernel runs (the causal half, at its measured rate); at 512 the unfused core
    takes longer than the fused kernel would at the same width, in prefill and in decode."""
    narrow = model(256)
    g = Group(1, 4096, 2048)
    secs, flops = narrow._attention((g,))
    assert flops == 2.0 * 4096 * 2048 * 64 * 512
    fused = attention_seconds(flops, narrow.gpu, narrow.attn_eff, kernel=narrow.kernel, head_dim=256,
                              seq_len=2048)
    assert secs == pytest.approx(max(fused, 4096 * narrow.kv_token / narrow.hbm), rel=1e-12)
    wide = model(512)
    for grp in (Group(1, 4096, 2048), Group(64, 1, 2000)):
        unfused, _ = wide._attention((grp,))
        f = 2.0 * grp.seqs * grp.new * grp.context * 64 * 1024
        as_fused = max(attention_seconds(f, wide.gpu, wide.attn_eff, kernel=wide.kernel, head_dim=512,
                                         seq_len=grp.context),
                       grp.seqs * (grp.context + grp.new) * wide.kv_token / wide.hbm)
        assert unfused > as_fused


def test_the_run_says_so_and_the_step_slows():
    base = simulate(load(LLAMA, {"model.head_dim": 256}))
    wide = simulate(load(LLAMA, {"model.head_dim": 512}))
    assert not any("fused attention" in w for w in base.warnings)
    assert any(w.startswith("kernel: a head dimension of 512") for w in wide.warnings)
    assert wide.iteration_time_s > base.iteration_time_s


def test_mla_decode_keeps_flashmla():
    """DeepSeek-V3's absorbed decode reads 576-wide heads (kv_lora_rank 512 + rope 64): FlashMLA's
    own kernel, fused; its 192-wide prefill heads are narrow.  No warning."""
    r = simulate(load(shipped_scenarios()["serve-deepseek-v3-disaggregated"]))
    assert not any("fused attention" in w for w in r.warnings)


def test_the_app_shows_the_warning_on_a_serving_link():
    """Opened as a link in the app (streamlit.testing): the sentence is shown, and the TPOT card
    reads the unfused step (44.65 ms against 43.71 ms served as fused; TTFT 51.5 against 50.0 ms)."""
    from app_support import run_app, seconds

    at = run_app(scenario="serve-llama3-70b-tp8", **{"model.head_dim": "512"})
    shown = [w.value for w in at.info] + [w.value for w in at.warning]      # a note: st.info (timeline.py)
    assert any("wider than the 256 the fused attention kernels take" in str(x) for x in shown)
    assert seconds(at) == pytest.approx(44.65e-3, abs=0.01e-3)
