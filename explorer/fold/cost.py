"""What each exact route of an iteration costs, from the counts alone, before simulating: the
decision which route to try (explorer/fold/run.py), so that a fold is attempted only when its
attempts cost less than the run it replaces.

Costs are in *task units*: one engine task scheduled and measured in a full simulation (about
5 us on the 2-core reference machine: the 530B Table 5 row's 117,075 tasks in 0.8 s, a 4-stage
interleaved pipeline's 11,780 in 53 ms).  Measured on that machine, shared at a load of 2.5-4
(tests/test_array_run.py keeps the decisions, bench/korthikanti.py prints the routes):

- the engine (fold/steady.py's reduced runs and the full run): :data:`ENGINE_RUN` per run (graph,
  network, measure()'s per-class passes) plus one unit per task — the task fold's reduced runs
  :data:`FOLD_TASK` per task (measure() and fold_tasks.match_shift walk every task again: 4-stage
  interleaved, 5,168 reduced tasks in 33 ms against 11,780 in full in 53 ms);
- the array runs (fold/arrays/rows.py, steps.py): :data:`ARRAY_RUN` per evaluation, per step of
  the compiled program (one op per stage: Python and numpy call overhead, the same for any number
  of rows) :data:`ARRAY_ONE_STEP` for one row of every unit (the free-stream loop) and
  :data:`ARRAY_STEP` for rows padded with phantom units (the fold's), and :data:`ARRAY_OP` per op
  and row (one row: 530B, 1,748 steps and 58,800 ops, 14 ms; 1T 1F1B at 512, 1,150 and 65,536,
  18 ms; 175B, 398 and 3,072, 1.5 ms; the fold's four rows of 66-69 units of 1T, 264 steps and
  8,832 ops each, 14 ms).

A fold is tried when its first attempt (three reduced runs and the confirming one) costs less than
the run it replaces — the task fold's the full engine run (what both share, the builder, left
out), the array fold's the full count as one array row with a margin of :data:`ARRAY_GAIN` (the
fold's proof and measures of four rows beside them; the row needs no proof) — and its search is
capped at that run's cost: all attempts of a fold that is not proven cost at most the run that
then replaces it.
"""
from __future__ import annotations

from dataclasses import replace
from functools import lru_cache

from ..config.sections import Scenario
from ..schedules import registry
from .budget import estimate
from .plan import FoldPlan, NotFolded

ENGINE_RUN = 100.0        # task units one engine run costs beyond its tasks and builder (~0.5 ms)
FOLD_TASK = 1.6           # task units per task of a task-fold reduced run (scheduled, measured, matched)
ARRAY_RUN = 100.0         # task units one array evaluation costs beyond its steps and ops (~0.5 ms)
ARRAY_ONE_STEP = 0.5      # task units per step of one row of every unit (~2.5 us)
ARRAY_STEP = 3.0          # task units per step of rows with phantom units (~15 us)
ARRAY_OP = 0.05           # task units per op and row (~0.25 us)
# The array fold's rows need only cost less than the array run: a folded result also draws its
# timeline folded (the Gantt's block and its repeats) where the array run's full task list is
# drawn coarse, and proves its period on four rows whose measures cost little beside them.
ARRAY_GAIN = 1.0
# Memory: an array run holds about 200 bytes per op (rows.Rows' times, bindings and masks over
# passes and transfers, and _evaluate's time vector), against budget.MAX_WORK's ~1 KB per unit.
ARRAY_MEMORY_OP = 0.2
# First calls: compiling a program (pricing/program.py, memoised per shape) and the builder's
# per-stage facts (priced passes, the traffic basis of fold/arrays/traffic.py: two calls per
# stage).  Measured on the reference machine under a load of about 2.5: 1,024 stages x 512 ops
# compiled in 1.7 s (3.3 us per op) and their per-stage facts in 1.6 s; taken at 2/3 of that.
ARRAY_COMPILE_OP = 0.4
ARRAY_STAGE = 100.0


def engine_tasks(sc: Scenario, micro_batches: int) -> float:
    """Engine tasks of ``sc`` run with ``micro_batches`` micro-batches (budget.estimate's count,
    which is a fixed number plus a fixed number per micro-batch)."""
    fixed, per_mb = _task_line(sc)
    return fixed + per_mb * micro_batches


@lru_cache(maxsize=64)
def _task_line(sc: Scenario) -> tuple[int, int]:
    """budget.estimate's tasks of ``sc`` as (at no micro-batch, per micro-batch): counted at one
    and two micro-batches (memoised: the decision runs before every simulation)."""
    one, two = (estimate(replace(sc, training=replace(sc.training, global_batch=k * sc.training.micro_batch
                                                      * sc.dp))).tasks for k in (1, 2))
    return 2 * one - two, two - one


