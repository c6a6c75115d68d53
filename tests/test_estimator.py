"""The vectorised estimator (explorer/estimate) against the full simulation.

Stated agreement: the estimator evaluates the engine's own cost functions and the critical path of
the schedule's order, so its iteration time, per-GPU memory and fit equal simulate()'s to float
rounding — asserted here to 1e-9 relative (far inside the 5 % it was asked to meet) on every
shipped scenario, on variants that exercise every window, send kind and ZeRO stage, and on random
valid scenarios of tests/test_random_scenarios.py's generator.  Equal numbers give equal rankings:
on layout sets of llama3-405b-16k and megatron-gpt3-175b every pair whose simulated times differ
is ordered the same (Kendall tau 1).  estimate_overrides' fast validation gives the scenarios and
one-line reasons of from_dict.  Timings are in bench/estimator.py, not here.
"""
from __future__ import annotations

import itertools
import math
import random
from dataclasses import replace

import numpy as np
import pytest
from test_random_scenarios import random_raw

from explorer.estimate import Estimates, estimate, estimate_many, estimate_overrides, scenarios_from_overrides
from explorer.scenario import ScenarioError, apply_overrides, from_dict, load, load_raw, shipped_scenarios
from explorer.simulate import simulate
from explorer.taskgraph.make import iteration_builder
from explorer.vocabulary import CATEGORIES, OFFLOAD

REL = 1e-9                    # float rounding: the estimate adds the same seconds in another order
# Serving scenarios included: the estimator hands them to the simulation (pricing/scope.py
# workload_priced), which prices prefill and decode; it once priced them as training steps.
SHIPPED = shipped_scenarios()


def assert_agrees(scenarios, est: Estimates) -> list[float]:
    """Every row of ``est`` equals simulate() of its scenario; returns the relative time errors."""
    errs = []
    for i, sc in enumerate(scenarios):
        r = simulate(sc)
        T = r.iteration_time_s
        err = abs(est.iteration_time_s[i] / T - 1)
        errs.append(err)
        assert err <= REL, (sc.name, est.iteration_time_s[i], T)
        assert est.memory_GB_total[i] == pytest.approx(r.memory.as_GB()["total"], rel=REL, abs=1e-12)
        assert bool(est.fits[i]) is (not r.memory_over_capacity)
        assert est.mfu[i] == pytest.approx(r.mfu, rel=1e-8)
        assert est.tokens_per_s[i] == pytest.approx(r.tokens_per_s, rel=1e-8)
        assert est.tflops_per_gpu[i] == pytest.approx(r.tflops_per_gpu, rel=1e-8)
        parts = [est.breakdown_s[k][i] for k in CATEGORIES]
        assert sum(parts) == pytest.approx(est.iteration_time_s[i], rel=1e-12)
        assert min(parts) >= -1e-12 * T
        # Category by category, as run shows them (pricing/walk.py walks the simulation's gaps), but
        # ``offload``, which the estimator keeps in compute (estimate/result.Estimates).
        want = {k: r.breakdown_s.get(k, 0.0) for k in CATEGORIES}
        want["compute"] += r.breakdown_s.get(OFFLOAD, 0.0)
        for k in CATEGORIES:
            assert abs(est.breakdown_s[k][i] - want[k]) <= 1e-9 * T, (sc.name, k)
    return errs


def test_shipped_scenarios_agree_with_the_simulation():
    scs = [load(p) for _, p in sorted(SHIPPED.items())]
    assert len(scs) == len(SHIPPED) >= 9         # the shipped scenarios, cross-region-pp included
    assert max(assert_agrees(scs, estimate_many(scs))) <= REL


