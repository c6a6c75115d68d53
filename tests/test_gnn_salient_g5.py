"""SALIENT on AWS G5 machines besides the shipped 16-GPU scenario (tests/test_gnn_papers100m.py): the
published epochs our host model reproduces and the one it does not, which bound what the 16-GPU
run leaves out.

SALIENT++'s artifact (Kaler et al., "Communication-Efficient Graph Neural Networks with
Probabilistic Neighborhood Expansion Analysis and Caching", MLSys 2023;
github.com/MITIBMxGraph/SALIENT_plusplus_artifact) runs SALIENT itself as its baseline (system
version ``salient``: every feature in every machine's memory, experiment_optimization_impact.py
with ``distribute_data = 0``) with its exp_driver.py defaults: 15 sampler threads per GPU, batch
1,024, fan-outs (15, 10, 5), hidden 256, 3-layer SAGE.  Its README gives, in ms per epoch:

- ogbn-papers100M on 2, 4 and 8 AWS g5.8xlarge machines (one A10G, 32 vCPUs = 16 cores of an AMD
  EPYC 7R32 each; 25 Gb/s, AWS's G5 instance table): 11,407.285, 5,632.411 and 3,059.608
  (README "A. Impact of different optimizations");
- ogbn-products on one g5.24xlarge ("48 physical cores (96 hardware threads) and 4 GPUs") using 2
  and 4 of its A10G: 1,757.898 and 1,537.975 (workflows/local_experiments.md, Experiment A).

With the sampler rate read off SALIENT's single-GPU V100 epoch (3.85M sampled edges per
thread-second, explorer/workloads/gnn/loader.py) and nothing fitted here, the one-GPU-per-machine
runs and the two-GPU g5.24xlarge run come out within 4 % but for the 8-machine one (-10 %, its
pipeline fill: see below); four GPUs sharing one g5.24xlarge come out 0.57x, the same shortfall
as SALIENT's 16-GPU run with two GPUs on each of 8 g5.24xlarge (0.51x).
"""
from __future__ import annotations

import math

import pytest

from explorer.scenario import load
from explorer.simulate import simulate
from explorer.workloads.gnn import costs, loader

from conftest import ROOT

SCENARIO = ROOT / "scenarios" / "gnn-sage-papers100m.yaml"
SALIENT_THREADS = 15                       # SALIENT++ exp_driver.py --num_samplers default
PAPERS_TRAIN = 1_207_179                   # ogbn-papers100M training nodes (OGB)
# ogbn-products (Hu et al., OGB, NeurIPS 2020, Table 2), features stored in fp16 as SALIENT's
# prepared datasets keep them (SALIENT_artifact README, download_datasets_fast.py).
PRODUCTS = {"model.gnn.nodes": 2_449_029, "model.gnn.edges": 61_859_140, "model.gnn.features": 100,
            "model.gnn.classes": 47, "model.gnn.train_nodes": 196_615, "model.gnn.feature_bytes": 2}


def g5_8xlarge(machines: int) -> dict:
    """``machines`` g5.8xlarge, one A10G each, 15 sampler threads, 25 Gb/s, papers100M."""
    return {"cluster.gpus_per_node": 1, "cluster.nodes": machines, "parallelism.dp": machines,
            "training.global_batch": 1024 * machines, "model.gnn.cpu_workers": SALIENT_THREADS,
            "cluster.scale_out.nic_Gbps": 25}


def one_g5_24xlarge(gpus: int) -> dict:
    """One g5.24xlarge using ``gpus`` of its A10G (15 sampler threads each), ogbn-products."""
    return {**PRODUCTS, "cluster.gpus_per_node": gpus, "cluster.nodes": 1, "parallelism.dp": gpus,
            "training.global_batch": 1024 * gpus, "model.gnn.cpu_workers": SALIENT_THREADS * gpus}


def epoch_s(overrides: dict) -> float:
    """Seconds per epoch: the training nodes over the seed nodes per second."""
    sc = load(SCENARIO, overrides)
    return sc.model.gnn.train_nodes / simulate(sc).samples_per_s


@pytest.mark.parametrize("machines, measured_s, ours_s", [(2, 11.407285, 11.018), (4, 5.632411, 5.509),
                                                          (8, 3.059608, 2.7546)])
