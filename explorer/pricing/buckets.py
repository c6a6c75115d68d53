"""Gradient buckets and ZeRO 1-2 parameter gathers of every stage, as dp_buckets.dp_tasks makes them.

Per held chunk and kind of gradient (dense over the dp group, expert over the edp group), the
builder cuts ``params x bytes`` into ``ceil(total / bucket_MB)`` buckets (one under ZeRO-3, which
reduces layer by layer instead) and merges them into at most MAX_BUCKET_TASKS tasks, task j taking
``buckets // tasks`` buckets plus one of the remainder, ready once the pass has produced its
buckets (fraction ``done / buckets``); gradients travel in the framework's reduction dtype,
gathered parameters in bf16 (Li et al. VLDB 2020 Sec. 3.2.3; Rajbhandari et al. SC20).  The same
arithmetic, over arrays of stages x chunks; one collective priced per distinct bucket size and
group shape.  Two-direction schedules add to each reduce bucket task the all-reduce with the
stage's other weight copy (taskgraph/techniques/pair_sync.py), priced per stage (the pair of
pipeline ranks s and p-1-s sits differently on the fabric for every s); under ZeRO-3, whose
reduce-scatters run inside the passes, that all-reduce of each chunk's accumulated shard is the
only task (dp_buckets.reduce_op).
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from ..config import Scenario
from ..taskgraph.techniques.dp_buckets import MAX_BUCKET_TASKS, reduce_op
from ..taskgraph.techniques.fsdp import comm_zero
from ..taskgraph.techniques.optimizer import grad_reduce_bytes, param_bytes
from ..taskgraph.techniques.pair_sync import PAIR, PAIR_OP, pair_bytes, pair_synced
from .keys import RowNetwork, memo_table

JOBS = 2 * MAX_BUCKET_TASKS          # bucket tasks of one chunk: dense, then expert gradients
_J = np.arange(MAX_BUCKET_TASKS)


Arrays4 = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]


@dataclass(frozen=True)
class _Plan:
    """The buckets of one kind of gradient (or the gathers) over the stages x held chunks: what does
    not depend on the links' speeds, so rows that differ only in a bandwidth or a latency share it
    and price its few distinct calls on their own network."""

    classes: np.ndarray              # the stage classes it was made for (identity checked on a hit)
    live: np.ndarray                 # (p, nch) a bucket to reduce: parameters and a group of > 1
    buckets: np.ndarray              # (p, nch) buckets per held chunk (0 where not live)
    calls: tuple[tuple[int, float], ...]   # distinct (representative stage, bucket bytes)
    index: np.ndarray                # (p, nch) the call of each held chunk (0 where not live)
    k: np.ndarray | None             # (p, nch, MAX_BUCKET_TASKS) buckets per task; None for gathers
    frac: np.ndarray | None          # (p, nch, MAX_BUCKET_TASKS) readiness fraction of each task


_PLANS = memo_table()


def _plan(sc: Scenario, net: RowNetwork, n_params: np.ndarray, dim: str, nbytes: float,
          classes: np.ndarray, reps: tuple[int, ...], tasks: bool, pkey: int, paired: bool = False) -> _Plan:
    """The bucket plan of ``n_params`` parameters per held chunk on ``dim``'s groups, memoised on
    the parameters' interned key ``pkey``, the stage classes (shared by every network of one
    placement: pricing/stages.py) and the options the cut reads.  ``paired``: the buckets are also
    all-reduced with the other weight copy, so a group of one GPU still has buckets (dp_tasks)."""
    zero3 = sc.parallelism.zero == 3
    key = (pkey, dim, id(classes), nbytes, zero3, sc.communication.bucket_MB, tasks, paired)
    got = _PLANS.get(key)
    if got is not None and got.classes is classes:
        return got
    total = n_params * nbytes
    groups = np.array([net.group_size(dim, r) for r in reps])[classes]
    live = (total > 0) & ((groups[:, None] > 1) | paired)
    if zero3:
        buckets = np.ones_like(total)
    else:
        bucket_MB = sc.communication.bucket_MB
        assert bucket_MB is not None                 # filled by the defaults (config/loading.py)
        buckets = np.maximum(1.0, np.ceil(total / (bucket_MB * 1e6)))
    size = np.where(live, total / buckets, 0.0)
    calls: dict[tuple[int, float], int] = {}
    cls = np.repeat(classes, total.shape[1]).tolist()
    flat = size.ravel().tolist()
    index = np.zeros(total.size, np.int64)
    for i in np.flatnonzero(live.ravel()).tolist():
        index[i] = calls.setdefault((reps[cls[i]], flat[i]), len(calls))
    k = frac = None
    if tasks:
        b, t = buckets[..., None], np.minimum(buckets, MAX_BUCKET_TASKS)[..., None]
        k = np.where(_J < t, b // t + (_J < b % t), 0.0)          # dp_buckets._per_task
        frac = np.where(live[..., None], np.cumsum(k, axis=-1) / b, 0.0)
        k = np.where(live[..., None], k, 0.0)
    got = _PLANS[key] = _Plan(classes, live, np.where(live, buckets, 0), tuple(calls),
                              index.reshape(total.shape), k, frac)
    for a in (got.live, got.buckets, got.index, got.k, got.frac):
        if a is not None:
            a.flags.writeable = False            # shared by every row of the plan, as network.py's members
    return got


def _tasks(sc: Scenario, net: RowNetwork, n_params: np.ndarray, dim: str, op: str, nbytes: float,
           classes: np.ndarray, reps: tuple[int, ...], pkey: int, tasks: bool = True,
           pair_only: bool = False) -> tuple[np.ndarray | None, np.ndarray | None, np.ndarray, np.ndarray]:
    """(p, nch, MAX_BUCKET_TASKS) readiness fraction and seconds of each task, (p, nch) buckets and
    seconds of one bucket, for ``n_params`` parameters per held chunk on ``dim``'s groups (stages
    of one placement class share their group shapes: one call priced per class and size).
    ``tasks`` False: the buckets and their seconds only (the gathers, which are not merged into
    tasks), the first two arrays None.  A reduction of a two-direction schedule adds each
    bucket's all-reduce with the other weight copy to its seconds (pair_sync.py); ``pair_only``
    (ZeRO-3, whose reduce-scatters run inside the passes): those seconds alone."""
    if not n_params.any():
        # No parameters of this kind (a dense model's expert half): no task, nothing to price.
        z = np.zeros(n_params.shape)
        return np.zeros((*z.shape, MAX_BUCKET_TASKS)), np.zeros((*z.shape, MAX_BUCKET_TASKS)), z, z
    paired = (pair_synced(sc, op) or pair_only) and net.group_size(PAIR, 0) > 1
    plan = _plan(sc, net, n_params, dim, nbytes, classes, reps, tasks, pkey, paired)
    cost = net.cost
    if pair_only:
        one = np.zeros(plan.live.shape)
    else:
        priced = np.array([cost(op, size, dim, rep).time_s for rep, size in plan.calls] or [0.0])
        one = np.where(plan.live, priced[plan.index], 0.0)
    if paired:
        one = one + _pair_seconds(net, dim, plan, classes, reps)
    if not tasks:
        return None, None, plan.buckets, one
    assert plan.frac is not None and plan.k is not None             # a plan made with tasks has both
    return plan.frac, plan.k * one[..., None], plan.buckets, one


def _pair_seconds(net: RowNetwork, dim: str, plan: _Plan, classes: np.ndarray,
                  reps: tuple[int, ...]) -> np.ndarray:
    """(p, nch) seconds of one bucket's all-reduce with the stage's other weight copy, as dp_tasks
    prices it: the bucket's 1/n shard (pair_sync.pair_bytes) over the pair group of stage s."""
    n = np.array([net.group_size(dim, r) for r in reps])[classes]
    out = np.zeros(plan.live.shape)
    flat = [size for _, size in plan.calls]
    cost = net.cost
    for s, ch in zip(*np.nonzero(plan.live), strict=True):
        size = flat[plan.index[s, ch]] if flat else 0.0
        out[s, ch] = cost(PAIR_OP, pair_bytes(size, int(n[s])), PAIR, int(s)).time_s
    return out


