"""The shipped GNN scenario against its published epoch time: SALIENT (Kaler et al., MLSys 2022)
trains 3-layer GraphSAGE (fan-outs 15, 10, 5; batch 1,024 per GPU; hidden 256) on ogbn-papers100M
in 2.0 s per epoch on 16 GPUs (abstract); its artifact README gives 2.025 +- 0.224 s on 8 AWS
g5.24xlarge machines using 2 GPUs each, 20 CPU sampler threads per GPU
(github.com/MITIBMxGraph/SALIENT_artifact).  The figures the scenario's description quotes for ours
(the GPU step, the CPU sampler, the host copy) are checked against the run, so they cannot drift."""
from __future__ import annotations

import math

import pytest

from explorer.scenario import load
from explorer.simulate import simulate
from explorer.workloads.gnn import costs, loader, sampling

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
    "at 25 GB/s) beside it; SALIENT's 16 GPUs are 8.2x its one, ours 16.0x.  Ruled out as the whole "
    "gap: the epoch's fill (74 mini-batches over 20 threads: 4 rounds of 280 ms and the last round's "
    "steps, 1.30 s = 0.64x) and the slowest of 16 samplers (no mini-batch can sample more than 0.6 % "
    "above our figure).  The same rate reproduces SALIENT with one A10G per g5.8xlarge and with two "
    "on one g5.24xlarge (tests/test_gnn_salient_g5.py), not four on one (0.57x).  Not modelled and "
    "not measured apart: what two GPUs' 40 threads and processes share on each g5.24xlarge, and the "
    "16-rank TCP collectives with the per-step loss all-reduce and .cpu() sync of --use_lrs; "
    "GPU-bound, the step would have to be 23.6 ms"))
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


# Each sampler thread prepares a whole mini-batch (SALIENT_artifact fast_sampler/fast_sampler.cpp,
# fast_sampler_thread: one seed range, multilayer_sample, then serial_index), every epoch starts an
# empty pipeline (driver/drivers/base.py train: a new FastSamplerSession per epoch after the
# validation pass, --test_epoch_frequency 1 in all_dist_benchmarks.sh) and the epoch time is the
# "Preamble" (which waits for the first batch, DevicePrefetcher.preload) plus "Compute" (the steps
# and the closing dist.barrier), helper_scripts/parse_timings.py.  Each of the 16 ranks trains on
# 1,207,179 / 16 = 75,448 or 75,449 seeds (fast_trainer/shufflers.py DistributedShuffler): 74
# mini-batches.
BATCHES_PER_GPU = 74
THREADS_PER_GPU = 20


def test_the_epochs_sampler_rounds_leave_most_of_the_gap():
    """One thread takes 20 x 14.02 = 280.4 ms per mini-batch; 74 mini-batches over 20 threads are 4
    rounds (1.122 s) while the GPU trains each round's 20 in 20 x 12.90 = 258 ms < 280.4 ms, and the
    last round's 14 after it (181 ms): 1.30 s, 0.64x SALIENT's 2.025 s, still outside 25 %.  The
    same count on SALIENT's one V100 (1,179 mini-batches, 59 rounds): 16.54 s before the last
    round's steps, 0.2 % above its measured 16.51 s epoch, so the fill is in what the rate was read
    off.  GPU-bound instead, the 16-GPU epoch would be the fill and 74 steps of
    (2.025 - 0.2804) / 74 = 23.6 ms, against our 12.9 ms."""
    sc = load(SCENARIO)
    hw = loader.host_work(sc, costs.seeds(sc))
    one_batch = hw.sampler_s * THREADS_PER_GPU
    assert one_batch == pytest.approx(0.2804, abs=5e-5)
    step = simulate(load(SCENARIO, {"model.gnn.sampler_edges_per_core_s": 1e12})).iteration_time_s
    assert THREADS_PER_GPU * step < one_batch
    rounds = math.ceil(BATCHES_PER_GPU / THREADS_PER_GPU)
    last = BATCHES_PER_GPU - (rounds - 1) * THREADS_PER_GPU
    assert (rounds, last) == (4, 14)
    epoch = rounds * one_batch + last * step
    assert epoch == pytest.approx(1.302, abs=0.0005)
    assert epoch / PUBLISHED_EPOCH_S == pytest.approx(0.643, abs=0.0005) and epoch / PUBLISHED_EPOCH_S < 0.75
    assert math.ceil(1179 / THREADS_PER_GPU) * one_batch == pytest.approx(16.54, abs=0.005)
    assert (PUBLISHED_EPOCH_S - one_batch) / BATCHES_PER_GPU == pytest.approx(23.6e-3, abs=5e-5)
    text = load(SCENARIO).description
    assert "4 rounds of 280 ms" in text and "1.30 s" in text and "0.64x" in text and "23.6 ms" in text


def test_no_mini_batch_samples_more_than_the_fan_outs_allow():
    """The slowest of 16 GPUs' samplers, as far as a mini-batch's size goes: a hop's frontier is at
    most S (1 + f) (a node draws at most f neighbours, GraphSAGE Alg. 2), so no mini-batch of 1,024
    seeds has more than 1,024 x 16 x 11 x 6 = 1,081,344 input nodes nor 1,024 x 15 + 16,384 x 10 +
    180,224 x 5 = 1,080,320 sampled edges.  Ours, every fan-out under the average degree 29.1, are
    1,075,302 and 1,079,517: 0.56 % and 0.07 % under that cap, so the largest of the 320 mini-batches
    a round prepares is at most 0.6 % larger than the one we price (real mini-batches, whose nodes
    of degree under a fan-out take fewer, are smaller)."""
    sc = load(SCENARIO)
    g = sc.model.gnn
    nodes_cap = 1024 * 16 * 11 * 6
    edges_cap = 1024 * 15 + 1024 * 16 * 10 + 1024 * 16 * 11 * 5
    assert (nodes_cap, edges_cap) == (1_081_344, 1_080_320)
    nodes, edges = sampling.frontiers(g, 1024.0)[-1], sum(sampling.sampled_edges(g, 1024.0))
    assert nodes / nodes_cap == pytest.approx(1 - 0.0056, abs=5e-5)
    assert edges / edges_cap == pytest.approx(1 - 0.0007, abs=5e-5)
    text = load(SCENARIO).description
    assert "0.6 %" in text and "1,081,344" in text
