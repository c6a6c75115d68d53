"""The serving tour (scenarios/tours/serving.yaml, issue 37: "Why decode is latency-bound: TP, EP
and disaggregation"): each narration's numbers against the simulation and the closed forms they
quote, one assertion per claim."""
from __future__ import annotations

import pytest
from tour_support import simulate_steps, step_text

from explorer.physics.hardware import hbm_efficiency
from explorer.scenario import apply_overrides, from_dict
from explorer.share import check_tour, preset_raw
from explorer.simulate import simulate
from explorer.teaching.tours import tours

TOUR = "serving"


@pytest.fixture(scope="module")
def runs():
    return simulate_steps(TOUR)


def text(i: int) -> str:
    return step_text(TOUR, i)


def ms(s: float, digits: int = 1) -> str:
    return f"{s * 1e3:.{digits}f} ms"


def test_the_tour_ships_as_the_issue_names_it():
    t = tours()[TOUR]
    assert t.title == "Why decode is latency-bound: TP, EP and disaggregation"
    assert check_tour(t) == []
    assert [s.params.get("scenario") for s in t.steps][-2:] == ["serve-deepseek-v3-disaggregated"] * 2


def test_decode_reads_the_weights_and_waits_on_all_reduces(runs):
    f, sc = runs[1].inference, runs[1].scenario
    gpu = sc.hardware.gpu
    assert f"**{f['weights_GB']:.1f} GB**" in text(1)
    # "at the H100's 3.35 TB/s (80 % achievable) that alone is 3.3 ms"
    floor = f["weights_GB"] * 1e9 / (gpu.hbm_GBps * 1e9 * hbm_efficiency(gpu))
    assert (gpu.hbm_GBps, hbm_efficiency(gpu)) == (3350.0, 0.8)
    assert f"**{ms(floor)}**" in text(1)
    # The step can never beat reading the weights once (issue 37's physics test, on the step shown).
    assert f["decode_step_s"] > floor
    # "160 TP all-reduces of only 8 x 8,192 x 2 bytes = 131 KB each, 2.8 ms of an 8.1 ms step"
    m = sc.model
    assert 2 * m.layers == 160 and 8 * m.hidden * 2 == 131_072
    assert f"**{ms(f['decode_step_breakdown_s']['tp'])}** of an **{ms(f['decode_step_s'])}** step" in text(1)
    assert "TP all-reduce latency within one node" in f["bottleneck"]


def test_batching_amortises_the_weights(runs):
    f = runs[2].inference
    pts = {p["batch"]: p for p in f["batch_curve"]}
    assert max(pts) == 1024 and f["knee_batch"] == 128
    assert f"**{ms(pts[1]['tpot_s'])[:-3]} to {ms(pts[128]['tpot_s'])}**" in text(2)
    tok = (round(pts[1]["output_tokens_per_s_per_gpu"]), round(pts[128]["output_tokens_per_s_per_gpu"]))
    assert f"**{tok[0]} to {tok[1]} tokens/s**" in text(2)
    # "at 256 a step is a bandwidth-bound all-reduce of 4 MB": 256 x 8,192 x 2 bytes, the preset's batch.
    assert f["batch"] == 256 and 256 * 8192 * 2 / 2**20 == 4.0
    assert "TP all-reduce bandwidth" in f["bottleneck"]


def test_tp_across_nodes_is_slower(runs):
    one, two = runs[1].inference, runs[3].inference
    assert f"({two['weights_GB']:.1f} GB)" in text(3)
    assert two["decode_step_s"] > one["decode_step_s"]
    assert f"**{ms(one['decode_step_s'])[:-3]} -> {ms(two['decode_step_s'])}**" in text(3)
    assert two["bottleneck"].split(": ", 1)[1].startswith("61 % in TP all-reduce latency across 2 nodes")
    assert "**61 %**" in text(3)


def test_fewer_gpus_per_replica(runs):
    tp8, tp2 = runs[2].inference, runs[4].inference
    assert runs[4].scenario.dp == 4 and tp2["batch"] == 256
    assert (f"**{tp8['output_tokens_per_s_per_gpu']:,.0f} -> {tp2['output_tokens_per_s_per_gpu']:,.0f} "
            "tokens/s**") in text(4)
    # weights_GB is one GPU's: a TP-2 replica reads twice that (a hunt read "each replica reads 35.3 GB").
    assert (f"each GPU reads its {tp2['weights_GB']:.1f} GB of weights per step "
            f"({2 * tp2['weights_GB']:.1f} GB a replica)") in text(4)
    assert f"**{tp8['tpot_s'] * 1e3:.1f} -> {tp2['tpot_s'] * 1e3:.1f} ms**" in text(4)
    # "(TensorRT-LLM measures 2,102 on this shape)": the preset's cited comparison.
    assert "2,102 per GPU" in " ".join(preset_raw("serve-llama3-70b-tp8")["description"].split())


def test_a_latency_target_decides_the_layout(runs):
    raw = preset_raw("serve-llama3-70b-tp8")
    got = {}
    for tp in (8, 4, 2):
        sc = from_dict(apply_overrides(raw, {"parallelism.tp": tp, "inference.tpot_target_ms": 20.0}))
        f = simulate(sc).inference
        got[tp] = (f["target_batch"], f"{f['requests_per_s_at_target']:.2f}")
        assert all(p["tpot_s"] > 0.020 for p in f["batch_curve"] if p["batch"] > f["target_batch"])
    f = runs[5].inference                         # the step's own link: TP 4 with the target
    assert (f["target_batch"], f"{f['requests_per_s_at_target']:.2f}") == got[4]
    assert got == {8: (128, "6.62"), 4: (64, "7.44"), 2: (16, "3.54")}
    assert "(two replicas, batch 64) serves **7.44 requests/s**" in text(5)
    assert "TP 8 at batch 128 serves 6.62 and TP 2 at batch 16 only 3.54" in text(5)


def test_moe_decode_is_all_to_all_latency(runs):
    f, m = runs[6].inference, runs[6].scenario.model
    assert f["bottleneck"].startswith(f"decode step {f['decode_step_s'] * 1e3:.1f} ms: 55 % in EP all-to-all "
                                      "latency across 16 nodes")
    assert "**55 %**" in text(6) and f"**{ms(f['decode_step_s'])}** step" in text(6)
    # "88 x 8 routed tokens per GPU": the batch and top-k; "58 times per step": 61 layers, 3 dense.
    assert (f["batch"], m.moe.top_k) == (88, 8) and "88 x 8 routed tokens" in text(6)
    assert m.layers - m.moe.dense_layers == 58 and "58 times per step" in text(6)


def test_disaggregation_moves_the_kv_cache(runs):
    base, slow = runs[6].inference, runs[7].inference
    assert f"**{slow['kv_transfer_bytes'] / 1e6:.1f} MB**" in text(7)
    assert f"(**{slow['kv_transfer_s'] * 1e3:.0f} ms** per request)" in text(7)
    # Hidden behind the next prefill: the same requests/s, bound by decode.
    assert slow["requests_per_s"] == base["requests_per_s"] and slow["bound"] == "decode"
    assert f"**{slow['requests_per_s']:.2f}**, set by decode" in text(7)
