"""The timeline of one iteration as a flat table, and its Chrome/Perfetto trace export.

One row per drawn bar: GPU class, lane (stream), operation kind, start/end in seconds and the
details a hover or a CSV reader wants.  Compute tasks carry blocking collectives as parts
(see schedules/iteration.py); here they are expanded layer by layer so a TP all-reduce appears on
its own lane between the GEMMs it separates.  When the expansion would exceed ``max_segments``
rows, each task is drawn as one bar per part instead, and ``coarse`` says so.
"""
from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass

from .engine import Task

COLUMNS = ("gpu_class", "lane", "kind", "start_s", "end_s", "duration_s", "micro_batch", "chunk",
           "bytes", "group", "algorithm", "tier", "busbw_GBps", "detail")
LANE_OF = {"compute": "compute", "recompute": "compute", "optimizer": "compute", "weight-grad": "compute",
           "tp": "tp", "cp": "cp", "ep": "ep", "pp": "pp", "dp": "dp"}


@dataclass(frozen=True)
class Timeline:
    """Columnar rows (see COLUMNS) plus the class labels and whether bars were aggregated."""

    columns: dict[str, list]
    class_labels: tuple[str, ...]
    coarse: bool

    def __len__(self) -> int:
        return len(self.columns["start_s"])

    def rows(self) -> list[dict]:
        cols = self.columns
        return [{k: cols[k][i] for k in COLUMNS} for i in range(len(self))]

    def to_csv(self) -> str:
        buf = io.StringIO()
        w = csv.writer(buf)
        w.writerow(COLUMNS)
        cols = self.columns
        for i in range(len(self)):
            w.writerow([cols[k][i] for k in COLUMNS])
        return buf.getvalue()

    def to_trace(self) -> dict:
        """Chrome trace-event JSON (opens in ui.perfetto.dev): one process per GPU class, one
        thread per lane, complete ("X") events in microseconds."""
        events: list[dict] = []
        lanes = ["compute", "tp", "cp", "ep", "pp", "dp"]
        for pid, label in enumerate(self.class_labels):
            events.append({"ph": "M", "name": "process_name", "pid": pid, "args": {"name": label}})
            events.append({"ph": "M", "name": "process_sort_index", "pid": pid, "args": {"sort_index": pid}})
            for tid, lane in enumerate(lanes):
                events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": lane}})
        cols = self.columns
        for i in range(len(self)):
            args = {k: cols[k][i] for k in ("micro_batch", "chunk", "bytes", "group", "algorithm", "tier",
                                            "busbw_GBps", "detail") if cols[k][i] not in (None, "")}
            events.append({"name": cols["kind"][i], "cat": cols["lane"][i], "ph": "X",
                           "ts": cols["start_s"][i] * 1e6, "dur": cols["duration_s"][i] * 1e6,
                           "pid": cols["gpu_class"][i], "tid": lanes.index(cols["lane"][i]), "args": args})
        return {"traceEvents": events, "displayTimeUnit": "ms"}

    def to_trace_json(self) -> str:
        return json.dumps(self.to_trace())


def build_timeline(tasks: list[Task], class_labels: tuple[str, ...], max_segments: int = 60_000) -> Timeline:
    """Expand scheduled tasks into drawable rows."""
    cols: dict[str, list] = {k: [] for k in COLUMNS}
    estimate = sum((t.info or {}).get("layers", 1) * max(len(t.parts), 1) for t in tasks)
    coarse = estimate > max_segments

    def add(t: Task, lane: str, kind: str, start: float, dur: float, detail: str = "") -> None:
        info = t.info or {}
        if lane in ("tp", "cp", "ep") and t.stream == "compute":
            # A blocking collective drawn out of its compute task: describe the call itself.
            comm = info.get("comm", {}).get(lane, {})
            info = {"micro_batch": info.get("micro_batch"), "chunk": info.get("chunk"), **comm}
            detail = detail or comm.get("op", "")
        cols["gpu_class"].append(t.cls)
        cols["lane"].append(lane)
        cols["kind"].append(kind)
        cols["start_s"].append(start)
        cols["end_s"].append(start + dur)
        cols["duration_s"].append(dur)
        cols["micro_batch"].append(info.get("micro_batch"))
        cols["chunk"].append(info.get("chunk"))
        cols["bytes"].append(info.get("bytes"))
        cols["group"].append(info.get("group"))
        cols["algorithm"].append(info.get("algorithm", ""))
        cols["tier"].append(info.get("tier", ""))
        cols["busbw_GBps"].append(info.get("busbw_GBps"))
        cols["detail"].append(detail or info.get("op", "") or info.get("direction", ""))

    for t in tasks:
        if t.duration <= 0:
            continue
        if t.stream != "compute" or t.kind == "optimizer":
            add(t, LANE_OF.get(t.kind, t.stream), t.kind, t.start, t.duration)
            continue
        layer_parts = [(k, v) for k, v in (t.info or {}).get("layer_parts", ()) if v > 0]
        layers = (t.info or {}).get("layers", 0)
        at = t.start
        if coarse or not layer_parts or layers == 0:
            for k, v in t.parts:
                add(t, LANE_OF[k], _kind(t.kind, k), at, v)
                at += v
            continue
        per_layer = sum(v for _, v in layer_parts)
        # The layer template may describe only the dense layers of a mixed chunk; scale so the
        # drawn layers fill the task and put edge work (embedding, logits) at the end.
        body = min(per_layer * layers, t.duration)
        scale = body / (per_layer * layers) if per_layer > 0 else 0.0
        for _ in range(layers):
            for k, v in layer_parts:
                add(t, LANE_OF[k], _kind(t.kind, k), at, v * scale)
                at += v * scale
        rest = t.start + t.duration - at
        if rest > 1e-12:
            add(t, "compute", t.kind, at, rest, "embedding/logits")
    return Timeline(cols, class_labels, coarse)


def _kind(task_kind: str, part: str) -> str:
    if part == "compute":
        return task_kind
    return part
