"""Results the page shows, computed once per scenario and kept in a cache bounded by bytes.

Streamlit's ``st.cache_data`` bounds entries, not memory, and keeps whatever a function returns —
a heavy scenario's task list is 60-100 MB.  Here a scenario's entry holds only what the page
draws (the JSON figures, the per-class memory, the YAML and the Gantt figure of at most
``MAX_BARS`` bars), its size is estimated when it is stored, and the least recently used entries
are evicted beyond ``MAX_CACHE_BYTES`` — so a server stays bounded whatever links it is sent.
The cache is shared by all sessions (scenarios are keyed by their canonical JSON) and guarded by
a lock, since Streamlit runs sessions in threads.
"""
from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

import plotly.graph_objects as go

from .. import figures
from ..fidelity.band import with_band
from ..figures.of_run import MAX_BARS, gantt_of
from ..result.memory_timeline import memory_timeline
from ..result.timeline import build_timeline
from ..scenario import Scenario, from_dict, to_yaml
from ..teaching.timeline_story import passes
from .summary import Summary

MAX_CACHE_BYTES = 256 * 2**20    # all cached views together
BYTES_PER_BAR = 400              # a drawn bar's share of the figure JSON (measured: 250-380 bytes)


@dataclass(frozen=True)
class ViewData:
    """Everything the views draw for one scenario."""

    scenario: Scenario
    json: dict[str, Any]          # the run's JSON summary (Result.to_json_dict), as the Compare view diffs
    summary: Summary              # the same, typed: what the views read
    labels: tuple[str, ...]       # GPU class display labels (name and multiplicity)
    names: tuple[str, ...]        # GPU class names ("stage 3 · DC 1"), for axes and titles
    breakdown_name: str           # the class the breakdown describes
    memory: tuple[dict[str, float], ...]
    utilisation: dict[str, float]
    yaml: str
    gantt: go.Figure
    gantt_info: figures.GanttInfo
    full_rows: int               # per-layer operations of the whole timeline (downloads)
    fold: tuple[float, float, int, float] | None = None   # block start/end s, repeats, period s
    memory_curves: tuple = ()    # per class, memory over the timeline (analysis/memory_timeline.py)
    passes: tuple = ()           # per class, the drawn timeline's passes (teaching/timeline_story.py)

    def size_bytes(self) -> int:
        """Rough footprint, for the cache's byte budget."""
        return (len(json.dumps(self.json, default=str)) + len(self.yaml)
                + self.gantt_info.bars * BYTES_PER_BAR + 4096
                + sum(112 * len(c.points) for c in self.memory_curves)    # a (float, float) tuple
                + sum(200 * len(p) for p in self.passes))                 # a Pass and its fields


class ByteBoundedLRU:
    """A thread-safe least-recently-used map whose values report their size in bytes."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._items: OrderedDict[Hashable, tuple[Any, int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get_or_compute(self, key: Hashable, compute: Callable[[], Any], size: Callable[[Any], int]) -> Any:
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
                return self._items[key][0]
        value = compute()            # outside the lock: other sessions keep being served
        n = size(value)
        with self._lock:
            if key not in self._items and n <= self.max_bytes:
                self._items[key] = (value, n)
                self._bytes += n
                while self._bytes > self.max_bytes:
                    _, (_, old) = self._items.popitem(last=False)
                    self._bytes -= old
        return value

    @property
    def bytes(self) -> int:
        return self._bytes

    def __len__(self) -> int:
        return len(self._items)


_VIEWS = ByteBoundedLRU(MAX_CACHE_BYTES)
_SMALL = ByteBoundedLRU(32 * 2**20)


def view_data(raw_json: str) -> ViewData:
    """Simulate the scenario ``raw_json`` (canonical JSON of its raw mapping) once for all sessions."""
    return _VIEWS.get_or_compute(raw_json, lambda: _compute(raw_json), ViewData.size_bytes)


def _compute(raw_json: str) -> ViewData:
    from ..simulate import simulate

    sc = from_dict(json.loads(raw_json))
    res = simulate(sc)
    labels = tuple(c.label for c in res.classes)
    # The Gantt as drawn (figures/of_run.py, shared with the HTML report); the task list itself is
    # not kept.
    draw = gantt_of(res, MAX_BARS)
    j = with_band(res.to_json_dict(), sc)         # what run --json prints, expected_error included
    names = tuple(c.name for c in res.classes)
    return ViewData(sc, j, Summary.from_json(j), labels, names, names[res.breakdown_class],
                    tuple(m.as_GB() for m in res.memory_by_class),
                    dict(res.utilisation),
                    to_yaml(sc), draw.fig, draw.info, draw.full_rows, draw.fold, memory_timeline(res),
                    passes(draw.columns))


def summary(raw_json: str) -> Summary:
    """Just the figures of a scenario (for comparisons such as the ZeRO stages)."""
    def compute() -> Summary:
        from ..simulate import simulate
        sc = from_dict(json.loads(raw_json))
        return Summary.from_json(with_band(simulate(sc).to_json_dict(), sc))
    # A summary's size: its JSON's (about 2-6 kB) plus the record's objects.
    return _SMALL.get_or_compute(("summary", raw_json), compute, lambda s: 8192)


def consensus_curve(raw_json: str):
    """The local-SGD / DiLoCo consensus curve of a scenario (explorer/design/consensus.py: one
    inner step per replica count; on demand, cached)."""
    def compute():
        from ..design.consensus import consensus
        return consensus(json.loads(raw_json))
    return _SMALL.get_or_compute(("consensus", raw_json), compute, lambda c: 512 * len(c.points) + 1024)


def bubble_story(raw_json: str) -> str:
    """The card-versus-formula decomposition of a scenario (three extra simulations: on demand)."""
    def compute() -> str:
        from ..simulate import simulate
        from ..teaching.bubble import explain_bubble
        return explain_bubble(simulate(from_dict(json.loads(raw_json))))
    return _SMALL.get_or_compute(("bubble", raw_json), compute, lambda t: len(t) + 256)


def class_lanes(raw_json: str):
    """The simulated slowest class's lanes (explorer/traces/lanes.py) for the measured-trace
    overlay: one more simulation, only once a trace is uploaded; cached."""
    def compute():
        from ..simulate import simulate
        from ..traces.lanes import simulated_lanes
        return simulated_lanes(simulate(from_dict(json.loads(raw_json))))
    return _SMALL.get_or_compute(("lanes", raw_json), compute,
                                 lambda spans: 64 * sum(len(v) for v in spans.values()) + 1024)


def trace_fit(raw_json: str, key: tuple, measured):
    """``import-trace --fit``'s fit (explorer/traces/run_fit.py) of the scenario to the uploaded
    traces ``key`` (their names and sizes), cached: a dozen simulations, made on click."""
    def compute():
        from ..traces.run_fit import fit_run
        return fit_run(from_dict(json.loads(raw_json)), measured)
    return _SMALL.get_or_compute(("fit", raw_json, key), compute, lambda f: 4096)


def full_timeline(raw_json: str, max_rows: int):
    """Every operation of the iteration, at most ``max_rows`` rows, for the trace and CSV
    downloads (never cached: a download is rare and its table can be large)."""
    from ..simulate import simulate

    res = simulate(from_dict(json.loads(raw_json)))
    return build_timeline(res.tasks, tuple(c.label for c in res.classes), max_segments=max_rows,
                          max_rows=max_rows)


def cache_stats() -> dict[str, int]:
    """Entries and estimated bytes of the view cache (logged, and read by the load bench)."""
    return {"entries": len(_VIEWS), "bytes": _VIEWS.bytes}
