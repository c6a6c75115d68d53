"""Direction tests for issue 37's ``inference:`` fields (config/inference.py): each moves the serving
figure it should, the way physics says.  Collected by tests/test_controls.py through ``COVERED``."""
from __future__ import annotations

from functools import cache

import pytest

from explorer.config import shipped_scenarios
from explorer.scenario import load
from explorer.simulate import simulate

LLAMA = "serve-llama3-70b-tp8"
DEEPSEEK = "serve-deepseek-v3-disaggregated"
# Llama 3 70B disaggregated on two nodes: one TP 8 prefill replica, one TP 8 decode replica.
SPLIT = (("cluster.nodes", 2), ("inference.disaggregated.prefill.tp", 8),
         ("inference.disaggregated.decode.tp", 8))

_CHUNK = "test_smaller_prefill_chunks_delay_the_first_token_but_stall_decode_less"
COVERED = {
    "inference.prompt_tokens": "test_a_longer_prompt_takes_longer_to_first_token_and_more_kv",
    "inference.output_tokens": "test_longer_outputs_hold_more_kv_and_finish_fewer_requests",
    "inference.batch": "test_a_larger_batch_lengthens_the_step_and_raises_throughput",
    "inference.weight_dtype": "test_fp8_weights_halve_the_weight_bytes_and_speed_decode",
    "inference.activation_dtype": "test_fp8_activations_run_the_prefill_at_the_fp8_peak",
    "inference.kv_dtype": "test_an_fp8_kv_cache_halves_it_and_doubles_the_batch_it_allows",
    "inference.chunked_prefill_tokens": _CHUNK,
    "inference.memory_utilization": "test_more_usable_memory_allows_a_larger_batch",
    "inference.disaggregated.prefill.tp": "test_prefill_tp_shortens_the_first_token",
    "inference.disaggregated.prefill.pp": "test_prefill_pp_adds_its_sends_to_the_first_token",
    "inference.disaggregated.prefill.ep": "test_wider_prefill_ep_spreads_the_all_to_all_over_more_nodes",
    "inference.disaggregated.prefill.replicas":
        "test_more_prefill_replicas_serve_more_requests_when_prefill_bound",
    "inference.disaggregated.decode.tp": "test_decode_tp_in_a_node_shortens_the_token_time",
    "inference.disaggregated.decode.pp": "test_decode_pp_halves_the_weights_and_allows_a_larger_batch",
    "inference.disaggregated.decode.ep": "test_wider_decode_ep_holds_fewer_experts_per_gpu",
    "inference.disaggregated.decode.replicas":
        "test_more_decode_replicas_serve_more_requests_when_decode_bound",
    "inference.disaggregated.kv_transfer_GBps": "test_a_slower_kv_link_lengthens_the_transfer",
    "inference.tpot_target_ms": "test_a_looser_tpot_target_allows_a_larger_batch_and_more_requests",
    "inference.arrival_rate": "test_more_arrivals_more_sequences_longer_tokens_and_waits",
    "inference.ttft_target_ms": "test_a_looser_ttft_target_allows_more_requests",
    "inference.mix": "test_a_mix_with_more_long_prompts_waits_longer_for_its_first_token",
}


@cache
def _run(name: str, ov: tuple) -> dict:
    return simulate(load(shipped_scenarios()[name], dict(ov))).inference


def run(name: str, **ov) -> dict:
    return _run(name, tuple(sorted(ov.items())))


def split(**ov) -> dict:
    return run(LLAMA, **{**dict(SPLIT), **ov})


def test_a_longer_prompt_takes_longer_to_first_token_and_more_kv():
    a, b = run(LLAMA), run(LLAMA, **{"inference.prompt_tokens": 4000})
    assert b["ttft_s"] > a["ttft_s"] and b["kv_cache_GB"] > a["kv_cache_GB"]
    assert b["max_batch"] < a["max_batch"]


def test_longer_outputs_hold_more_kv_and_finish_fewer_requests():
    a, b = run(LLAMA), run(LLAMA, **{"inference.output_tokens": 4000})
    assert b["kv_cache_GB"] > a["kv_cache_GB"] and b["requests_per_s"] < a["requests_per_s"]


