"""The shipped GNN scenario against its published epoch time: SALIENT (Kaler et al., MLSys 2022)
trains 3-layer GraphSAGE (fan-outs 15, 10, 5; batch 1,024 per GPU; hidden 256) on ogbn-papers100M
in 2.0 s per epoch on 16 GPUs (abstract); its artifact README gives 2.025 +- 0.224 s on 8 AWS
g5.24xlarge machines using 2 GPUs each (github.com/MITIBMxGraph/SALIENT_artifact).  The figures the
scenario's description quotes for ours are checked against the run, so they cannot drift."""
from __future__ import annotations

import pytest

from explorer.scenario import load
from explorer.simulate import simulate

from conftest import ROOT

SCENARIO = ROOT / "scenarios" / "gnn-sage-papers100m.yaml"
PUBLISHED_EPOCH_S = 2.025      # SALIENT artifact README, SAGE / SALIENT / ogbn-papers100M, 16 GPUs
TOLERANCE = 0.25


def epoch_s(overrides: dict | None = None) -> float:
    """Seconds per epoch: the training nodes over the seed nodes per second."""
    sc = load(SCENARIO, overrides or {})
    return sc.model.gnn.train_nodes / simulate(sc).samples_per_s


@pytest.mark.xfail(strict=True, reason=(
    "measured: ours 0.95 s per epoch = 0.47x SALIENT's 2.025 s.  Each GPU's step here is its GraphSAGE "
    "work (11.9 ms) and a 1.1 ms all-reduce; SALIENT's 16 GPUs run 8x faster than its one, not 16x "
    "(abstract).  What takes the rest is not established here; the model leaves out the CPU sampler "
    "two GPUs of a machine share and the wait of every step for its slowest GPU's mini-batch"))
def test_the_epoch_time_is_salients_within_25_percent():
    assert epoch_s() == pytest.approx(PUBLISHED_EPOCH_S, rel=TOLERANCE)


def test_the_description_quotes_our_figures_and_the_published_one():
    text = load(SCENARIO).description
    assert "2.025" in text and "2.0 s per epoch" in text
    ours = epoch_s()
    assert ours == pytest.approx(0.95, abs=0.005) and "0.95 s per epoch" in text
    assert f"{ours / PUBLISHED_EPOCH_S:.2f}x the measured time" in text
    # Partitioned features (1/16 local): 258 MB fetched per GPU per step, 7.3 s per epoch.
    sc = load(SCENARIO, {"model.gnn.local_share": 0.0625})
    r = simulate(sc)
    assert r.comm_bytes_per_gpu["gnn"] == pytest.approx(258e6, rel=0.005) and "258 MB per GPU" in text
    assert sc.model.gnn.train_nodes / r.samples_per_s == pytest.approx(7.3, abs=0.05) and "7.3 s" in text
