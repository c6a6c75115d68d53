"""The steady-state fold over array runs: explorer/fold/steady.py's proof and extrapolation, with the four
reduced simulations evaluated as arrays (arrayfold/rows.py) instead of task objects.

For a pipeline whose task graph holds only passes, pipeline transfers, gradient buckets and
optimizer steps (:func:`eligible` and arrayfold/tail.py: no ZeRO 1-2 parameter gathers, P3
priorities, compressed gradients or overlapped FSDP calls, sends on their own stream, a
one-direction schedule whose order depends on the units alone and which flushes or whose
consecutive iterations overlap — ZB-H2, measured over each class's own window, walk.window), the
reduced counts of the fold's plan (fold_plan.py) are evaluated as four columns of one compiled
program.  The same two
proofs as explorer/fold/steady.py then hold or the caller falls back to it: every task of each run is the
previous run's, early or one period late with its binding dependency (arrayfold/proof.py), the
same delta three times; and every timed measure (iteration time, per-class breakdown, busy and
end times, memory) lies on one line over the four counts.  The measures are extrapolated to the
scenario's count; bytes and tier load, which do not depend on timing, are counted for the full
iteration directly (arrayfold/traffic.py).  The search may try reduced counts up to the full one
(the task fold's plan stops earlier: its reduced runs cost engine time, these a little numpy).
"""
from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np

from ...analysis.breakdown import MemoryBreakdown
from ...analysis.measures import Measures
from ...analysis.memory import class_memory
from ...config import Scenario
from ...config.frameworks import profile as framework_profile
from ...network.groups import Network
from ...pricing.keys import compute_key
from ...pricing.program import KINDS
from ...pricing.scope import prices
from ...pricing.split import layer_split_choice
from ...schedules.registry import Window
from ...schedules.registry import get as get_schedule
from ...taskgraph.builder import IDEAL_ASPECTS, IterationBuilder
from ...taskgraph.make import iteration_builder
from ...vocabulary import CATEGORIES, CATEGORY_OF_PART
from ..cost import array_cost, array_fold_refused
from ..plan import ARRAY_PERIODS, NotFolded, planned
from ..steady import REL_TOL, FoldInfo, _extrapolate, _rebuild, reduced
from .proof import match, unit_maps
from .rows import Rows, evaluate_rows, stage_starts
from .tail import tail
from .traffic import byte_measures
from .unfold import KeptRun, folded_tasks
from .walk import breakdowns, window


@dataclass(frozen=True)
class ArrayFold:
    """A folded simulation from array runs: the measures at the scenario's count and what
    simulate.assemble needs beside them."""

    builder: IterationBuilder          # built for the smallest reduced count (m-independent facts)
    net: Network
    measures: Measures
    info: FoldInfo
    tasks: int                         # tasks of the full iteration's graph
    kept: KeptRun                      # the triple's largest run, for the task list when read
    scenario: Scenario                 # the scenario simulated (its full count)


def arrays_tasks(fold: ArrayFold):
    """The task list of a result folded over arrays (arrayfold/unfold.py), or None when the
    builder's graph is not the array run's (the caller runs the task fold instead)."""
    return folded_tasks(fold.kept, fold.builder, fold.info.delta_s, fold.info.periods,
                        _rebuild(fold.scenario, fold.builder.ideal))


def eligible(sc: Scenario) -> bool:
    """Whether the scenario's schedule, framework and options allow a graph the array runs hold
    (see module docstring); arrayfold/tail.py then asks the builder about its data-parallel tasks."""
    return ineligible(sc) is None


def ineligible(sc: Scenario, folding: bool = True) -> str | None:
    """Why the array runs cannot hold ``sc``'s graph (the first reason), or None (:func:`eligible`).
    Variants that wrap the iteration are dispatched before (variants/registry.py).  ``folding``:
    the schedule must also grow in one place (one run of the whole iteration need not:
    arrayfold/direct.py)."""
    par = sc.parallelism
    if not prices(sc):
        return ("a feature the pricing model does not price (compressed gradients, degraded nodes, "
                "a convolutional network: pricing/scope.py)")
    if sc.communication.dp_priority:
        return "P3 bucket priorities reorder the data-parallel stream"
    if par.dp_kind != "allreduce":
        return f"{par.dp_kind} data parallelism"
    sched = get_schedule(par.schedule)
    # Two directions (Chimera) as one array run only: each op still waits for one transfer and
    # sends one, and each direction's chunk runs half the units (traffic.byte_measures); a fold's
    # reduced runs would have to grow both pipelines in step.  A fused F&B (DualPipe, DualPipe-V)
    # sends two transfers, which the task space's one slot per pass does not hold.
    if not (sched.window in (Window.FLUSH, Window.OVERLAP) and (not sched.two_directions or not folding)
            and not sched.fused_pairs and sched.timed is None
            and (sched.grows_in_one_place or not folding) and sched.iterations_simulated == 1):
        return (f"the {par.schedule} schedule (the array runs hold schedules whose order depends on the "
                "units alone, flushing or overlapping iterations, without fused F&B ops; a fold, one "
                "direction)")
    if framework_profile(sc.training.framework).blocking_p2p:
        return f"{sc.training.framework}'s blocking pipeline sends"
    return None


