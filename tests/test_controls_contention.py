"""Contention between dimensions (issue 34, item 7): calls of different streams limited by one
link of a GPU share it max-min fairly (explorer/engine/sharing.py).

Closed forms on the engine itself, then a scenario whose data-parallel reduce-scatter overlaps a
pipeline send on the same NIC, slower by exactly what the fair share predicts (collected by
tests/test_controls.py through ``COVERED``)."""
from __future__ import annotations

import copy

import pytest

from explorer.analysis.steady_state import schedule_iteration
from explorer.engine.scheduler import Task, TaskGraph, run
from explorer.scenario import from_dict
from explorer.simulate import simulate

COVERED = {
    "communication.contention": "test_reduce_scatter_beside_a_pipeline_send_slows_it_by_the_fair_share",
}


def _graph(calls: list[tuple[str, int, str, float, float, float]]) -> TaskGraph:
    """One class; per call (stream, class, tier, start, duration, wire): a compute task of
    ``start`` seconds on its own stream releases it (so calls start when asked)."""
    g = TaskGraph()
    for stream, cls, tier, start, dur, wire in calls:
        gate = g.add(Task(cls, f"gate-{stream}", "compute", start))
        g.add(Task(cls, stream, stream, dur, [(gate, 1.0)], parts=((stream, dur),), tier=tier, wire=wire))
    return g


def _ends(g: TaskGraph) -> list[float]:
    run(g)
    return [t.end for t in g.tasks if t.stream in ("pp", "dp")]


def test_two_equal_transfers_on_one_nic_take_twice_as_long():
    """Two calls that each fill the NIC (wire = duration), in flight from 0 to the end: each gets
    half of it, so 1 s of work ends at 2 s (processor sharing with k = 2)."""
    g = _graph([("pp", 0, "scale-out", 0.0, 1.0, 1.0), ("dp", 0, "scale-out", 0.0, 1.0, 1.0)])
    assert _ends(g) == pytest.approx([2.0, 2.0], rel=1e-12)
    # The breakdown of a stretched call still sums to its time: its own category grows.
    assert [t.parts for t in g.tasks if t.stream == "dp"] == [(("dp", pytest.approx(2.0)),)]


def test_half_overlapping_transfers_follow_the_fair_share_integral():
    """A from 0, B from 0.5, 1 s each: A alone for 0.5 s (0.5 done), then both at 1/2 — A's last
    0.5 s of work takes 1 s, ending at 1.5; B has done 0.5 by then and finishes alone at 2.0
    (integral of the rate = the work)."""
    g = _graph([("pp", 0, "scale-out", 0.0, 1.0, 1.0), ("dp", 0, "scale-out", 0.5, 1.0, 1.0)])
    assert _ends(g) == pytest.approx([1.5, 2.0], rel=1e-12)


def test_latency_bound_calls_share_only_what_they_use():
    """Max-min by progressive filling on demands w = wire / duration: two calls using half the link
    each fit together (no slowdown); two using 0.8 each get 0.5, progressing at 0.5 / 0.8 of their
    pace, so 1 s takes 1.6 s; unequal demands 0.2 and 1.0: the small one keeps its 0.2, the large
    one gets the 0.8 left (1 s of it takes 1.25 s; after the 1 s call leaves it runs alone)."""
    g = _graph([("pp", 0, "scale-out", 0.0, 1.0, 0.5), ("dp", 0, "scale-out", 0.0, 1.0, 0.5)])
    assert _ends(g) == [1.0, 1.0]
    g = _graph([("pp", 0, "scale-out", 0.0, 1.0, 0.8), ("dp", 0, "scale-out", 0.0, 1.0, 0.8)])
    assert _ends(g) == pytest.approx([1.6, 1.6], rel=1e-12)
    g = _graph([("pp", 0, "scale-out", 0.0, 1.0, 0.2), ("dp", 0, "scale-out", 0.0, 1.0, 1.0)])
    # pp ends at 1.0 unslowed; dp did 0.8 s of its work by then, its last 0.2 s alone: 1.2.
    assert _ends(g) == pytest.approx([1.0, 1.2], rel=1e-12)


