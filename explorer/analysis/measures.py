"""The numbers a :class:`~explorer.simulate.Result` is assembled from, before any maximum over GPU
classes, ratio or sentence.

Every figure of a Result is a maximum, a ratio or a text of these measures (explorer/simulate.py,
``assemble``).  Keeping them per class and pre-maximum is what lets the steady-state fold
(explorer/fold/steady.py) extrapolate them: each is an affine function of the micro-batch count once the
schedule is periodic, whereas a maximum over classes of affine functions need not be.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..engine.records import BucketInfo, TransferInfo
from .breakdown import CATEGORIES, COMM_DIMS, MemoryBreakdown
from .memory import class_memory
from .report import link_summary
from .steady_state import ScheduledRun
from .utilisation import class_calls, class_traffic, tier_utilisation


@dataclass(frozen=True)
class Measures:
    """Per-class measures of one scheduled iteration (all seconds or bytes per iteration)."""

    T: float                                          # iteration time
    breakdowns: tuple[dict[str, float], ...]          # per class: seconds per category (sums to T)
    busy: tuple[float, ...]                           # per class: compute-stream busy seconds
    end: tuple[float, ...]                            # per class: when its last task ends
    memory: tuple[MemoryBreakdown, ...]               # per class: bytes per GPU
    comm: tuple[dict[str, float], ...]                # per class: bus bytes per dimension
    traffic: tuple[dict[str, tuple[float, ...]], ...]  # per class: dimension -> bytes per tier boundary
    link_load: dict[str, float]                       # per tier: bytes / capacity (utilisation x T)
    links: dict[str, dict]                            # the main call of each dimension (m-independent)
    pace_margin: float = 0.0                          # ScheduledRun.pace_margin (its sign must not flip)

    def flat(self) -> list[float]:
        """Every number in a fixed order (the fold's affine check and extrapolation)."""
        out = [self.T]
        for b in self.breakdowns:
            out += [b[k] for k in CATEGORIES]
        out += list(self.busy) + list(self.end)
        for mb in self.memory:
            out += [mb.params, mb.grads, mb.optimizer, mb.activations, mb.reserved]
        for c in self.comm:
            out += [c[k] for k in COMM_DIMS]
        for tr in self.traffic:
            out += [x for d in COMM_DIMS for x in tr[d]]
        out += list(self.link_load.values())
        out.append(self.pace_margin)
        return out

    def with_flat(self, values: list[float]) -> Measures:
        """The same structure holding ``values`` (in :meth:`flat`'s order)."""
        it = iter(values)
        tiers = len(next(iter(self.traffic[0].values()))) if self.traffic else 0
        n = len(self.busy)
        T = next(it)
        breakdowns = tuple({k: next(it) for k in CATEGORIES} for _ in range(n))
        busy = tuple(next(it) for _ in range(n))
        end = tuple(next(it) for _ in range(n))
        memory = tuple(MemoryBreakdown(next(it), next(it), next(it), next(it), next(it)) for _ in range(n))
        comm = tuple({k: next(it) for k in COMM_DIMS} for _ in range(n))
        traffic = tuple({d: tuple(next(it) for _ in range(tiers)) for d in COMM_DIMS} for _ in range(n))
        link_load = {k: next(it) for k in self.link_load}
        pace_margin = next(it)
        if next(it, None) is not None:
            raise ValueError("Measures.with_flat: more values than measures")
        return Measures(T, breakdowns, busy, end, memory, comm, traffic, link_load, self.links, pace_margin)

    def structure(self) -> tuple:
        """What must be equal, not extrapolated, between two micro-batch counts."""
        return (len(self.busy), tuple(self.link_load), repr(self.links))


def measure(r: ScheduledRun) -> Measures:
    """The measures of a scheduled iteration: one pass over each class's tasks, no classes x tasks."""
    b, p = r.builder, r.builder.p
    end, busy = [0.0] * p, [0.0] * p
    comm: list[dict[str, float]] = []
    for s, mine in enumerate(r.by_class):
        for t in mine:
            if t.end > end[s]:
                end[s] = t.end
            if t.stream == "compute":
                busy[s] += t.duration
        comm.append(class_comm_bytes(r, s))
    # Each class's network calls, gathered once for its traffic and the tiers' load.
    calls = [class_calls(b, s, mine) for s, mine in enumerate(r.by_class)]
    return Measures(
        T=r.T, breakdowns=tuple(r.breakdown(s) for s in range(p)), busy=tuple(busy), end=tuple(end),
        memory=tuple(class_memory(b, r.net, s) for s in range(p)), comm=tuple(comm),
        traffic=tuple({d: tuple(v) for d, v in class_traffic(b, s, r.by_class[s], calls[s]).items()}
                      for s in range(p)),
        link_load=tier_utilisation(b, r.net, r.by_class, 1.0, calls), links=link_summary(b, r.tasks),
        pace_margin=r.pace_margin)


def class_comm_bytes(r: ScheduledRun, s: int) -> dict[str, float]:
    """Bytes one GPU of class ``s`` sends per iteration, per dimension (bus bytes, nccl-tests
    convention): its chunks' per-unit calls times the units, its transfers and its buckets."""
    b = r.builder
    held = b.rank_chunks(s)
    # Every registered dimension has a count (explorer/dimensions.py); the chunks carry tp, cp, ep
    # and the ZeRO-3 gathers (dp) per unit.
    per = {**dict.fromkeys(COMM_DIMS, 0.0),
           "tp": sum(n * c.tp_bytes for c, n in held), "cp": sum(n * c.cp_bytes for c, n in held),
           "ep": sum(n * c.ep_bytes for c, n in held), "dp": sum(n * c.fsdp_bytes for c, n in held)}
    for c, n in held:              # generic edges (taskgraph/edges.py), per unit
        for k, v in c.edge_bytes:
            per[k] += n * v
    for t in r.by_class[s]:
        if t.kind == "pp" and isinstance(t.info, TransferInfo):
            per["pp"] += t.info.bytes * b.m / b.m_sim     # per iteration when two are simulated
        elif t.kind == "dp" and isinstance(t.info, BucketInfo):
            per["dp"] += t.info.bus_bytes
    return per
