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
from test_fold import as_json, check_fold, long_raw
from test_golden import same
from test_random_scenarios import random_raw

import explorer.fold.run as fold_run
from explorer.fidelity.korthikanti import table5_raw, table5_rows
from explorer.fold import cost
from explorer.fold.arrays.direct import ArrayRun, attempt_array_run
from explorer.fold.arrays.lazy import LazyTasks
from explorer.fold.arrays.tail import tail
from explorer.fold.plan import FoldPlan, planned
from explorer.fold.run import ARRAY_RUN, ARRAYS, FULL, TASKS, routed, run_iteration
from explorer.network.groups import Network
from explorer.scenario import ScenarioError, from_dict, load_raw, shipped_scenarios
from explorer.simulate import simulate
from explorer.taskgraph.make import iteration_builder

from conftest import ROOT

sys.path.insert(0, str(ROOT / "bench"))


def replicas_fill_cluster(raw: dict, dp: int) -> None:
    """Size ``raw``'s cluster (one datacenter) to ``dp`` replicas of its tp x pp x cp layout, nodes of
    at most its GPUs per node."""
    par = raw["parallelism"]
    gpus = par["tp"] * par["pp"] * par.get("cp", 1) * dp
    gpn = min(gpus, raw["cluster"]["gpus_per_node"])
    raw["cluster"].update(gpus_per_node=gpn, nodes=gpus // gpn, datacenters=1)


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
    replicas_fill_cluster(raw, dp)
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
    # Element by element: the measures mix seconds with byte counts of 1e10-1e12, whose last-bit
    # differences exceed an absolute bound set by the iteration (a fuzz helper's wide models).
    assert (np.abs(a - b) <= 1e-9 * np.maximum(np.abs(b), full.measures.T)).all()
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


def zb_h2_raw(seed: int) -> dict:
    """A random pipeline on ZB-H2 (Qi et al., ICLR 2024), whose consecutive iterations overlap
    (Window.OVERLAP: the iteration is the largest span from a class's first compute to its last
    task), 2-8 stages, 1-3 layers a stage, ZeRO 0-2, no SM share for communication kernels
    (buckets that slow a pass are not held), 1 to 540 micro-batches a pipeline."""
    rng = random.Random(seed)
    raw = interleaved_raw(seed)
    par = raw["parallelism"]
    par.update(schedule="zb-h2", vpp=1, zero=rng.choice([0, 1, 2]))
    raw["model"]["layers"] = par["pp"] * rng.choice([1, 2, 3])
    gpus = raw["cluster"]["nodes"] * raw["cluster"]["gpus_per_node"]
    dp = gpus // (par["tp"] * par["pp"])
    groups = rng.choice([1, 3, 8, 17, 40, 90, 540])
    raw["training"]["global_batch"] = raw["training"]["micro_batch"] * dp * groups
    raw["communication"]["comm_sms"] = 0
    return raw


@pytest.mark.slow          # a hypothesis run (README: slow tier)
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
@given(st.integers(0, 10**6))
@example(1)
def test_zb_h2_takes_an_array_route_equal_to_the_engine_for_random_pipelines(seed):
    """ZB-H2's overlapping window on the array routes: the iteration (each class's span from its
    first compute), its breakdowns (walked from that class's window start) and every other
    measure equal the engine's to 1e-9; a run too short to fold takes the array run, task for task."""
    try:
        sc = from_dict(zb_h2_raw(seed))
    except ScenarioError:
        return
    assert_array_route_exact(sc)


def assert_array_route_exact(sc) -> None:
    """``sc`` takes an array route whose measures equal the engine's to 1e-9; the array run's task
    list is the engine's task for task, and a folded one is the array fold's own (no task fold)."""
    it, how = routed(sc)
    assert how.taken in (ARRAY_RUN, ARRAYS), how
    full = run_iteration(sc, fold=False)
    a, b = np.array(it.measures.flat()), np.array(full.measures.flat())
    # Element by element: the measures mix seconds with byte counts of 1e10-1e12, whose last-bit
    # differences exceed an absolute bound set by the iteration (a fuzz helper's wide models).
    assert (np.abs(a - b) <= 1e-9 * np.maximum(np.abs(b), full.measures.T)).all()
    if how.taken == ARRAY_RUN:
        assert_engine_exact(sc)
    else:
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(fold_run, "_tasks", lambda *a: pytest.fail("the task fold ran"))
            assert check_fold(sc)


def test_zb_h2_on_megatron_gpt3_175b_is_one_array_row_not_the_full_engine():
    """Issue 35, item 1: ZB-H2 on the 175B layout (pp 8, 96 micro-batches) had taken the full
    simulation (37 ms a call); it is one array row, equal to the engine."""
    raw = load_raw(shipped_scenarios()["megatron-gpt3-175b"])
    raw["parallelism"].update(schedule="zb-h2", vpp=1)
    sc = from_dict(raw)
    it, how = routed(sc)
    assert how.taken == ARRAY_RUN, how
    assert it.measures.T == pytest.approx(run_iteration(sc, fold=False).measures.T, rel=1e-12)


def zero3_raw(seed: int) -> dict:
    """A random ZeRO-3 pipeline (two replicas or more, Megatron's framework: parameters gathered
    and gradients reduce-scattered layer by layer inside the passes) on GPipe, 1F1B or the
    interleaved schedule, with or without prefetching."""
    rng = random.Random(seed)
    raw = interleaved_raw(seed)
    par = raw["parallelism"]
    sched = rng.choice(["gpipe", "1f1b", "interleaved"])
    par.update(schedule=sched, vpp=par["vpp"] if sched == "interleaved" else 1, zero=3)
    raw["model"]["layers"] = par["pp"] * par["vpp"] * rng.choice([1, 2])
    dp = rng.choice([2, 4])
    replicas_fill_cluster(raw, dp)
    groups = rng.choice([1, 2, 5, 12, 40])
    raw["training"]["global_batch"] = raw["training"]["micro_batch"] * dp * par["pp"] * groups
    raw["training"]["framework"] = "megatron"
    raw["communication"].update(comm_sms=0, prefetch_layers=rng.choice([0, 1, 2]))
    return raw


@pytest.mark.slow          # a hypothesis run (README: slow tier)
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
@given(st.integers(0, 10**6))
@example(0)
def test_zero3_pipelines_take_an_array_route_equal_to_the_engine(seed):
    """Issue 35, item 1: ZeRO-3's calls drawn under the passes (they block nothing) no longer send
    a pipeline to the engine; its measures equal the engine's and its task list, read, is the
    engine's without running it (folded: the array fold's own, not the task fold's)."""
    try:
        sc = from_dict(zero3_raw(seed))
    except ScenarioError:
        return
    assert_array_route_exact(sc)


def chimera_raw(seed: int) -> dict:
    """A random Chimera pipeline (Li & Hoefler, SC21: two pipelines in opposite directions, each
    rank a chunk of each): 2-8 stages (even), whole basic units of pp micro-batches, ZeRO 0-3 (the
    two copies' gradients all-reduced after the step's last backward: pair_sync.py), one to four
    replicas."""
    rng = random.Random(seed)
    raw = interleaved_raw(seed)
    par = raw["parallelism"]
    par.update(schedule="chimera", vpp=1, zero=rng.choice([0, 1, 2, 3]))
    raw["model"]["layers"] = par["pp"] * rng.choice([1, 2, 3])
    dp = rng.choice([1, 2, 4])
    replicas_fill_cluster(raw, dp)
    groups = rng.choice([1, 2, 3, 8, 20])
    raw["training"]["global_batch"] = raw["training"]["micro_batch"] * dp * par["pp"] * groups
    raw["communication"]["comm_sms"] = 0
    return raw


@pytest.mark.slow          # a hypothesis run (README: slow tier)
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
@given(st.integers(0, 10**6))
@example(2)
def test_chimera_takes_the_array_run_equal_to_the_engine_for_random_pipelines(seed):
    """Issue 35, item 1: Chimera's two directions as one array row (each op waits for one transfer
    and sends one; each direction's chunk runs half the units): every measure the engine's to 1e-9,
    bytes and tier loads included, and the task list the engine's task for task."""
    try:
        sc = from_dict(chimera_raw(seed))
    except ScenarioError:
        return
    if not isinstance(attempt_array_run(sc), ArrayRun):
        return                          # a graph the array runs do not hold (blocking sends, ...)
    assert_array_route_exact(sc)
    assert same(as_json(simulate(sc, fold=False)), as_json(simulate(sc)),
                abs_tol=1e-9 * simulate(sc).iteration_time_s) == []


def test_megatron_gpt3_175b_on_chimera_is_one_array_row():
    """Chimera on the 175B layout (pp 8, 96 micro-batches) had taken the full simulation (19.9 ms
    a call): one array row, equal to the engine task for task (its TP bytes counted once per
    direction's half of the units, not twice)."""
    raw = load_raw(shipped_scenarios()["megatron-gpt3-175b"])
    raw["parallelism"].update(schedule="chimera", vpp=1)
    sc = from_dict(raw)
    assert routed(sc)[1].taken == ARRAY_RUN
    assert_engine_exact(sc)
    assert same(as_json(simulate(sc, fold=False)), as_json(simulate(sc)), abs_tol=1e-9 * 40.0) == []


def test_megatron_gpt3_175b_on_gpipe_with_zero3_is_one_array_row():
    """GPipe with ZeRO-3 on the 175B layout had taken the full simulation (22 ms a call): one
    array row now, equal to the engine task for task."""
    raw = load_raw(shipped_scenarios()["megatron-gpt3-175b"])
    raw["parallelism"].update(schedule="gpipe", vpp=1, zero=3)
    assert_engine_exact(from_dict(raw))


def test_a_drawn_fsdp_call_longer_than_its_pass_is_left_to_the_task_fold():
    """ZB-H1 splits the backward: its input-gradient pass carries the whole backward's hidden
    ZeRO-3 seconds, which can outlast it, and then the calls queue on the dp stream.  The array
    runs hold the drawn calls only where each ends within its pass (arrays/tail._drawn_fsdp_held):
    on the 175B layout they do (0.180 s under a 0.410 s input-gradient pass) and the run is the
    engine's task for task; stretched past the pass, the graph is refused."""
    raw = load_raw(shipped_scenarios()["megatron-gpt3-175b"])
    raw["parallelism"].update(schedule="zb-h1", vpp=1, zero=3)
    raw["training"]["global_batch"] = 96
    sc = from_dict(raw)
    assert_engine_exact(sc)
    b = iteration_builder(sc, Network(sc), frozenset())
    assert tail(b) is not None
    shape = b._pass_shape(0, 0, "Bi")
    b._pass_cache[(0, 0, "Bi")] = (*shape[:5], shape[2] * 1.01)      # hidden beyond the pass
    b.__dict__.pop("_array_tail", None)
    assert tail(b) is None


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
    # Not the task fold; seed 102 (ZeRO-3, whose drawn calls the array runs hold since issue 35)
    # folds over arrays: 1.3 ms against 1.9 ms for the full run, measured when it was admitted.
    assert routed(sc)[1].taken in ((ARRAYS,) if seed == 102 else (FULL,))


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
