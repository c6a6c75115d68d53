"""The timeline of one iteration as a flat table, and its Chrome/Perfetto trace export.

One row per drawn bar: GPU class, lane (stream), operation kind, start/end in seconds and the
details a hover or a CSV reader wants.  Compute tasks carry blocking collectives as parts
(see taskgraph/builder.py); here they are expanded layer by layer so a TP all-reduce appears on
its own lane between the GEMMs it separates.  When the expansion would exceed ``max_segments``
rows, each task is drawn as one bar per part instead, and ``coarse`` says so.
"""
from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from ..engine.records import BucketInfo, OverlapInfo, PassInfo, TransferInfo
from ..engine.scheduler import Task
from ..fold.arrays.lazy import resolved
from ..fold.tasks import FoldedTasks
from ..vocabulary import BLOCKING_DIMS, LANE_OF, OFFLOAD, STREAMS
from .waited import OVERLAPPED, waited_on

COLUMNS = ("gpu_class", "lane", "kind", "start_s", "end_s", "duration_s", "micro_batch", "chunk",
           "bytes", "group", "algorithm", "tier", "busbw_GBps", "detail", "overlapped", "flops")
# Column meanings: gpu_class (int), lane (compute|tp|cp|ep|pp|dp), kind (forward, backward,
# weight-grad, F&B, optimizer, recompute, tp, cp, ep, pp, dp, or "<dim> (overlapped)"), start_s /
# end_s / duration_s (float seconds), micro_batch / chunk (int or None), bytes (float, None for
# compute), group (int, None for compute), algorithm / tier (str, None for compute), busbw_GBps,
# detail (str), overlapped (bool: communication that runs under compute and blocks nothing —
# TP-overlap, ring-attention K/V, FSDP prefetch, DualPipe's hidden all-to-all), flops (float
# FLOPs of a compute row, its share of the pass; None for communication).  Activation offloading
# adds lane "offload" (kind "offload"): one layer's host copy per row, on the copy engine.
MAX_ROWS = 2_000_000      # hard cap of a full (per-layer) timeline, for downloads