def simulate_arrays(sc: Scenario, ideal: frozenset[str] | None = None) -> ArrayFold | None:
    """The folded simulation of ``sc`` from array runs, or None when ``sc`` is not :func:`eligible`,
    folding does not pay, or no period is proven within the plan's limit.  ``ideal``: the aspects
    of the ideal pipeline to apply (the scenario's own when None; teaching/bubble.py's steps)."""
    got = attempt_arrays(sc, ideal)
    return got if isinstance(got, ArrayFold) else None


def attempt_arrays(sc: Scenario, ideal: frozenset[str] | None = None) -> ArrayFold | NotFolded:
    """:func:`simulate_arrays`, with the reason when there is no fold."""
    fp = planned(sc)
    if isinstance(fp, NotFolded):
        return fp
    if ideal is None:
        ideal = IDEAL_ASPECTS if sc.parallelism.ideal_pipeline else frozenset()
    slices = sc.parallelism.token_slices
    base: IterationBuilder | None = None
    why = ineligible(sc)
    if why is not None:
        return NotFolded(why)
    refused = array_fold_refused(sc, fp)
    if refused is not None:
        return refused
    # The search stops before its rows would cost as much as the full count as one array row
    # (direct.py), which then replaces it (explorer/fold/cost.py).
    run_cost = array_cost(sc, [fp.micro_batches])
    unproven = NotFolded(f"no period proven before the reduced runs would cost as much as the full "
                         f"{fp.micro_batches:,} micro-batches as one array row")
    spent = 0.0
    for triple in fp.triples(ARRAY_PERIODS):
        beyond = 2 * triple[2] - triple[1]
        counts = [*triple, beyond]
        spent += array_cost(sc, counts)
        if beyond >= fp.micro_batches or spent > run_cost:
            return unproven
        if base is None:
            base = _builder(reduced(sc, counts[0]), ideal)
            if tail(base) is None:
                return NotFolded("its data-parallel tasks are not buckets the array runs hold (P3, "
                                 "compression, overlapped FSDP or buckets that slow a pass)")
        units = [c * slices for c in counts]
        R = evaluate_rows(base, units)
        if task_counts(base, R).sum() >= _full_tasks(base, R, fp.micro_batches * slices):
            return NotFolded("the reduced runs' per-iteration tasks would make them as large as the full "
                             "iteration")
        got = _fold(sc, base, R, counts, fp.micro_batches)
        if got is not None:
            return got
    return unproven


# Builders of the smallest reduced count, most recently used last: what they hold (layer split,
# chunks, priced passes and transfers) does not depend on the micro-batch count, so a scenario that
# changes only its global batch (the app's slider, a sweep over batch sizes) reuses one.
MAX_BUILDERS = 8
_BUILDERS: dict[tuple[Scenario, frozenset[str]], IterationBuilder] = {}
_BUILDERS_LOCK = threading.Lock()          # the app simulates in one thread per session


def _builder(small: Scenario, ideal: frozenset[str]) -> IterationBuilder:
    """The builder of reduced scenario ``small`` with the ideal-pipeline aspects ``ideal``
    (memoised), its layer split the estimator's (one direction: the array runs hold no DualPipe)."""
    key = (small, ideal)
    with _BUILDERS_LOCK:
        b = _BUILDERS.pop(key, None)
        if b is not None:
            _BUILDERS[key] = b
            return b
    split = layer_split_choice(small, compute_key(small), False)
    b = iteration_builder(small, Network(small, free="comm" in ideal), ideal, split.layers, split.balanced)
    with _BUILDERS_LOCK:
        while len(_BUILDERS) >= MAX_BUILDERS:
            del _BUILDERS[next(iter(_BUILDERS))]
        _BUILDERS[key] = b
    return b


def task_counts(b: IterationBuilder, R: Rows) -> np.ndarray:
    """(g,) the engine's tasks of each row: the row's, and the ZeRO-3 calls drawn under its passes
    (builder._fsdp_hidden_task; the rows hold none: arrays/unfold.copy_times)."""
    k = R.exists.sum(axis=0)
    drawn = _drawn_columns(b, R)
    if not drawn.any():
        return k
    n = R.n
    return k + (drawn[R.prog.dur][:, None] & R.exists[:n]).sum(axis=0)