def test_salient_with_one_a10g_per_g5_8xlarge_is_paced_by_the_sampler_at_its_v100_rate(
        machines, measured_s, ours_s):
    """SALIENT++'s README, system version ``salient`` on ogbn-papers100M: 11.41, 5.63 and 3.06 s per
    epoch on 2, 4 and 8 g5.8xlarge.  Ours: the 15 threads sample a mini-batch's 1,079,517 edges in
    18.69 ms, longer than the A10G's whole step (12.7, 13.0, 13.4 ms with the all-reduce), so the sampler
    paces: 11.02, 5.51, 2.75 s (-3.4 %, -2.2 %, -10.0 %), within 12 %.  The EPYC 7R32's threads
    sample at the V100 machine's rate when each machine feeds one GPU.  The 8-machine shortfall is
    the epoch's pipeline fill: each sampler thread prepares a whole mini-batch (SALIENT's
    fast_sampler.cpp, fast_sampler_thread: multilayer_sample then serial_index), so 148 mini-batches
    over 15 threads take ceil(148 / 15) = 10 rounds of one thread's 280.4 ms (2.80 s) where the
    per-step pace counts 9.83."""
    got = epoch_s(g5_8xlarge(machines))
    assert got == pytest.approx(ours_s, abs=0.0005)
    assert got == pytest.approx(measured_s, rel=0.12)
    sc = load(SCENARIO, g5_8xlarge(machines))
    hw = loader.host_work(sc, costs.seeds(sc))
    assert hw.sampler_s == pytest.approx(18.69e-3, abs=5e-6)
    assert simulate(sc).iteration_time_s == pytest.approx(hw.sampler_s, rel=1e-12)
    batches = math.ceil(math.ceil(PAPERS_TRAIN / machines) / 1024)
    rounds = math.ceil(batches / SALIENT_THREADS)
    assert (machines, batches, rounds) in {(2, 590, 40), (4, 295, 20), (8, 148, 10)}
    assert rounds * hw.sampler_s * SALIENT_THREADS == pytest.approx(
        {2: 11.216, 4: 5.608, 8: 2.804}[machines], abs=0.0005)


def test_two_a10g_sharing_one_g5_24xlarge_are_paced_by_the_sampler_too():
    """SALIENT++'s workflows/local_experiments.md, ``salient`` on ogbn-products with 2 of the
    g5.24xlarge's GPUs: 1.758 s per epoch.  Ours: 30 threads on the machine, 15 per GPU, sample
    the 1,044,888 edges of a mini-batch in 18.09 ms, longer than the A10G's 11.1 ms step, the
    pace: 1.737 s (-1.2 %), within 5 %."""
    sc = load(SCENARIO, one_g5_24xlarge(2))
    hw = loader.host_work(sc, costs.seeds(sc))
    assert hw.sampler_s == pytest.approx(1_044_888 / (3.85e6 * 15), rel=1e-5)
    assert simulate(sc).iteration_time_s == pytest.approx(hw.sampler_s, rel=1e-12)
    assert epoch_s(one_g5_24xlarge(2)) == pytest.approx(1.757898, rel=0.05)


@pytest.mark.xfail(strict=True, reason=(
    "measured: SALIENT++'s four A10G sharing one g5.24xlarge (60 sampler threads on its 48 cores, "
    "ogbn-products) take 1.538 s per epoch; ours 0.869 s = 0.57x: we give every GPU its threads at "
    "the one-GPU machine's rate, and nothing of the host they share (cores, memory bandwidth, four "
    "processes) is modelled.  Two GPUs on the same machine are reproduced (-1.2 %)"))
def test_four_a10g_sharing_one_g5_24xlarge_within_25_percent():
    assert epoch_s(one_g5_24xlarge(4)) == pytest.approx(1.537975, rel=0.25)


def test_the_scenario_description_quotes_these_runs():
    """The shipped scenario's description names these comparisons with the figures above."""
    text = load(SCENARIO).description
    for quoted in ("11.0, 5.51 and 2.75 s", "11.41, 5.63 and 3.06 s", "1.74 s against 1.76 s",
                   "0.87 s against 1.54 s"):
        assert quoted in text
    assert f"{epoch_s(one_g5_24xlarge(2)):.2f} s against 1.76 s" in text
    assert f"{epoch_s(one_g5_24xlarge(4)):.2f} s against 1.54 s" in text
    assert [f"{epoch_s(g5_8xlarge(n)):.3g}" for n in (2, 4, 8)] == ["11", "5.51", "2.75"]
