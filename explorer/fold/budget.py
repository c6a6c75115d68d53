"""Work budget: how big a simulation a scenario asks for, known before simulating.

:func:`estimate` counts, from the :class:`~explorer.config.sections.Scenario` alone, the engine tasks the
task-graph builder (taskgraph/builder.py) will create and the rows a full per-layer timeline
would have.  Both are upper bounds that follow the builder's structure:

- compute: per pipeline stage one task per op of the schedule's program order — forward and
  backward per pipeline unit per virtual chunk (2·m·v; m = micro_batches x token_slices),
  backward split into B and W where the schedule splits it (zb-h1/zb-h2, DualPipe: at most 3·m),
  times the iterations the schedule simulates back to back (two for pipedream-async; both read
  from explorer/schedules/registry.py) — plus one optimizer task;
- pp: one transfer per forward or backward that crosses to another chunk (2·m·(p·v - 1));
- dp: at most MAX_BUCKET_TASKS bucket tasks per chunk, per gradient kind (dense; expert when
  ep < dp·cp) and per collective (all-reduce; or reduce-scatter and all-gather for ZeRO 1-2);
  under ZeRO-3 one overlapped gather/reduce drawing task per forward and backward instead.

fold/admit.check_budget turns a scenario beyond :data:`MAX_WORK` into a one-line ScenarioError that
names the knobs making it smaller.  The cost of a simulation grows with the tasks, through
per-stage passes over the task list in the analysis with tasks x stages, and with the layers
(the balanced layer split is searched layer by layer); the budget weighs tasks by
``1 + pp / STAGE_WEIGHT`` and adds ``LAYER_WEIGHT`` units per layer.  Measured on the 2-core
reference machine (``python -m explorer run``, wall time including start-up; see bench/fuzz.py
for the fuzzing figures):

==========================  =======  ========  ==========  =======
case (pp x micro-batches)   tasks    work      seconds     peak MB
==========================  =======  ========  ==========  =======
64 x 512 (Megatron 1T row)  130,624  146,952   1.7         260
128 x 256                   131,456  164,320   1.9         166
512 x 64                    132,608  265,216   3.3         171
64 x 1024                   262,336  295,128   3.4         301
128 x 512                   262,528  328,160   4.0         302
256 x 256                   262,912  394,368   5.1         302
==========================  =======  ========  ==========  =======

so :data:`MAX_WORK` = 300,000 keeps every allowed simulation under about 3.5 s and 300 MB.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from ..config.schema import ScenarioError
from ..config.sections import Scenario
from ..schedules import registry
from ..taskgraph.replicas import units_simulated
from ..taskgraph.techniques.fsdp import comm_zero
from ..taskgraph.techniques.pair_sync import fsdp_paired
from ..workloads.registry import workload_for, workload_spec
from .plan import plan

MAX_BUCKET_TASKS = 8        # = taskgraph.techniques.dp_buckets.MAX_BUCKET_TASKS (a test keeps them equal)
STAGE_WEIGHT = 512          # a task costs 1 + pp/512 units: the analysis passes over tasks per stage
LAYER_WEIGHT = 2            # a model layer costs about 2 task units (100,000 layers: about 2.3 s)
MAX_WORK = 300_000          # work units a simulation may take (table above: about 3.5 s, 300 MB)
KNOBS = ("training.global_batch, training.micro_batch (raise it), parallelism.pp, parallelism.vpp, "
         "parallelism.token_slices or model.layers")


@dataclass(frozen=True)
class WorkEstimate:
    """Upper bounds of the simulation's size: engine tasks, and rows of the timeline drawn layer
    by layer (what a full CSV or trace download holds)."""

    tasks: int
    timeline_rows: int
    stages: int = 1
    layers: int = 0

    @property
    def work(self) -> int:
        """The budgeted quantity: tasks weighted by the per-stage passes of the analysis, plus
        the per-layer work of building the graph (the layer split is searched layer by layer)."""
        return int(self.tasks * (1 + self.stages / STAGE_WEIGHT) + LAYER_WEIGHT * self.layers)


def estimate(sc: Scenario) -> WorkEstimate:
    """Engine tasks and per-layer timeline rows of simulating ``sc`` (upper bounds, no simulation).

    >>> from explorer.config import load, shipped_scenarios
    >>> e = estimate(load(shipped_scenarios()["teaching-8gpu"]))
    >>> e.tasks > 4 * 2 * 8          # 4 stages x (forward + backward) x 8 micro-batches, and more
    True
    """
    par = sc.parallelism
    p, v = par.pp, par.vpp
    units = sc.micro_batches * par.token_slices
    sched = registry.get(par.schedule)
    runs = sched.iterations_simulated * units                     # pipeline units simulated
    if par.stage_replicas and min(par.stage_replicas) > 0:
        # PipeDream's replicas: more iterations back to back until every replica reaches its
        # steady phase (taskgraph/replicas.units_simulated); each stage's replicas all-reduce.
        runs = units_simulated(par.stage_replicas, units, sched.iterations_simulated)
    vee = sched.placement is registry.Placement.V     # 2 chunks per rank, each running every unit
    work = runs * (2 if vee else 1)
    if sched.split_backward:              # (vpp is 1: only interleaving schedules have virtual stages)
        passes = 2 * work                 # forwards and backwards (input-gradient part) per stage
        compute = 3 * work                # ... plus a separate weight-gradient pass each at most
    else:
        passes = compute = 2 * runs * v
    chunks = sched.chunks_per_rank(v)     # model chunks per GPU: v, or both ends for DualPipe or a V
    hops = 2 * p - 2 if vee else p * v - 1            # a V's 2p chunks, its turn local
    pp_tasks = 2 * runs * max(hops, 0)                # vpp > 1 only with the interleaved schedule
    dp_group = max(sc.dp, *(par.stage_replicas or (1,))) * par.cp
    dims = (1 if dp_group > 1 else 0) + (1 if sc.model.is_moe and dp_group // par.ep > 1 else 0)
    zero = comm_zero(sc)               # FSDP2 under a pipeline communicates as ZeRO-2 (techniques/fsdp.py)
    ops = {0: 1, 1: 2, 2: 2, 3: 0}[zero]
    # ZeRO-3's shards all-reduced with the other weight copy: one task per chunk and gradient kind,
    # even with one GPU per dp group (dp_buckets.reduce_op, pair_sync.py).
    paired = zero == 3 and fsdp_paired(sc)
    # A compressed reduction adds an encode and a decode task per bucket task (dp_buckets.dp_tasks).
    coded = 3 if sc.communication.compression.active and zero in (0, 1, 2) else 1
    dp_tasks = p * chunks * dims * ops * MAX_BUCKET_TASKS * coded + (p * chunks * 2 if paired else 0)
    fsdp = p * passes if zero == 3 and dims else 0
    # A workload's overlapped edges (taskgraph/edges.py): one task per unit, chunk and (dimension,
    # phase) on the dimension's own stream (a DLRM's prefetched embedding all-to-all).
    edge_tasks = p * chunks * runs * _overlapped_edge_kinds(sc)
    tasks = p * compute + pp_tasks + dp_tasks + fsdp + edge_tasks + p   # + one optimizer step per stage

    # Timeline rows: every layer of every pass drawn as its non-zero parts, one bar each.
    fwd_parts = 1 + (par.tp > 1) + (par.cp > 1) + (par.ep > 1) + (zero == 3 and dims > 0)
    bwd_parts = fwd_parts + 1 + (sc.training.recompute != "none")   # + weight-grad, recompute
    layer_rows = runs * sc.model.layers * (fwd_parts + bwd_parts)
    edge_rows = 6 * runs                  # embedding/logits remainder bars: F, B, W of both edge chunks
    rows = layer_rows + edge_rows + (tasks - p * compute)
    return WorkEstimate(int(tasks), int(rows), p, sc.model.layers)


def _overlapped_edge_kinds(sc: Scenario) -> int:
    """Distinct (dimension, phase) of the overlapped edges of ``sc``'s layers: each is one task per
    unit and chunk.  Families the estimator prices have no edges of their own (a family with edges
    sets ``estimator=False``, explorer/workloads/family.py), so their spec is not built here."""
    if workload_for(sc.model).estimator:
        return 0
    try:
        spec = workload_spec(sc)
    except ScenarioError:
        return 0
    return len({(e.dim, e.phase) for lc in spec.kinds for e in lc.edges if e.overlap and e.size_bytes > 0})


def folded_estimate(sc: Scenario) -> WorkEstimate | None:
    """The most work the steady-state fold's reduced simulations may take (explorer/fold/plan.py:
    its limit of micro-batches, as one simulation), or None when ``sc`` does not fold."""
    fp = plan(sc)
    if fp is None:
        return None
    return estimate(replace(sc, training=replace(sc.training,
                                                 global_batch=fp.limit * sc.training.micro_batch * sc.dp)))


def joined_estimate(kinds: list[Scenario]) -> WorkEstimate:
    """The work of the kinds of replica of one scenario simulated each and joined into one task
    list (explorer/variants/replicas.py): their estimates add."""
    es = [estimate(k) for k in kinds]
    return WorkEstimate(sum(e.tasks for e in es), sum(e.timeline_rows for e in es), max(e.stages for e in es),
                        sum(e.layers for e in es))


def check_unfolded_budget(sc: Scenario) -> None:
    """Raise a ScenarioError when the full simulation of ``sc`` exceeds :data:`MAX_WORK` (a scenario
    admitted for its fold whose period could not be proven)."""
    e = estimate(sc)
    if e.work > MAX_WORK:
        refuse(sc, e, " (its steady state could not be folded)")


def refuse(sc: Scenario, e: WorkEstimate, why: str) -> None:
    par = sc.parallelism
    raise ScenarioError(
        "training.global_batch",
        f"{sc.micro_batches * par.token_slices:,} pipeline units x {par.pp * par.vpp:,} pipeline "
        f"chunks need "
        f"about {e.tasks:,} engine tasks on {par.pp:,} stages{why}, beyond the simulation budget "
        f"(tasks x (1 + pp/{STAGE_WEIGHT}) + {LAYER_WEIGHT} x model.layers <= {MAX_WORK:,}, "
        f"here {e.work:,}); "
        f"make it smaller with {KNOBS}")
