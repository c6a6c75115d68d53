"""DualPipe's fused F&B op (DeepSeek-V3 report Sec. 3.2.1, Fig. 4): the shape of one F&B task —
its parts, the communication hidden under it, FLOPs and the FSDP seconds drawn under it — for a
forward of one local chunk and a full backward of another on one class.  It depends on the two
chunks alone, not on the units: made once per (class, chunk pair) and kept in the builder's pass
cache (DeepSeek-V3's 7,000-task graph has some 1,600 F&B ops of four shapes per class)."""
from __future__ import annotations

from typing import Protocol

from ..engine.records import PassInfo
from ..engine.scheduler import Task, TaskGraph
from .chunks import COMPUTE_PARTS, ChunkWork, fuse, sum_parts
from .layout import Fused, Pass


class _Builder(Protocol):
    """What an F&B's shape reads of the builder (taskgraph/builder.py), named here so that this
    module does not import the builder that imports it."""

    _pass_cache: dict[tuple, tuple]

    def chunk_of(self, s: int, c: int) -> ChunkWork: ...

    def _sm_contention(self, hidden_s: float) -> float: ...

    def _fsdp_hidden_task(self, g: TaskGraph, s: int, tid: int, ps: Pass, ch: ChunkWork,
                          hidden: float) -> None: ...


def fused_shape(b: _Builder, s: int, lf: int, lb: int) -> tuple:
    """(parts, hidden communication, FLOPs, FSDP seconds under it) of an F&B on class ``s`` of
    local chunks ``lf`` (forward) and ``lb`` (backward), memoised on ``b``."""
    key = (s, lf, lb, "F&B")
    got = b._pass_cache.get(key)
    if got is not None:
        return got
    chf, chb = b.chunk_of(s, lf), b.chunk_of(s, lb)
    fsdp = ("dp", chf.fsdp_hidden[0] + chb.fsdp_hidden[1])
    parts = fuse(chf.fwd_parts, chb.bwd_parts, (*chf.hidden_f, *chb.hidden_b, fsdp))
    exposed = dict(parts)     # below: what ran under the other's compute (DeepSeek-V3 Fig. 4)
    comm_all = sum_parts(*((k, v) for k, v in chf.fwd_parts + chb.bwd_parts if k not in COMPUTE_PARTS),
                         *chf.hidden_f, *chb.hidden_b)
    hidden = tuple((k, v - exposed.get(k, 0.0)) for k, v in comm_all if v - exposed.get(k, 0.0) > 0)
    flops = chf.flops_f + chb.flops_b + chb.flops_w
    out = sum(v for k, v in parts if k not in COMPUTE_PARTS)     # SM contention: all but the exposed
    slow = b._sm_contention(max(0.0, sum(v for _, v in comm_all) + fsdp[1] - out))
    parts = parts + ((("compute", slow),) if slow > 0 else ())
    got = b._pass_cache[key] = (parts, hidden, flops, fsdp[1])
    return got


def fused_task(b: _Builder, g: TaskGraph, s: int, step: Fused, deps: list) -> int:
    """Add DualPipe's F&B of ``step`` on class ``s`` to ``g`` after ``deps``: one task for a forward
    and another unit's full backward; its id.  Its shape, duration and forward chunk are kept with
    fused_shape's (what every F&B of the pair reads: DeepSeek-V3 has some 1,600 of them)."""
    f, bk = step.f, step.b
    key = (s, f.local, bk.local, "F&B task")
    shape = b._pass_cache.get(key)
    if shape is None:
        parts, hidden, flops, fsdp = fused_shape(b, s, f.local, bk.local)
        chf = b.chunk_of(s, f.local)
        shape = b._pass_cache[key] = (parts, hidden, flops, fsdp, sum(x for _, x in parts), chf)
    parts, hidden, flops, fsdp, dur, chf = shape
    info = PassInfo(f.mb, f.local, 0, chf.comm, (), flops, hidden,
                    f"F mb {f.mb} dir {f.lane} + B mb {bk.mb} dir {bk.lane}", bk.mb, bk.local)
    tasks = g.tasks                      # TaskGraph.add inlined
    tasks.append(Task(s, "compute", "F&B", dur, deps, 0, parts, info))
    tid = len(tasks) - 1
    if fsdp > 0:
        b._fsdp_hidden_task(g, s, tid, f, chf, fsdp)
    return tid
