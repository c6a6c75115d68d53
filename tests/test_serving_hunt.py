"""Serving figures a read-only hunt found wrong or misleading (each test fails on the code before
its fix): requests/s as run --json's samples_per_s, the EP combine's own bytes, what bounds a
co-located replica, the prefill pool's memory, the decode pool's workspace, and the design tools
that rank training steps refusing a serving file."""
from __future__ import annotations

import json

import pytest

from explorer.cli import main
from explorer.scenario import load
from explorer.simulate import simulate

from conftest import ROOT

LLAMA = ROOT / "scenarios" / "serve-llama3-70b-tp8.yaml"
DEEPSEEK = ROOT / "scenarios" / "serve-deepseek-v3-disaggregated.yaml"


def run_json(path, overrides: dict | None = None) -> dict:
    return simulate(load(path, overrides or {})).to_json_dict()


@pytest.mark.parametrize("path", [LLAMA, DEEPSEEK], ids=lambda p: p.stem)
def test_a_served_sample_is_a_request(path):
    """samples_per_s was output tokens/s over model.seq_len (1.18 beside 9.69 requests/s)."""
    d = run_json(path)
    assert d["samples_per_s"] == d["inference"]["requests_per_s"]
    assert d["samples_per_s"] == pytest.approx(8.395 if path == LLAMA else 100.14, rel=1e-3)


def test_the_ep_combine_is_counted_at_its_own_16_bit_size():
    """DeepSeek-V3's decode pool dispatches FP8 activations and combines in bf16 (DeepSeek-V3
    Sec. 3.3.2): per MoE layer a dispatch of tokens/tp x top_k x hidden bytes and a combine of twice
    that, so the step's EP bytes are 3 dispatches per MoE layer (58 of the 61 layers), not 2."""
    d = run_json(DEEPSEEK)
    dispatch = d["links"]["ep"]["bytes"]
    assert dispatch == pytest.approx(5_046_272.0)
    assert d["comm_bytes_per_gpu"]["ep"] == pytest.approx(58 * 3 * dispatch, rel=1e-12)
    assert d["comm_bytes_per_gpu"]["ep"] == pytest.approx(878.05e6, rel=1e-5)


def test_a_co_located_replica_that_mostly_prefills_is_bound_by_prefill():
    """16-token answers: each request's 40.5 ms prefill against 16 x 19.2 ms / 256 = 1.2 ms of decode
    steps, 97 % of the replica's time; the bottleneck says so before the decode step's shares."""
    f = run_json(LLAMA, {"inference.output_tokens": 16})["inference"]
    assert f["bound"] == "prefill"
    assert f["bottleneck"].startswith("prefill: each request's prompt takes the replica 40.5 ms from "
                                      "decoding, 97 % of its time against 1.2 ms of decode steps")
    assert "decode step 19.2 ms: 49 % in TP all-reduce" in f["bottleneck"]
    base = run_json(LLAMA)["inference"]       # 256 tokens: 20.1 ms of decode steps a request
    assert base["bound"] == "decode" and base["bottleneck"].startswith("decode step")


def test_a_prefill_pool_that_does_not_fit_is_said_and_never_fits():
    """At ep 1 each prefill GPU would hold all 256 routed experts: 671 GB of an H800's 77 GB usable."""
    d = run_json(DEEPSEEK, {"inference.disaggregated.prefill.ep": 1})
    assert d["memory_over_capacity"] and "memory" in d["warning_kinds"]
    said = [w for w in d["warnings"] if w.startswith("the prefill pool's GPUs need")]
    assert said and "671.4 GB each" in said[0] and "77.3 GB" in said[0]
    assert not run_json(DEEPSEEK, {"inference.disaggregated.prefill.ep": 32})["memory_over_capacity"]


def test_the_sweep_picks_only_prefill_pools_that_fit(capsys):
    assert main(["sweep", str(DEEPSEEK), "--full", "--json",
                 "--vary", "inference.disaggregated.prefill.ep=1,8,32"]) == 0
    rows = json.loads(capsys.readouterr().out)
    fits = {r["overrides"]["inference.disaggregated.prefill.ep"]: r["fits"] for r in rows}
    assert fits == {1: False, 8: False, 32: True}