VARIANTS = [
    ("teaching-8gpu", {"parallelism.stage_layers": [3, 9, 7, 5]}),
    ("teaching-8gpu", {"parallelism.ideal_pipeline": True}),
    ("teaching-8gpu", {"communication.dp_priority": True}),
    ("megatron-gpt3-175b", {"training.framework": "deepspeed"}),               # blocking sends
    ("megatron-gpt3-175b", {"parallelism.schedule": "pipedream-async"}),      # ASYNC window
    ("megatron-gpt3-175b", {"parallelism.schedule": "zb-h2"}),                # OVERLAP window
    ("megatron-gpt3-175b", {"parallelism.schedule": "gpipe", "parallelism.zero": 2}),
    ("megatron-gpt3-175b", {"parallelism.schedule": "interleaved", "parallelism.vpp": 3}),
    ("llama3-405b-16k", {"parallelism.zero": 3}),
    ("llama3-405b-16k", {"communication.dp_priority": True}),
    ("fsdp-llama3-8b", {"training.framework": "fsdp", "parallelism.pp": 2, "parallelism.dp": 32}),
    ("two-datacenters", {"parallelism.ideal_pipeline": True}),
    ("deepseek-v3", {"communication.comm_sms": 0, "model.moe.skew": 0.8}),
    ("zero-bubble-8gpu", {"parallelism.schedule": "zb-h2", "communication.dp_overlap": False}),
]


def test_variants_of_every_window_send_kind_and_zero_stage_agree():
    scs = [load(SHIPPED[name], ov) for name, ov in VARIANTS]
    assert_agrees(scs, estimate_many(scs))


def test_a_blocking_interleaved_stage_counts_every_send_it_makes_in_its_busy_bound():
    """P3's period is at least the busiest stream's seconds per iteration (pricing/sync.busiest_stream).
    A blocking sender (DeepSpeed) sends on its compute stream at each of its chunks' boundaries: an
    interleaved stage sends three transfers a unit on two stages, not one.  Counted as one forward and
    one backward, the estimate read 1.3078 s against the simulation's 1.3094 (fuzzed; 1.3941 s since its
    512-wide heads run unfused, as no fused attention kernel takes them: transformer/attention.fused)."""
    raw = {"model": {"layers": 16, "hidden": 8192, "heads": 16, "vocab": 1000, "mtp_depth": 1},
           "training": {"global_batch": 16, "framework": "deepspeed"}, "cluster": {"gpus_per_node": 4},
           "parallelism": {"pp": 2, "schedule": "interleaved", "vpp": 2, "token_slices": 2},
           "communication": {"dp_priority": True}}
    sc = from_dict(raw)
    assert simulate(sc).iteration_time_s == pytest.approx(1.39407, rel=1e-5)
    assert_agrees([sc], estimate_many([sc]))


def random_scenarios(seed: int, n: int):
    rng = random.Random(seed)
    out = []
    while len(out) < n:
        try:
            out.append(from_dict(random_raw(rng)))
        except ScenarioError:
            continue
    return out


def test_random_valid_scenarios_agree_with_the_simulation():
    scs = random_scenarios(11, 160)
    kinds = {(sc.parallelism.schedule, sc.parallelism.zero) for sc in scs}
    assert len({s for s, _ in kinds}) == 7 and len({z for _, z in kinds}) == 4     # every schedule, stage
    errs = assert_agrees(scs, estimate_many(scs))
    assert max(errs) <= REL


def test_a_batch_gives_each_row_what_it_gives_alone():
    """Grouping, padding with phantom units and memoisation never mix rows: a mixed batch equals
    the rows estimated one by one, in order."""
    scs = random_scenarios(5, 40) + [load(p) for _, p in sorted(SHIPPED.items())]
    many = estimate_many(scs)
    for i, sc in enumerate(scs):
        one = estimate(sc)
        assert one.iteration_time_s[0] == pytest.approx(many.iteration_time_s[i], rel=1e-13)
        assert one.memory_GB_total[0] == many.memory_GB_total[i]
        for k in CATEGORIES:
            assert one.breakdown_s[k][0] == pytest.approx(many.breakdown_s[k][i], rel=1e-12, abs=1e-15)