def engine_cost(sc: Scenario, micro_batches: int, weight: float = 1.0) -> float:
    """Task units of one engine run of ``sc`` at ``micro_batches``; ``weight`` per task."""
    return ENGINE_RUN + weight * engine_tasks(sc, micro_batches)


def ops_per_stage(sc: Scenario, units: int) -> int:
    """Passes one stage runs for ``units`` pipeline units: forward and backward per virtual chunk,
    and a weight-gradient pass where the schedule splits the backward (schedules/registry.py)."""
    sched = registry.get(sc.parallelism.schedule)
    per_unit = 3 if sched.split_backward else 2 * sched.chunks_per_rank(sc.parallelism.vpp)
    return per_unit * units * sched.iterations_simulated


def array_cost(sc: Scenario, micro_batches: list[int]) -> float:
    """Task units of evaluating the rows of ``micro_batches`` at once (arrays/rows.evaluate_rows):
    every row runs the program of the largest count (phantom units pad the others), whose steps
    are about one stage's ops plus a fill and a drain of the pipeline (2 p)."""
    units = max(micro_batches) * sc.parallelism.token_slices
    per_stage = ops_per_stage(sc, units)
    steps = per_stage + 2 * sc.parallelism.pp
    step = ARRAY_ONE_STEP if len(set(micro_batches)) == 1 else ARRAY_STEP
    return ARRAY_RUN + step * steps + ARRAY_OP * per_stage * sc.parallelism.pp * len(micro_batches)


def array_work(sc: Scenario, micro_batches: list[int]) -> float:
    """The most work evaluating the rows of ``micro_batches`` may take on a first call, in
    budget.MAX_WORK's units: twice their time (:func:`array_cost`: a search that stops at that
    cost, then the run replacing it), the program's compilation (:data:`ARRAY_COMPILE_OP` per op)
    and the builder's per-stage facts (:data:`ARRAY_STAGE`) — or their memory when that weighs
    more (:data:`ARRAY_MEMORY_OP`)."""
    units = max(micro_batches) * sc.parallelism.token_slices
    ops = ops_per_stage(sc, units) * sc.parallelism.pp
    time = 2 * array_cost(sc, micro_batches) + ARRAY_COMPILE_OP * ops + ARRAY_STAGE * sc.parallelism.pp
    return max(time, ARRAY_MEMORY_OP * ops)


def first_attempt(fp: FoldPlan) -> list[int]:
    """The counts of the fold's first attempt: its first triple and the run one period beyond."""
    for triple in fp.triples():
        return [*triple, 2 * triple[2] - triple[1]]
    a, b, c = fp.first
    return [a, b, c, 2 * c - b]


def task_fold_refused(sc: Scenario, fp: FoldPlan) -> NotFolded | None:
    """Why the task fold is not tried — its first attempt costs as much as the full engine run or
    more — or None when it pays.  What both share (the builder: layer split, network, priced
    passes; the fold makes one for all its runs) is left out of both sides."""
    counts = first_attempt(fp)
    attempt = sum(engine_cost(sc, c, FOLD_TASK) for c in counts)
    full = engine_cost(sc, sc.micro_batches)
    if attempt < full:
        return None
    return NotFolded(f"its first attempt ({'/'.join(map(str, counts))} micro-batches, {attempt:,.0f} "
                     f"task units scheduled, measured and matched) costs at least the full run "
                     f"({full:,.0f})")


def array_fold_refused(sc: Scenario, fp: FoldPlan) -> NotFolded | None:
    """Why the array fold is not tried — its first attempt costs more than 1 / ARRAY_GAIN of the full
    count as one array row (:func:`array_cost`), which replaces it — or None when it pays."""
    counts = first_attempt(fp)
    attempt, run = array_cost(sc, counts), array_cost(sc, [sc.micro_batches])
    if ARRAY_GAIN * attempt <= run:
        return None
    return NotFolded(f"its first attempt ({'/'.join(map(str, counts))} micro-batches, {attempt:,.0f} "
                     f"task units) costs more than 1/{ARRAY_GAIN:g} of the full count as one array row "
                     f"({run:,.0f})")


def search_spent(run_tasks: list[int], full_tasks: float) -> bool:
    """Whether the task fold's reduced runs so far (their tasks ``run_tasks``) cost as much as the
    full run of ``full_tasks`` tasks: its search stops there and the full run replaces it, so that
    a fold that is not proven costs at most that run again."""
    return sum(ENGINE_RUN + FOLD_TASK * t for t in run_tasks) >= ENGINE_RUN + full_tasks