def test_calls_on_other_links_or_other_gpus_do_not_share():
    """Different tiers (a send over NVLink beside a bucket over the NIC) or different GPU classes:
    each at its own pace, bit for bit the time without sharing."""
    g = _graph([("pp", 0, "scale-up", 0.0, 1.0, 1.0), ("dp", 0, "scale-out", 0.0, 1.0, 1.0)])
    assert _ends(g) == [1.0, 1.0]
    g = _graph([("pp", 0, "scale-out", 0.0, 1.0, 1.0), ("dp", 1, "scale-out", 0.0, 1.0, 1.0)])
    assert _ends(g) == [1.0, 1.0]


RAW = {"model": {"layers": 4, "hidden": 1024, "heads": 8, "vocab": 1024, "seq_len": 1024, "ffn_kind": "gelu"},
       "training": {"global_batch": 8, "micro_batch": 1},
       "hardware": {"gpu": "h100-sxm"},
       "cluster": {"gpus_per_node": 1, "nodes": 4},
       "parallelism": {"tp": 1, "pp": 2, "dp": 2, "zero": 1, "schedule": "1f1b", "order": "tp-cp-ep-dp-pp"},
       "communication": {"dp_overlap": False, "bucket_MB": 1000}}


def _scenario(contention: bool):
    raw = copy.deepcopy(RAW)
    raw["communication"]["contention"] = contention
    return from_dict(raw)


def test_reduce_scatter_beside_a_pipeline_send_slows_it_by_the_fair_share():
    """PP 2 x DP 2, one GPU per node: the pipeline send and the ZeRO-1 reduce-scatter both leave by
    the GPU's NIC.  Without overlap of the backward, stage 1's buckets start when its last backward
    ends — with its last gradient send to stage 0.  Both use more than half the NIC alone (the send
    w = wire / duration, the bucket nearly all), so each gets half: the send takes 2 x its wire
    seconds instead of latency + wire, and stage 0's last backward, the rest of the critical path,
    starts that much later.  The iteration grows by exactly 2 wire - duration of the send; off,
    today's idealisation."""
    on, off = schedule_iteration(_scenario(True)), schedule_iteration(_scenario(False))
    sends = [t for t in off.tasks if t.stream == "pp" and t.cls == 1]
    last = max(sends, key=lambda t: t.end)
    cost = on.builder.net.cost("send-recv", on.builder.pp_msg_bytes, "pp", 0)
    wire, dur = cost.time_s - cost.latency_s, cost.time_s
    assert last.duration == pytest.approx(dur, rel=1e-12) and cost.boundary == "scale-out"
    bucket = next(t for t in on.tasks if t.stream == "dp" and t.cls == 1)
    assert bucket.tier == "scale-out" and wire / dur > 0.5 and bucket.wire > 0.5 * bucket.duration
    t_on = simulate(_scenario(True)).iteration_time_s
    t_off = simulate(_scenario(False)).iteration_time_s
    assert t_on - t_off == pytest.approx(2 * wire - dur, rel=1e-9)
    assert t_on - t_off > 0


def test_contention_off_keeps_every_call_at_its_priced_time():
    """With ``communication.contention: false`` no call carries a tier to share: every pp and dp
    task lasts exactly what the collective model priced."""
    r = schedule_iteration(_scenario(False))
    calls = [t for t in r.tasks if t.stream in ("pp", "dp")]
    assert calls and all(t.wire == 0 and t.end - t.start == pytest.approx(t.duration, rel=1e-12)
                         for t in calls)


def test_the_estimator_and_the_array_fold_leave_shared_links_to_the_engine():
    """The estimator and the array fold replicate the engine without link sharing: a row whose
    sends and buckets may share a link comes from the simulation (pricing/scope.py), equal to it;
    with contention off the estimator prices the row itself, at today's idealised time."""
    from explorer.estimate import estimate_many
    from explorer.fold.arrays.fold import ineligible
    from explorer.variants.registry import needs_simulation
    on, off = _scenario(True), _scenario(False)
    assert needs_simulation(on) and not needs_simulation(off)
    assert ineligible(on) is not None
    est = estimate_many([on, off]).iteration_time_s
    assert est[0] == pytest.approx(simulate(on).iteration_time_s, rel=1e-9)
    assert est[1] == pytest.approx(simulate(off).iteration_time_s, rel=1e-9)
    assert est[0] > est[1]