def layouts(name: str, grid: dict) -> list:
    out = []
    for combo in itertools.product(*grid.values()):
        ov = {**dict(zip(grid, combo, strict=True)), "parallelism.dp": None, "parallelism.stage_layers": None}
        ov["parallelism.schedule"] = ov.get("parallelism.schedule") or (
            "interleaved" if ov["parallelism.vpp"] > 1 else "1f1b")
        try:
            out.append(load(SHIPPED[name], ov))
        except ScenarioError:
            continue
    return out


def kendall_tau(a: np.ndarray, b: np.ndarray) -> tuple[float, list]:
    """Kendall's tau of two orderings and the pairs they order differently."""
    conc = disc = 0
    flips = []
    for i, j in itertools.combinations(range(len(a)), 2):
        s = np.sign(a[i] - a[j]) * np.sign(b[i] - b[j])
        conc += s > 0
        disc += s < 0
        if s < 0:
            flips.append((i, j))
    return (conc - disc) / max(conc + disc, 1), flips


@pytest.mark.parametrize("name, grid", [
    ("llama3-405b-16k", {"parallelism.tp": [4, 8], "parallelism.pp": [8, 16], "parallelism.vpp": [1, 2],
                         "training.micro_batch": [1, 2], "training.global_batch": [2048, 4096]}),
    ("megatron-gpt3-175b", {"parallelism.tp": [4, 8], "parallelism.pp": [4, 8, 16], "parallelism.vpp": [1, 2],
                            "training.micro_batch": [1, 2]}),
])
def test_layouts_rank_as_the_simulation_ranks_them(name, grid):
    scs = layouts(name, grid)
    assert len(scs) >= 12
    est = estimate_many(scs).iteration_time_s
    sim = np.array([simulate(sc).iteration_time_s for sc in scs])
    # The layouts differ: no two simulated times within 1e-6 of each other, so every pair counts.
    gaps = [abs(x / y - 1) for x, y in itertools.combinations(sim, 2)]
    assert min(gaps) > 1e-6
    tau, flips = kendall_tau(est, sim)
    assert tau == 1.0 and flips == [], flips


def validated_as_from_dict(raw: dict, ovs: list[dict]) -> tuple[list, list]:
    """scenarios_from_overrides(raw, ovs), asserting each row's scenario and message are from_dict's."""
    scs, reasons = scenarios_from_overrides(raw, ovs)
    for ov, sc, why in zip(ovs, scs, reasons, strict=True):
        try:
            want, want_why = from_dict(apply_overrides(raw, ov)), None
        except ScenarioError as exc:
            want, want_why = None, str(exc)
        assert sc == want and why == want_why, ov
    return scs, reasons


def test_estimate_overrides_validates_as_from_dict_does():
    raw = load_raw(SHIPPED["llama3-405b-16k"])
    grid = {"parallelism.tp": [1, 4, 8, 16], "parallelism.pp": [4, 16, 32], "parallelism.vpp": [1, 2],
            "training.micro_batch": [1, 4], "cluster.scale_out.nic_Gbps": [200, 400]}
    ovs = [{**dict(zip(grid, c, strict=True)), "parallelism.dp": None}
           for c in itertools.product(*grid.values())]
    ovs += [{"hardware.gpu": "b200"}, {"hardware.gpu.peak_tflops": 1200}, {"model.preset": "llama3-70b"},
            {"model.moe.experts": 8}, {"parallelism.tp": "eight"}, {"parallelism.tp": 3}, {"no.such.key": 1},
            {"hardware.gpu.preset": "h100-sxm"}, {"communication.bucket_MB": None},
            {"training.framework": "deepspeed"}, {"parallelism.stage_layers": [60, 66]},
            {"parallelism.pp": 2, "parallelism.dp": None, "parallelism.stage_layers": [60, 66]},
            {"parallelism.tp": 16, "parallelism.dp": None, "training.dtype": "fp8"}, {},
            # A top-level field and a tuple of sections (the fast path once raised on both).
            {"name": "renamed"}, {"description": "d", "parallelism.zero": 2},
            {"cluster.scale_across.links": [[60, 66]]}, {"cluster.scale_across.links": []}]
    scs, reasons = validated_as_from_dict(raw, ovs)
    assert 20 < sum(r is None for r in reasons) < len(ovs) - 20          # both kinds are exercised
    est, reasons2 = estimate_overrides(raw, ovs)
    assert reasons2 == reasons
    valid = [i for i, r in enumerate(reasons) if r is None]
    ref = estimate_many([scs[i] for i in valid])
    assert np.array_equal(est.iteration_time_s[valid], ref.iteration_time_s)
    bad = [i for i, r in enumerate(reasons) if r is not None]
    assert np.isnan(est.iteration_time_s[bad]).all() and not est.fits[bad].any()
    assert all("\n" not in r for r in reasons if r is not None)




