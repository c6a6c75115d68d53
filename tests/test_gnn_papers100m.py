"""The shipped GNN scenario against its published epoch time: SALIENT (Kaler et al., MLSys 2022)
trains 3-layer GraphSAGE (fan-outs 15, 10, 5; batch 1,024 per GPU; hidden 256) on ogbn-papers100M
in 2.0 s per epoch on 16 GPUs (abstract); its artifact README gives 2.025 +- 0.224 s on 8 AWS
g5.24xlarge machines using 2 GPUs each, 20 CPU sampler threads per GPU
(github.com/MITIBMxGraph/SALIENT_artifact).  The figures the scenario's description quotes for ours
(the GPU step, the CPU sampler, the host copy) are checked against the run, so they cannot drift."""
from __future__ import annotations

import pytest

from explorer.scenario import load
from explorer.simulate import simulate
from explorer.workloads.gnn import costs, loader

from conftest import ROOT

SCENARIO = ROOT / "scenarios" / "gnn-sage-papers100m.yaml"
PUBLISHED_EPOCH_S = 2.025      # SALIENT artifact README, SAGE / SALIENT / ogbn-papers100M, 16 GPUs
TOLERANCE = 0.25


def epoch_s(overrides: dict | None = None) -> float:
    """Seconds per epoch: the training nodes over the seed nodes per second."""
    sc = load(SCENARIO, overrides or {})
    return sc.model.gnn.train_nodes / simulate(sc).samples_per_s


@pytest.mark.xfail(strict=True, reason=(
    "measured: ours 1.03 s per epoch = 0.51x SALIENT's 2.025 s.  Each GPU's step is paced by its CPU "
    "sampler (14.0 ms with 20 threads per GPU at the rate SALIENT's own single-GPU epoch gives), the "
    "GPU's GraphSAGE work (11.8 ms) and all-reduce (1.1 ms) and the 284 MB host-to-GPU copy (11.4 ms "
    "at 25 GB/s) beside it; SALIENT's 16 GPUs are 8.2x its one, ours 16.0x.  Left out, and believed "
    "to be the rest: every step's wait for the slowest of 16 GPUs' samplers, the host memory two "
    "GPUs' 40 sampler threads and copies share, and an epoch's fixed costs over 74 steps"))
def test_the_epoch_time_is_salients_within_25_percent():
    assert epoch_s() == pytest.approx(PUBLISHED_EPOCH_S, rel=TOLERANCE)


def test_the_description_quotes_our_figures_and_the_published_one():
    text = load(SCENARIO).description
    assert "2.025" in text and "2.0 s per epoch" in text
    ours = epoch_s()
    assert ours == pytest.approx(1.03, abs=0.005) and "1.03 s per epoch" in text
    assert f"{ours / PUBLISHED_EPOCH_S:.2f}x the measured time" in text
    # The host side: the sampler's 14.0 ms paces the GPU's 12.9 ms step (11.8 ms of work and the
    # 1.1 ms all-reduce), which waits 1.1 ms; the copy, 284 MB in 11.4 ms, hidden; not pipelined
    # every step takes 38.3 ms, 2.82 s per epoch.
    sc = load(SCENARIO)
    hw = loader.host_work(sc, costs.seeds(sc))
    r = simulate(sc)
    fast = simulate(load(SCENARIO, {"model.gnn.sampler_edges_per_core_s": 1e12}))
    gpu, step = fast.breakdown_s["compute"], fast.iteration_time_s
    assert hw.sampler_s == pytest.approx(14.0e-3, abs=5e-5) and "**14.0 ms**" in text
    assert r.iteration_time_s == pytest.approx(hw.sampler_s, rel=1e-12) and "14.0 ms each" in text
    assert step == pytest.approx(12.9e-3, abs=5e-5) and "take 12.9 ms" in text
    assert r.iteration_time_s - step == pytest.approx(1.1e-3, abs=5e-5) and "waits 1.1 ms" in text
    assert fast.breakdown_s["dp"] == pytest.approx(1.1e-3, abs=5e-5) and "1.1 ms all-reduce" in text
    assert hw.copy_bytes == pytest.approx(284e6, rel=0.002) and "**284 MB**" in text
    assert hw.copy_s == pytest.approx(11.4e-3, abs=5e-5) and "**11.4 ms**" in text
    assert gpu == pytest.approx(11.8e-3, abs=5e-5) and "GPU's **11.8 ms**" in text
    off = load(SCENARIO, {"model.gnn.pipelined": False})
    r_off = simulate(off)
    assert r_off.iteration_time_s == pytest.approx(38.3e-3, abs=5e-5) and "38.3 ms" in text
    assert off.model.gnn.train_nodes / r_off.samples_per_s == pytest.approx(2.82, abs=0.005)
    assert "2.82 s per epoch" in text
    # 16 GPUs against one: SALIENT 16.513 / 2.025 = 8.2x; ours 16.54 / 1.03 = 16.0x (the one-GPU
    # epoch is tests/test_gnn_loader.py's, on SALIENT's V100).
    assert "8.2x faster than its one" in text and "ours 16.0x" in text
    # Partitioned features (1/16 local): 258 MB fetched per GPU per step, 7.3 s per epoch (the
    # sampler hides under the fetch).
    sc = load(SCENARIO, {"model.gnn.local_share": 0.0625})
    r = simulate(sc)
    assert r.comm_bytes_per_gpu["gnn"] == pytest.approx(258e6, rel=0.005) and "258 MB per GPU" in text
    assert sc.model.gnn.train_nodes / r.samples_per_s == pytest.approx(7.26, abs=0.05) and "7.3 s" in text
