"""``sweep SERVING --full``: a serving scenario's combinations read as serving figures (TTFT, TPOT,
tokens/s per GPU, requests/s, max batch), each row equal to ``run --set`` of its values, and the
layout that serves the most named — how serve-3d-dram's heads (tp) and layers (pp) are best spread
over its eight chips."""
from __future__ import annotations

import csv
import json

import pytest

from explorer.cli import main

SWEEP = ["sweep", "serve-3d-dram", "--full", "--vary", "parallelism.tp=1,2,8", "--vary", "parallelism.pp=1,2"]


def _run(capsys, *sets) -> dict:
    assert main(["run", "serve-3d-dram", "--json", *[x for s in sets for x in ("--set", s)]]) == 0
    return json.loads(capsys.readouterr().out)["inference"]


def test_each_row_is_run_of_its_values_and_the_best_serves_the_most(capsys, tmp_path):
    out = tmp_path / "rows.csv"
    assert main([*SWEEP, "--json", "--csv", str(out)]) == 0
    rows = json.loads(capsys.readouterr().out)
    valid = [r for r in rows if r["valid"]]
    assert len(rows) == 6 and len(valid) == 5          # tp 8 x pp 2 needs 16 chips
    for r in valid:
        tp, pp = r["overrides"]["parallelism.tp"], r["overrides"]["parallelism.pp"]
        f = _run(capsys, f"parallelism.tp={tp}", f"parallelism.pp={pp}")
        for k in ("ttft_s", "tpot_s", "output_tokens_per_s_per_gpu", "requests_per_s", "max_batch"):
            assert r["inference"][k] == pytest.approx(f[k], rel=1e-12), (tp, pp, k)
    table = list(csv.DictReader(out.open(encoding="utf-8")))
    assert float(table[0]["tpot_s"]) == pytest.approx(rows[0]["inference"]["tpot_s"], rel=1e-12)
    assert main(SWEEP) == 0
    text = capsys.readouterr().out
    assert "TTFT" in text and "tok/s/GPU" in text and "MFU" not in text
    # tp 1 holds 64 sequences of 2,000 tokens beside 70 GB of weights on no chip: it does not fit.
    fits = [r for r in valid if r["inference"]["max_batch"] >= r["inference"]["batch"]]
    best = max(fits, key=lambda r: r["inference"]["output_tokens_per_s_per_gpu"])
    assert best["overrides"] == {"parallelism.tp": 2, "parallelism.pp": 1}
    assert (f"serves the most that fits: {best['inference']['output_tokens_per_s_per_gpu']:,.0f} output "
            "tokens/s per GPU") in text and "at parallelism.tp=2, parallelism.pp=1" in text


def test_with_a_target_the_best_serves_the_most_requests_within_it(capsys):
    assert main([*SWEEP, "--set", "inference.tpot_target_ms=12", "--json"]) == 0
    rows = [r for r in json.loads(capsys.readouterr().out) if r["valid"]]
    assert all("requests_per_s_at_target" in r["inference"] for r in rows)
    assert main([*SWEEP, "--set", "inference.tpot_target_ms=12"]) == 0
    text = capsys.readouterr().out
    best = max(rows, key=lambda r: r["inference"]["requests_per_s_at_target"])
    assert "at target" in text
    assert f"{best['inference']['requests_per_s_at_target']:,.2f} requests/s within the target" in text