_ODD_VALUES = [0, 1, 1.0, True, False, 2, 4, 8, 3, -1, 0.5, None, "x", "1f1b", "ring", [1, 2], [60, 66], "8",
               1e9, 16, 400, [[60, 66]], {"a": 1}]


def test_fast_validation_equals_from_dict_on_random_overrides():
    """Every settable field, then random pairs and triples, with values of every kind (right, wrong
    type, out of range, unhashable), some repeated so the fast path's memo tables are hit: each
    row's scenario and message equal from_dict's."""
    from explorer.scenario import SETTABLE

    rng = random.Random(11)
    keys = sorted(SETTABLE)
    raw = load_raw(SHIPPED["teaching-8gpu"])
    ovs = [{k: rng.choice(_ODD_VALUES)} for k in keys]                 # every field once
    ovs += [{rng.choice(keys): rng.choice(_ODD_VALUES) for _ in range(rng.randint(2, 3))} for _ in range(60)]
    ovs += ovs[:30]
    scs, reasons = validated_as_from_dict(raw, ovs)
    assert 5 <= sum(r is None for r in reasons) <= len(ovs) - 5          # both kinds are exercised

def test_rows_share_the_sections_their_overrides_leave_alone():
    """The fast validation rebuilds each distinct (section, its changes) once and fill_defaults
    keeps a section a default does not change, so rows that leave the model, the GPU or a section
    as another row has it hold the same objects (the estimator's keys find them by identity);
    and a loaded scenario is a fixed point of fill_defaults."""
    from explorer.config.loading import fill_defaults

    raw = load_raw(SHIPPED["llama3-405b-16k"])
    ovs = [{"parallelism.zero": z, "cluster.scale_out.nic_Gbps": g} for z in (1, 2) for g in (200, 400)]
    scs, reasons = scenarios_from_overrides(raw, ovs)
    assert reasons == [None] * 4
    assert len({id(sc.model) for sc in scs}) == 1 and len({id(sc.hardware) for sc in scs}) == 1
    assert scs[0].parallelism is not scs[2].parallelism and scs[0].cluster is not scs[1].cluster
    assert scs[0].cluster is scs[2].cluster           # the same NIC: one rebuilt and filled cluster
    assert scs[0].cluster.scale_out.nic_Gbps == 200 and scs[1].cluster.scale_out.nic_Gbps == 400
    for sc in scs:
        assert fill_defaults(sc) is sc
        assert sc == from_dict(apply_overrides(raw, ovs[scs.index(sc)]))


def test_estimates_are_arrays_of_one_length_with_the_result_conventions():
    tight = load(SHIPPED["llama3-405b-16k"], {"parallelism.zero": 0})          # does not fit in 80 GB
    scs = [load(SHIPPED["teaching-8gpu"]), tight]
    est = estimate_many(scs)
    assert len(est) == 2 and est.fits.dtype == bool
    arrays = (est.iteration_time_s, est.memory_GB_total, est.mfu, est.tokens_per_s, *est.breakdown_s.values())
    for arr in arrays:
        assert isinstance(arr, np.ndarray) and arr.shape == (2,) and arr.dtype == np.float64
    assert list(est.breakdown_s) == list(CATEGORIES)
    assert est.fits.tolist() == [True, False]
    assert simulate(tight).memory_over_capacity
    assert est.memory_GB_total[1] * 1e9 > tight.hardware.gpu.capacity_bytes
    row = est.row(0)
    assert math.isclose(row["iteration_time_s"], sum(row["breakdown_s"].values()), rel_tol=1e-12)
    assert len(estimate_many([])) == 0


