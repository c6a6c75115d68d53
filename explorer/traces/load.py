"""Read one rank's trace into the few intervals the measurement needs.

One pass over the streamed events (explorer/traces/stream.py) keeps, per thread or GPU stream,
only (start, end) of compute, of collectives (with their op and process group) and of the
optimizer/recompute markers, plus the ``ProfilerStep#N`` windows: the event dicts themselves are
dropped as they are read.  A trace with GPU kernels is measured on its GPU streams (its CPU ops
only launch kernels); a CPU-only trace on its CPU threads.  Times are microseconds, as in the
Chrome trace format ("ts"/"dur" in us: Trace Event Format, Google, 2016).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from . import classify
from .stream import TraceError, iter_trace

Interval = tuple[float, float]


@dataclass
class Lane:
    """The intervals of one thread (CPU) or stream (GPU)."""

    work: list[Interval] = field(default_factory=list)
    comm: list[tuple[float, float, str, str | None]] = field(default_factory=list)   # (s, e, op, group)
    marks: list[tuple[float, float, str]] = field(default_factory=list)              # optimizer/recompute


@dataclass(frozen=True)
class RankTrace:
    """What one file says about one rank."""

    path: Path
    rank: int | None                    # distributedInfo.rank, when the profiler wrote it
    world: int | None                   # distributedInfo.world_size
    steps: dict[int, Interval]          # ProfilerStep#N -> (start, end) in us
    lanes: dict[tuple[str, str], Lane]  # (pid, tid) -> intervals, of the measured kind only
    groups: dict[str, tuple[int, ...]]  # process-group name -> global ranks
    gpu: bool                           # measured on GPU kernels (else CPU ops)


def _interval(ev: dict) -> Interval | None:
    ts, dur = ev.get("ts"), ev.get("dur")
    if isinstance(ts, bool) or isinstance(dur, bool):
        return None
    if ts is None or dur is None:
        return None                     # a missing field: the event cannot be placed, skip it
    try:
        s, d = float(ts), float(dur)
    except (TypeError, ValueError):
        return None                     # a missing field: the event cannot be placed, skip it
    if d != d or s != s or d < 0 or abs(s) == float("inf") or d == float("inf"):
        return None
    return s, s + d


def _add_work(lane: Lane, span: Interval) -> None:
    """Append, merging into the previous interval when it starts inside it: a CPU op's children
    (aten::linear > aten::addmm > ...) then cost nothing, so memory follows the top-level ops."""
    if lane.work:
        s, e = lane.work[-1]
        if s <= span[0] <= e:
            if span[1] > e:
                lane.work[-1] = (s, span[1])
            return
    lane.work.append(span)


def _name_by_launcher(pending: list[tuple[Lane, int, object]],
                      launches: dict[object, tuple[tuple[str, str], float]],
                      cpu: dict[tuple[str, str], Lane]) -> None:
    """An NCCL kernel's name says its implementation, not the call (all-to-all runs as
    ``ncclKernel_SendRecv``): take the op and process group of the innermost CPU collective
    (``nccl:all_to_all``, ``record_param_comms``) that launched it, found through the kernel's
    ``correlation`` and its ``cudaLaunchKernel`` (Kineto links the two by that id)."""
    for lane, i, corr in pending:
        hit = launches.get(corr)
        if hit is None or hit[0] not in cpu:
            continue
        at = hit[1]
        around = [c for c in cpu[hit[0]].comm if c[0] <= at <= c[1] and c[2] not in ("other", "wait")]
        if around:
            s, e, op, group = lane.comm[i]
            named = max(around, key=lambda c: (c[3] is not None, c[0]))
            lane.comm[i] = (s, e, named[2], named[3] if named[3] is not None else group)


def _group_of(args: dict) -> str | None:
    """The process group record_param_comms names (PyTorch >= 2.2 writes ``Process Group Name``)."""
    for key in ("Process Group Name", "pg_name", "Process Group Description"):
        v = args.get(key)
        if v not in (None, ""):
            return str(v)
    return None


def _groups_of(info: object) -> dict[str, tuple[int, ...]]:
    """distributedInfo.pg_config -> {pg_name: ranks} (Kineto writes it for each process group)."""
    out: dict[str, tuple[int, ...]] = {}
    if not isinstance(info, dict):
        return out
    for pg in info.get("pg_config") or []:
        if isinstance(pg, dict) and isinstance(pg.get("ranks"), list):
            try:
                out[str(pg.get("pg_name"))] = tuple(int(r) for r in pg["ranks"])
            except (TypeError, ValueError):
                continue
    return out


def read_rank(path: Path, marker: str | None = None) -> RankTrace:
    """Stream ``path`` once and keep what :mod:`explorer.traces.measure` needs.

    Iterations are the ``ProfilerStep#N`` windows, or, with ``marker``, the CPU events of that exact
    name (a ``record_function("train_step")`` of the user's), numbered 1, 2, ... in time order."""
    marked: list[Interval] = []
    steps: dict[int, Interval] = {}
    gpu_steps: dict[int, Interval] = {}     # Kineto's copy of ProfilerStep#N on the GPU timeline
    cpu: dict[tuple[str, str], Lane] = {}
    gpu: dict[tuple[str, str], Lane] = {}
    info: object = None
    events = 0
    launches: dict[object, tuple[tuple[str, str], float]] = {}   # correlation -> CPU lane, launch time
    pending: list[tuple[Lane, int, object]] = []                  # NCCL kernels to name by their launcher
    for key, ev in iter_trace(path):
        if key != "event":
            if key == "distributedInfo":
                info = ev
            continue
        events += 1
        if ev.get("ph") != "X":
            continue
        span = _interval(ev)
        name = ev.get("name")
        if span is None or not isinstance(name, str):
            continue
        if marker is not None and name == marker and ev.get("cat") != "gpu_user_annotation":
            marked.append(span)
            continue
        n = None if marker is not None else classify.step_number(ev)
        if n is not None:
            into = gpu_steps if ev.get("cat") == "gpu_user_annotation" else steps
            s, e = into.get(n, span)
            into[n] = (min(s, span[0]), max(e, span[1]))
            continue
        cat = ev.get("cat")
        args = ev.get("args") if isinstance(ev.get("args"), dict) else {}
        lane_key = (str(ev.get("pid")), str(ev.get("tid")))
        lanes = gpu if classify.is_gpu_kernel(ev) else cpu
        if cat in ("cuda_runtime", "cuda_driver") and "Launch" in name and "correlation" in args:
            launches[args["correlation"]] = (lane_key, span[0])
            continue
        if cat not in ("cpu_op", "user_annotation", "kernel"):
            continue
        lane = lanes.setdefault(lane_key, Lane())
        op = classify.collective_op(name, args)
        if op is not None:
            lane.comm.append((span[0], span[1], op, _group_of(args)))
            if lanes is gpu and "correlation" in args:
                pending.append((lane, len(lane.comm) - 1, args["correlation"]))
        elif classify.is_optimizer(name):
            lane.marks.append((span[0], span[1], "optimizer"))
        elif classify.is_recompute(name):
            lane.marks.append((span[0], span[1], "recompute"))
            if cat != "user_annotation":
                _add_work(lane, span)
        elif cat != "user_annotation":
            _add_work(lane, span)      # a user's own annotation is a label, not work
    if events == 0:
        raise TraceError(path, "has an empty \"traceEvents\" list")
    if marker is not None:
        if not marked:
            raise TraceError(path, f"has no event named {marker!r} (--iteration-marker): "
                             "no iteration to measure")
        steps = {i + 1: span for i, span in enumerate(sorted(marked))}
    if not steps and not gpu_steps:
        raise TraceError(path, "has no ProfilerStep#N annotation: no iteration to measure "
                         "(profile with torch.profiler and call prof.step() once per iteration)")
    info_d = info if isinstance(info, dict) else {}
    rank, world = info_d.get("rank"), info_d.get("world_size")
    uses_gpu = any(lane.work or lane.comm for lane in gpu.values())
    _name_by_launcher(pending, launches, cpu)
    return RankTrace(path=path, rank=rank if isinstance(rank, int) else None,
                     world=world if isinstance(world, int) else None,
                     steps=gpu_periods(gpu_steps) if uses_gpu and gpu_steps else steps,
                     lanes=gpu if uses_gpu else cpu, groups=_groups_of(info), gpu=uses_gpu)


def gpu_periods(windows: dict[int, Interval]) -> dict[int, Interval]:
    """The GPU's iterations from Kineto's GPU copies of ``ProfilerStep#N``, which span step N's first
    kernel to its last (libkineto's GPU user-annotation events): each step runs until the next one
    starts, so that the GPU's wait between steps (a data loader's stall, the host's own work) is in
    the iteration, as the CPU's step windows and ``--iteration-marker`` have it (a hunt read 6.8 ms
    for 10 ms steps with 3 ms of input stalls).  The last step, whose end the trace does not show, is
    left out when there are others; a lone step keeps its kernels' span."""
    order = sorted(windows)
    if len(order) < 2:
        return dict(windows)
    return {n: (windows[n][0], max(windows[n][1], windows[nxt][0]))
            for n, nxt in zip(order, order[1:], strict=False)}


TRACE_SUFFIXES = (".json", ".json.gz", ".pt.trace.json", ".pt.trace.json.gz")


def trace_files(path: Path) -> list[Path]:
    """``path`` itself, or the ``.json``/``.json.gz`` files of a directory (one per rank)."""
    if not path.exists():
        raise TraceError(path, "does not exist")
    if path.is_file():
        return [path]
    files = sorted(p for p in path.iterdir() if p.is_file() and p.name.endswith((".json", ".json.gz")))
    if not files:
        raise TraceError(path, "is a directory with no .json or .json.gz trace in it")
    return files


def read_ranks(path: Path, marker: str | None = None) -> list[RankTrace]:
    """Every rank's trace under ``path``, ordered by rank (distributedInfo.rank, else file name)."""
    ranks = [read_rank(p, marker) for p in trace_files(path)]
    seen = [r.rank for r in ranks if r.rank is not None]
    if len(seen) == len(ranks) and len(set(seen)) == len(seen):
        ranks.sort(key=lambda r: r.rank or 0)           # every rank is known here
    return ranks
