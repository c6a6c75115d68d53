"""The gossip or parameter-server exchange on the timeline: a ``dp`` task per GPU class.

A replica's step is simulated alone (decentral.py); the exchange is priced apart and added to the
iteration (its exposed seconds).  Without tasks of its own the Gantt and the Perfetto trace showed
the step only: a parameter-server iteration of 9.76 s drew 0.45 s of work and nothing of the 9.31 s
its push and pull take (a hunt found the trace's span short of the iteration).  The exchange is
drawn on every class's ``dp`` lane, ending with the iteration and lasting its own seconds, so
that what overlaps the step overlaps it on the chart (gossip's D-PSGD) and what the step waits
for follows it (the parameter server).
"""
from __future__ import annotations

from collections.abc import Sequence

from ...engine.records import BucketInfo
from ...engine.scheduler import Task
from ...fold.arrays.lazy import LazyTasks, resolved
from ...fold.tasks import FoldedTasks
from ...result.windows import Exchange

# What a bar of the exchange says it is (teaching/explain.py explains such bars).
EXCHANGE_PREFIX = "exchange: "


def exchange_tasks(classes: int, x: Exchange, T: float) -> list[Task]:
    """One ``dp`` task per GPU class: the exchange's seconds, ending at ``T`` (not before 0), its
    bytes what one GPU of the busiest stage sends (Exchange.sent)."""
    start = max(0.0, T - x.exchange_s)
    dur = T - start
    if dur <= 0.0:
        return []
    what = ("parameter-server push and pull" if x.kind == "parameter-server"
            else f"{x.kind} exchange with {x.peers} neighbour{'s' if x.peers != 1 else ''}")
    sent = x.sent                                          # as run --json's comm_bytes_per_gpu
    info = BucketInfo(chunk=0, bytes=sent, bus_bytes=sent, buckets=1, bucket_bytes=sent, group=x.peers,
                      algorithm=x.kind, tier="", busbw_GBps=0.0, op=EXCHANGE_PREFIX + what, dim="dp",
                      layer_rank=0, groups=1, share=1.0)
    return [Task(cls=c, stream="dp", kind="dp", duration=dur, parts=(("dp", dur),), info=info, ready=start,
                 start=start, end=T) for c in range(classes)]


def with_exchange(tasks: Sequence[Task], extra: list[Task]) -> Sequence[Task]:
    """``tasks`` followed by ``extra``, made when first read (a replica's tasks are often lazy).  A
    folded steady state (fold/tasks.FoldedTasks) is kept as it is, drawn folded without them."""
    if not extra or isinstance(tasks, FoldedTasks):
        return tasks

    def make() -> Sequence[Task]:
        base = resolved(tasks)
        return base if isinstance(base, FoldedTasks) else [*base, *extra]

    return LazyTasks(len(tasks) + len(extra), make)