# --- The fast mode (explorer/estimate/fast.py, what search ranks with) -----------------------------
# Stated bound: its iteration time is within fast.STATED_BOUND (0.5 %) of the exact estimator's —
# itself equal to simulate() to 1e-9 above, so the bound holds against the full simulation — on the
# shipped scenarios, 200 random valid scenarios and the deep grid of bench/estimator.py (pp to 64,
# global batch to 8192, four schedules), where most rows are extrapolated; its memory within the same
# bound.  Rankings: Kendall tau 1 against the exact ranking on every pair of layouts whose exact times
# differ by more than 1 % (closer pairs may swap: the bound is 0.5 % each way).

def without_contention(scs: list) -> list:
    """The scenarios with ``communication.contention`` off: what the fast mode ranks (the search's
    proxy turns it off, design/proxy.py); with it on, rows whose pipeline sends and gradient
    buckets share a link come from the simulation (pricing/scope.py), so no mode is exercised."""
    return [replace(sc, communication=replace(sc.communication, contention=False)) for sc in scs]


def deep_grid_scenarios(step: int) -> list:
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
    from estimator import DEEP, overrides
    raw = load_raw(SHIPPED["llama3-405b-16k"])
    out = []
    for ov in overrides(DEEP)[::step]:
        try:
            out.append(from_dict(apply_overrides(raw, ov)))
        except ScenarioError:
            continue
    return without_contention(out)


LONG = {"parallelism.tp": [8, 16], "parallelism.pp": [4, 8, 16, 32], "training.global_batch": [8192, 16384],
        "training.micro_batch": [1], "parallelism.vpp": [1, 2],
        "parallelism.schedule": ["1f1b", "zb-h1", "gpipe", "interleaved"]}


def long_pipelines() -> list:
    """llama3-405b-16k layouts with many units: most are longer than 4 x p x v (extrapolated)."""
    return without_contention([sc for sc in layouts("llama3-405b-16k", LONG)
                               if (sc.parallelism.vpp > 1) == (sc.parallelism.schedule == "interleaved")])


def assert_fast_within_bound(scs) -> np.ndarray:
    from explorer.estimate.fast import STATED_BOUND
    exact = estimate_many(scs)
    fast = estimate_many(scs, exact=False)
    err = np.abs(fast.iteration_time_s / exact.iteration_time_s - 1)
    assert err.max() <= STATED_BOUND, scs[int(err.argmax())].name
    assert np.abs(fast.memory_GB_total / exact.memory_GB_total - 1).max() <= STATED_BOUND
    for k in CATEGORIES:
        assert (fast.breakdown_s[k] >= -1e-9 * fast.iteration_time_s).all()
    return exact.iteration_time_s


def extrapolated(scs) -> int:
    from explorer.estimate.fast import _extrapolable, _plain
    from explorer.pricing.profile import row_profile
    return sum(bool(pr is not None and _extrapolable(pr)) for pr in (_plain(row_profile(sc)) for sc in scs))


@pytest.mark.slow
def test_fast_mode_is_within_its_bound_on_shipped_random_and_deep_scenarios():
    shipped = [load(p) for _, p in sorted(SHIPPED.items())]
    rand = random_scenarios(23, 200)
    deep = deep_grid_scenarios(2)
    long = long_pipelines()
    assert extrapolated(long) >= 20 and extrapolated(deep) >= 5                  # the mode is exercised
    for scs in (shipped, rand, deep, long):
        assert_fast_within_bound(scs)


@pytest.mark.slow          # (over 3 s: the slow tier's rule, README)
def test_fast_mode_ranks_long_pipelines_as_the_exact_estimate_beyond_one_percent():
    deep = long_pipelines() + deep_grid_scenarios(3)
    exact = estimate_many(deep).iteration_time_s
    fast = estimate_many(deep, exact=False).iteration_time_s
    flips = [(i, j) for i, j in itertools.combinations(range(len(deep)), 2)
             if abs(exact[i] / exact[j] - 1) > 0.01
             and np.sign(exact[i] - exact[j]) != np.sign(fast[i] - fast[j])]
    assert flips == []


