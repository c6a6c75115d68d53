"""training.sync (explorer/variants/lowcomm): closed forms of the window of H inner steps and its WAN
synchronisation, the run --json contract, and the validation rules (SYNC_RULE_CASES)."""
from __future__ import annotations

import json

import pytest

from explorer.config.sync_rules import SYNC_RULES
from explorer.runnable import rule_failures_leave_survivors, rule_sync_whole_replicas
from explorer.scenario import ScenarioError, load
from explorer.simulate import simulate
from explorer.variants.lowcomm import inner_scenario
from explorer.workloads.transformer.layer import model_params

from conftest import ROOT

TWO_DC = ROOT / "scenarios" / "two-datacenters.yaml"     # Llama 3 70B, 2 x 512 H100, DP across


def _run(**sync):
    over = {f"training.sync.{k}": v for k, v in sync.items()}
    return simulate(load(TWO_DC, over))


def test_every_step_contract_time_per_step_is_the_iteration():
    res = simulate(load(TWO_DC))
    out = res.to_json_dict()
    assert out["time_per_step_s"] == out["iteration_time_s"]
    assert set(out["bytes_per_step"]) == {"scale-up", "scale-out", "scale-across"}
    # The tiers sum the per-dimension traffic (a byte counts at every boundary it leaves).
    for tier, v in out["bytes_per_step"].items():
        assert v == pytest.approx(sum(d[tier] for d in out["comm_bytes_by_tier"].values()), rel=1e-12)
    assert out["bytes_per_step"]["scale-across"] > 0 and "sync" not in out


def test_diloco_wan_bytes_are_one_allreduce_of_the_model_per_window():
    """One synchronisation sends 2(D-1)/D of the fp32 model out of each datacenter (a ring of D
    per parameter slice; Patarasuk & Yuan 2009); per step it is that over H."""
    sc = load(TWO_DC, {"training.sync.kind": "diloco"})
    D = sc.cluster.datacenters
    params = model_params(sc)
    for H in (1, 10, 500):
        w = _run(kind="diloco", inner_steps=H).sync_window
        # Norm weights replicated over the 8 TP ranks are synchronised by each: < 0.01% more.
        assert w.wan_bytes_per_sync == pytest.approx(2 * (D - 1) / D * params * 4, rel=1e-3)
        res = _run(kind="diloco", inner_steps=H)
        # The inner step itself never leaves the datacenter: all WAN traffic is the sync's / H.
        assert res.bytes_per_step["scale-across"] == pytest.approx(
            w.sync_bytes_per_gpu["scale-across"] / H, rel=1e-12)


def test_diloco_window_is_h_inner_steps_plus_the_blocking_sync():
    w = _run(kind="diloco", inner_steps=50).sync_window
    assert w.window_s == pytest.approx(50 * w.inner_step_s + w.sync_s + w.update_s, rel=1e-12)
    assert w.exposed_sync_s == w.sync_s and w.wan_Gbps_to_hide is None and w.wan_Gbps_needed is None
    assert w.time_per_step_s == pytest.approx(w.window_s / 50, rel=1e-12)


def test_more_inner_steps_amortise_the_sync_towards_the_inner_step():
    steps = [_run(kind="diloco", inner_steps=h).time_per_step_s for h in (1, 10, 100, 1000)]
    assert steps == sorted(steps, reverse=True)
    inner = _run(kind="diloco", inner_steps=1000).sync_window.inner_step_s
    assert steps[-1] - inner < 0.01 * inner


def test_diloco_beats_every_step_sync_over_a_slow_wan():
    """At 100 Gb/s between the buildings, every-step DP sync is WAN-bound; H = 100 is not."""
    slow = {"cluster.scale_across.bandwidth_Gbps": 100}
    every = simulate(load(TWO_DC, slow)).time_per_step_s
    diloco = simulate(load(TWO_DC, {**slow, "training.sync.kind": "diloco"})).time_per_step_s
    assert diloco < 0.8 * every


def test_outer_dtype_scales_the_wan_bytes():
    fp32 = _run(kind="diloco").sync_window.wan_bytes_per_sync
    assert _run(kind="diloco", outer_dtype="bf16").sync_window.wan_bytes_per_sync == pytest.approx(fp32 / 2)
    assert _run(kind="diloco", outer_dtype="int4").sync_window.wan_bytes_per_sync == pytest.approx(fp32 / 8)


def test_streaming_fragments_divide_the_peak_bandwidth_to_hide():
    """Streaming DiLoCo (Douillard et al. 2025): a fragment carries 1/F of the model, so the WAN
    rate that hides it behind tau inner steps is the whole model's divided by F."""
    base = _run(kind="streaming-diloco", inner_steps=96, fragments=1, overlap_steps=1).sync_window
    for F in (2, 4, 8):
        w = _run(kind="streaming-diloco", inner_steps=96, fragments=F, overlap_steps=1).sync_window
        assert w.wan_Gbps_needed == pytest.approx(base.wan_Gbps_needed / F, rel=1e-12)
        assert w.wan_bytes_per_sync == pytest.approx(base.wan_bytes_per_sync, rel=1e-12)
        # Hiding completely also needs room for the in-datacenter gather: never below the need.
        assert w.wan_Gbps_to_hide >= w.wan_Gbps_needed