def test_the_decode_pool_does_not_reserve_a_prompt_pass():
    """A disaggregated decode pool never prefills: chunked_prefill_tokens (co-located only) leaves
    its max batch alone, and its workspace is the batch's one-token pass (191 sequences)."""
    base = run_json(DEEPSEEK)["inference"]["max_batch"]
    chunked = run_json(DEEPSEEK, {"inference.chunked_prefill_tokens": 256})["inference"]["max_batch"]
    assert base == chunked == 191


@pytest.mark.parametrize("command", [["advise", str(LLAMA), "--set", "cluster.datacenters=2",
                                      "--set", "cluster.nodes=2"],
                                     ["sensitivity", str(ROOT / "scenarios" / "serve-3d-dram.yaml")]],
                         ids=["advise", "sensitivity"])
def test_tools_that_rank_training_steps_refuse_a_serving_file(command, capsys):
    """advise ranked serving layouts by their decode step ("1.36x faster" for a layout with half
    the output tokens/s); sensitivity by the decode step alone (TTFT unseen)."""
    assert main(command) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert err.startswith(f"error: inference: {command[0]} studies training steps")


def test_a_co_located_pipeline_loses_its_busiest_prefill_stage_per_request():
    """TP 4 x PP 2 on 8 H100s: a prompt's two stage passes take 26.9-27.1 ms each (TTFT about
    54.1 ms); each stage stops decoding only for its own share while the other decodes, so a request
    costs the replica its busiest stage, and TPOT = step + batch x that / output tokens."""
    from explorer.serving.deploy import saturated
    sc = load(LLAMA, {"parallelism.tp": 4, "parallelism.pp": 2})
    sv = saturated(sc)
    stages = [st.duration for st in sv.prefill]
    assert len(stages) == 2 and sv.ttft_s == pytest.approx(54.07e-3, abs=5e-5)
    assert sv.prefill_cost_s == pytest.approx(max(stages), rel=1e-12)
    assert sv.prefill_cost_s == pytest.approx(27.1e-3, abs=1e-4)
    assert sv.tpot_s == pytest.approx(sv.step_s + 256 * max(stages) / 1000, rel=1e-12)
    one = saturated(load(LLAMA))                       # one stage: the whole pass, TTFT itself
    assert one.prefill_cost_s == pytest.approx(one.ttft_s, rel=1e-12)


def test_diff_of_two_servers_shows_what_a_request_sees(capsys):
    """Chunked prefill on serve-llama3-70b-tp8: the decode step is unchanged (+0.0 %), while TTFT
    rises 40.51 -> 74.71 ms and TPOT falls 30.50 -> 28.95 ms; diff said only the first."""
    assert main(["diff", str(LLAMA), "--set-b", "inference.chunked_prefill_tokens=512"]) == 0
    text = capsys.readouterr().out
    assert "  TTFT                   40.51 ms       74.71 ms      +34.19 ms  (+84.4%)" in text
    assert "  TPOT                   30.50 ms       28.95 ms       -1.55 ms  (-5.1%)" in text
    assert "  max batch                 1,775          1,775             +0  (+0.0%)" in text
    assert main(["diff", str(LLAMA), "--set-b", "inference.chunked_prefill_tokens=512", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)["delta_inference"]
    assert d["ttft_s"]["delta"] == pytest.approx(34.19e-3, abs=1e-5)
    assert set(d) == {"ttft_s", "tpot_s", "output_tokens_per_s_per_gpu", "requests_per_s", "max_batch"}
    teaching = str(ROOT / "scenarios" / "teaching-8gpu.yaml")
    assert main(["diff", teaching, "--set-b", "training.micro_batch=2"]) == 0
    assert "TTFT" not in capsys.readouterr().out          # a training diff has no served lines


@pytest.mark.parametrize("budget", [1000, 4096])
def test_a_prompt_within_the_chunk_budget_rides_one_mixed_step(budget):
    """Chunked prefill on (Sarathi-Serve): a 1,000-token prompt within the budget is one mixed step
    with the 256 decodes, not a pass of its own: 9.09 requests/s (8.39 without chunking, 8.84 in
    two chunks of 500), so more budget never serves fewer requests."""
    from explorer.serving.deploy import saturated
    sv = saturated(load(LLAMA, {"inference.chunked_prefill_tokens": budget}))
    assert sv.requests_per_s == pytest.approx(9.086, abs=5e-4)
    rates = [saturated(load(LLAMA, {"inference.chunked_prefill_tokens": b})).requests_per_s
             for b in (0, 256, 512, budget)]
    assert rates == sorted(rates) and rates[0] == pytest.approx(8.395, abs=5e-4)
