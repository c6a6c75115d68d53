"""The array run (explorer/fold/arrays/direct.py) and the route decision (explorer/fold/cost.py).

Where folding cannot pay — Megatron's interleaved schedule at the micro-batch counts of
Korthikanti et al. 2022's Table 5 — the full count is evaluated as one array row: every figure
must be the engine's (``run_iteration(sc, fold=False)``) to 1e-9 and the task list, made when
read, the engine's time for time.  A fold is attempted only when its first attempt costs less
than the run it replaces, decided from the counts before simulating; and the work budget counts
what is simulated, so a 1T model at pp 128 with 4,096 micro-batches opens.
"""
from __future__ import annotations

import json
import random
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from test_fold import as_json, long_raw
from test_golden import same
from test_random_scenarios import random_raw

from explorer.fidelity.korthikanti import table5_raw, table5_rows
from explorer.fold import cost
from explorer.fold.arrays.direct import ArrayRun, attempt_array_run
from explorer.fold.arrays.lazy import LazyTasks
from explorer.fold.plan import FoldPlan, planned
from explorer.fold.run import ARRAY_RUN, ARRAYS, FULL, TASKS, routed, run_iteration
from explorer.scenario import ScenarioError, from_dict
from explorer.simulate import simulate

from conftest import ROOT

sys.path.insert(0, str(ROOT / "bench"))


