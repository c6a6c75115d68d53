"""Latency targets of a serving deployment (explorer/serving/targets.py): the requests/s within a
TPOT and a mean-TTFT target.  The TTFT bound is the M/D/1 queue's closed form inverted; checked
against the queue itself and against the deployment run at that arrival rate."""
from __future__ import annotations

import json

import pytest

from explorer.cli import main
from explorer.serving.load import md1_wait
from explorer.serving.targets import at_target, ttft_rate, within_targets

LLAMA = "serve-llama3-70b-tp8"


@pytest.mark.parametrize(("service", "target", "servers"),
                         [(0.02, 0.05, 2), (0.0347, 0.04, 1), (0.1, 0.1, 3)])
def test_the_ttft_rate_puts_the_mean_ttft_exactly_on_the_target(service, target, servers):
    rate = ttft_rate(service, target, servers)
    assert service + md1_wait(rate / servers, service) == pytest.approx(target, rel=1e-12)


def test_the_ttft_rate_closed_form_and_its_edges():
    # rho = 2 (G - S) / (S + 2 (G - S)) = 0.06 / 0.08 = 0.75 per server; rate = 2 x 0.75 / 0.02.
    assert ttft_rate(0.02, 0.05, 2) == pytest.approx(75.0)
    assert ttft_rate(0.06, 0.05, 2) == 0.0                  # the prefill alone misses the target
    assert ttft_rate(0.05, 0.05, 2) == 0.0                  # no slack: no queue can be allowed


def test_a_point_within_targets_serves_its_capacity_capped_by_the_ttft_rate():
    p = {"batch": 8, "tpot_s": 0.01, "ttft_s": 0.02, "requests_per_s": 50.0}
    assert within_targets(p, None, None, 1) == 50.0
    assert within_targets(p, 0.009, None, 1) == 0.0
    assert within_targets(p, None, 0.05, 2) == 50.0         # the TTFT rate (75/s) is above capacity
    assert within_targets(p, None, 0.03, 2) == pytest.approx(ttft_rate(0.02, 0.03, 2))
    q = {**p, "batch": 16, "requests_per_s": 90.0}
    best, rate = at_target([p, q], None, 0.05, 2)
    assert best is q and rate == pytest.approx(75.0)
    assert at_target([p, q], 0.001, None) is None


def _run(capsys, *sets) -> dict:
    assert main(["run", LLAMA, "--json", *[x for s in sets for x in ("--set", s)]]) == 0
    return json.loads(capsys.readouterr().out)["inference"]


def test_the_deployment_at_its_ttft_rate_has_the_target_ttft(capsys):
    """Llama 3 70B on 8 H100s (one replica): a 50 ms mean-TTFT target allows the M/D/1 rate of its
    40.5 ms prefill, 7.87 requests/s; run at that arrival rate, its mean TTFT is 50 ms."""
    f = _run(capsys, "inference.ttft_target_ms=50")
    assert f["ttft_target_s"] == 0.05 and "tpot_target_s" not in f
    assert f["requests_per_s_at_target"] == pytest.approx(ttft_rate(f["ttft_s"], 0.05, 1), rel=1e-9)
    assert f["requests_per_s_at_target"] == pytest.approx(7.87, abs=0.005)
    rate = f["requests_per_s_at_target"]
    loaded = _run(capsys, f"inference.arrival_rate={rate * 0.9999:.6f}")
    assert loaded["ttft_s"] == pytest.approx(0.05, rel=2e-3)
    # A TTFT below the prefill itself is met at no rate; both targets: the tighter one binds.
    assert _run(capsys, "inference.ttft_target_ms=40")["target_batch"] is None
    both = _run(capsys, "inference.tpot_target_ms=20", "inference.ttft_target_ms=50")
    tpot_only = _run(capsys, "inference.tpot_target_ms=20")
    assert both["requests_per_s_at_target"] == pytest.approx(tpot_only["requests_per_s_at_target"])
    assert main(["run", LLAMA, "--set", "inference.ttft_target_ms=50"]) == 0
    assert "target mean TTFT 50 ms: 7.87 requests/s at batch 256" in capsys.readouterr().out


def test_a_target_names_only_a_batch_that_fits_in_memory(capsys):
    """Llama 3 70B on one H100 (tp 1) holds at most 32 sequences: its configured batch 256 does not
    fit, so a TPOT target of 100 ms (met by 256 at 22.57 requests/s) is answered at batch 32."""
    f = _run(capsys, "parallelism.tp=1", "inference.tpot_target_ms=100")
    assert f["max_batch"] == 32 and f["batch"] == 256
    assert f["target_batch"] == 32
    assert f["requests_per_s_at_target"] == pytest.approx(7.38, abs=0.005)
    assert _run(capsys, "parallelism.tp=1", "inference.ttft_target_ms=1e7")["target_batch"] == 32
    # tp 2 holds 281: the configured 512 is no answer, the curve's 256 is.
    f = _run(capsys, "parallelism.tp=2", "inference.batch=512", "inference.tpot_target_ms=100")
    assert (f["max_batch"], f["target_batch"]) == (281, 256)
    assert f["requests_per_s_at_target"] == pytest.approx(18.52, abs=0.005)


def test_a_target_is_missed_when_no_batch_fits_and_the_summary_says_why(capsys):
    """bf16 weights of a 70B model (141 GB) on one GPU: no batch fits, so no batch meets the target
    (the curve still draws batch 1, which met 100 ms at 54 ms)."""
    sets = ["parallelism.tp=1", "inference.weight_dtype=bf16", "inference.tpot_target_ms=100"]
    f = _run(capsys, *sets)
    assert f["max_batch"] == 0 and f["target_batch"] is None and f["requests_per_s_at_target"] == 0.0
    assert main(["run", LLAMA, *[x for s in sets for x in ("--set", s)]]) == 0
    assert "target TPOT 100 ms: no batch fits in memory (0 requests/s)" in capsys.readouterr().out
    assert main(["run", LLAMA, "--set", "parallelism.tp=1", "--set", "inference.tpot_target_ms=10"]) == 0
    assert ("target TPOT 10 ms: missed at every batch that fits in memory (1 to 32; 0 requests/s)"
            in capsys.readouterr().out)


def test_the_apps_target_sentence_says_a_miss_is_within_memory():
    """The Serving curve tab says what run's summary says (serving/report.targets_text): a target is
    missed at every batch that fits (1 to max batch), or no batch fits at all."""
    from explorer.ui.views.serving import target_sentence

    from cli_support import cli

    def inference(*sets: str) -> dict:
        got = cli("run", "serve-llama3-70b-tp8", "--set", "parallelism.tp=1", *sets, "--json")
        return json.loads(got.stdout)["inference"]

    f = inference("--set", "inference.tpot_target_ms=1")
    assert f["target_batch"] is None and f["max_batch"] == 32
    assert target_sentence(f).startswith("**Target TPOT 1 ms is missed at every batch that fits in memory "
                                         "(1 to 32)**")
    f = inference("--set", "inference.weight_dtype=bf16", "--set", "inference.tpot_target_ms=100")
    assert f["max_batch"] == 0
    assert target_sentence(f).startswith("**Target TPOT 100 ms is missed: no batch fits in memory**")
