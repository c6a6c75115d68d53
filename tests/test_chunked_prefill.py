"""Chunked prefill's cost when a prompt has more chunks than are priced one by one
(serving/deploy._prefill): a one-token budget on a 10M-token prompt ran a pass per chunk for
minutes; beyond EXACT_CHUNKS the chunks' steps are read at evenly spaced chunks and summed
piecewise-linearly, within 1e-6 of pricing every chunk."""
from __future__ import annotations

import numpy as np
import pytest

import explorer.serving.deploy as deploy
from explorer.scenario import load
from explorer.simulate import simulate

from conftest import ROOT

SERVE = ROOT / "scenarios" / "serve-llama3-70b-tp8.yaml"


def test_the_piecewise_linear_sum_is_exact_on_a_line():
    """sum_{j=0}^{n-1} (a + b j) = n a + b n (n - 1) / 2, from any knots on the line."""
    n, a, b = 1001, 2.5, 0.125
    at = np.array([0, 7, 300, 999, 1000])
    got = deploy._integer_sum(at, a + b * at.astype(float))
    assert got == pytest.approx(n * a + b * n * (n - 1) / 2, rel=1e-14)


@pytest.mark.parametrize(("prompt", "budget"), [(100_000, 100), (8192, 8)])
@pytest.mark.slow
def test_interpolated_chunks_agree_with_every_chunk_priced(monkeypatch, prompt, budget):
    sc = load(SERVE, {"inference.prompt_tokens": prompt, "inference.chunked_prefill_tokens": budget})
    assert prompt // budget > 512 == deploy.EXACT_CHUNKS          # the interpolated path
    fast = simulate(sc).inference
    monkeypatch.setattr(deploy, "EXACT_CHUNKS", 10**7)
    exact = simulate(sc).inference
    assert fast["ttft_s"] == pytest.approx(exact["ttft_s"], rel=1e-6)
    assert fast["tpot_s"] == pytest.approx(exact["tpot_s"], rel=1e-6)
