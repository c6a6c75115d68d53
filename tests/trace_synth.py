"""A Kineto-shaped trace of a simulated iteration (test data for import-trace and its fit).

One rank: the simulated slowest GPU class, each Gantt lane on its own CPU thread, written as
PyTorch's profiler writes a CPU-only trace — ``ProfilerStep#N`` windows, compute as ``cpu_op``
events, collectives as ``c10d::`` ops (send for pp, all-to-all for ep, all-reduce otherwise), each
naming its process group, whose ranks ``distributedInfo.pg_config`` lists (rank 0's group along
the dimension, in the scenario's placement),
the optimizer under torch's ``Optimizer.step#`` annotation and recomputation under a
``checkpoint`` annotation.  The iteration repeats ``steps`` times back to back.
"""
from __future__ import annotations

import gzip
import json
from pathlib import Path

from explorer.result.timeline import build_timeline
from explorer.simulate import simulate
from explorer.traces.compare import layout_of

OP_OF = {"pp": "c10d::send", "ep": "c10d::alltoall_"}


def events_of(sc, steps: int = 2, drop_lanes: tuple[str, ...] = (),
              receives: bool = True) -> tuple[list[dict], float]:
    """The trace events of ``steps`` iterations of ``sc``'s slowest class and its iteration (s);
    with ``receives``, also the transfers of other classes its compute waits for, as recvs."""
    res = simulate(sc)
    tl = build_timeline(res.tasks, tuple(c.label for c in res.classes), max_segments=200_000)
    col = tl.columns
    T = res.iteration_time_s
    us = 1e6
    out: list[dict] = []
    for n in range(steps):
        t0 = n * T * us
        out.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{n + 1}", "pid": 1,
                    "tid": 1, "ts": t0, "dur": T * us})
        for i, cls in enumerate(col["gpu_class"]):
            lane, kind = col["lane"][i], col["kind"][i]
            if cls != res.breakdown_class or lane in drop_lanes:
                continue
            s, e = col["start_s"][i] * us + t0, col["end_s"][i] * us + t0
            ev = {"ph": "X", "cat": "cpu_op", "pid": 1, "tid": f"lane-{lane}", "ts": s, "dur": e - s}
            if lane == "compute":
                if kind == "optimizer":
                    out.append({**ev, "cat": "user_annotation", "name": "Optimizer.step#AdamW.step"})
                elif kind == "recompute":
                    out.append({**ev, "cat": "user_annotation", "name": "checkpoint_recompute"})
                out.append({**ev, "name": "aten::mm"})
            elif lane != "offload":
                out.append({**ev, "name": OP_OF.get(lane, "c10d::allreduce_"),
                            "args": {"Process Group Name": lane}})
        # What the class receives: the other classes' transfers its compute waits for, as the
        # rank's blocking recv on a thread of their own.
        tasks = res.tasks if receives else ()
        for t in tasks:
            if t.cls != res.breakdown_class or t.stream != "compute":
                continue
            for j, _ in t.deps:
                d = tasks[j]
                mine = d.cls == res.breakdown_class
                if not mine and d.stream not in ("compute", "offload") and d.end > d.start:
                    out.append({"ph": "X", "cat": "cpu_op", "pid": 1, "tid": f"recv-{d.stream}",
                                "ts": d.start * us + t0, "dur": (d.end - d.start) * us,
                                "name": "c10d::recv_" if d.stream == "pp" else "c10d::allreduce_",
                                "args": {"Process Group Name": d.stream}})
    return out, T


def process_groups(sc) -> list[dict]:
    """``distributedInfo.pg_config``: rank 0's group along each dimension of the layout."""
    lay = layout_of(sc)
    return [{"pg_name": d, "ranks": [k * lay.strides[d] for k in range(n)]}
            for d, n in lay.sizes.items() if n > 1]


def write_trace(path: Path, sc, steps: int = 2, drop_lanes: tuple[str, ...] = (),
                receives: bool = True) -> float:
    """Write the trace as gzipped JSON at ``path``; returns the simulated iteration time (s)."""
    events, T = events_of(sc, steps, drop_lanes, receives)
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        json.dump({"traceEvents": events, "distributedInfo": {"rank": 0, "world_size": 1,
                                                              "pg_config": process_groups(sc)}}, fh)
    return T