def dp_work(sc: Scenario, net: RowNetwork, params: np.ndarray, expert: np.ndarray, gather_overlap: bool,
            dims: Mapping[str, tuple[np.ndarray, tuple[int, ...]]], pkey: int) -> Arrays4:
    """Per stage: readiness and seconds of the reduce bucket tasks of its chunks ((p, nch*JOBS)),
    when each chunk's first forward may start ((p, nch): its gathers done under ZeRO 1-2 with
    overlap, IterationBuilder._gathers_at_start) and the gathers after the step ((p,)).  ``dims``:
    per dimension the stages' classes and their representatives (pricing/stages.py); ``pkey``: the
    interned key of ``params`` and ``expert`` (profile.Layout.pkey), on which the bucket plans are
    memoised."""
    p, nch = params.shape
    zero = comm_zero(sc)           # FSDP2 under a pipeline reduces once per step, as ZeRO-2
    frac = np.zeros((p, nch, JOBS))
    dur = np.zeros((p, nch, JOBS))
    gates = np.zeros((p, nch))
    trailing = np.zeros(p)
    op = reduce_op(sc)
    if op is None:                    # FSDP reduces layer by layer (techniques/fsdp.py), no buckets
        return frac.reshape(p, -1), dur.reshape(p, -1), gates, trailing
    gather = np.zeros((p, nch))
    has_gather = np.zeros((p, nch), bool)
    for half, (dim, n_params) in enumerate((("dp", params), ("edp", expert))):
        classes, reps = dims[dim]
        # ZeRO-3 under a two-direction schedule: the accumulated shards' pair all-reduce alone.
        f, d, _, _ = _tasks(sc, net, n_params, dim, op, grad_reduce_bytes(sc), classes, reps, pkey,
                            pair_only=zero == 3)
        frac[..., half * MAX_BUCKET_TASKS:(half + 1) * MAX_BUCKET_TASKS] = f
        dur[..., half * MAX_BUCKET_TASKS:(half + 1) * MAX_BUCKET_TASKS] = d
        if zero in (1, 2):
            _, _, buckets, one = _tasks(sc, net, n_params, dim, "all-gather", param_bytes(sc), classes, reps,
                                        pkey, tasks=False)
            gather += buckets * one
            has_gather |= buckets > 0
    if gather_overlap:
        # Issued at the start on the dp stream, chunk by chunk: a chunk's first forward waits for
        # its own gathers, which follow those of the chunks before it.
        gates = np.where(has_gather, np.cumsum(gather, axis=1), 0.0)
    else:
        trailing = gather.sum(axis=1)
    return frac.reshape(p, -1), dur.reshape(p, -1), gates, trailing
