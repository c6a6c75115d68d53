"""Replicas that are not alike: stragglers, simulated as extra GPU classes.

Without stragglers every pipeline replica runs the same schedule, so one GPU class per stage
stands for all of them (DESIGN.md, "Symmetry").  A straggler (``cluster.stragglers``) breaks that
symmetry for its replica only: its TP/CP group waits for it at every collective, so its whole
stage in that replica runs ``slowdown`` times slower, and that replica's pipeline stretches.  The
other replicas are still identical to one another.  So the iteration is simulated once per
*variant* — a kind of replica — never once per GPU:

- ``straggler replica``: ``count // pp`` replicas with every stage slow (usually none), and one
  replica whose last ``count mod pp`` stages are slow (the worst placement of that many slow
  GPUs: each slows a different stage; a slow GPU beyond one per stage changes nothing);
- the rest, at speed.

Data-parallel collectives join one member of every replica, so each gradient bucket starts when
the slowest replica has produced it (a collective waits for its last member; Llama 3 report,
arXiv 2407.21783, Sec. 3.3.4).  Every replica becomes ready no earlier than at speed, so the
slowest variant's own simulation *is* the schedule of every bucket and of the optimizer step after
it: the fast replicas' classes get those tasks at the slowest variant's times, and the gap
before them is their wait (reported per variant as ``wait_s``).  The iteration is the slowest
variant's.  Not modelled: a straggler in an expert-parallel group that spans replicas (its
all-to-all would slow the other replicas' passes too).
"""
from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ..analysis.report import Notice
from ..config import Scenario
from ..engine.records import BucketInfo
from ..engine.scheduler import Task
from ..result.record import Result
from . import hetero
from .kinds import Variant


def variants(sc: Scenario) -> list[Variant]:
    """The variants of ``sc``'s replicas (module docstring; datacenters that differ:
    explorer/variants/hetero.py); empty when every replica is alike."""
    if sc.cluster.heterogeneous:
        return hetero.variants(sc)
    st = sc.cluster.stragglers
    if not st.active:
        return []
    p, dp = sc.parallelism.pp, sc.dp
    slow_stages = min(st.count, p * dp)              # one slow GPU per (replica, stage) at most
    full, rest = divmod(slow_stages, p)
    at_speed = replace(st, count=0, stage_slowdown=())

    def with_slow(k: int) -> Scenario:
        factors = tuple(st.slowdown if s >= p - k else 1.0 for s in range(p))
        return replace(sc, cluster=replace(sc.cluster, stragglers=replace(at_speed, stage_slowdown=factors)))

    out = []
    if full:
        out.append(Variant("straggler replica" if full == 1 else "straggler replicas", with_slow(p), full))
    if rest:
        out.append(Variant("straggler replica" if not full else "partly slow replica", with_slow(rest), 1))
    normal = dp - full - (1 if rest else 0)
    if normal:
        out.append(Variant("", replace(sc, cluster=replace(sc.cluster, stragglers=at_speed)), normal))
    return out


def _is_sync(t: Task) -> bool:
    """Whether ``t`` is a collective joined by every replica at the iteration's end (a gradient
    bucket, the optimizer step, a gather after it), rather than a replica's own work."""
    if t.kind == "optimizer":
        return True
    return isinstance(t.info, BucketInfo) and (t.info.op != "all-gather" or bool(t.deps))


@dataclass
class JoinedTasks(Sequence[Task]):
    """The variants' task lists as one list (class and task ids offset), built when first read;
    the faster variants' end-of-iteration collectives carry the slowest variant's times."""

    parts: list[tuple[Sequence[Task], int]]          # (tasks, class offset); the slowest first
    _all: list[Task] | None = field(default=None, repr=False)

    def _build(self) -> list[Task]:
        if self._all is None:
            slowest = list(self.parts[0][0])
            out = list(slowest)
            for tasks, offset in self.parts[1:]:
                base = len(out)
                own = list(tasks)
                twin = _sync_twins(own, slowest)
                for i, t in enumerate(own):
                    src = slowest[twin[i]] if i in twin else t
                    out.append(replace(t, cls=t.cls + offset, deps=[(d + base, w) for d, w in t.deps],
                                       binding=t.binding + base if t.binding >= 0 else -1,
                                       ready=src.ready, start=src.start, end=src.end))
            self._all = out
        return self._all

    def __len__(self) -> int:
        return len(self._build())

    def __getitem__(self, i):
        return self._build()[i]

    def __iter__(self) -> Iterator[Task]:
        return iter(self._build())


# Share of the iteration a faster variant must wait for the slowest before a warning names it.
WAIT_TOLERANCE = 1e-9


def wait_s(own: Sequence[Task], slowest: Sequence[Task]) -> float:
    """How long a faster variant's classes wait for the slowest at the iteration's end: the
    largest delay of a joint collective past the time its own replica had it ready."""
    twin = _sync_twins(own, slowest)
    return max([0.0, *(slowest[j].start - own[i].start for i, j in twin.items())])


def _sync_twins(own: Sequence[Task], slowest: Sequence[Task]) -> dict[int, int]:
    """Index in ``own`` -> index in ``slowest`` of the same joint collective: the k-th sync task of
    each (replicas with other micro-batch counts have other task counts but the same buckets);
    empty when their sync tasks differ in number (nothing can be joined)."""
    mine = [i for i, t in enumerate(own) if _is_sync(t)]
    theirs = [i for i, t in enumerate(slowest) if _is_sync(t)]
    return dict(zip(mine, theirs, strict=True)) if len(mine) == len(theirs) else {}