@dataclass(frozen=True)
class Timeline:
    """Columnar rows (see COLUMNS) plus the class labels and whether bars were aggregated."""

    columns: dict[str, list]
    class_labels: tuple[str, ...]
    coarse: bool                     # one row per task part instead of per layer
    truncated: bool = False          # rows beyond max_rows were dropped (even coarse was too big)
    # A folded drawing (folded_timeline): the rows are a reduced run's, in which the block between
    # these start and end seconds repeats this many times in the full iteration, each repeat one
    # period (seconds) later; None otherwise.
    fold: tuple[float, float, int, float] | None = None

    def __len__(self) -> int:
        return len(self.columns["start_s"])

    def rows(self) -> list[dict]:
        cols = self.columns
        return [{k: cols[k][i] for k in COLUMNS} for i in range(len(self))]

    def iter_csv(self, chunk_rows: int = 10_000):
        """The CSV text in chunks of ``chunk_rows`` rows (a generator, for streaming downloads)."""
        cols = self.columns
        buf = io.StringIO()
        w = csv.writer(buf)
        w.writerow(COLUMNS)
        for i in range(len(self)):
            w.writerow([cols[k][i] for k in COLUMNS])
            if (i + 1) % chunk_rows == 0:
                yield buf.getvalue()
                buf.seek(0)
                buf.truncate()
        if buf.tell():
            yield buf.getvalue()

    def to_csv(self) -> str:
        return "".join(self.iter_csv())

    def iter_trace_events(self):
        """The trace events one by one (metadata first): see to_trace."""
        return iter(self.to_trace()["traceEvents"])

    def iter_trace_json(self, chunk_events: int = 10_000):
        """The trace-event JSON text in chunks (a generator, for streaming downloads)."""
        yield '{"displayTimeUnit": "ms", "traceEvents": ['
        batch: list[str] = []
        first = True
        for ev in self._events():
            batch.append(json.dumps(ev))
            if len(batch) >= chunk_events:
                yield ("" if first else ",") + ",".join(batch)
                first, batch = False, []
        if batch:
            yield ("" if first else ",") + ",".join(batch)
        yield "]}"

    def to_trace(self) -> dict:
        """Chrome trace-event JSON (opens in ui.perfetto.dev): one process per GPU class, one
        thread per lane, complete ("X") events in microseconds."""
        return {"traceEvents": list(self._events()), "displayTimeUnit": "ms"}

    def _events(self):
        events: list[dict] = []
        # The streams, then the lanes only some runs have: offload copies, and PipeDream's stage
        # replicas (``compute~3``: a replica's own streams), in order (a hunt found the trace export of
        # pipedream-vgg16 failing with "'compute~1' is not in list").
        extra = {lane for lane in self.columns["lane"] if lane not in STREAMS}
        lanes = list(STREAMS) + sorted(extra, key=_lane_order)
        tid_of = {lane: i for i, lane in enumerate(lanes)}
        for pid, label in enumerate(self.class_labels):
            events.append({"ph": "M", "name": "process_name", "pid": pid, "args": {"name": label}})
            events.append({"ph": "M", "name": "process_sort_index", "pid": pid, "args": {"sort_index": pid}})
            for tid, lane in enumerate(lanes):
                events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid,
                               "args": {"name": lane}})
        yield from events
        cols = self.columns
        for i in range(len(self)):
            args = {k: cols[k][i] for k in ("micro_batch", "chunk", "bytes", "group", "algorithm", "tier",
                                            "busbw_GBps", "detail", "overlapped", "flops")
                    if cols[k][i] not in (None, "", False)}
            yield {"name": cols["kind"][i], "cat": cols["lane"][i], "ph": "X",
                   "ts": cols["start_s"][i] * 1e6, "dur": cols["duration_s"][i] * 1e6,
                   "pid": cols["gpu_class"][i], "tid": tid_of[cols["lane"][i]], "args": args}

    def to_trace_json(self) -> str:
        return json.dumps(self.to_trace())


def _lane_order(lane: str) -> tuple[int, str, int]:
    """Offload first, then replica lanes by stream and replica number (compute~2 before compute~10)."""
    base, _, n = lane.partition("~")
    return (0 if lane == OFFLOAD else 1, base, int(n) if n.isascii() and n.isdigit() else 0)


def _lane(t: Task) -> str:
    """The lane of a task drawn as one row: its kind's stream, on a PipeDream stage replica's own
    lane (``pp~3``: replica 3's sends, which overlap replica 0's; a hunt found them on one trace
    thread, where complete events must nest)."""
    lane = LANE_OF.get(t.kind, t.stream)
    _, tilde, k = t.stream.partition("~")
    return f"{lane}~{k}" if tilde and "~" not in lane else lane


def _layers(t: Task) -> int:
    """Layers a task's pass spans (1 for everything drawn as one row)."""
    return t.info.layers if isinstance(t.info, PassInfo) else 1


def _hidden_all(t: Task) -> tuple:
    return t.info.hidden if isinstance(t.info, PassInfo) else ()


def estimate_rows(tasks: Sequence[Task], coarse: bool = False) -> int:
    """Rows build_timeline would produce (per layer, or ``coarse``: per task part), without
    building them: one pass over the tasks, so a download can be refused or coarsened first (a
    folded task list is counted folded: its reduced run and its block once per further period)."""
    tasks = resolved(tasks)
    if isinstance(tasks, FoldedTasks):
        return tasks.estimate(lambda ts: estimate_rows(ts, coarse))
    n = 0
    for t in tasks:
        parts = max(len(t.parts), 1) + len(_hidden_all(t))
        n += parts if coarse else _layers(t) * parts + 1
        n += _offload_rows_count(t, coarse)
    return n