@pytest.mark.parametrize("schedule,vpp", [("1f1b", 1), ("interleaved", 2)])
def test_the_task_fold_stays_exact_when_calls_share_a_link(schedule, vpp):
    """Megatron's 1F1B and interleaved schedules with DP overlap, 2 nodes x 8 GPUs (tp 2, pp 4,
    dp 2): stage 0's sends and buckets share its NVLink ports, so some calls are slowed — and the
    steady-state fold (engine runs at reduced counts, the period proven task by task) gives the
    unfolded simulation's figures and timeline (before: the durations of slowed calls, computed at
    other absolute times, broke the exact duration match and 1F1B simulated in full)."""
    from test_fold import check_fold
    raw = {"model": {"layers": 8, "hidden": 1024, "heads": 16, "vocab": 1000, "seq_len": 512},
           "training": {"global_batch": 2048, "micro_batch": 1},
           "hardware": {"gpu": "h100-sxm"},
           "cluster": {"nodes": 2, "gpus_per_node": 8},
           "parallelism": {"tp": 2, "pp": 4, "schedule": schedule, "vpp": vpp, "zero": 0},
           "communication": {"dp_overlap": True, "contention": True}}
    sc = from_dict(raw)
    slowed = [t for t in simulate(sc, fold=False).tasks if t.alone > 0]
    assert slowed and all(t.end - t.start > t.alone for t in slowed)
    assert check_fold(sc)


def test_the_estimators_decline_covers_every_graph_whose_calls_share_a_link():
    """pricing/scope.links_may_meet is what keeps the estimator and the array fold exact: every
    shipped and 60 random valid scenarios whose task graph the engine pools (two streams' calls
    limited by one tier of one class) are declined; pp inside a node beside dp across nodes (or
    the reverse) is not (those rows stay with the estimator)."""
    import dataclasses
    import pathlib
    import random

    from test_random_scenarios import random_raw

    from explorer.engine.sharing import pools_of
    from explorer.fold.plan import foldable, granularity
    from explorer.fold.steady import reduced
    from explorer.pricing.scope import links_may_meet, workload_priced
    from explorer.scenario import ScenarioError, load
    from explorer.taskgraph.make import iteration_builder

    def pooled(sc) -> bool:
        g, need = granularity(sc), 2 * sc.parallelism.pp * sc.parallelism.vpp + 2
        if foldable(sc) and -(-need // g) * g < sc.micro_batches:     # the same calls per stage
            sc = reduced(sc, -(-need // g) * g)
        tasks = iteration_builder(sc).build().tasks
        number: dict = {}
        return pools_of(tasks, [number.setdefault((t.cls, t.stream), len(number)) for t in tasks]) is not None

    root = pathlib.Path(__file__).resolve().parents[1]
    scs = [load(p) for p in sorted((root / "scenarios").glob("*.yaml"))]
    rng, drawn = random.Random(5), 0
    while drawn < 60:
        try:
            scs.append(from_dict(random_raw(rng)))
            drawn += 1
        except ScenarioError:
            continue
    # Contention is off by default (explorer/config/contention.py): switch it on everywhere.
    scs = [dataclasses.replace(sc, communication=dataclasses.replace(sc.communication, contention=True))
           for sc in scs]
    # A workload the arrays do not price at all (workload_priced: families with their own edges
    # such as DLRM's embedding exchange, PipeDream's per-stage replicas) is declined before this.
    both = [(pooled(sc), links_may_meet(sc) or not workload_priced(sc)) for sc in scs]
    assert [i for i, (p, m) in enumerate(both) if p and not m] == []
    assert sum(p for p, _ in both) >= 5
    apart = dict(RAW, cluster={"gpus_per_node": 2, "nodes": 2},     # dp in the node, pp across
                 communication={**RAW.get("communication", {}), "contention": True})
    assert not links_may_meet(from_dict(apart))