def simulate_kinds(sc: Scenario, simulate: Callable[[Scenario], Result]) -> Result:
    """The Result of ``sc`` whose replicas differ: one simulation per kind (:func:`variants`), joined
    (:func:`combine`)."""
    return combine(sc, variants(sc), simulate)


def combine(sc: Scenario, vs: list[Variant], run: Callable[[Scenario], Result]) -> Result:
    """The Result of ``sc`` from one simulation per variant (``run``): the slowest variant's
    figures, every variant's classes (named ``stage s (tag)``, ``gpus`` = replicas x tp x cp), their
    memories and tasks, and per variant its replicas, own iteration time and wait.  Datacenters
    that differ (explorer/variants/hetero.py) name classes by datacenter and GPU, check memory per GPU type
    and give the whole cluster's throughput figures (hetero.headline)."""
    results = [run(v.sc) for v in vs]
    order = sorted(range(len(vs)), key=lambda i: -results[i].iteration_time_s)
    slow = results[order[0]]
    het = sc.cluster.heterogeneous
    per_replica = sc.parallelism.tp * sc.parallelism.cp
    classes: list[Any] = []
    memory: list[Any] = []
    capacity: list[float] = []
    parts: list[tuple[Sequence[Task], int]] = []
    rows: list[dict[str, Any]] = []
    mem_notes: list[Notice] = []
    for i in order:
        v, r = vs[i], results[i]
        gpu = v.sc.hardware.gpu
        offset = len(classes)
        for c in r.classes:
            if v.datacenters:          # DP across datacenters that differ: this kind's datacenters
                c = replace(c, datacenter=v.datacenters[0], name=f"stage {c.stage} · {v.tag} · {gpu.name}")
            elif het:                  # PP across: each stage on its own datacenter's GPU
                c = replace(c, name=f"{c.name} · {hetero.dc_gpu(sc, c.datacenter).name}")
            name = c.name + (f" ({v.tag})" if v.tag and not v.datacenters else "")
            gpus = v.replicas * per_replica
            classes.append(replace(c, index=offset + c.index, name=name, gpus=gpus,
                                   label=f"{name} (×{gpus} GPUs)"))
        memory += list(r.memory_by_class)
        # Each class's own board: a kind of replica's GPU, a PP-across stage's datacenter's.
        capacity += [(gpu if v.datacenters or not het else hetero.dc_gpu(sc, c.datacenter)).capacity_bytes
                     for c in r.classes]
        parts.append((r.tasks, offset))
        mem_notes += [Notice(n.kind, f"{v.tag} ({gpu.name}): {n.message}" if v.datacenters else n.message)
                      for n in r.notices if n.kind == "memory"]
        if het and not v.datacenters:
            continue                   # PP across: one kind of replica, no rows
        rows.append({"name": v.tag or "at speed", "replicas": v.replicas,
                     "iteration_time_s": r.iteration_time_s,
                     # At most the slowest's iteration beyond its own: a run its host paces
                     # (steady_state.host_paced) ends later than its tasks, which wait_s reads.
                     "wait_s": 0.0 if i == order[0] else min(wait_s(r.tasks, slow.tasks), max(
                         0.0, slow.iteration_time_s - r.iteration_time_s)),
                     **({"gpu": gpu.name, "micro_batches": v.sc.micro_batches,
                         "memory_GB": max(mb.total for mb in r.memory_by_class) / 1e9,
                         "memory_capacity_GB": gpu.capacity_bytes / 1e9,
                         # Bytes one GPU of this kind sends for DP per tier (hierarchical: the WAN
                         # share is S / its datacenter's replicas; hetero.py's docstring).
                         "dp_bytes_per_gpu_by_tier": dict(r.comm_bytes_by_tier["dp"])}
                        if v.datacenters else {})})
    notices = list(slow.notices)
    if het:
        notices = [n for n in notices if n.kind != "memory"]
        notices += (mem_notes if vs[0].datacenters else
                    [Notice(k, m) for k, m in hetero.stage_memory_notices(sc, memory)])
    # A wait of rounding (two classes whose times differ in the last bits: 3e-18 s) is no wait.
    fast = [row for row in rows[1:] if row["wait_s"] > WAIT_TOLERANCE * slow.iteration_time_s]
    if fast:
        w = max(row["wait_s"] for row in fast)
        count = sum(row["replicas"] for row in fast)
        noun = "replica" if count == 1 else "replicas"
        who = f"{noun} at speed" if not het else f"{noun} on faster GPUs or in other datacenters"
        notices.append(Notice("straggler", (
            f"{'stragglers' if not het else 'datacenters'}: {count:,} {who} "
            f"would finish in {min(row['iteration_time_s'] for row in fast):.4g} s but wait up to "
            f"{w * 1e3:.4g} ms at the gradient reduction for the {rows[0]['name']} "
            f"({slow.iteration_time_s:.4g} s per iteration)")))
    # Result fields by name (tokens/s, TFLOP/s, MFU): set as they are, not as combined()'s pace.
    figures: dict[str, Any] = hetero.headline(sc, vs, results, slow.iteration_time_s) if het else {}
    return slow.combined(sc, notices, classes=tuple(classes), memory_by_class=tuple(memory),
                         class_capacity=tuple(capacity),
                         tasks=JoinedTasks(parts), replicas=tuple(rows), **figures)