def build_timeline(tasks: Sequence[Task], class_labels: tuple[str, ...], max_segments: int = 60_000,
                   max_rows: int = MAX_ROWS) -> Timeline:
    """Expand scheduled tasks into drawable rows.

    Per layer while the estimate stays within ``max_segments``; otherwise one row per task part
    (``coarse``).  ``max_rows`` is a hard cap (downloads): beyond it rows are dropped and
    ``truncated`` says so — coarsening comes first, so only a coarse timeline is ever truncated."""
    estimate = sum(_layers(t) * (max(len(t.parts), 1) + len(_hidden_all(t))) for t in tasks)
    coarse = estimate > min(max_segments, max_rows)
    rows = _Rows(max_rows)
    waited = waited_on(tasks)
    for i, t in enumerate(tasks):
        if t.duration <= 0:
            continue
        if t.stream != "compute" or t.kind == "optimizer":
            # A call issued to run under the compute (an FSDP layer gather or reduce-scatter, an
            # overlapped edge's call) is drawn hatched unless a compute pass waited for it: with
            # prefetching off, each layer waits for its gather, which is then exposed, not hidden.
            hidden = isinstance(t.info, OverlapInfo) and i not in waited
            kind = f"{t.kind}{OVERLAPPED}" if hidden and not t.kind.endswith(OVERLAPPED) else t.kind
            rows.add(t, _lane(t), kind, t.start, t.duration, overlapped=hidden,
                     flops=0.0 if t.kind == "optimizer" else None)
            continue
        info = t.info
        layer_parts = [(k, v) for k, v in info.layer_parts if v > 0] if isinstance(info, PassInfo) else []
        layers = info.layers if isinstance(info, PassInfo) else 0
        if coarse or not layer_parts or layers == 0:
            _expand_parts(rows, t)
            bounds = [(t.start, t.end)]
        else:
            bounds = _expand_layers(rows, t, layer_parts, layers)
        if isinstance(info, PassInfo) and info.offload:
            offload_rows(rows, t, info.offload, bounds)
    _serialise_offload(rows.cols)
    return Timeline(rows.cols, class_labels, coarse, rows.truncated)


def folded_timeline(tasks: Sequence[Task], class_labels: tuple[str, ...],
                    max_segments: int = 60_000) -> Timeline:
    """What the Gantt draws: a folded task list as its reduced run, with the span of the repeated
    block and how often it repeats (``fold``, drawn as "xK"), so that nothing is unfolded; any other
    task list as build_timeline draws it."""
    tasks = resolved(tasks)
    if not isinstance(tasks, FoldedTasks):
        return build_timeline(tasks, class_labels, max_segments)
    tl = build_timeline(tasks.tasks, class_labels, max_segments)
    return replace(tl, fold=(*tasks.block_span(), tasks.periods + 1, tasks.fold.delta))


# (micro_batch, chunk, bytes, group, algorithm, tier, busbw_GBps, detail, overlapped) of a row.
_NO_LINK = (None, None, None, None, None, None, None, "", False)


def _row_fields(t: Task, lane: str) -> tuple:
    """What a row shows of its task's typed payload: a pass (and, on a blocking-collective lane,
    the per-layer call it issues, as priced), a pipeline transfer, a bucket, an overlapped call."""
    info = t.info
    if isinstance(info, PassInfo):
        if lane in BLOCKING_DIMS and t.stream == "compute":
            call = info.comm.get(lane, {})
            return (info.micro_batch, info.chunk, call.get("bytes"), call.get("group"),
                    call.get("algorithm", ""), call.get("tier", ""), call.get("busbw_GBps"),
                    call.get("op", ""), False)
        return (info.micro_batch, info.chunk, None, None, None, None, None, info.op, False)
    if isinstance(info, TransferInfo):
        return (info.micro_batch, info.chunk, info.bytes, info.group, info.algorithm, info.tier,
                info.busbw_GBps, info.direction, False)
    if isinstance(info, BucketInfo):
        return (None, info.chunk, info.bytes, info.group, info.algorithm, info.tier, info.busbw_GBps,
                info.op, False)
    if isinstance(info, OverlapInfo):          # hidden or not: build_timeline decides (_waited_on)
        return (info.micro_batch, info.chunk, info.bytes, info.group, info.algorithm, info.tier,
                info.busbw_GBps, info.op, False)
    return _NO_LINK


