"""Invariants that hold for every scenario: the breakdown sums to the iteration, more bandwidth
never slows an iteration, results are deterministic, cost does not grow with the GPU count."""
from __future__ import annotations

import pytest

from explorer.config.inference import TRAINING_ONLY
from explorer.scenario import ScenarioError, apply_overrides, from_dict, load, load_raw
from explorer.simulate import simulate
from explorer.taskgraph.make import iteration_builder

from conftest import SCENARIO_FILES, pipeline_raw

VARIANTS = {
    "as shipped": {},
    "zero3": {"parallelism.zero": 3},
    "zero0-no-overlap": {"parallelism.zero": 0, "communication.dp_overlap": False},
    "tp-overlap": {"communication.tp_overlap": True},
    "ring": {"communication.algorithm": "ring"},
    "hierarchical": {"communication.algorithm": "hierarchical"},
}


@pytest.fixture(scope="module", params=SCENARIO_FILES, ids=lambda p: p.stem)
def raw(request):
    return load_raw(request.param)


@pytest.mark.parametrize("variant", VARIANTS)
def test_breakdown_sums_exactly_to_iteration_time(raw, variant):
    try:
        sc = from_dict(apply_overrides(raw, VARIANTS[variant]))
    except ScenarioError as exc:
        if "inference" in raw:     # a serving scenario refuses training-only fields (config/inference.py)
            assert exc.field in TRAINING_ONLY, exc
            return
        if variant == "tp-overlap" and from_dict(raw).model.kind != "transformer":
            # A family without tensor-parallel layers refuses their overlap (config/model_rules.py).
            assert exc.field == "communication.tp_overlap", exc
            return
        # ZeRO-3 does not combine with gossip, parameter servers or compressed buckets: each says so.
        assert VARIANTS[variant] == {"parallelism.zero": 3}, exc
        assert exc.field in ("parallelism.zero", "communication.compression.kind"), exc
        return
    r = simulate(sc)
    assert sum(r.breakdown_s.values()) == pytest.approx(r.iteration_time_s, rel=1e-9)
    assert all(v >= -1e-12 for v in r.breakdown_s.values())
    assert 0 <= r.bubble_fraction < 1 and 0 < r.mfu < 1


BANDWIDTH_KNOBS = [
    ("cluster.scale_up.bandwidth_GBps", 2.0),
    ("cluster.scale_out.nic_Gbps", 2.0),
    ("cluster.scale_across.bandwidth_Gbps", 4.0),
]


@pytest.mark.parametrize("key,factor", BANDWIDTH_KNOBS)
def test_more_bandwidth_never_slows_an_iteration(raw, key, factor):
    base = from_dict(raw)
    _, tier, field = key.split(".")
    faster = from_dict(apply_overrides(raw, {key: getattr(getattr(base.cluster, tier), field) * factor}))
    assert simulate(faster).iteration_time_s <= simulate(base).iteration_time_s * (1 + 1e-12)


def test_removing_oversubscription_never_slows_an_iteration(raw):
    key = "cluster.scale_out.oversubscription"
    over = simulate(from_dict(apply_overrides(raw, {key: 4.0})))
    flat = simulate(from_dict(apply_overrides(raw, {key: 1.0})))
    assert flat.iteration_time_s <= over.iteration_time_s * (1 + 1e-12)


@pytest.mark.parametrize("kind,low,high", [("fat-tree", 3.0, 4.0), ("rail-optimized", 1.5, 3.0)])
def test_dp_crossing_a_4_to_1_spine_gets_correspondingly_slower(kind, low, high):
    # Llama 3 placement [TP, CP, PP, DP]: a DP group has one member every 16 nodes. A fat-tree leaf
    # block holds 4 nodes (one member per block: all DP traffic crosses the spine, 4x slower);
    # a rail-optimized block holds 32 nodes (two members: part of the traffic stays inside, so
    # between 2x and 3x slower depending on the algorithm's step pattern).  NCCL's per-call latency
    # (nccl_tuning.py), which the spine does not slow, keeps the bus-bandwidth ratios below those.
    raw = load_raw([p for p in SCENARIO_FILES if p.stem == "llama3-405b-16k"][0])
    res = {o: simulate(from_dict(apply_overrides(raw, {"cluster.scale_out.kind": kind,
                                                       "cluster.scale_out.oversubscription": o})))
           for o in (1.0, 4.0)}
    assert res[4.0].links["dp"]["tier"] == "spine"
    assert low <= res[1.0].links["dp"]["busbw_GBps"] / res[4.0].links["dp"]["busbw_GBps"] <= high
    assert res[4.0].breakdown_s["dp"] > res[1.0].breakdown_s["dp"]