def _drawn_columns(b: IterationBuilder, R: Rows) -> np.ndarray:
    """(columns,) bool: a pass of this duration-table column draws a ZeRO-3 call under it (kept on
    the builder with the parts, :func:`_parts`)."""
    return _per_column(b, R, "_array_drawn", (), bool, lambda shape: shape[5] > 0)


def _per_column(b: IterationBuilder, R: Rows, memo: str, width: tuple, dtype, value) -> np.ndarray:
    """``value`` of the pass shape (IterationBuilder._pass_shape) of every duration-table column
    the program uses, in an array of (columns, *width), kept on the builder under ``memo``."""
    prog = R.prog
    got = b.__dict__.get(memo)
    if got is None or len(got) <= int(prog.dur.max()):
        got = np.zeros((int(prog.dur.max()) + 1, *width), dtype)
        for col in np.flatnonzero(np.bincount(prog.dur)):      # (np.unique imports numpy.ma)
            s, rest = divmod(int(col), prog.nch * len(KINDS))
            local, kind = divmod(rest, len(KINDS))
            got[col] = value(b._pass_shape(s, local, KINDS[kind]))
        b.__dict__[memo] = got
    return got


def _full_tasks(b: IterationBuilder, R: Rows, units: int) -> float:
    """Tasks of the full graph on the line through the rows' task counts (a run's tasks are its
    per-iteration ones plus a fixed number per unit)."""
    k = task_counts(b, R)
    return float(k[0] + (k[1] - k[0]) * (units - R.units[0]) / (R.units[1] - R.units[0]))


def _fold(sc: Scenario, base: IterationBuilder, R: Rows, counts: list[int], m: int) -> ArrayFold | None:
    """The fold over rows ``R`` (micro-batch ``counts``: a triple and the run one period beyond),
    or None when a proof fails."""
    T = np.array([R.end[R.exists[:, r], r].max() for r in range(R.g)])
    tol = REL_TOL * max(float(T.max()), 1e-30)
    shift = R.units[1] - R.units[0]
    maps = unit_maps(R, shift)
    got = [x for r in range(3) if (x := match(R, r, r + 1, T, tol, maps)) is not None]
    if len(got) < 3:
        return None
    deltas = [x[0] for x in got]
    if max(deltas) - min(deltas) > tol:
        return None
    flat = _timed_measures(base, R)
    step = counts[1] - counts[0]
    periods = (m - counts[2]) // step
    if _extrapolate(flat[1:], 1, float(T[3])) is None:
        return None
    values = _extrapolate(flat[:3], periods, float(T[2]))
    if values is None:
        return None
    p = R.p
    it = iter(values)
    T_full = next(it)
    bds = tuple({k: next(it) for k in CATEGORIES} for _ in range(p))
    busy = tuple(next(it) for _ in range(p))
    end = tuple(next(it) for _ in range(p))
    memory = tuple(MemoryBreakdown(*(next(it) for _ in range(5))) for _ in range(p))
    units = m * sc.parallelism.token_slices
    comm, traffic, load, links = byte_measures(base, units, _sends(R, units), R.tail)
    ms = Measures(T_full, bds, busy, end, memory, comm, traffic, load, links, 0.0)
    tasks = task_counts(base, R)
    info = FoldInfo((counts[0], counts[1], counts[2]), step, periods, float(deltas[1]), int(tasks.sum()),
                    int(tasks[3] - tasks[2]))
    kept = KeptRun(reduced(sc, counts[2]), **{f: getattr(R, f)[:, 2].copy()
                                              for f in ("exists", "ready", "start", "end", "binding")},
                   late=got[1][1], shift=shift)
    return ArrayFold(base, base.net, ms, info, int(round(_full_tasks(base, R, units))), kept, sc)


def _timed_measures(b: IterationBuilder, R: Rows) -> list[list[float]]:
    """Per row, in Measures.flat's order up to memory: T (the schedule's window, walk.window),
    per-class breakdowns, busy seconds, end times and memory (params, grads, optimizer,
    activations)."""
    ends = _class_ends(R)
    T, starts = window(R, ends, b.schedule.window is Window.OVERLAP)
    bd = breakdowns(R, _parts(b, R), T, starts)
    cls, comp = R.cls(), R.compute()
    peaks = _peaks(b, R)
    # Everything but the activations' peak is the same for every count: priced once per class.
    held = _held_memory(b)
    out = []
    for r in range(R.g):
        busy = _busy_seconds(R, r, cls, comp)
        row = [float(T[r]), *bd[r].ravel().tolist(), *busy.tolist(), *ends[r].tolist()]
        for s, mb in enumerate(held):
            # class_memory adds the peak to the recompute transient: peak + transient, as here.
            row += [mb.params, mb.grads, mb.optimizer, float(peaks[r, s]) + mb.activations, mb.reserved]
        out.append(row)
    return out