def interleaved_raw(seed: int) -> dict:
    """A random pipeline (tests/test_random_scenarios.py's options) on Megatron's interleaved
    schedule, 2-8 stages, 2-3 virtual stages, 1-12 groups of pp micro-batches, one or two replicas
    (ZeRO 0, buckets the array runs hold): mostly too few micro-batches to fold."""
    rng = random.Random(seed)
    raw = random_raw(rng)
    par = raw["parallelism"]
    pp = rng.choice([2, 4, 8])
    par.update(pp=pp, vpp=rng.choice([2, 3]), schedule="interleaved", ep=1, cp=1, zero=0)
    dp = rng.choice([1, 1, 2])
    gpus = par["tp"] * pp * dp
    gpn = min(gpus, raw["cluster"]["gpus_per_node"])
    raw["cluster"].update(gpus_per_node=gpn, nodes=gpus // gpn, datacenters=1)
    raw["model"].update(layers=pp * par["vpp"] * rng.choice([1, 2]))
    groups = rng.choice([1, 2, 3, 5, 8, 12])
    raw["training"]["global_batch"] = raw["training"]["micro_batch"] * dp * pp * groups
    raw["training"]["framework"] = rng.choice(["megatron", "megatron", "fsdp"])
    raw["communication"].update(dp_priority=False, contention=False)
    return raw


def assert_engine_exact(sc) -> None:
    """The array run's measures, JSON and task list equal the engine's."""
    it, how = routed(sc)
    assert how.taken == ARRAY_RUN and it.info is None, how
    full = run_iteration(sc, fold=False)
    a, b = np.array(it.measures.flat()), np.array(full.measures.flat())
    assert np.abs(a - b).max() <= 1e-9 * full.measures.T
    fast, slow = simulate(sc), simulate(sc, fold=False)
    assert isinstance(fast.tasks, LazyTasks) and fast.fold is None
    assert same(as_json(slow), as_json(fast), abs_tol=1e-12 * slow.iteration_time_s) == []
    tasks = list(fast.tasks)
    assert len(tasks) == len(slow.tasks) == len(fast.tasks)
    for x, y in zip(tasks, slow.tasks, strict=True):
        assert (x.cls, x.stream, x.kind, x.info, x.binding) == (y.cls, y.stream, y.kind, y.info, y.binding)
        assert (x.ready, x.start, x.end) == (y.ready, y.start, y.end)        # bit for bit


def test_korthikanti_175b_runs_interleaved_as_one_array_row_equal_to_the_engine():
    """Table 5's 175B row on its published layout (pp 8, vpp 3, 64 micro-batches: eight periods
    of pp, too few to fold) takes the array run, and equals the engine task for task."""
    row = next(r for r in table5_rows() if r.model == "175B" and r.recompute == "full")
    sc = from_dict(table5_raw(row))
    assert (sc.parallelism.schedule, sc.parallelism.pp, sc.parallelism.vpp, sc.micro_batches) == \
        ("interleaved", 8, 3, 64)
    assert_engine_exact(sc)


def test_transfers_that_outlast_the_passes_take_the_exact_loop_and_equal_the_engine(monkeypatch):
    """arrays/steps.evaluate first assumes every pp stream free when its next transfer leaves; 512-wide
    layers on H100s with 1 Gb/s between stages make transfers (pp 0.15 s) outlast the passes
    (7 ms of compute), the assumption fails and the exact loop gives the engine's times."""
    import explorer.fold.arrays.steps as steps
    raw = {"model": {"layers": 16, "hidden": 512, "heads": 16, "vocab": 1000, "seq_len": 1024},
           "training": {"global_batch": 32, "micro_batch": 1}, "hardware": {"gpu": "h100-sxm"},
           "cluster": {"nodes": 8, "gpus_per_node": 1, "scale_out": {"nic_Gbps": 1}},
           "parallelism": {"tp": 1, "pp": 8, "schedule": "interleaved", "vpp": 2}}
    sc = from_dict(raw)
    loops = []
    exact, free = steps._loop, steps._loop_free
    monkeypatch.setattr(steps, "_loop", lambda *a: (loops.append("free" if a[-1] else "exact"), exact(*a))[1])
    monkeypatch.setattr(steps, "_loop_free", lambda *a: (loops.append("free"), free(*a))[1])
    assert_engine_exact(sc)
    assert loops[:2] == ["free", "exact"]


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
@given(st.integers(0, 10**6))
@example(3)
def test_interleaved_array_runs_equal_the_engine_for_random_pipelines(seed):
    try:
        sc = from_dict(interleaved_raw(seed))
    except ScenarioError:
        return
    if not isinstance(attempt_array_run(sc), ArrayRun):
        return                          # a graph the array runs do not hold (blocking sends, SM contention)
    if routed(sc)[1].taken == ARRAYS:
        return                          # enough micro-batches to fold: test_arrayfold.py's
    assert_engine_exact(sc)


# -- the decision ----------------------------------------------------------------------------------
# Seeds of tests/test_fold.py's random scenarios (long_raw) whose task fold the old code attempted
# though the full run was cheaper (few tasks, 73-267 in full: four runs' per-run costs outweigh
# them; measured 1.2-2.4x the full run), and seeds whose fold saves most of the run (0.1-0.3x).
SLOWER_FOLDED = (50, 64, 72, 102, 136, 159, 195)
FASTER_FOLDED = (36, 87, 146, 192, 202, 226)


@pytest.mark.parametrize("seed", SLOWER_FOLDED)
def test_a_fold_whose_first_attempt_costs_more_than_the_full_run_is_not_attempted(seed):
    sc = from_dict(long_raw(seed))
    fp = planned(sc)
    assert isinstance(fp, FoldPlan)                 # the plan alone would fold it
    why = cost.task_fold_refused(sc, fp)
    assert why is not None and "costs at least the full run" in why.reason
    assert routed(sc)[1].taken == FULL


@pytest.mark.parametrize("seed", FASTER_FOLDED)
def test_a_fold_that_pays_is_attempted_and_taken(seed):
    sc = from_dict(long_raw(seed))
    fp = planned(sc)
    assert isinstance(fp, FoldPlan) and cost.task_fold_refused(sc, fp) is None
    assert routed(sc)[1].taken in (TASKS, ARRAYS)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
@given(st.integers(0, 10**6))
@example(13850)
@example(46624)
@example(841)
def test_every_fold_taken_on_the_fold_property_scenarios_cost_less_than_the_full_run(seed):
    """On tests/test_fold.py's property-test scenarios: a task fold taken scheduled fewer task
    units (per run ENGINE_RUN, per task FOLD_TASK, counted from its runs) than the full run
    (ENGINE_RUN plus its tasks) — the decision, in tasks, not a timing; an array fold's first
    attempt cost at most 1 / ARRAY_GAIN of the array run."""
    try:
        sc = from_dict(long_raw(seed))
        it, how = routed(sc)
    except ScenarioError:
        return
    if how.taken == TASKS:
        runs = len({*it.info.counts, 2 * it.info.counts[2] - it.info.counts[1]})
        spent = runs * cost.ENGINE_RUN + cost.FOLD_TASK * it.info.simulated_tasks
        assert spent < cost.ENGINE_RUN + len(simulate(sc, fold=False).tasks)
    elif how.taken == ARRAYS:
        first = cost.array_cost(sc, cost.first_attempt(planned(sc)))
        assert cost.ARRAY_GAIN * first <= cost.array_cost(sc, [sc.micro_batches])


def test_the_cost_model_counts_the_engines_tasks():
    """budget.estimate's tasks, on which the decision rests, are those the engine schedules on a
    pipeline without data parallelism (an upper bound elsewhere): 1F1B on 4 stages."""
    sc = from_dict(long_raw(228))
    full = simulate(sc, fold=False)
    assert cost.engine_tasks(sc, sc.micro_batches) >= len(full.tasks)


# -- the budget --------------------------------------------------------------------------------------
def one_t_raw(pp: int, global_batch: int, schedule: str = "1f1b") -> dict:
    row = next(r for r in table5_rows() if r.model == "1T" and r.recompute == "full")
    raw = table5_raw(row, global_batch)
    raw["parallelism"].update(pp=pp, schedule=schedule)
    raw["cluster"]["nodes"] = raw["cluster"]["nodes"] * pp // row.pp
    return raw


def test_a_1t_model_at_pp_128_with_4096_micro_batches_opens_by_its_array_runs():
    """2,089,088 engine tasks in full (work 2.6 M, budget 300,000): the array runs hold it (an
    array fold of 130-133 micro-batches), so it opens and simulates."""
    sc = from_dict(one_t_raw(128, 4096))
    assert (sc.parallelism.pp, sc.micro_batches) == (128, 4096)
    it, how = routed(sc)
    assert how.taken == ARRAYS and it.info.counts[0] == 130


def test_an_over_budget_pipeline_the_array_runs_do_not_hold_is_still_refused_in_one_line():
    """GPipe grows in two places (no fold) and the array runs do not hold it: refused."""
    with pytest.raises(ScenarioError) as err:
        from_dict(one_t_raw(128, 4096, "gpipe"))
    msg = str(err.value)
    assert "\n" not in msg and msg.startswith("training.global_batch") and "300,000" in msg


def test_the_bench_runs_every_table5_row_on_its_published_layout_and_says_its_route():
    import korthikanti as bench
    for row in table5_rows():
        sc = bench.scenario(row)
        res = simulate(sc)
        how = bench.route(sc, res)
        want = ARRAYS if row.model == "1T" else ARRAY_RUN
        assert how.taken == want, (row.label, how)
        assert json.dumps(how.describe())


def test_a_repeated_array_run_reads_what_it_kept_and_gives_the_same_bits():
    """What an array run of every unit depends on only through the program and the builder (its
    seconds in step order, masks, busy passes, activation peaks, binding indices) is kept after
    the first run and read on the next (issue 35: the 1T interleaved row, 2.16x the 1F1B row):
    the second run reads it, cannot write it, and gives the first run's measures bit for bit
    and the engine's."""
    from explorer.fold.arrays.fold import _builder
    from explorer.pricing.program import compile_program
    raw = {"model": {"layers": 16, "hidden": 512, "heads": 16, "vocab": 1000, "seq_len": 1024},
           "training": {"global_batch": 32, "micro_batch": 1}, "hardware": {"gpu": "h100-sxm"},
           "cluster": {"nodes": 8, "gpus_per_node": 1},
           "parallelism": {"tp": 1, "pp": 8, "schedule": "interleaved", "vpp": 2}}
    sc = from_dict(raw)
    first = attempt_array_run(sc)
    assert isinstance(first, ArrayRun)
    b = _builder(sc, frozenset())
    prog = compile_program(b.schedule.name, b.p, b.v, sc.micro_batches)
    kept = {k: prog.__dict__.get(k) for k in ("_in_step_order", "_binding_indices")}
    kept |= {k: b.__dict__.get(k) for k in ("_array_inputs", "_array_peaks")}
    kept |= {k: first.rows.tail.__dict__.get(k) for k in ("_walk_busy", "_busy_seconds", "_rows_cls")}
    assert all(v is not None for v in kept.values()), kept.keys()
    second = attempt_array_run(sc)
    assert isinstance(second, ArrayRun)
    for k, v in kept.items():                   # read again, not made again
        assert (prog.__dict__ | b.__dict__ | second.rows.tail.__dict__)[k] is v, k
    assert second.rows.exists is first.rows.exists and not second.rows.exists.flags.writeable
    with pytest.raises(ValueError):
        second.rows.dur[0, 0] = 1.0
    assert second.measures.flat() == first.measures.flat()
    for f in ("ready", "start", "end", "binding"):
        assert np.array_equal(getattr(second.rows, f), getattr(first.rows, f)), f
    assert_engine_exact(sc)
