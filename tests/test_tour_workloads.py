"""The tour of the issue-36 workloads (scenarios/tours/beyond-transformers.yaml): each narration's
numbers against the simulation and the closed forms they quote, one assertion per claim.
Teaching notes: why the embedding all-to-all is on the critical path (DLRM), feature fetch vs
halo exchange (GNN), PipeDream's 15-1 (VGG-16)."""
from __future__ import annotations

import pytest
from tour_support import simulate_steps, step_scenario, step_text

from explorer.config.dlrm import MLPERF_POOLING
from explorer.scenario import apply_overrides, from_dict
from explorer.share import check_tour, parse_query, preset_raw
from explorer.simulate import simulate
from explorer.teaching.tours import tours
from explorer.workloads.convnet.vgg import build
from explorer.workloads.gnn.sampling import halo_nodes
from explorer.workloads.registry import workload_for

TOUR = "beyond-transformers"


@pytest.fixture(scope="module")
def runs():
    return simulate_steps(TOUR)


def text(i: int) -> str:
    return step_text(TOUR, i)


def test_the_tour_ships_with_a_step_per_pattern():
    t = tours()[TOUR]
    assert check_tour(t) == []
    titles = [s.title for s in t.steps]
    assert "Why the embedding all-to-all is on the critical path" in titles
    assert any(x.startswith("Feature fetch vs halo exchange") for x in titles)
    assert any("15-1: replicate the cheap convolutions, keep the FC layers on one GPU" in x for x in titles)


def test_dlrm_all_to_all_claims(runs):
    base, blocking, tablewise = runs[1], runs[2], runs[3]
    # "(8 x ids + 2 x 6,912 samples x 26 tables x 128 x 2 bytes) x 7/8": ids are int64, one per
    # lookup; column-wise every GPU needs every id (a shard of every table), table-wise one GPU.
    ids = 6912 * sum(MLPERF_POOLING) * 8
    closed = (8 * ids + 2 * 6912 * 26 * 128 * 2) * 7 / 8
    one_owner = (ids + 2 * 6912 * 26 * 128 * 2) * 7 / 8
    assert base.comm_bytes_per_gpu["emb"] == pytest.approx(closed, rel=1e-6)
    assert f"{closed / 1e6:.1f} MB per GPU" in text(1)
    # "Its 26 embedding tables (26 billion parameters)": 204.2M rows x 128, with the small MLPs.
    assert f"{workload_for(base.scenario.model).params(base.scenario) / 1e9:.0f} billion" == "26 billion"
    # "only the gradients' all-to-all, 0.13 ms, stays exposed"; without the pipeline "0.53 ms".
    assert f"{base.breakdown_s['emb'] * 1e3:.2f} ms" == "0.13 ms"
    assert f"{blocking.breakdown_s['emb'] * 1e3:.2f} ms" == "0.53 ms"
    assert blocking.comm_bytes_per_gpu["emb"] == base.comm_bytes_per_gpu["emb"]      # "the same bytes"
    # "from 3.63 to 4.02 ms"; table-wise "6.32 ms".
    ms = (f"{base.iteration_time_s * 1e3:.2f}", f"{blocking.iteration_time_s * 1e3:.2f}")
    assert ms == ("3.63", "4.02")
    assert f"{tablewise.iteration_time_s * 1e3:.2f}" == "6.32"
    assert tablewise.comm_bytes_per_gpu["emb"] == pytest.approx(one_owner, rel=1e-6)
    assert f"({one_owner / 1e6:.1f} MB instead of {closed / 1e6:.1f})" in text(3)


def test_gnn_fetch_and_halo_claims(runs):
    local, fetch, cached, halo = runs[4], runs[6], runs[7], runs[8]
    assert local.comm_bytes_per_gpu["gnn"] == 0.0                                     # "no feature crosses"
    assert f"{local.epoch_s:.2f}" == "1.03"
    assert f"{fetch.comm_bytes_per_gpu['gnn'] / 1e6:.0f}" == "258"
    assert (f"{fetch.iteration_time_s * 1e3:.1f}", f"{fetch.epoch_s:.2f}") == ("98.6", "7.26")
    assert cached.comm_bytes_per_gpu["gnn"] == pytest.approx(fetch.comm_bytes_per_gpu["gnn"] / 10, rel=1e-9)
    assert (f"{cached.comm_bytes_per_gpu['gnn'] / 1e6:.1f}", f"{cached.epoch_s:.2f}") == ("25.8", "1.59")
    # Halo: boundary nodes x layer width x bytes, forward at every layer (input fp16 features,
    # then fp32 hidden 256) and the gradients back for the hidden layers' inputs.
    sc = step_scenario(TOUR, 8)
    closed = 2_000_000 * (128 * 2 + 256 * 4 + 256 * 4) + 2_000_000 * (256 * 4 + 256 * 4)
    assert halo.comm_bytes_per_gpu["gnn"] == pytest.approx(closed, rel=1e-9)
    assert f"{closed / 1e9:.1f} GB" == "8.7 GB"
    assert halo.epoch_s == pytest.approx(halo.iteration_time_s, rel=1e-12)        # one pass = one epoch
    steps = 1_207_179 / 16_384
    assert f"{round(steps)} steps x 258 MB = {steps * fetch.comm_bytes_per_gpu['gnn'] / 1e9:.0f} GB" in \
        "74 steps x 258 MB = 19 GB"
    # "A random cut ... borders 88 M of the 111 M nodes": N (1 - 1/p)(1 - (1 - 1/p)^d), d = 29.
    g = sc.model.gnn
    random_cut = halo_nodes(type(g)(**{**g.__dict__, "halo_nodes": 0}))
    assert round(g.average_degree) == 29 and f"{random_cut / 1e6:.0f}" == "88"
    # "52.8 GB per GPU against the A10G's 25.8 GB (24 GiB)": over capacity, as the card shows it.
    assert halo.memory_over_capacity and f"{halo.memory.total / 1e9:.1f}" == "52.8"
    assert f"{sc.hardware.gpu.capacity_bytes / 1e9:.1f}" == "25.8"