class _Rows:
    """The timeline's columns as they fill, up to ``max_rows`` (then ``truncated``)."""

    def __init__(self, max_rows: int) -> None:
        self.cols: dict[str, list] = {k: [] for k in COLUMNS}
        self.max_rows = max_rows
        self.truncated = False

    def add(self, t: Task, lane: str, kind: str, start: float, dur: float, detail: str = "",
            overlapped: bool = False, flops: float | None = None) -> None:
        cols = self.cols
        if len(cols["start_s"]) >= self.max_rows:
            self.truncated = True
            return
        mb, chunk, nbytes, group, algorithm, tier, busbw, what, hidden = _row_fields(t, lane)
        compute_row = lane == "compute"
        cols["gpu_class"].append(t.cls)
        cols["lane"].append(lane)
        cols["kind"].append(kind)
        cols["start_s"].append(start)
        cols["end_s"].append(start + dur)
        cols["duration_s"].append(dur)
        cols["micro_batch"].append(mb)
        cols["chunk"].append(chunk)
        cols["bytes"].append(None if compute_row else nbytes)
        cols["group"].append(None if compute_row else group)
        cols["algorithm"].append(None if compute_row else (algorithm or ""))
        cols["tier"].append(None if compute_row else (tier or ""))
        cols["busbw_GBps"].append(None if compute_row else busbw)
        cols["detail"].append(detail or what)
        cols["overlapped"].append(overlapped or hidden)
        cols["flops"].append(flops if compute_row else None)


def _compute_secs(t: Task) -> float:
    return sum(v for k, v in t.parts if LANE_OF[k] == "compute") or 1.0


def _hidden(t: Task) -> list[tuple[str, float]]:
    return [(k, v) for k, v in _hidden_all(t) if v > 0]


def _expand_parts(rows: _Rows, t: Task) -> None:
    """One row per part of a compute task, then its hidden communication from the pass's start."""
    flops = t.info.flops if isinstance(t.info, PassInfo) else 0.0
    compute_secs = _compute_secs(t)
    at = t.start
    for k, v in t.parts:
        lane = LANE_OF[k]
        rows.add(t, lane, _kind(t.kind, k), at, v,
                 flops=flops * v / compute_secs if lane == "compute" else None)
        at += v
    for k, v in _hidden(t):
        # Hidden communication drawn on its own lane from the pass's start.
        rows.add(t, k, f"{k} (overlapped)", t.start, min(v, t.duration), overlapped=True)


def _expand_layers(rows: _Rows, t: Task, layer_parts: list[tuple[str, float]],
                   layers: int) -> list[tuple[float, float]]:
    """A compute task layer by layer from its one-layer template, edge work (embedding, logits)
    last; returns each drawn layer's (start, end)."""
    flops = t.info.flops if isinstance(t.info, PassInfo) else 0.0
    compute_secs = _compute_secs(t)
    per_layer = sum(v for _, v in layer_parts)
    # The layer template may describe only the dense layers of a mixed chunk; scale so the
    # drawn layers fill the task and put edge work (embedding, logits) at the end.
    body = min(per_layer * layers, t.duration)
    scale = body / (per_layer * layers) if per_layer > 0 else 0.0
    hidden_layer = [(k, v / layers) for k, v in _hidden(t)]
    at = t.start
    bounds = []
    for _ in range(layers):
        layer_start = at
        for k, v in layer_parts:
            lane = LANE_OF[k]
            rows.add(t, lane, _kind(t.kind, k), at, v * scale,
                     flops=flops * v * scale / compute_secs if lane == "compute" else None)
            at += v * scale
        for k, v in hidden_layer:
            rows.add(t, k, f"{k} (overlapped)", layer_start, min(v, at - layer_start), overlapped=True)
        bounds.append((layer_start, at))
    rest = t.start + t.duration - at
    if rest > 1e-12:
        rows.add(t, "compute", t.kind, at, rest, "embedding/logits", flops=flops * rest / compute_secs)
    return bounds


