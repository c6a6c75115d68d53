"""The host side of a mini-batch GNN step (explorer/workloads/gnn/loader.py): the CPU sampler's
seconds and the host-to-GPU copy's bytes in closed form, SALIENT's measured sampler throughput
reproduced, and the step waiting for them only when they outlast the GPU (pipelined) or always
(not pipelined).

SALIENT (Kaler et al., MLSys 2022); its artifact README (github.com/MITIBMxGraph/SALIENT_artifact)
gives, for SAGE on ogbn-papers100M (fan-outs 15, 10, 5, batch 1,024) on one GPU with 20 sampler
workers (experiments/performance_breakdown_config.cfg), "Sampling + Slicing" 2,373.212 ms per epoch.
"""
from __future__ import annotations

import math

import pytest

from explorer.cli import main
from explorer.scenario import load
from explorer.simulate import simulate
from explorer.workloads.gnn import costs, loader

from conftest import ROOT

SCENARIO = ROOT / "scenarios" / "gnn-sage-papers100m.yaml"
N = 111_059_956                    # ogbn-papers100M nodes (OGB, Hu et al. 2020)
FANOUTS = (15, 10, 5)
SALIENT_SAMPLING_SLICING_S = 2.373212    # per epoch, one GPU, 20 workers (artifact README)
BATCHES = math.ceil(1_207_179 / 1024)    # 1,179 mini-batches of 1,024 training nodes


def _frontiers(seeds: float) -> list[float]:
    out = [seeds]
    for f in FANOUTS:                    # every fan-out is below the average degree 29.1
        s = out[-1]
        out.append(s + (N - s) * (1 - math.exp(-s * f / N)))
    return out


def test_the_sampler_takes_the_sampled_edges_over_the_threads_of_one_gpu():
    """1,024 seeds: 15,360 + 163,828 + 900,329 = 1,079,517 sampled edges; 40 threads per machine
    shared by 2 GPUs = 20 per GPU at 26.8M edges per thread-second: 2.014 ms."""
    sc = load(SCENARIO)
    s = _frontiers(1024.0)
    edges = sum(x * f for x, f in zip(s, FANOUTS, strict=False))
    assert edges == pytest.approx(1_079_517, abs=1)
    hw = loader.host_work(sc, costs.seeds(sc))
    assert hw.sampler_s == pytest.approx(edges / (26.8e6 * 40 / 2), rel=1e-12)
    assert hw.sampler_s == pytest.approx(2.014e-3, abs=1e-6)


def test_the_copy_moves_the_input_frontiers_features_and_the_edge_indices():
    """1,075,302 input-frontier nodes x 128 features x 2 bytes (fp16) + 1,079,517 edges x 8 bytes
    = 283.9 MB per mini-batch, 11.36 ms over the A10G's 25 GB/s host link."""
    sc = load(SCENARIO)
    s = _frontiers(1024.0)
    expected = s[-1] * 128 * 2 + sum(x * f for x, f in zip(s, FANOUTS, strict=False)) * 8
    hw = loader.host_work(sc, costs.seeds(sc))
    assert hw.copy_bytes == pytest.approx(expected, rel=1e-12)
    assert hw.copy_bytes == pytest.approx(283.91e6, rel=1e-4)
    assert hw.copy_s == pytest.approx(hw.copy_bytes / 25e9, rel=1e-12)


def test_the_default_rate_reproduces_salients_single_gpu_sampling_and_slicing():
    """One GPU with SALIENT's 20 workers: the sampler seconds of an epoch's 1,179 mini-batches are
    the artifact's measured 2,373 ms within 1 % (the rate was read off that measurement, so this
    holds the frontier closed form and the rate to each other)."""
    sc = load(SCENARIO, {"cluster.gpus_per_node": 1, "cluster.nodes": 1, "parallelism.dp": 1,
                         "training.global_batch": 1024, "model.gnn.cpu_workers": 20})
    epoch = BATCHES * loader.host_work(sc, 1024.0).sampler_s
    assert epoch == pytest.approx(SALIENT_SAMPLING_SLICING_S, rel=0.01)


def test_not_pipelined_every_step_waits_for_the_sampler_and_the_copy():
    """Regression (issue 36, GNN item): the step used to leave the host out.  Not pipelined it
    takes sampler + copy more than the GPU's step; pipelined (SALIENT) the copy (11.36 ms) is
    shorter than the GPU's 11.78 ms, so nothing is added."""
    on, off = load(SCENARIO), load(SCENARIO, {"model.gnn.pipelined": False})
    hw = loader.host_work(off, costs.seeds(off))
    r_on, r_off = simulate(on), simulate(off)
    assert r_off.iteration_time_s - r_on.iteration_time_s == pytest.approx(hw.sampler_s + hw.copy_s, rel=1e-9)
    assert r_off.breakdown_s["compute"] - r_on.breakdown_s["compute"] == pytest.approx(
        hw.sampler_s + hw.copy_s, rel=1e-9)


def test_pipelined_the_step_takes_the_longest_of_sampler_copy_and_gpu():
    """Two sampler threads per machine (one per GPU): 1,079,517 / 26.8M = 40.3 ms per mini-batch,
    longer than the GPU's step, so the step grows by the sampler's excess over the GPU's work."""
    base = simulate(load(SCENARIO))
    sc = load(SCENARIO, {"model.gnn.cpu_workers": 2})
    hw = loader.host_work(sc, costs.seeds(sc))
    assert hw.sampler_s == pytest.approx(1_079_517 / 26.8e6, rel=1e-6)
    gpu = base.breakdown_s["compute"]
    grown = simulate(sc).iteration_time_s - base.iteration_time_s
    assert grown == pytest.approx(hw.sampler_s - gpu, rel=1e-6)
    assert loader.stall_s(sc, hw, gpu) == pytest.approx(max(hw.sampler_s, hw.copy_s) - gpu, rel=1e-12)


def test_a_full_graph_pass_has_no_host_work():
    sc = load(SCENARIO, {"model.gnn.mode": "fullgraph", "training.global_batch": 16,
                         "training.micro_batch": 1})
    assert loader.host_work(sc, costs.seeds(sc)) == loader.HostWork(0.0, 0.0, 0.0)


@pytest.mark.parametrize("field, value", [("model.gnn.cpu_workers", "0"),
                                          ("model.gnn.sampler_edges_per_core_s", "0"),
                                          ("model.gnn.pipelined", "sometimes")])
def test_a_bad_loader_field_exits_2_with_one_line_naming_it(field, value, capsys):
    assert main(["run", "gnn-sage-papers100m", "--set", f"{field}={value}"]) == 2
    err = capsys.readouterr().err.strip()
    assert field in err and "\n" not in err and "Traceback" not in err


def test_run_json_gives_the_epoch_time_of_a_gnn():
    r = simulate(load(SCENARIO))
    assert r.to_json_dict()["epoch_s"] == pytest.approx(1_207_179 / r.samples_per_s, rel=1e-12)