def test_the_cpu_sampler_sets_the_pace_claims(runs):
    """Step 5: the shipped sampler (14.0 ms, 20 threads per GPU) against the GPU's 12.9 ms step;
    half the threads: 28.0 ms, a 54 % wait, the epoch 1.03 -> 2.07 s, the bottleneck the sampler."""
    from explorer.workloads.gnn import costs, loader
    local, slow = runs[4], runs[5]
    sc = slow.scenario
    hw = loader.host_work(sc, costs.seeds(sc))
    assert f"{hw.sampler_s * 1e3:.1f} ms" == "28.0 ms" and f"{hw.copy_bytes / 1e6:.0f} MB" == "284 MB"
    assert f"{local.iteration_time_s * 1e3:.1f}" == "14.0"
    gpu = simulate(from_dict(apply_overrides(preset_raw("gnn-sage-papers100m"),
                                             {"model.gnn.sampler_edges_per_core_s": 1e12})))
    assert f"{gpu.iteration_time_s * 1e3:.1f}" == "12.9"
    assert slow.iteration_time_s == pytest.approx(hw.sampler_s, rel=1e-12)
    wait = (slow.iteration_time_s - gpu.iteration_time_s) / slow.iteration_time_s
    assert f"{wait:.0%}" == "54%" and (f"{local.epoch_s:.2f}", f"{slow.epoch_s:.2f}") == ("1.03", "2.07")
    assert slow.bottleneck.startswith("The host paces the step: the GPU waits 54.0%")
    for claim in ("**14.0 ms**", "**12.9 ms**", "**28.0 ms**", "**54 %**", "**2.07 s**", "284 MB"):
        assert claim in text(5)

def test_gnn_random_cut_claim():
    sc = step_scenario(TOUR, 8)
    raw = apply_overrides(preset_raw("gnn-sage-papers100m"),
                          {**parse_query(tours()[TOUR].steps[7].params).overrides, "model.gnn.halo_nodes": 0})
    r = simulate(from_dict(raw))
    assert sc.model.gnn.halo_nodes == 2_000_000
    assert (f"{r.comm_bytes_per_gpu['gnn'] / 1e9:.0f} GB", f"{r.epoch_s:.0f} s") == ("384 GB", "132 s")


def test_pipedream_claims(runs):
    dp, hybrid = runs[9], runs[10]
    assert f"{dp.comm_bytes_per_gpu['dp'] / 1e9:.2f}" == "1.04"
    assert (f"{dp.breakdown_s['dp'] * 1e3:.0f}", f"{dp.iteration_time_s * 1e3:,.0f}") == ("853", "1,006")
    assert f"{dp.samples_per_s:,.0f}" == "1,018"
    vgg = build(16)
    conv = sum(x.params for x in vgg.layers if not x.fc)
    assert (f"{conv / vgg.params:.0%}", f"{1 - conv / vgg.params:.0%}") == ("11%", "89%")
    assert f"{conv / 1e6:.1f}M" == "14.7M"
    assert f"{hybrid.samples_per_s:,.0f}" == "6,605"
    assert f"{hybrid.samples_per_s / dp.samples_per_s:.2f}x" == "6.49x"
    assert [c.gpus for c in hybrid.classes] == [15, 1] and hybrid.bubble_fraction_busiest == 0.0
    assert f"{hybrid.bubble_fraction:.1%}" == "4.5%"
    auto = simulate(from_dict(apply_overrides(preset_raw("pipedream-vgg16"),
                                              {"parallelism.stage_replicas": "auto"})))
    assert auto.scenario.parallelism.stage_replicas == (15, 1)                  # "picks 15-1 itself"