def _serialise_offload(cols: dict[str, list]) -> None:
    """One copy engine per GPU: offload rows of one class that would overlap (a slow link's copies
    running past their pass into the next one's) start when the previous copy has ended."""
    lane = cols["lane"]
    idx = [i for i in range(len(lane)) if lane[i] == OFFLOAD]
    idx.sort(key=lambda i: (cols["gpu_class"][i], cols["start_s"][i]))
    free: dict[int, float] = {}
    for i in idx:
        cls = cols["gpu_class"][i]
        start = max(cols["start_s"][i], free.get(cls, -math.inf))
        cols["start_s"][i] = start
        cols["end_s"][i] = start + cols["duration_s"][i]
        free[cls] = cols["end_s"][i]


def _offload_rows_count(t: Task, coarse: bool) -> int:
    """Rows offload_rows adds for task ``t``."""
    info = t.info
    if not isinstance(info, PassInfo) or not info.offload:
        return 0
    return 1 if coarse or info.layers == 0 else math.ceil(info.offload[1] - 1e-9)


def offload_rows(rows: _Rows, t: Task, offload: tuple, bounds: list[tuple[float, float]]) -> None:
    """The host copies of a pass's offloaded layers on the ``offload`` lane, one row per layer.

    ``offload`` is (direction, layers, copy seconds, exposed seconds) (ChunkWork.offload_fields);
    ``bounds`` the drawn layers' (start, end), one entry for a pass drawn as one block.  The copies
    share one copy engine, so a copy starts when the previous one has ended.  Transformer Engine's
    CPU offload (get_cpu_offload_context, which Megatron-Core's cpu_offloading_num_layers drives)
    offloads the first layers of a chunk: a layer's device-to-host copy starts after its forward;
    its host-to-device copy is prefetched while the layer after it runs its backward, so that it
    is back before its own backward (backward runs the layers in reverse, so these are the last
    ones drawn).  The rows' durations add up to the copy seconds; how much of them stalled the
    pass (the exposed seconds, inside the pass's compute bar) is in each row's detail."""
    direction, layers, copy, exposed = offload
    if len(bounds) == 1:
        per = [copy]
        starts = [bounds[0][0]]
    else:
        n = min(layers, len(bounds))
        per = [copy / layers] * int(n) + ([copy / layers * (n - int(n))] if n - int(n) > 1e-9 else [])
        k = len(per)
        if direction == "d2h":
            starts = [bounds[i][1] for i in range(k)]
        else:
            first = len(bounds) - k
            starts = [bounds[i - 1][0] if i > 0 else t.start for i in range(first, len(bounds))]
        if copy > n * (copy / layers) + 1e-15:          # layers beyond the drawn ones: one bar
            per.append(copy - sum(per))
            starts.append(starts[-1])
    what = "device→host" if direction == "d2h" else "host→device"
    detail = (f"{what} copy of one layer's activations over the host link "
              f"({exposed * 1e3:.3g} ms of this pass's {copy * 1e3:.3g} ms of copies stall it)")
    free = -math.inf
    for start, dur in zip(starts, per, strict=True):
        if dur <= 0:
            continue
        at = max(start, free)
        rows.add(t, OFFLOAD, OFFLOAD, at, dur, detail)
        free = at + dur


def _kind(task_kind: str, part: str) -> str:
    if part == "compute":
        return task_kind
    return part
