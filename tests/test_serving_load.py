"""Serving under an arrival rate (explorer/serving/load.py, ``inference.arrival_rate``): the
concurrency Little's law gives, the M/D/1 wait for a prefill in TTFT, the served rate's figures,
and a rate beyond the capacity refused in one line."""
from __future__ import annotations

from dataclasses import replace

import pytest

from explorer.cli import main as cli_main
from explorer.config import shipped_scenarios
from explorer.scenario import ScenarioError, load
from explorer.serving.deploy import saturated
from explorer.serving.load import md1_wait
from explorer.simulate import simulate

LLAMA = "serve-llama3-70b-tp8"
DSV3 = "serve-deepseek-v3-disaggregated"


def scenario(name: str, **ov):
    return load(shipped_scenarios()[name], {k.replace("__", "."): v for k, v in ov.items()})


def at_batch(sc, b: int):
    return saturated(replace(sc, inference=replace(sc.inference, batch=b, arrival_rate=None)))


def test_md1_wait_is_pollaczek_khinchine_for_deterministic_service():
    # rho = 5 x 0.1 = 0.5: W = 0.5 x 0.1 / (2 x 0.5) = 0.05 s.
    assert md1_wait(5.0, 0.1) == pytest.approx(0.05, rel=1e-12)
    assert md1_wait(0.0, 0.1) == 0.0 and md1_wait(10.0, 0.1) == float("inf")


@pytest.mark.parametrize("rate", [1.0, 5.0, 7.5])
def test_the_concurrency_is_the_smallest_batch_that_keeps_up(rate):
    sc = scenario(LLAMA, inference__arrival_rate=rate)
    f = simulate(sc).inference
    b = f["batch"]
    assert at_batch(sc, b).requests_per_s >= rate > at_batch(sc, b - 1).requests_per_s
    # Little's law: sequences in decode = arrivals x time each spends decoding (output x TPOT).
    assert b == pytest.approx(rate * sc.inference.output_tokens * f["tpot_s"], abs=1.0)
    assert f["requests_per_s"] == rate and f["arrival_rate"] == rate
    assert f["output_tokens_per_s_per_gpu"] == pytest.approx(rate * 1000 / 8, rel=1e-12)
    assert f["load"] == pytest.approx(rate / at_batch(sc, 256).requests_per_s, rel=1e-12)


def test_ttft_adds_the_wait_for_a_prefill():
    sc = scenario(LLAMA, inference__arrival_rate=5.0)
    f = simulate(sc).inference
    alone = at_batch(sc, f["batch"]).ttft_s
    assert f["queue_wait_s"] == pytest.approx(md1_wait(5.0, alone), rel=1e-12)
    assert f["ttft_s"] == pytest.approx(alone + f["queue_wait_s"], rel=1e-12)


def test_a_rate_beyond_the_capacity_is_refused_in_one_line(capsys):
    with pytest.raises(ScenarioError, match=r"^inference\.arrival_rate: 20 requests/s exceed"):
        simulate(scenario(LLAMA, inference__arrival_rate=20.0))
    assert cli_main(["run", LLAMA, "--set", "inference.arrival_rate=20"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: inference.arrival_rate:") and "\n" not in err


def test_the_batch_caps_the_concurrency():
    # 5 requests/s need 77 sequences per replica; a cap of 32 cannot keep up.
    with pytest.raises(ScenarioError, match="32 sequences per replica"):
        simulate(scenario(LLAMA, inference__arrival_rate=5.0, inference__batch=32))


def test_disaggregated_prefills_queue_on_the_prefill_replicas():
    sc = scenario(DSV3, inference__arrival_rate=50.0)
    f = simulate(sc).inference
    alone = at_batch(sc, f["batch"])
    assert f["queue_wait_s"] == pytest.approx(md1_wait(50.0 / alone.prefill_layout.dp, alone.ttft_s))
    assert f["batch"] < sc.inference.batch and f["requests_per_s"] == 50.0


def test_a_saturated_server_reports_no_load_keys():
    f = simulate(scenario(LLAMA)).inference
    assert not {"arrival_rate", "queue_wait_s", "load"} & set(f)
