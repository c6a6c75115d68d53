"""Generic communication edges on the workload boundary (explorer/workloads/spec.Edge,
explorer/taskgraph/edges.py): a toy edge added to one layer of a small data-parallel model shows
on its dimension in the breakdown, the byte counts and the traffic, blocking or overlapped, with
the closed-form bytes of an all-to-all and the seconds of a lone call as the network prices it."""
from __future__ import annotations

import dataclasses

import pytest

from explorer import dimensions, load, simulate
from explorer.fold.run import routed
from explorer.network.groups import Network
from explorer.simulate import assemble
from explorer.taskgraph import builder
from explorer.workloads.spec import Edge

from conftest import ROOT

TEACHING = ROOT / "scenarios" / "teaching-8gpu.yaml"
# One 8-GPU NVSwitch node, data parallel over all 8 (pp 1), one micro-batch per replica.
DP8 = {"parallelism.pp": 1, "parallelism.dp": 8, "training.global_batch": 8}
ORIGINAL = builder.workload_spec


def _with_edges(monkeypatch, *edges: Edge) -> None:
    """The transformer's spec with one extra layer kind — its first layer — that makes ``edges``."""
    def spec(sc):
        sp = ORIGINAL(sc)
        k = dataclasses.replace(sp.kinds[0], edges=edges)
        (k0, n0), *rest = sp.runs
        return dataclasses.replace(sp, kinds=sp.kinds + (k,), runs=((len(sp.kinds), 1), (k0, n0 - 1), *rest))

    monkeypatch.setattr(builder, "workload_spec", spec)


def _run(overrides=DP8):
    # The array routes price the transformer from its own tables: a family with edges is not
    # priced by them (Workload.estimator False); the task routes are what edges run on.
    return simulate(load(TEACHING, overrides), fold=False)


def test_the_emb_dimension_spans_the_data_parallel_group():
    assert dimensions.group_of("emb") == "dp" and dimensions.group_of("tp") == "tp"
    net = Network(load(TEACHING, DP8))
    assert net.group_size("emb") == net.group_size("dp") == 8


def test_a_lone_blocking_all_to_all_adds_its_seconds_and_closed_form_bytes(monkeypatch):
    base = _run()
    size = 64e6
    _with_edges(monkeypatch, Edge("emb", "fwd", "all-to-all", size))
    r = _run()
    call = Network(load(TEACHING, DP8)).cost("all-to-all", size, "emb", 0)
    # One call per micro-batch (one here) on the compute stream: the iteration grows by its seconds.
    assert r.breakdown_s["emb"] == pytest.approx(call.time_s, rel=1e-9)
    assert r.iteration_time_s - base.iteration_time_s == pytest.approx(call.time_s, rel=1e-6)
    # nccl-tests' bus bytes of an all-to-all: size x (n-1)/n per GPU (NCCL PERFORMANCE.md).
    assert r.comm_bytes_per_gpu["emb"] == pytest.approx(size * 7 / 8, rel=1e-12)
    # Inside one NVSwitch node every byte stays on the scale-up links.
    assert r.comm_bytes_by_tier["emb"]["scale-up"] == pytest.approx(size * 7 / 8, rel=1e-12)
    assert r.comm_bytes_by_tier["emb"]["scale-out"] == 0.0
    # A lone call cannot beat the wire: its bus bytes over the GPU's NVLink bandwidth (450 GB/s).
    assert call.time_s > size * 7 / 8 / 450e9
    assert r.links["emb"]["op"] == "all-to-all" and r.links["emb"]["group"] == 8
    assert sum(r.breakdown_s.values()) == pytest.approx(r.iteration_time_s, rel=1e-12)


def test_an_overlapped_edge_hides_under_compute_until_it_outlasts_it(monkeypatch):
    base = _run()
    _with_edges(monkeypatch, Edge("emb", "fwd", "all-to-all", 64e6, overlap=True))
    small = _run()
    assert small.iteration_time_s == pytest.approx(base.iteration_time_s, rel=1e-12)
    assert small.breakdown_s["emb"] == 0.0 and small.comm_bytes_per_gpu["emb"] == pytest.approx(56e6)
    lanes = {t.stream for t in small.tasks}
    assert "emb" in lanes                            # drawn on its own lane
    _with_edges(monkeypatch, Edge("emb", "fwd", "all-to-all", 4e9, overlap=True))
    big = _run()
    call = Network(load(TEACHING, DP8)).cost("all-to-all", 4e9, "emb", 0)
    # The exchange now outlasts the forward and backward it runs under: the iteration waits for it,
    # and the wait is charged to emb (at least the call's seconds beyond the compute it hid under).
    assert big.iteration_time_s > call.time_s
    assert big.breakdown_s["emb"] >= call.time_s - base.breakdown_s["compute"] - 1e-9
    assert sum(big.breakdown_s.values()) == pytest.approx(big.iteration_time_s, rel=1e-12)


def test_the_task_fold_gives_the_full_simulations_figures_with_edges(monkeypatch):
    _with_edges(monkeypatch, Edge("emb", "fwd", "all-to-all", 4e9, overlap=True),
                Edge("emb", "bwd", "all-to-all", 4e8))
    sc = load(TEACHING, {"parallelism.pp": 2, "parallelism.dp": 4, "training.global_batch": 1024})
    it, route = routed(sc, arrays=False)
    assert route.taken == "task fold"
    folded = assemble(sc, it.builder, it.net, it.measures, it.tasks, it.info)
    full = simulate(sc, fold=False)
    assert folded.iteration_time_s == pytest.approx(full.iteration_time_s, rel=1e-9)
    assert folded.breakdown_s["emb"] == pytest.approx(full.breakdown_s["emb"], rel=1e-9)
    # 256 micro-batches (1024 / dp 4) x (4 GB + 0.4 GB) x 3/4 on the stage holding the edge layer.
    assert full.comm_bytes_per_gpu["emb"] == pytest.approx(256 * 4.4e9 * 3 / 4, rel=1e-12)
    assert folded.comm_bytes_per_gpu["emb"] == full.comm_bytes_per_gpu["emb"]


def test_an_edge_refuses_a_phase_it_does_not_know():
    with pytest.raises(ValueError, match=r"^Edge.phase 'fw': use one of fwd, bwd$"):
        Edge("emb", "fw", "all-to-all", 1.0)