def test_streaming_exposes_only_what_exceeds_the_overlap():
    slow = {"cluster.scale_across.bandwidth_Gbps": 10}
    for tau in (0, 1, 4):
        w = simulate(load(TWO_DC, {**slow, "training.sync.kind": "streaming-diloco",
                                   "training.sync.inner_steps": 100, "training.sync.fragments": 4,
                                   "training.sync.overlap_steps": tau})).sync_window
        assert w.exposed_sync_s == pytest.approx(4 * max(0.0, w.fragment_sync_s - tau * w.inner_step_s))
    hidden = _run(kind="streaming-diloco", inner_steps=100, fragments=4, overlap_steps=1).sync_window
    assert hidden.exposed_sync_s == 0.0          # 1,600 Gb/s moves a fragment within one step


def test_independent_models_never_cross_the_wan():
    res = _run(kind="independent")
    assert res.time_per_step_s == res.sync_window.inner_step_s == res.iteration_time_s
    assert res.bytes_per_step["scale-across"] == 0.0


def test_diloco_keeps_an_fp32_snapshot_and_momentum_per_parameter_of_its_slice():
    """DiLoCo, Algorithm 1: the last synchronised parameters and the outer momentum, 8 bytes per
    parameter of the slice each GPU reduces (1/dp_in of its parameters: the dp_in replicas of a
    datacenter split the outer step as ZeRO-1 splits an optimizer); local SGD keeps neither."""
    inner_sc = inner_scenario(load(TWO_DC, {"training.sync.kind": "diloco"}))
    inner = simulate(inner_sc).memory
    params = inner.params / 2                       # bf16 weights, one GPU of the largest stage
    res = _run(kind="diloco")
    assert res.sync_window.slice_params == pytest.approx(params / inner_sc.dp, rel=1e-12)
    assert res.memory.optimizer == pytest.approx(inner.optimizer + 8 * params / inner_sc.dp)
    assert _run(kind="local-sgd").memory.optimizer == pytest.approx(inner.optimizer)


def test_amortised_throughput_and_json_contract():
    res = _run(kind="diloco", inner_steps=20)
    w = res.sync_window
    out = json.loads(json.dumps(res.to_json_dict()))
    assert out["time_per_step_s"] == pytest.approx(w.window_s / 20)
    tokens = res.scenario.training.global_batch * res.scenario.model.seq_len
    assert out["tokens_per_s"] == pytest.approx(tokens / out["time_per_step_s"], rel=1e-9)
    assert out["sync"]["kind"] == "diloco" and "Douillard" in out["sync"]["quality"]
    assert out["gpus"] == 1024 and res.scenario.cluster.datacenters == 2


SYNC_RULE_CASES = {
    "rule_sync_needs_datacenters": (ROOT / "scenarios" / "teaching-8gpu.yaml",
                                    {"training.sync.kind": "diloco"}, "training.sync.kind"),
    "rule_sync_whole_replicas": (TWO_DC, {"training.sync.kind": "diloco",
                                          "parallelism.order": "tp-cp-ep-dp-pp"}, "training.sync.kind"),
    "rule_compression_needs_buckets": (ROOT / "scenarios" / "fsdp-llama3-8b.yaml",
                                       {"communication.compression.kind": "fp16"},
                                       "communication.compression.kind"),
    "rule_faults_fit": (TWO_DC, {"cluster.faults.failed_nodes": 2}, "cluster.faults.failed_nodes"),
    # GPT-3 175B: each pipeline stage is 16 nodes holding one GPU group of every replica, so the
    # last 16 nodes (the last stage) hold all 16 replicas.
    "rule_failures_leave_survivors": (ROOT / "scenarios" / "megatron-gpt3-175b.yaml",
                                      {"cluster.faults.failed_nodes": 16}, "cluster.faults.failed_nodes"),
    "rule_one_compressor": (TWO_DC, {"training.sync.kind": "diloco", "training.sync.outer_dtype": "int4",
                                     "communication.compression.kind": "1bit"}, "training.sync.outer_dtype"),
    "rule_dp_kind_replicas": (TWO_DC, {"parallelism.dp_kind": "gossip-ring"}, "parallelism.zero"),
    "rule_sync_fragments": (TWO_DC, {"training.sync.kind": "streaming-diloco", "training.sync.fragments": 81},
                            "training.sync.fragments"),
}


@pytest.mark.parametrize("name", sorted(SYNC_RULE_CASES))
def test_sync_rule_names_the_field(name):
    path, over, field = SYNC_RULE_CASES[name]
    with pytest.raises(ScenarioError) as e:
        load(path, over)
    assert e.value.field == field


