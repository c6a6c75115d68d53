"""A server's MFU over the peak its GEMMs run at, and the memory budget its verdict is against.

Found by an invariant hunt: serve-llama3-70b-tp8 (FP8 weights and activations) with a 4M-wide FFN
read an MFU of 1.26 (over the bf16 peak) and no fp8 figure; with inference.memory_utilization 0.1
it read memory_over_capacity true at 19.4 GB "of 85.9".
"""
from __future__ import annotations

import json

import pytest

from explorer.cli import main


def _run(capsys, *sets: str) -> dict:
    args = ["run", "serve-llama3-70b-tp8", "--json"]
    for s in sets:
        args += ["--set", s]
    assert main(args) == 0
    return json.loads(capsys.readouterr().out)


def test_fp8_serving_reports_its_fp8_mfu(capsys):
    base = _run(capsys)
    wide = _run(capsys, "model.ffn_hidden=4194304")
    for j in (base, wide):
        # H100: 1,979 fp8 and 989 bf16 dense TFLOP/s.
        assert j["mfu_fp8_peak"] == pytest.approx(j["tflops_per_gpu"] / 1979, rel=1e-9)
        assert 0 < j["mfu_fp8_peak"] <= 1
    assert wide["mfu"] > 1 >= wide["mfu_fp8_peak"]          # bf16's can exceed 1 on FP8 GEMMs


@pytest.mark.parametrize("share", [0.1, 0.5, 0.9])
def test_the_memory_verdict_is_against_the_servers_budget(capsys, share):
    j = _run(capsys, f"inference.memory_utilization={share}")
    assert j["memory_budget_GB"] == pytest.approx(j["memory_capacity_GB"] * share, rel=1e-12)
    assert j["memory_over_capacity"] == (j["memory_GB"]["total"] > j["memory_budget_GB"])


@pytest.mark.parametrize("sets", [
    # Accepted and ignored before: a field whose default is None (the loader's derived ones, a layout
    # list), and training-step fields the refusal list lacked.
    "parallelism.pipeline_layout=[1,2,3]", "parallelism.stage_layers=[1000,1000]",
    "communication.bucket_MB=1", "training.fp8_recipe=current", "parallelism.max_in_flight=2",
    "communication.comm_sms=8", "parallelism.stage_replicas=[1]", "communication.prefetch_layers=3"])
def test_a_serving_run_refuses_training_fields_by_name(sets, capsys):
    assert main(["run", "serve-llama3-70b-tp8", "--set", sets]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: {sets.split('=')[0]}: is a training field") and "\n" not in err


def test_weights_that_do_not_fit_name_the_layout_not_the_batch(capsys, tmp_path):
    """Llama 3 70B in bf16 on one H100: 141.1 GB of weights against the 81.6 GB the server may use
    (0.95 x 85.9).  The warning had said the batch's KV cache did not fit "at most 0 per replica
    (inference.batch)" and the curve offered a knee; it now says the weights alone exceed the
    budget and names tp/pp/weight_dtype, and the knee says no batch fits.  The HTML report of the
    same input had failed (a one-GPU replica's topology drew 0 label lines: ZeroDivisionError)."""
    sets = ["parallelism.tp=1", "cluster.gpus_per_node=1", "inference.weight_dtype=bf16", "inference.batch=1"]
    j = _run(capsys, *sets)
    (said,) = j["warnings"]
    assert said.startswith("the weights alone (141.1 GB per GPU") and "81.6 GB" in said
    assert "parallelism.tp" in said and "inference.weight_dtype" in said and "inference.batch" not in said
    assert j["memory_over_capacity"] and j["inference"]["max_batch"] == 0
    args = ["run", "serve-llama3-70b-tp8"] + [x for s in sets for x in ("--set", s)]
    assert main(args) == 0
    assert "knee at batch 1 (no batch fits in memory: see the warning)" in capsys.readouterr().out
    page = tmp_path / "r.html"
    assert main(["report", "serve-llama3-70b-tp8", *args[2:], "--html", str(page)]) == 0
    assert page.stat().st_size > 100_000 and "wrote" in capsys.readouterr().out
    # A batch too large for the KV cache still names the batch.
    big = _run(capsys, "inference.batch=4096")
    assert big["warnings"] == ["the KV cache of 4096 sequences of 2,000 tokens does not fit beside the "
                               "weights: at most 1765 per replica (inference.batch)"]
