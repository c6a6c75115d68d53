"""Stragglers (cluster.stragglers; explorer/variants/replicas.py): closed form, properties, the joined result.

Closed form (one stage, DP only, gradient reduction after the backward): a replica is one class
running its passes back to back, C seconds of kernels, then the buckets (R s) and the optimizer
(O s).  One straggler at slowdown f makes its replica's passes take f x C; the buckets start when
the last member is ready, so T' = f C + R + O = T + (f - 1) C, exactly.
"""
from __future__ import annotations

import random

import pytest
from test_random_scenarios import random_raw

from explorer.estimate import estimate_many
from explorer.scenario import ScenarioError, from_dict, load
from explorer.simulate import simulate

from conftest import ROOT

TEACHING = ROOT / "scenarios" / "teaching-8gpu.yaml"
DP_ONLY = {"parallelism.pp": 1, "parallelism.dp": 8, "communication.dp_overlap": False}


def _run(count: int, slowdown: float, **ov):
    return simulate(load(TEACHING, {**ov, "cluster.stragglers.count": count,
                                    "cluster.stragglers.slowdown": slowdown}))


def test_one_stage_dp_only_closed_form_is_exact():
    """T' = T + (f - 1) x C (module docstring), C the class's compute seconds: exact to rounding."""
    base = _run(0, 1.0, **DP_ONLY)
    c = base.breakdown_s["compute"] + base.breakdown_s["recompute"]
    assert c > 0.5 * base.iteration_time_s          # compute-bound: the claim is not vacuous
    for f in (1.1, 1.5, 3.0):
        slow = _run(1, f, **DP_ONLY)
        assert slow.iteration_time_s == pytest.approx(base.iteration_time_s + (f - 1) * c, rel=1e-9)


def test_slowdown_one_and_count_zero_change_nothing():
    """slowdown 1.0 (any count) and count 0 (any slowdown) are today's result, to the bit."""
    base = _run(0, 1.0).to_json_dict()
    assert _run(3, 1.0).to_json_dict() == base
    assert _run(0, 2.0).to_json_dict() == base


def _compute_by_class(r) -> dict[int, float]:
    out: dict[int, float] = {}
    for t in r.tasks:
        if t.stream == "compute":
            out[t.cls] = out.get(t.cls, 0.0) + sum(v for k, v in t.parts if k in ("compute", "recompute",
                                                                                    "weight-grad"))
    return out


def test_pipeline_straggler_costs_its_stage_compute_on_the_critical_path():
    """1F1B, 4 stages, 8 micro-batches: the last stage (C3 = 68 ms of kernels) is lighter than the
    busiest (C1 = 76 ms).  Slowed by f = 1.5 it becomes the bottleneck, so the iteration grows by at
    least f C3 - C1 (its stretched work replaces the busiest stage's on the steady-state path) and
    at most (f - 1) C3 (every second of it on the critical path)."""
    base = _run(0, 1.0)
    comp = _compute_by_class(base)
    assert comp[3] == pytest.approx(0.0677, abs=5e-4) and comp[1] == pytest.approx(0.0758, abs=5e-4)
    f = 1.5
    slow = _run(1, f)
    stage = [c for c in slow.classes if c.name == "stage 3 (straggler replica)"]
    assert len(stage) == 1 and stage[0].gpus == 1
    assert _compute_by_class(slow)[3] == pytest.approx(f * comp[3], rel=1e-12)
    grew = slow.iteration_time_s - base.iteration_time_s
    assert f * comp[3] - comp[1] <= grew <= (f - 1) * comp[3]


def test_the_fast_replica_waits_and_the_result_says_so():
    """The at-speed replica's classes share the buckets' times of the straggler replica: its wait
    (reported) is the straggler replica's delay, and a notice names it."""
    base, slow = _run(0, 1.0), _run(1, 2.0)
    rows = {r["name"]: r for r in slow.replicas}
    assert rows["at speed"]["replicas"] == 1 and rows["straggler replica"]["replicas"] == 1
    assert rows["at speed"]["iteration_time_s"] == pytest.approx(base.iteration_time_s)
    assert rows["at speed"]["wait_s"] > 0.2 * (slow.iteration_time_s - base.iteration_time_s)
    assert "straggler" in slow.warning_kinds
    assert len(slow.classes) == 8 and sum(c.gpus for c in slow.classes) == 8
    ends = {}
    for t in slow.tasks:
        if t.kind == "optimizer":
            ends.setdefault(t.cls % 4, set()).add(round(t.end, 12))
    assert all(len(v) == 1 for v in ends.values())     # both replicas step together


def test_a_straggler_never_makes_anyone_faster_and_more_are_never_faster():
    """Property over random valid scenarios: slowdown f > 1 and more stragglers never shorten the
    iteration."""
    rng = random.Random(12)
    done = 0
    while done < 12:
        raw = random_raw(rng)
        try:
            times = []
            f = rng.choice([1.2, 2.0])
            for count in (0, 1, 2, 5):
                raw["cluster"]["stragglers"] = {"count": count, "slowdown": f}
                times.append(simulate(from_dict(raw)).iteration_time_s)
        except ScenarioError:
            continue
        done += 1
        assert all(b >= a * (1 - 1e-12) for a, b in zip(times, times[1:], strict=False)), (raw, times)


def test_estimator_hands_straggler_rows_to_the_simulation():
    """The estimator cannot price differing replicas: the row is the simulation's, equal."""
    sc = load(TEACHING, {"cluster.stragglers.count": 1, "cluster.stragglers.slowdown": 1.5})
    est = estimate_many([sc])
    assert float(est.iteration_time_s[0]) == pytest.approx(simulate(sc).iteration_time_s, rel=1e-12)


def test_bounds_refused():
    with pytest.raises(ScenarioError, match="slowdown"):
        load(TEACHING, {"cluster.stragglers.slowdown": 0.5})



def test_the_fold_does_not_admit_stragglers_beyond_the_work_budget():
    """The 1T-parameter row with 4,096 micro-batches is admitted for its fold; with a straggler the
    replicas are joined into one task list the timeline draws unfolded (explorer/variants/replicas.py), so
    the same pipeline is refused with the budget's one-line reason instead of hanging the page."""
    raw = {"model": {"layers": 128, "hidden": 25600, "heads": 160, "vocab": 51200, "seq_len": 2048},
           "training": {"global_batch": 4096, "micro_batch": 1, "recompute": "full"},
           "hardware": {"gpu": "a100-80gb"}, "cluster": {"nodes": 64, "gpus_per_node": 8},
           "parallelism": {"tp": 8, "pp": 64, "zero": 0}}
    from_dict(raw)                                   # admitted: it folds
    slow = {**raw, "cluster": {**raw["cluster"], "stragglers": {"count": 1, "slowdown": 1.5}}}
    with pytest.raises(ScenarioError) as err:
        from_dict(slow)
    assert str(err.value).startswith("training.global_batch") and "\n" not in str(err.value)
