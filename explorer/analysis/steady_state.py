"""The iteration window: build and run the task graph, then find where one iteration starts on
each GPU class and how long it lasts, as the schedule's registry entry says its iterations meet
(schedules/registry.py ``Window``) or, with P3 bucket priorities, when the next iteration can start.
A never-flushing pipeline's period is also at least every stream's busy time per iteration.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from ..config import Scenario
from ..engine.records import BucketInfo, PassInfo, StepInfo
from ..engine.scheduler import Task, run
from ..network.groups import Network
from ..schedules.registry import Window
from ..taskgraph.builder import IDEAL_ASPECTS, IterationBuilder
from ..taskgraph.make import iteration_builder
from ..taskgraph.techniques.fsdp import comm_zero
from ..workloads.registry import workload_for
from .breakdown import class_breakdown, group_by_class

# The breakdown category of the time a stream sets the pace with beyond the compute window: the
# compute stream's excess is its optimizer step (which the window, between backwards, never holds).
PACE_CATEGORY = {"compute": "optimizer", "pp": "pp", "dp": "dp"}
# (A stage's PipeDream replicas run on streams ``compute~k`` and ``pp~k``, taskgraph/replicas.py:
# their category is their base stream's, the part before "~".)


def pace_category(stream: str) -> str:
    """The breakdown category of ``stream``'s time beyond the window: :data:`PACE_CATEGORY`, and a
    workload's own communication stream its dimension (a DLRM's ``emb``, a GNN's ``gnn``: each is a
    reported dimension and a category; with ``communication.dp_priority`` their streams can outlast
    the window, which had raised KeyError)."""
    base = stream.split("~")[0]
    return PACE_CATEGORY.get(base, base)


@dataclass(frozen=True)
class ScheduledRun:
    """One scheduled task graph and its iteration window (what every analysis reads)."""

    builder: IterationBuilder
    net: Network
    tasks: list[Task]
    by_class: list[list[Task]]       # tasks grouped by GPU class once (no classes x tasks loops)
    T: float                         # iteration time
    window: list[float]              # per class: where its iteration starts
    enders: list[Task]               # the tasks that end last, in task order
    measured: float | None = None    # the window's length when a stream's busy time set T beyond it
    pace: str = "bubble"             # ... and the breakdown category charged with T - measured
    # A never-flushing pipeline: its busiest stream's seconds per iteration minus the compute window
    # (> 0: that stream sets T).  The fold keeps the side of this maximum fixed (explorer/fold/steady.py).
    pace_margin: float = 0.0

    def breakdown(self, s: int) -> dict[str, float]:
        """Seconds of the iteration per category on class ``s`` (sums to ``T``): the compute stream
        over the window, plus — when a slower stream sets the period (PipeDream's steady state) —
        the time beyond the window charged to that stream's category."""
        if self.measured is None or self.T <= self.measured:
            return class_breakdown(self.tasks, s, self.T, self.window[s], self.by_class[s], self.enders)
        out = class_breakdown(self.tasks, s, self.measured, self.window[s], self.by_class[s], self.enders)
        out[self.pace] += self.T - self.measured
        return out


def schedule_iteration(sc: Scenario, ideal: frozenset[str] | None = None,
                       builder: IterationBuilder | None = None) -> ScheduledRun:
    """Build and run the task graph of ``sc`` (with the given ideal-pipeline aspects; the
    scenario's own ``ideal_pipeline`` when None) and find its iteration window, paced by the
    host where it prepares the units (:func:`host_paced`).  ``builder``: one already made for
    ``sc`` (the fold's reduced runs share their m-independent parts,
    IterationBuilder.for_scenario), else a new one."""
    return host_paced(sc, _scheduled(sc, ideal, builder))


def host_paced(sc: Scenario, run: ScheduledRun) -> ScheduledRun:
    """``run`` paced by the host where it prepares every unit beside the GPU (a GNN's pipelined
    CPU sampler and host-to-GPU copy, workloads/family.HostInput): in steady state the host makes
    one iteration's m units per period, running through the GPU's whole step — its communication
    and optimizer included — so the period is at least m x its time per unit (SALIENT, Kaler et
    al. MLSys 2022, Sec. 4: batch preparation and transfer pipelined with training; the slowest
    of the three stages sets the pace).  The GPU's wait beyond its own window is charged to
    ``compute`` (the GPU idles on its stream, as a loop that does not pipeline waits inside it).
    The margin (host time - window) is the run's ``pace_margin``, whose sign a fold keeps."""
    hook = workload_for(sc.model).host_input
    got = hook(sc) if hook is not None else None
    if got is None or not got.pipelined or run.measured is not None:
        return run
    busy = run.builder.m * got.per_unit_s
    if busy <= run.T:
        return replace(run, pace_margin=busy - run.T)
    return replace(run, T=busy, measured=run.T, pace="compute", pace_margin=busy - run.T)


def _scheduled(sc: Scenario, ideal: frozenset[str] | None, builder: IterationBuilder | None) -> ScheduledRun:
    """:func:`schedule_iteration` before the host's pace."""
    if builder is None:
        if ideal is None:
            ideal = IDEAL_ASPECTS if sc.parallelism.ideal_pipeline else frozenset()
        builder = iteration_builder(sc, Network(sc, free="comm" in ideal), ideal)
    net = builder.net
    graph = builder.build()
    makespan = run(graph)
    tasks = graph.tasks
    p, m = builder.p, builder.m
    by_class = group_by_class(tasks, p)
    # Schedules whose consecutive iterations overlap (ZB-H2 with the optimizer's global sync
    # bypassed, Qi et al. ICLR 2024 Sec. 4) repeat every max-over-stages *span*; the others flush,
    # so an iteration is the whole makespan.
    window_kind = builder.schedule.window
    if window_kind is Window.ASYNC:
        # Steady state (Narayanan et al., PipeDream, SOSP 2019) of two back-to-back iterations:
        # on stage s, one period spans m backwards, ending at B_k and B_(k+m) with
        # k = m-1-(p-1-s), the last backward of the first iteration's steady phase, so that
        # neither end lies in a warm-up or in the final drain (which a third iteration would fill).
        ends = [{i.micro_batch: t.end for t in mine
                 if t.kind == "backward" and isinstance(i := t.info, PassInfo)} for mine in by_class]
        ks = [m - 1 - (p - 1 - s) for s in range(p)]
        if min(ks) >= 0:
            first = [ends[s][ks[s]] for s in range(p)]
            return _async_run(builder, net, tasks, by_class, first, makespan,
                              max(_replicated_period(ends[s], ks[s], m, _replicas(builder, s))
                                  for s in range(p)))
        # Fewer micro-batches than stages: no steady phase; from the first iteration's last backward.
        first = [ends[s][m - 1] for s in range(p)]
        last = [max(t.end for t in mine) for mine in by_class]
        return _async_run(builder, net, tasks, by_class, first, makespan,
                          max(last[s] - first[s] for s in range(p)))
    if sc.communication.dp_priority:
        T, window = _next_iteration_period(builder, by_class)
        # The next iteration starts while the last buckets are still in flight, so one period
        # no longer contains one iteration's traffic: in steady state the dp stream must still
        # carry one iteration's buckets per period or its queue grows without bound (P3's speed-up
        # ends where the network is the bottleneck: Jayarajan et al., SysML 2019, Sec. 5), the bound
        # _async_run applies to PipeDream.  Without it a 100 Gb/s WAN read 114 % busy.
        enders = [t for t in tasks if t.end == makespan]
        busy, stream = max((b, st) for mine in by_class for st, b in stream_busy(builder, mine).items())
        if busy > T:
            return ScheduledRun(builder, net, tasks, by_class, busy, window, enders, T,
                                pace_category(stream), busy - T)
        return ScheduledRun(builder, net, tasks, by_class, T, window, enders, pace_margin=busy - T)
    elif window_kind is not Window.FLUSH:
        first = [min((t.start for t in mine if t.stream == "compute"), default=0.0) for mine in by_class]
        last = [max(t.end for t in mine) for mine in by_class]
        T = max(last[s] - first[s] for s in range(p))
        window = first
    else:
        T, window = makespan, [0.0] * p
    enders = [t for t in tasks if t.end == makespan]
    return ScheduledRun(builder, net, tasks, by_class, T, window, enders)


def _async_run(builder: IterationBuilder, net: Network, tasks: list[Task], by_class: list[list[Task]],
               first: list[float], makespan: float, measured: float) -> ScheduledRun:
    """A never-flushing pipeline's run: its period is the compute window ``measured`` or, when
    longer, the busiest stream of any stage per iteration (``stream_busy``), whose excess the
    breakdown charges to that stream."""
    enders = [t for t in tasks if t.end == makespan]
    busy, stream = max((b, st) for s, mine in enumerate(by_class)
                       for st, b in replica_busy(builder, mine, _replicas(builder, s)).items())
    if busy <= measured:
        return ScheduledRun(builder, net, tasks, by_class, measured, first, enders,
                            pace_margin=busy - measured)
    return ScheduledRun(builder, net, tasks, by_class, busy, first, enders, measured,
                        pace_category(stream), busy - measured)


def _replicas(b: IterationBuilder, s: int) -> int:
    """PipeDream replicas of stage ``s`` (parallelism.stage_replicas; 1 without)."""
    reps = b.sc.parallelism.stage_replicas
    return reps[s] if reps else 1


def _replicated_period(ends: dict[int, float], k: int, m: int, r: int) -> float:
    """One iteration's period on a stage from its backwards' ends: B_(k+m) - B_k, or with ``r``
    replicas taking the micro-batches in turn (PipeDream's round robin, taskgraph/replicas.py) and m
    not a multiple of r, the mean of it over the r backwards ending at B_k.  Then B_k and B_(k+m) fall
    on different replicas, whose phases differ (pipedream-vgg16 at 16 micro-batches on 15 replicas:
    a faster network read 37 % slower); over one turn of the replicas each replica's own period
    counts once, and the mean is the stage's steady-state period (each replica runs its
    micro-batches r apart, so B_(i+m) - B_i summed over r consecutive i is r periods)."""
    if m % r == 0:                  # B_k and B_(k+m) on one replica
        return ends[k + m] - ends[k]
    starts = [i for i in range(k - r + 1, k + 1) if i >= 0]
    return sum(ends[i + m] - ends[i] for i in starts) / len(starts)


def replica_busy(b: IterationBuilder, mine: list[Task], r: int) -> dict[str, float]:
    """:func:`stream_busy` of a stage with ``r`` PipeDream replicas, per base stream (``compute~3``
    counts towards ``compute``): each replica's share of the per-unit work is the mean over the
    replicas — in steady state the round robin gives each m / r micro-batches an iteration, while the
    iterations simulated give some replicas one more than others (16 micro-batches on 15 replicas) —
    plus the once-per-iteration tasks (gradient buckets, the optimizer step), which every replica
    runs and the graph draws on replica 0's streams.  Where the simulated micro-batches give every
    replica as many (and without replicas), stream_busy itself: each stream is then a replica's
    steady state, the pass that a stage's overlapped buckets slow (dp_buckets) on the one that has it."""
    if b.m_sim % r == 0:
        return stream_busy(b, mine)
    per_unit = b.m / b.m_sim
    out: dict[str, float] = {}
    for t in mine:
        once = isinstance(t.info, (BucketInfo, StepInfo))
        base = t.stream.split("~")[0]
        out[base] = out.get(base, 0.0) + (t.duration if once else t.duration * per_unit / r)
    return out


def stream_busy(b: IterationBuilder, mine: list[Task]) -> dict[str, float]:
    """Busy seconds per iteration of each stream of one GPU class, for a schedule that simulates
    ``iterations_simulated`` iterations back to back: the per-unit tasks (passes, pipeline
    transfers, overlapped FSDP calls) count ``m / m_sim`` of their total; the once-per-graph tasks
    (gradient buckets, parameter gathers, the optimizer step) are one iteration's.

    In steady state every stream must keep up, so a never-flushing pipeline's period is at least
    the largest of these over stages and streams: the slowest stage (and stream) sets PipeDream's
    steady-state throughput (Narayanan et al., "PipeDream: Generalized Pipeline Parallelism for DNN
    Training", SOSP 2019, Sec. 3)."""
    per_unit = b.m / b.m_sim
    out: dict[str, float] = {}
    for t in mine:
        once = isinstance(t.info, (BucketInfo, StepInfo))
        out[t.stream] = out.get(t.stream, 0.0) + (t.duration if once else t.duration * per_unit)
    return out


def _next_iteration_period(b: IterationBuilder, by_class: list[list[Task]]) -> tuple[float, list[float]]:
    """Steady-state iteration time with P3-style bucket priorities (Jayarajan et al., "Priority-based
    Parameter Propagation", SysML 2019; ByteScheduler, SOSP 2019): the next iteration's first
    forward on a stage may start as soon as the layers it reaches first are updated, while later
    buckets are still in flight.  Its forward over the chunk's G bucket groups runs contiguously
    from S', group g (first layers = 0) at S' + g*F/G, so S' = max_g(ready_g - g*F/G), where
    ready_g is when group g's gradients are reduced, its slice of the optimizer step is done and —
    for ZeRO 1-2 — its parameters are gathered back.  Each stage repeats every S' - S, S its first
    forward; the iteration is the slowest stage's period."""
    sc, p = b.sc, b.p
    period, window = 0.0, [0.0] * p
    for s in range(p):
        mine = by_class[s]
        # The optimizer step and (ZeRO 1-2) the parameter gathers as the tasks charged them.
        opt = next(t.duration for t in mine if t.kind == "optimizer")
        buckets = [(t, i) for t in mine if isinstance(i := t.info, BucketInfo) and i.chunk == 0]
        gathers = {(i.dim, i.layer_rank): t.duration for t, i in buckets if i.op == "all-gather"}
        gather_groups = {i.dim: i.groups for _, i in buckets if i.op == "all-gather"}
        first_f = min((t for t in mine if t.kind == "forward"), key=lambda t: t.start)
        start = first_f.start
        ready: dict[int, float] = {}
        groups = 1
        for t, i in buckets:
            if i.op != "all-gather":
                g, groups = i.layer_rank, i.groups
                extra = opt * i.share
                if comm_zero(sc) in (1, 2) and i.dim in gather_groups:
                    # The gather of the parameters of the same layers: when gradients are reduced
                    # in fp32 (frameworks.py) they fill more buckets than the bf16 parameters, so
                    # the reduce group's position maps proportionally onto the gather groups.
                    gg = min(g * gather_groups[i.dim] // groups, gather_groups[i.dim] - 1)
                    extra += gathers.get((i.dim, gg), 0.0)
                ready[g] = max(ready.get(g, 0.0), t.end + extra)
        compute_end = max(t.end for t in mine if t.stream == "compute" and t.kind != "optimizer")
        slice_f = first_f.duration / groups
        restart = max([compute_end] + [r - g * slice_f for g, r in ready.items()])
        window[s] = start
        period = max(period, restart - start)
    return period, window