def test_a_larger_batch_lengthens_the_step_and_raises_throughput():
    a, b = run(LLAMA, **{"inference.batch": 16}), run(LLAMA, **{"inference.batch": 64})
    assert b["decode_step_s"] > a["decode_step_s"]
    assert b["output_tokens_per_s_per_gpu"] > a["output_tokens_per_s_per_gpu"]


def test_fp8_weights_halve_the_weight_bytes_and_speed_decode():
    ov = {"inference.batch": 8, "inference.activation_dtype": "bf16"}
    bf, f8 = run(LLAMA, **ov, **{"inference.weight_dtype": "bf16"}), run(LLAMA, **ov)
    assert f8["weights_GB"] == pytest.approx(bf["weights_GB"] / 2)
    assert f8["decode_step_s"] < bf["decode_step_s"]


def test_fp8_activations_run_the_prefill_at_the_fp8_peak():
    assert run(LLAMA)["ttft_s"] < run(LLAMA, **{"inference.activation_dtype": "bf16"})["ttft_s"]


def test_an_fp8_kv_cache_halves_it_and_doubles_the_batch_it_allows():
    f8, bf = run(LLAMA), run(LLAMA, **{"inference.kv_dtype": "bf16"})
    assert f8["kv_cache_GB"] == pytest.approx(bf["kv_cache_GB"] / 2)
    assert f8["max_batch"] in (2 * bf["max_batch"], 2 * bf["max_batch"] + 1)


def test_smaller_prefill_chunks_delay_the_first_token_but_stall_decode_less():
    whole = run(LLAMA)
    c512, c128 = run(LLAMA, **{"inference.chunked_prefill_tokens": 512}), \
        run(LLAMA, **{"inference.chunked_prefill_tokens": 128})
    assert whole["ttft_s"] < c512["ttft_s"] < c128["ttft_s"]
    # Sarathi-Serve's point: chunks ride along memory-bound decode steps, so decode stalls less.
    assert c512["tpot_s"] < whole["tpot_s"]


def test_more_usable_memory_allows_a_larger_batch():
    assert run(LLAMA, **{"inference.memory_utilization": 0.5})["max_batch"] < run(LLAMA)["max_batch"]


def test_prefill_tp_shortens_the_first_token():
    assert split()["ttft_s"] < split(**{"inference.disaggregated.prefill.tp": 2})["ttft_s"]


def test_prefill_pp_adds_its_sends_to_the_first_token():
    ov = {"cluster.nodes": 3}
    assert split(**ov)["ttft_s"] < split(**ov, **{"inference.disaggregated.prefill.pp": 2})["ttft_s"]


def test_wider_prefill_ep_spreads_the_all_to_all_over_more_nodes():
    assert run(DEEPSEEK)["ttft_s"] < run(DEEPSEEK, **{"inference.disaggregated.prefill.ep": 64})["ttft_s"]


def test_more_prefill_replicas_serve_more_requests_when_prefill_bound():
    ov = {"inference.output_tokens": 256}                     # short outputs: the prefill pool binds
    few, many = run(DEEPSEEK, **ov, **{"inference.disaggregated.prefill.replicas": 32}), run(DEEPSEEK, **ov)
    assert few["bound"] == many["bound"] == "prefill"
    assert many["requests_per_s"] == pytest.approx(2 * few["requests_per_s"])


def test_decode_tp_in_a_node_shortens_the_token_time():
    ov = {"inference.batch": 8}
    assert split(**ov)["tpot_s"] < split(**ov, **{"inference.disaggregated.decode.tp": 4})["tpot_s"]


def test_decode_pp_halves_the_weights_and_allows_a_larger_batch():
    ov = {"cluster.nodes": 3}
    one, two = split(**ov), split(**ov, **{"inference.disaggregated.decode.pp": 2})
    assert two["weights_GB"] == pytest.approx(one["weights_GB"] / 2, rel=0.05)
    assert two["max_batch"] > one["max_batch"]