def test_every_sync_rule_has_a_case():
    # The two that need the simulator's model run in explorer/runnable.py.
    rules = (*SYNC_RULES, rule_sync_whole_replicas, rule_failures_leave_survivors)
    assert {r.__name__ for r in rules} == set(SYNC_RULE_CASES)


@pytest.mark.parametrize("over, field", [
    ({"training.sync.kind": "streaming-diloco", "training.sync.inner_steps": 3, "training.sync.fragments": 4},
     "training.sync.fragments"),
    ({"training.sync.kind": "streaming-diloco", "training.sync.inner_steps": 10, "training.sync.fragments": 5,
      "training.sync.overlap_steps": 3}, "training.sync.overlap_steps"),
    ({"training.sync.kind": "diloco", "training.global_batch": 511}, "training.global_batch"),
    ({"training.sync.kind": "gossip"}, "training.sync.kind"),
    ({"training.sync.outer_dtype": "int3"}, "training.sync.outer_dtype"),
])
def test_bad_sync_values_name_their_field(over, field):
    with pytest.raises(ScenarioError) as e:
        load(TWO_DC, over)
    assert e.value.field == field


def test_window_round_trips_through_json():
    """The app keeps the run as JSON and rebuilds the window from it."""
    from explorer.variants.lowcomm import SyncWindow
    for kind in ("diloco", "streaming-diloco", "independent"):
        w = _run(kind=kind).sync_window
        assert SyncWindow.from_json(json.loads(json.dumps(w.to_json_dict()))) == w


def test_windows_and_exchanges_run_under_the_ideal_pipeline():
    """The teaching switch (equal stages, free communication inside the step) composes with both."""
    for over in ({"training.sync.kind": "diloco"},
                 {"parallelism.dp_kind": "gossip-ring", "parallelism.zero": 0}):
        res = simulate(load(TWO_DC, {**over, "parallelism.ideal_pipeline": True}))
        assert res.time_per_step_s >= res.iteration_time_s > 0


# --------------------------------------------------------------------------- groups of nodes
RN = ROOT / "scenarios" / "resnet50-cloud-dp.yaml"
LOCAL = {"communication.compression.kind": "none", "training.sync.kind": "local-sgd",
         "training.sync.replica_nodes": 1, "training.sync.inner_steps": 8}


def test_local_sgd_among_the_nodes_of_one_datacenter_closed_form():
    """Eight one-node groups of ResNet-50 (25.56M parameters, fp32 outer payload): each GPU
    all-reduces its 1/8 slice with its 7 counterparts over the node NICs, a ring: 2 x 7/8 x
    102.2 MB / 8 = 22.4 MB per GPU per synchronisation, 1/8 of it per step; nothing crosses a WAN;
    the inner step is one node's, with 1/8 of the global batch."""
    from explorer.workloads.convnet import arch as convnet_arch
    r = simulate(load(RN, LOCAL))
    w = r.sync_window
    slice_bytes = convnet_arch.build(50).params * 4 / 8
    assert w.replicas == 8 and w.group_nodes == 1 and w.link == "fabric"
    assert w.sync_bytes_per_gpu["scale-out"] == pytest.approx(2 * 7 / 8 * slice_bytes, rel=1e-9)
    assert w.wan_bytes_per_sync == 0.0 and r.bytes_per_step["scale-across"] == 0.0
    inner = inner_scenario(load(RN, LOCAL))
    assert (inner.cluster.nodes, inner.dp, inner.training.global_batch) == (1, 8, 512)
    assert r.time_per_step_s == pytest.approx(w.inner_step_s + (w.sync_s + w.update_s) / 8, rel=1e-12)
    assert r.tokens_per_s == pytest.approx(4096 / r.time_per_step_s, rel=1e-9)


@pytest.mark.parametrize("changes, field", [
    ({"training.sync.replica_nodes": 3}, "training.sync.replica_nodes"),     # 3 does not divide 8
    ({"training.sync.replica_nodes": 8}, "training.sync.replica_nodes"),     # one group only
])
def test_replica_groups_must_divide_and_be_several(changes, field):
    with pytest.raises(ScenarioError) as info:
        load(RN, {**LOCAL, **changes})
    assert info.value.field == field and "\n" not in str(info.value)


def test_degraded_nodes_slow_the_last_group_the_synchronisation_waits_for():
    """Degraded nodes are the cluster's last: with DiLoCo across four 8-node datacenters, 15 of them
    degrade the last datacenter wholly (and 7 of the one before), so its group, simulated alone,
    has 8 degraded nodes and the window is the one of 8 — slower than none, and no longer refused
    as "15 of 8 nodes" when the simulation runs a group."""
    diloco = ROOT / "scenarios" / "diloco-cross-region.yaml"
    slow = {"cluster.faults.nic_factor": 0.25}
    steps = {}
    for n in (0, 8, 15):
        sc = load(diloco, {**slow, "cluster.faults.degraded_nodes": n})
        assert inner_scenario(sc).cluster.faults.degraded_nodes == min(n, 8)
        steps[n] = simulate(sc).to_json_dict()["time_per_step_s"]
    assert steps[15] == steps[8] > steps[0]