def test_identical_scenarios_give_identical_timelines():
    path = SCENARIO_FILES[0]
    a, b = simulate(load(path)), simulate(load(path))
    assert a.timeline.columns == b.timeline.columns
    assert a.to_json_dict() == b.to_json_dict()


def test_every_shipped_scenario_has_a_teaching_description(raw):
    sc = from_dict(raw)
    assert len(sc.description) > 200 and "look at" in sc.description.lower()


def test_task_count_depends_on_pipeline_shape_not_gpu_count():
    # One bucket size for both (Megatron's default bucket grows with the DP group: frameworks.py).
    small = from_dict(pipeline_raw(4, 8, dp=2, communication__bucket_MB=160))
    big_raw = pipeline_raw(4, 8, dp=2, communication__bucket_MB=160)
    big_raw["cluster"] = {"gpus_per_node": 8, "nodes": 1024,
                          "scale_up": {"bandwidth_GBps": 1e6, "latency_us": 0}}
    big_raw["parallelism"]["dp"] = 2048
    big_raw["training"]["global_batch"] = 8 * 2048
    big = from_dict(big_raw)
    assert len(iteration_builder(small).build()) == len(iteration_builder(big).build())


def test_slower_wan_makes_dp_across_datacenters_the_bottleneck():
    raw = load_raw([p for p in SCENARIO_FILES if p.stem == "two-datacenters"][0])
    slow = simulate(from_dict(apply_overrides(raw, {"cluster.scale_across.bandwidth_Gbps": 200})))
    fast = simulate(from_dict(apply_overrides(raw, {"cluster.scale_across.bandwidth_Gbps": 12800})))
    assert slow.breakdown_s["dp"] > 4 * fast.breakdown_s["dp"]
    assert "WAN" in slow.bottleneck and slow.bottleneck.startswith("DP")


@pytest.mark.parametrize("name", ["teaching-8gpu", "megatron-gpt3-175b", "two-datacenters", "fsdp-llama3-8b"])
def test_dp_overlap_off_exposes_the_gradient_reduction(name):
    # Without overlap every bucket waits for the stage's whole backward (and, under ZeRO-3, each
    # layer's reduce-scatter runs after its backward instead of under the layers before it), so
    # the iteration is strictly longer and its exposed DP time strictly larger.
    path = next(f for f in SCENARIO_FILES if f.stem == name)
    on = simulate(load(path, {"communication.dp_overlap": True}))
    off = simulate(load(path, {"communication.dp_overlap": False}))
    assert off.iteration_time_s > on.iteration_time_s * (1 + 1e-4)
    assert off.breakdown_s["dp"] > on.breakdown_s["dp"] + 1e-4 * on.iteration_time_s


def test_without_dp_overlap_no_bucket_starts_before_the_last_backward():
    r = simulate(from_dict(pipeline_raw(4, 8, dp=2, communication__dp_overlap=False)))
    for s in range(4):
        last = max(t.end for t in r.tasks if t.cls == s and t.kind in ("backward", "weight-grad"))
        buckets = [t for t in r.tasks if t.cls == s and t.kind == "dp"]
        assert buckets and min(t.start for t in buckets) >= last - 1e-15


def test_a_non_finite_result_is_an_internal_error_not_infinity():
    import dataclasses

    from explorer.simulate import SimulationError, _check_finite
    r = simulate(from_dict(pipeline_raw(2, 2)))
    _check_finite(r)
    for field, bad in (("iteration_time_s", float("inf")), ("mfu", float("nan")), ("tokens_per_s", 0.0),
                       ("bubble_fraction", float("nan"))):
        with pytest.raises(SimulationError, match=field):
            _check_finite(dataclasses.replace(r, **{field: bad}))
