"""A request-length mix (``inference.mix``, explorer/serving/mix.py): the running batch holds each
kind in proportion to share x output, each prompt has its own prefill, the rates take the means over
the arrivals and the prefill queue is M/G/1.  Checked against runs of each kind alone (co-located
prefill does not depend on the decode batch, so a kind's TTFT is its single-kind run's) and the
Pollaczek-Khinchine formula."""
from __future__ import annotations

import json

import pytest

from explorer.cli import main
from explorer.serving.load import md1_wait, mg1_wait
from explorer.serving.targets import ttft_rate

LLAMA = "serve-llama3-70b-tp8"
DEEPSEEK = "serve-deepseek-v3-disaggregated"
KEYS = ("ttft_s", "tpot_s", "decode_step_s", "requests_per_s", "output_tokens_per_s_per_gpu",
        "kv_cache_GB", "max_batch")


def _run(capsys, *sets, scenario=LLAMA) -> dict:
    assert main(["run", scenario, "--json", *[x for s in sets for x in ("--set", s)]]) == 0
    return json.loads(capsys.readouterr().out)


def _mix(*kinds) -> str:
    return "inference.mix=[" + ", ".join(f"{{prompt_tokens: {p}, output_tokens: {o}, share: {s}}}"
                                         for p, o, s in kinds) + "]"


def _alone(capsys, p, o, *sets, scenario=LLAMA) -> dict:
    return _run(capsys, f"inference.prompt_tokens={p}", f"inference.output_tokens={o}", *sets,
                scenario=scenario)["inference"]


def test_a_mix_of_one_kind_is_that_kind(capsys):
    alone = _alone(capsys, 1000, 1000)
    for kinds in ([(1000, 1000, 1)], [(1000, 1000, 1), (1000, 1000, 3)]):
        f = _run(capsys, _mix(*kinds))["inference"]
        for k in KEYS:
            assert f[k] == pytest.approx(alone[k], rel=1e-12), k
        assert f["mean_prompt_tokens"] == 1000 and f["mean_output_tokens"] == 1000


def test_two_prompt_lengths_decode_as_their_mean_and_prefill_each_on_its_own(capsys):
    """1,000 and 3,000-token prompts, 1,000 tokens out each, equal shares: the running batch's mean
    context (2,000 + 500) and memory per sequence (3,000) are those of 2,000-token prompts, so the
    decode step and the KV cache equal that kind's; TTFT is the mean of the two kinds' own."""
    f = _run(capsys, _mix((1000, 1000, 1), (3000, 1000, 1)))["inference"]
    mid, short, long = (_alone(capsys, p, 1000) for p in (2000, 1000, 3000))
    for k in ("decode_step_s", "kv_cache_GB", "max_batch"):
        assert f[k] == pytest.approx(mid[k], rel=1e-12), k
    assert [m["ttft_s"] for m in f["mix"]] == pytest.approx([short["ttft_s"], long["ttft_s"]], rel=1e-12)
    assert f["ttft_s"] == pytest.approx((short["ttft_s"] + long["ttft_s"]) / 2, rel=1e-12)
    # Attention is quadratic in the prompt: the mean of the two prefills exceeds the middle one's.
    assert f["ttft_s"] > mid["ttft_s"]


def test_the_batch_holds_kinds_by_share_times_output_and_the_rate_counts_mean_outputs(capsys):
    run = _run(capsys, _mix((200, 100, 3), (4000, 1000, 1)))
    f = run["inference"]
    assert [m["share"] for m in f["mix"]] == [0.75, 0.25]
    assert [m["share_of_batch"] for m in f["mix"]] == pytest.approx([300 / 1300, 1000 / 1300])
    assert f["mean_output_tokens"] == pytest.approx(325) and f["mean_prompt_tokens"] == pytest.approx(1150)
    assert f["output_tokens_per_s_per_gpu"] * f["gpus"] == pytest.approx(f["requests_per_s"] * 325, rel=1e-12)
    assert run["tokens_per_s"] == pytest.approx(f["requests_per_s"] * 325, rel=1e-12)
    assert "a mix (75% 200 + 100; 25% 4,000 + 1,000; means 1,150 prompt + 325 output tokens)" in \
        _text(capsys, _mix((200, 100, 3), (4000, 1000, 1)))


def _text(capsys, *sets) -> str:
    assert main(["run", LLAMA, *[x for s in sets for x in ("--set", s)]]) == 0
    return capsys.readouterr().out


def test_the_prefill_queue_of_a_mix_is_m_g_1(capsys):
    """Under 4 requests/s the wait is lambda E[S^2] / (2 (1 - lambda E[S])) over the kinds' own
    prefills, longer than an M/D/1 queue of the same mean prefill would make it."""
    mix = _mix((200, 100, 3), (4000, 1000, 1))
    s = [_alone(capsys, 200, 100)["ttft_s"], _alone(capsys, 4000, 1000)["ttft_s"]]
    mean, sq = 0.75 * s[0] + 0.25 * s[1], 0.75 * s[0] ** 2 + 0.25 * s[1] ** 2
    f = _run(capsys, mix, "inference.arrival_rate=4")["inference"]
    assert f["queue_wait_s"] == pytest.approx(mg1_wait(4.0, mean, sq), rel=1e-9)
    assert f["queue_wait_s"] > md1_wait(4.0, mean)
    assert f["ttft_s"] == pytest.approx(mean + f["queue_wait_s"], rel=1e-9)
    assert [m["ttft_s"] for m in f["mix"]] == pytest.approx([t + f["queue_wait_s"] for t in s], rel=1e-9)
    # A mean-TTFT target: the rate that the M/G/1 bound allows puts the mean TTFT on the target.
    target = mean + 0.01
    rate = ttft_rate(mean, target, 1, sq)
    assert mean + mg1_wait(rate, mean, sq) == pytest.approx(target, rel=1e-12)
    t = _run(capsys, mix, f"inference.ttft_target_ms={target * 1e3}")["inference"]
    assert t["requests_per_s_at_target"] == pytest.approx(min(rate, max(
        p["requests_per_s"] for p in t["batch_curve"])), rel=1e-9)


def test_a_disaggregated_mix_sends_each_prompts_kv_cache(capsys):
    f = _run(capsys, _mix((1024, 512, 1), (3072, 512, 1)), scenario=DEEPSEEK)["inference"]
    mid = _alone(capsys, 2048, 512, scenario=DEEPSEEK)
    assert f["kv_transfer_bytes"] == pytest.approx(mid["kv_transfer_bytes"], rel=1e-12)   # linear in P
    assert f["decode_step_s"] == pytest.approx(mid["decode_step_s"], rel=1e-12)


def test_more_long_prompts_lengthen_the_mean_first_token(capsys):
    few = _run(capsys, _mix((500, 200, 9), (8000, 200, 1)))["inference"]
    many = _run(capsys, _mix((500, 200, 1), (8000, 200, 1)))["inference"]
    assert many["ttft_s"] > few["ttft_s"] and many["decode_step_s"] > few["decode_step_s"]


@pytest.mark.parametrize(("value", "says"), [
    ("[{prompt_tokens: 0, output_tokens: 5}]", "inference.mix[0].prompt_tokens"),
    ("[{prompt_tokens: 10}]", "inference.mix[0].output_tokens"),
    ("[{prompt_tokens: 10, output_tokens: 5, share: 0}]", "inference.mix[0].share"),
    ("[{prompt_tokens: 10, output_tokens: 5, shares: 1}]", "shares"),
])
def test_a_bad_mix_is_one_line(capsys, value, says):
    assert main(["run", LLAMA, "--set", f"inference.mix={value}"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and says in err
