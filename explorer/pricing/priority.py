"""P3 / ByteScheduler bucket priorities (communication.dp_priority), one row at a time.

With priorities the dp stream is a non-preemptive priority queue (explorer/engine/scheduler.py: the ready
task of smallest (priority, ready time, creation order) runs next), the first layers' buckets
overtaking queued ones (techniques/dp_buckets.py: priority 1 + chunk x MAX_BUCKET_TASKS + the
bucket's layer rank), and the next iteration may start as soon as the layers its first forward
reaches are reduced, updated and gathered: analysis/steady_state._next_iteration_period (Jayarajan
et al., "Priority-based Parameter Propagation", SysML 2019), which :func:`p3_period` evaluates on
the replayed bucket end times.  A rare option (it needs a flushing schedule, ZeRO 0-2 and
overlapped reduction), so it is replayed per row in Python rather than vectorised.
"""
from __future__ import annotations

import heapq
import math

import numpy as np

from ..taskgraph.techniques.dp_buckets import MAX_BUCKET_TASKS, _per_task
from ..taskgraph.techniques.fsdp import comm_zero
from ..taskgraph.techniques.optimizer import grad_reduce_bytes, param_bytes
from .chunk_basis import F_IDX
from .pipeline import StageTimes
from .profile import RowProfile


def _tasks(prof: RowProfile, s: int, c: int, op: str) -> list[dict]:
    """The bucket tasks dp_buckets.dp_tasks makes for local chunk ``c`` of stage ``s``; priorities
    only for reductions released during the backward (P3 needs ``ready_task``)."""
    sc, net = prof.sc, prof.net
    gc = int(prof.holds[s, c])
    params, expert = prof.feat[gc, F_IDX["params"]], prof.feat[gc, F_IDX["expert_params"]]
    nbytes = grad_reduce_bytes(sc) if op != "all-gather" else param_bytes(sc)
    prioritised = op != "all-gather" and prof.overlap_reduce
    out = []
    for dim, n_params in (("dp", params), ("edp", expert)):
        total = n_params * nbytes
        if total <= 0 or net.group_size(dim, s) <= 1:
            continue
        bucket_MB = sc.communication.bucket_MB
        assert bucket_MB is not None       # filled by the defaults (config/loading.py)
        buckets = max(1, math.ceil(total / (bucket_MB * 1e6)))
        cc = net.cost(op, total / buckets, dim, s)
        tasks = min(buckets, MAX_BUCKET_TASKS)
        done = 0
        for j in range(tasks):
            k = _per_task(buckets, tasks, j)
            done += k
            out.append({"frac": done / buckets, "dur": k * cc.time_s, "dim": dim, "rank": tasks - 1 - j,
                        "groups": tasks,
                        "priority": 1 + gc * MAX_BUCKET_TASKS + (tasks - 1 - j) if prioritised else 1,
                        "share": k / buckets * n_params / max(params + expert, 1.0)})
    return out


def p3_period(prof: RowProfile, st: StageTimes, r: int) -> tuple[float, np.ndarray, np.ndarray]:
    """(iteration time, (p,) window start, (p, 3) ready time, local chunk (-1: none) and seconds of
    each stage's last bucket to end) of row ``r``."""
    p, nch = prof.p, prof.nch
    zero = comm_zero(prof.sc)
    op = "all-reduce" if zero == 0 else "reduce-scatter"
    kept = st.ops[r]
    assert kept is not None                # P3 rows are evaluated in full (StageTimes.ops)
    _, times, col, ops = kept
    start, end, clock = times.start[:, col], times.end[:, col], times.clock[:, col]
    period = 0.0
    window = np.zeros(p)
    last_bucket = np.array([[0.0, -1.0, 0.0]] * p)
    for s in range(p):
        jobs = []
        for c in range(nch):
            g_op = ops.grads[s, c]
            for t in _tasks(prof, s, c, op):
                t["ready"] = (start[g_op] + t["frac"] * (end[g_op] - start[g_op]) if prof.overlap_reduce
                              else end[ops.last[s]])
                t["chunk"] = c
                jobs.append(t)
        _serve(jobs)
        if jobs:
            t = max(jobs, key=lambda t: t["end"])        # served one at a time: the last one served
            last_bucket[s] = t["ready"], t["chunk"], t["dur"]
        gathers = _tasks(prof, s, 0, "all-gather") if zero in (1, 2) else []
        g_dur = {(t["dim"], t["rank"]): t["dur"] for t in gathers}
        g_groups = {t["dim"]: t["groups"] for t in gathers}
        first = ops.first[s]
        ready: dict[int, float] = {}
        groups = 1
        for t in (t for t in jobs if t["chunk"] == 0):
            g, groups = t["rank"], t["groups"]
            extra = prof.optimizer[s] * t["share"]
            if t["dim"] in g_groups:
                gg = min(g * g_groups[t["dim"]] // groups, g_groups[t["dim"]] - 1)
                extra += g_dur.get((t["dim"], gg), 0.0)
            ready[g] = max(ready.get(g, 0.0), t["end"] + extra)
        compute_end = clock[s]
        slice_f = (end[first] - start[first]) / groups
        restart = max([compute_end] + [rt - g * slice_f for g, rt in ready.items()])
        window[s] = start[first]
        period = max(period, restart - start[first])
    return period, window, last_bucket


def _serve(jobs: list[dict]) -> None:
    """One server, non-preemptive, smallest (priority, ready, creation order) first: sets "end"."""
    arrivals = sorted(range(len(jobs)), key=lambda i: (jobs[i]["ready"], i))
    queue: list[tuple[int, float, int]] = []
    now, k = 0.0, 0
    while k < len(arrivals) or queue:
        if not queue and jobs[arrivals[k]]["ready"] > now:
            now = jobs[arrivals[k]]["ready"]
        while k < len(arrivals) and jobs[arrivals[k]]["ready"] <= now:
            i = arrivals[k]
            heapq.heappush(queue, (jobs[i]["priority"], jobs[i]["ready"], i))
            k += 1
        _, _, i = heapq.heappop(queue)
        jobs[i]["end"] = now = now + jobs[i]["dur"]