@pytest.mark.parametrize("name, grid", [
    ("llama3-405b-16k", {"parallelism.tp": [4, 8], "parallelism.pp": [8, 16], "parallelism.vpp": [1, 2],
                         "training.micro_batch": [1, 2], "training.global_batch": [2048, 4096]}),
    ("megatron-gpt3-175b", {"parallelism.tp": [4, 8], "parallelism.pp": [4, 8, 16], "parallelism.vpp": [1, 2],
                            "training.micro_batch": [1, 2]}),
])
def test_fast_mode_ranks_the_layout_sets_as_the_simulation_beyond_one_percent(name, grid):
    scs = layouts(name, grid)
    fast = estimate_many(scs, exact=False).iteration_time_s
    sim = estimate_many(scs).iteration_time_s            # equal to simulate() (the test above)
    for i, j in itertools.combinations(range(len(scs)), 2):
        if abs(sim[i] / sim[j] - 1) > 0.01:
            assert np.sign(fast[i] - fast[j]) == np.sign(sim[i] - sim[j]), (scs[i].name, scs[j].name)


def test_interleaved_on_a_number_of_stages_that_is_not_a_power_of_two():
    """Megatron's interleaved order takes the units p at a time, so the program a row shares is
    compiled for a multiple of p (program.program_units): 8 units on 3 stages name a unit 8 (the
    advisor crashed on campus-4-buildings' pp 3 x vpp 2 layouts).  Exact and fast mode, whose short
    counts are whole groups of p too, on 3, 5, 6 and 7 stages: equal to the simulation, and the
    long rows extrapolated within the stated bound."""
    teaching = SHIPPED["teaching-8gpu"]
    scs = [load(teaching, {"cluster.nodes": nodes, "parallelism.pp": pp, "parallelism.vpp": v,
                           "parallelism.schedule": "interleaved", "parallelism.dp": nodes * 8 // pp,
                           "training.global_batch": batch})
           for nodes, pp, v, batch in [(3, 3, 2, 384), (3, 3, 2, 960), (5, 5, 2, 640), (6, 3, 4, 1536),
                                       (3, 6, 2, 384), (7, 7, 2, 1792)]]
    assert [sc.micro_batches % sc.parallelism.pp for sc in scs] == [0] * len(scs)
    assert max(assert_agrees(scs, estimate_many(scs))) <= REL
    scs = without_contention(scs)
    assert max(assert_agrees(scs, estimate_many(scs))) <= REL
    assert extrapolated(scs) >= 2
    assert_fast_within_bound(scs)


def test_memory_follows_a_split_that_moves_with_the_network():
    """Regression: the estimator memoised a row's memory without its layer split, so a second row
    of one call whose split the network moved (ZeRO-3's exposed gathers over slower NICs: 1F1B pp 4
    dp 2 takes (8, 9, 8, 7) layers on one node, (7, 9, 9, 7) on two over 25 GbE) got the first row's
    memory (13.78 GB instead of the simulation's 12.44 GB)."""
    two = {"cluster.nodes": 2, "cluster.gpus_per_node": 4, "cluster.scale_out.kind": "fat-tree",
           "cluster.scale_out.nics_per_node": 1, "cluster.scale_out.fabric": "eth-25"}
    base = {"parallelism.schedule": "1f1b", "parallelism.zero": 3, "parallelism.pp": 4, "parallelism.dp": 2,
            "parallelism.order": "tp-cp-pp-dp"}
    scs = [load(shipped_scenarios()["zero-bubble-8gpu"], {**base, **over}) for over in ({}, two)]
    splits = [iteration_builder(sc).layer_counts for sc in scs]
    assert splits[0] != splits[1]
    assert_agrees(scs, estimate_many(scs))