def test_wider_decode_ep_holds_fewer_experts_per_gpu():
    narrow, wide = run(DEEPSEEK, **{"inference.disaggregated.decode.ep": 64}), run(DEEPSEEK)
    assert wide["weights_GB"] < narrow["weights_GB"] and wide["max_batch"] > narrow["max_batch"]


def test_more_decode_replicas_serve_more_requests_when_decode_bound():
    ov = {"inference.disaggregated.decode.ep": 64, "inference.disaggregated.prefill.replicas": 128,
          "cluster.nodes": 32}
    few, many = run(DEEPSEEK, **ov, **{"inference.disaggregated.decode.replicas": 64}), run(DEEPSEEK, **ov)
    assert few["bound"] == many["bound"] == "decode"
    assert many["requests_per_s"] == pytest.approx(2 * few["requests_per_s"])


def test_a_slower_kv_link_lengthens_the_transfer():
    slow, fast = run(DEEPSEEK, **{"inference.disaggregated.kv_transfer_GBps": 1}), run(DEEPSEEK)
    assert slow["kv_transfer_s"] > fast["kv_transfer_s"]
    # 2,048 tokens x 70,272 B of MLA latent at 1 GB/s, plus the fabric's latency.
    assert slow["kv_transfer_s"] == pytest.approx(2048 * 70_272 / 1e9, rel=0.01)


def test_a_looser_tpot_target_allows_a_larger_batch_and_more_requests():
    tight = run(LLAMA, **{"inference.tpot_target_ms": 10.0})
    loose = run(LLAMA, **{"inference.tpot_target_ms": 20.0})
    assert tight["target_batch"] < loose["target_batch"]
    assert tight["requests_per_s_at_target"] < loose["requests_per_s_at_target"]
    # The batch it names meets the target, and the next doubling on the curve does not.
    for f in (tight, loose):
        pts = {p["batch"]: p for p in f["batch_curve"]}
        assert pts[f["target_batch"]]["tpot_s"] <= f["tpot_target_s"] < pts[2 * f["target_batch"]]["tpot_s"]
    assert "tpot_target_s" not in run(LLAMA)
    missed = run(LLAMA, **{"inference.tpot_target_ms": 1.0})       # below one step at batch 1
    assert missed["target_batch"] is None and missed["requests_per_s_at_target"] == 0.0


def test_a_looser_ttft_target_allows_more_requests():
    """A mean-TTFT target caps the rate by the prefill queue (serving/targets.py): looser, more."""
    tight = run(LLAMA, **{"inference.ttft_target_ms": 45.0})
    loose = run(LLAMA, **{"inference.ttft_target_ms": 55.0})
    assert 0 < tight["requests_per_s_at_target"] < loose["requests_per_s_at_target"]
    assert "ttft_target_s" not in run(LLAMA)


def test_a_mix_with_more_long_prompts_waits_longer_for_its_first_token():
    """More of the arrivals with long prompts: longer prefills on average, a longer mean context in
    the running batch (serving/mix.py), fewer sequences in memory."""
    mix = lambda long_share: ({"prompt_tokens": 500, "output_tokens": 200, "share": 1.0},   # noqa: E731
                              {"prompt_tokens": 8000, "output_tokens": 200, "share": long_share})
    few, many = (simulate(load(shipped_scenarios()[LLAMA], {"inference.mix": list(mix(share))})).inference
                 for share in (0.1, 1.0))
    assert many["ttft_s"] > few["ttft_s"] and many["decode_step_s"] > few["decode_step_s"]
    assert many["max_batch"] < few["max_batch"]


def test_more_arrivals_more_sequences_longer_tokens_and_waits():
    """Under an arrival rate (serving/load.py) the concurrency follows Little's law and the first
    token waits in the prefill queue: both grow with the rate."""
    lo, hi = run(LLAMA, **{"inference.arrival_rate": 1.5}), run(LLAMA, **{"inference.arrival_rate": 6.0})
    assert hi["batch"] > lo["batch"] and hi["tpot_s"] > lo["tpot_s"]
    assert hi["queue_wait_s"] > lo["queue_wait_s"] and hi["ttft_s"] > lo["ttft_s"]
    assert hi["output_tokens_per_s_per_gpu"] == pytest.approx(4 * lo["output_tokens_per_s_per_gpu"])