def _class_ends(R: Rows) -> np.ndarray:
    """(g, p) when each class's last task ends: passes and transfers by stage blocks, then its
    buckets and step."""
    starts = stage_starts(R.prog)
    tail_starts = R.tail.starts
    n = R.n
    out = np.zeros((R.g, R.p))
    for r in range(R.g):
        live = np.where(R.exists[:, r], R.end[:, r], 0.0)
        end = np.maximum(np.maximum.reduceat(live[:n], starts), np.maximum.reduceat(live[n:2 * n], starts))
        out[r] = np.maximum(end, np.maximum.reduceat(live[2 * n:], tail_starts))
    return out


def _busy_seconds(R: Rows, r: int, cls: np.ndarray, comp: np.ndarray) -> np.ndarray:
    """(p,) compute seconds of each class in row ``r``.  A row whose durations and existence are
    read-only (an array run of every unit: arrays/rows._inputs keeps them on the builder) gives
    the same sums every time: kept on its tail for those arrays, read-only."""
    memo = R.tail.__dict__.get("_busy_seconds")
    frozen = R.g == 1 and not R.exists.flags.writeable and not R.dur.flags.writeable
    if frozen and memo is not None and memo[0] is R.exists and memo[1] is R.dur:
        return memo[2]
    mask = R.exists[:, r] & comp
    busy = np.bincount(cls[mask], R.dur[mask, r], minlength=R.p)
    if frozen:
        busy.flags.writeable = False
        R.tail.__dict__["_busy_seconds"] = (R.exists, R.dur, busy)
    return busy


def _parts(b: IterationBuilder, R: Rows) -> np.ndarray:
    """(columns, CATEGORIES) the parts of one pass of each duration-table column, as the builder's
    task carries them (IterationBuilder._pass_shape); kept on the builder with the rest of its
    m-independent facts."""
    def by_category(shape: tuple) -> np.ndarray:
        row = np.zeros(len(CATEGORIES))
        for name, v in shape[1]:
            row[CATEGORIES.index(CATEGORY_OF_PART[name])] += v
        return row
    return _per_column(b, R, "_array_parts", (len(CATEGORIES),), float, by_category)


def _held_memory(b: IterationBuilder) -> list[MemoryBreakdown]:
    """Per class, its memory without the activations' peak (class_memory with a peak of 0), the
    same for every count: kept on the builder."""
    got = b.__dict__.get("_array_memory")
    if got is None:
        got = b.__dict__["_array_memory"] = [class_memory(b, b.net, s, 0.0) for s in range(b.p)]
    return got


def _peaks(b: IterationBuilder, R: Rows) -> np.ndarray:
    """(g, p) activation bytes at each stage's peak, replaying its order as
    schedules/pipeline.peak_activations does: a forward adds its chunk's bytes, the pass completing
    the gradients (the weight-gradient pass when the backward is split) frees them.  Every stage
    of a one-direction program has as many ops: the stages replay side by side."""
    prog = R.prog
    p = R.p
    every = R.g == 1 and R.units[0] == prog.units      # every unit real: the peaks are the program's
    got = b.__dict__.get("_array_peaks")
    if every and got is not None and got[0] is prog:    # (and the builder's): kept on the builder
        return got[1]
    act = np.array([[ch.act_bytes for ch, _ in b.rank_chunks(s)] for s in range(p)])
    k = prog.kind.reshape(p, -1)
    fwd = k == KINDS.index("F")
    has_w = (k == KINDS.index("W")).any(axis=1, keepdims=True)
    release = np.where(has_w, k == KINDS.index("W"), (k == KINDS.index("B")) | (k == KINDS.index("Bi")))
    a = act[np.arange(p)[:, None], prog.local.reshape(p, -1)]
    real = R.real.reshape(p, -1, R.g)
    step = np.where(fwd, a, np.where(release, -a, 0.0))[:, :, None] * real
    live = np.cumsum(step, axis=1)                     # per stage and row, in program order
    peak = np.where(fwd[:, :, None] & real, live, 0.0).max(axis=1, initial=0.0)
    out = np.maximum(peak, 0.0).T
    if every:
        out.flags.writeable = False
        b.__dict__["_array_peaks"] = (prog, out)
    return out


def _sends(R: Rows, units: int) -> np.ndarray:
    """(2, p, pairs) transfers each class sends on each pair forward and backward over ``units``
    units: exact integers on the line through the first two rows."""
    prog = R.prog
    n = R.n
    du = R.units[1] - R.units[0]
    out = []
    for pairs in (prog.send_f, prog.send_b):
        per = []
        for r in (0, 1):
            sel = R.exists[n:2 * n, r] & (pairs >= 0)
            per.append(np.bincount(prog.stage[sel] * R.p + pairs[sel], minlength=R.p * R.p).reshape(R.p, R.p))
        out.append(np.round(per[0] + (per[1] - per[0]) * (units - R.units[0]) / du))
    return np.stack(out)
