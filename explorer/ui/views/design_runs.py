"""What the Design-space tab computes, and what each computation costs, without any widget.

The tab (views/design.py) runs four things on the scenario of the sidebar (A), each through
explorer/design: a sweep of two fields (the heatmap), the layout search, the sensitivity to 2x
upgrades (the tornado) and the scaling curve.  Results are kept in a byte-bounded cache shared by
all sessions, keyed by A's canonical JSON, its shipped scenario (links are written relative to it)
and the run's parameters — a progress callback cannot go through ``st.cache_data``, whose cached
functions replay the elements they touch.

Cost decides what runs by itself and what waits for a button: one full simulation of A is timed
once (:func:`probe_seconds`) and a sweep, sensitivity or scaling run estimated above
:data:`AUTO_SECONDS` waits for a press.  The search (views/design_search.py) always waits for
its button.
"""
from __future__ import annotations

import json
import pickle
import time
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ...config.inputs import parse_value
from ...design import Base, estimator_available, scaling, sensitivity, sweep
from ...design.base import check_key, share_query
from ...design.executors import ExecutorSpec, Progress
from ...design.scaling import ScalePoint, default_sizes
from ...design.scores import score, score_exact
from ...design.sensitivity import Sensitivity
from ...design.sweep import Point, SweepResult
from ...figures.design import _label
from ...numbers import time_scale
from ...scenario import SETTABLE, Scenario, ScenarioError, from_dict, gpu_presets, to_dict
from ...share import flatten, format_value
from ..cache import ByteBoundedLRU
from .metrics import fmt_time

AUTO_SECONDS = 3.0           # work that runs without a button press (estimated)
MAX_VALUES = 20              # values per heatmap axis (a 20 x 20 network grid prices in about 0.3 s)
IN_PROCESS = ExecutorSpec(workers=1)      # the server's threads share two cores: no process pool
_RESULTS = ByteBoundedLRU(48 * 2**20)


class _Missing(Exception):
    """Raised by :func:`lookup`'s compute: the result is not cached."""


def _raise_missing() -> Any:
    raise _Missing


def _size(value: Any) -> int:
    return len(pickle.dumps(value)) + 1024


def cached(key: Hashable, compute: Callable[[], Any]) -> Any:
    """``compute()``'s result, computed once per key for all sessions."""
    return _RESULTS.get_or_compute(key, compute, _size)


def lookup(key: Hashable) -> Any | None:
    """The cached result of ``key``, or None (nothing is computed)."""
    try:
        return _RESULTS.get_or_compute(key, _raise_missing, _size)
    except _Missing:
        return None


def make_base(raw: Mapping[str, Any], name: str, label: str) -> Base:
    """Scenario A as a design-space base: links relative to shipped scenario ``name``, dp derived
    (as in links), so varying tp or pp re-derives the data-parallel degree."""
    raw = json.loads(json.dumps(raw, default=str))
    if isinstance(raw.get("parallelism"), dict):
        raw["parallelism"].pop("dp", None)
    return Base(raw, name, label)


def _best_of_two(raw_json: str, scorer: Callable[[list[Scenario]], Any]) -> float:
    """Wall seconds ``scorer`` takes on A: a quick one timed twice and the faster kept, so first-call
    costs do not count."""
    sc = from_dict(json.loads(raw_json))
    best = float("inf")
    for _ in range(2):
        t0 = time.perf_counter()
        scorer([sc])
        best = min(best, time.perf_counter() - t0)
        if best > 1.0:
            break
    return best


def probe_seconds(raw_json: str) -> float:
    """Wall seconds of one full simulation of A (timed once and cached)."""
    return cached(("probe", raw_json), lambda: _best_of_two(raw_json, lambda s: score(s, "full")))


def exact_seconds(raw_json: str) -> float:
    """Wall seconds of scoring one variant of A as the tornado and the scaling curve do
    (scores.score_exact: the estimator, or the full engine for what it does not price; cached)."""
    return cached(("exact", raw_json), lambda: _best_of_two(raw_json, score_exact))


def per_config_seconds(raw_json: str) -> float:
    """Expected seconds to validate and score one sweep configuration: the loader (0.7 ms) and the
    estimator (up to 6 ms on a big pipeline), or the full engine while the estimator is absent."""
    return 7e-3 if estimator_available() else 7e-4 + probe_seconds(raw_json)


# --- Heatmap -------------------------------------------------------------------------------------
DEGREES = {"parallelism.tp": 8, "parallelism.pp": 64, "parallelism.cp": 16, "parallelism.ep": 64,
           "training.micro_batch": 16}


SHARES = (0.0, 0.25, 0.5, 0.75, 0.9)


def default_values(key: str, sc: Scenario) -> list[Any]:
    """A sensible value list for ``key`` around ``sc``'s value: powers of two for parallel degrees
    (within a node for tp, the layers for pp), every choice of a choice field, both booleans, the
    GPU presets, a share's range (SHARES), and x1/4 .. x4 of a number."""
    cur = flatten(to_dict(sc)).get(key)
    if key in DEGREES:
        limit = {"parallelism.tp": sc.cluster.gpus_per_node, "parallelism.pp": sc.model.layers,
                 "parallelism.ep": (sc.model.moe.experts if sc.model.moe is not None and sc.model.is_moe
                                    else 1),
                 "training.micro_batch": sc.training.global_batch}.get(key, DEGREES[key])
        if key.startswith("parallelism."):
            limit = min(limit, sc.gpus)
        values = [2 ** i for i in range(12) if 2 ** i <= min(limit, DEGREES[key])]
        if isinstance(cur, int) and cur not in values:
            values = sorted({*values, cur})
        at = values.index(cur) if cur in values else 0
        start = max(0, min(at - 3, len(values) - 7))
        return values[start:start + 7]
    if key == "hardware.gpu":
        return list(gpu_presets())
    field = SETTABLE.get(key)
    choices = field.metadata.get("choices") if field is not None else None
    if choices:
        return list(choices)[:MAX_VALUES]
    if isinstance(cur, bool):
        return [False, True]
    high = field.metadata.get("max") if field is not None else None
    if isinstance(cur, float) and field is not None and high is not None and high <= 1.0 \
            and field.metadata.get("min") == 0.0:
        # A share (a cache hit rate, a DLRM's hot share): across its range, whatever its value
        # (x1/4 .. x4 of 0 would be one value).
        return sorted({*(v for v in SHARES if v <= high), cur})
    if isinstance(cur, (int, float)) and cur > 0:
        factors = (0.25, 0.5, 1, 2, 4)
        if isinstance(cur, int):
            return sorted({max(1, round(cur * f)) for f in factors})
        return [cur * f for f in factors]
    return [] if cur is None else [cur]


def values_text(values: Sequence[Any]) -> str:
    """A value list as the values box shows it (and the link carries it): ``1,2,4,8``."""
    return ",".join(format_value(v) for v in values)


def parse_values(key: str, text: str) -> list[Any]:
    """``"1,2,4"`` -> ``[1, 2, 4]`` (YAML flow values, duplicates dropped); a one-line
    ScenarioError naming ``key`` when it is empty, unparsable or longer than MAX_VALUES."""
    check_key(key, "heatmap axis")
    values = parse_value(f"[{text}]", key)
    if not isinstance(values, list) or not values or any(v is None for v in values):
        raise ScenarioError(key, "give one or more comma-separated values, e.g. 1,2,4,8")
    unique = list({json.dumps(v, sort_keys=True): v for v in values}.values())
    if len(unique) > MAX_VALUES:
        raise ScenarioError(key, f"{len(unique)} values; at most {MAX_VALUES} per axis")
    return unique


@dataclass(frozen=True)
class Grid:
    """The heatmap's two fields and their values."""

    x: str
    xs: tuple[Any, ...]
    y: str
    ys: tuple[Any, ...]

    @property
    def cells(self) -> int:
        return len(self.xs) * len(self.ys)

    def key(self, raw_json: str, name: str) -> tuple[str, ...]:
        return ("sweep", raw_json, name, self.x, json.dumps(self.xs), self.y, json.dumps(self.ys))


def sweep_base(base: Base, grid: Grid) -> tuple[Base, bool]:
    """The base a sweep of ``grid`` starts from: without an explicit layer split when it varies
    the pipeline's depth (the split fixes pp·vpp; the simulator balances stages without it), and
    whether that split was dropped."""
    par = base.raw.get("parallelism")
    if ({grid.x, grid.y} & {"parallelism.pp", "parallelism.vpp"} and isinstance(par, dict)
            and par.get("stage_layers") is not None):
        raw = json.loads(json.dumps(base.raw))
        raw["parallelism"].pop("stage_layers")
        return replace(base, raw=raw), True
    return base, False


def current_cell(base: Base, grid: Grid) -> tuple[Any, Any] | None:
    """The scenario's own values of the heatmap's two fields (the cell the heatmap outlines), or
    None when a field has no value in it."""
    values = flatten(to_dict(base.scenario()))
    x, y = values.get(grid.x), values.get(grid.y)
    return None if x is None or y is None else (x, y)


def left_out(points: Sequence[ScalePoint]) -> str:
    """The scaling sizes left out, each reason once with its sizes ("" when none): deepseek-v3's
    strong curve loses 512 GPUs to ep and 8,192 and 16,384 to DualPipe's micro-batches, and one
    reason for all of them misled."""
    reasons: dict[str, list[int]] = {}
    for p in points:
        if not p.valid:
            reasons.setdefault(str(p.reason), []).append(p.gpus)
    return "; ".join(f"{', '.join(f'{g:,}' for g in sizes)} GPUs ({why})" for why, sizes in reasons.items())


def run_sweep(base: Base, grid: Grid, progress: Progress | None = None) -> SweepResult:
    """The sweep of ``grid`` on ``base`` with the estimator (the full engine while it is absent)."""
    return sweep(base, {grid.x: list(grid.xs), grid.y: list(grid.ys)}, executor=IN_PROCESS, progress=progress)


def _wrap(text: str, width: int = 60) -> str:
    """``text`` broken into hover lines of about ``width`` characters."""
    lines, line = [], ""
    for word in text.split():
        if line and len(line) + len(word) > width:
            lines.append(line)
            line = ""
        line = f"{line} {word}".strip()
    return "<br>".join(lines + [line])


def _cell_time(s: float) -> str:
    """Seconds in about three digits, to fit a cell: ``38.2 s``, ``107 ms``."""
    value, unit = (s, "s") if s >= 1 else (s * 1e3, "ms")
    return f"{value:.1f} {unit}" if value < 100 else f"{value:.0f} {unit}"


def cell_overlay(fig: Any, points: Sequence[Point], grid: Grid, metric: str, size: int) -> None:
    """Make the heatmap's cells clickable and labelled: a scatter of invisible square markers on
    the cell centres (Plotly selects scatter points, never heatmap cells) carrying each cell's
    link and hover text (the heatmap's own hover is switched off), and the cell's value,
    "invalid", or ⚠ for over memory, written in it (annotations, which a selection does not dim)
    when the grid is small enough to read."""
    xs = list(dict.fromkeys(_label(p.overrides[grid.x]) for p in points))
    ys = list(dict.fromkeys(_label(p.overrides[grid.y]) for p in points))
    # The colour scale spans the cells that fit (figures/design.heatmap greys the others).
    values = [p.figures[metric] for p in points if p.valid and p.figures.get("fits", True)]
    lo, hi = (min(values), max(values)) if values else (0.0, 1.0)
    px, py, data = [], [], []
    for p in points:
        x, y = _label(p.overrides[grid.x]), _label(p.overrides[grid.y])
        where = f"{grid.x} = {x}<br>{grid.y} = {y}<br>"
        if not p.valid:
            label, color, hover = "invalid", "#666", where + "invalid: " + _wrap(p.reason or "")
        else:
            f = p.figures
            v = f[metric]
            label = _cell_time(v) if metric == "iteration_time_s" else f"{v:.1%}"
            label += "" if f.get("fits", True) else " ⚠"
            # Viridis is light (yellow) at the better end: dark text there, white elsewhere; a
            # cell that does not fit is light grey.
            better = (hi - v if metric == "iteration_time_s" else v - lo) / ((hi - lo) or 1.0)
            color = "#222" if better > 0.55 or not f.get("fits", True) else "white"
            hover = (where + f"iteration {fmt_time(f['iteration_time_s'])} · MFU {f['mfu']:.1%} · "
                     f"{f['memory_GB_total']:.1f} GB" + ("" if f.get("fits", True) else " (does not fit)")
                     + "<br>click for its link")
        px.append(x)
        py.append(y)
        data.append([p.link or "" if p.valid else "", hover])
        if grid.cells <= 64:       # annotations take positions: a category axis reads "8" as position 8
            fig.add_annotation(x=xs.index(x), y=ys.index(y), text=label, showarrow=False,
                               font=dict(size=size, color=color))
    # figures/design.heatmap's unit: ms when every valid cell is below a second.
    valid = [p.figures[metric] for p in points if p.valid]
    title = time_scale(valid)[1] if metric == "iteration_time_s" else "MFU"
    fig.update_traces(hoverinfo="skip", hovertemplate=None, selector=dict(type="heatmap"),
                      colorbar=dict(title=dict(text=title), thickness=14))
    fig.add_scatter(x=px, y=py, mode="markers", customdata=data, showlegend=False,
                    hovertemplate="%{customdata[1]}<extra></extra>",
                    marker=dict(symbol="square", size=44, color="rgba(0,0,0,0)"),
                    hoverlabel=dict(bgcolor="white", bordercolor="#888", font_color="#222", align="left"),
                    selected=dict(marker=dict(opacity=1)), unselected=dict(marker=dict(opacity=1)))


def cell_rows(points: Sequence[Point], grid: Grid,
              href: Callable[[str | None], str | None]) -> list[dict[str, Any]]:
    """One table row per cell: the two values, its figures or reason, and its link (``href``)."""
    rows = []
    for p in points:
        f = p.figures
        rows.append({grid.x: _label(p.overrides[grid.x]), grid.y: _label(p.overrides[grid.y]),
                     "iteration (s)": f.get("iteration_time_s"),
                     "MFU (%)": 100 * f["mfu"] if p.valid else None,
                     "memory (GB)": f.get("memory_GB_total"),
                     "status": ("ok" if f.get("fits") else "over memory") if p.valid else p.reason,
                     "open": href(p.link) if p.valid else None})
    return rows


# --- Sensitivity and scaling ---------------------------------------------------------------------
@dataclass(frozen=True)
class Upgrades:
    """The sensitivity result and each change's share-link query string (by change name)."""

    result: Sensitivity
    links: Mapping[str, str | None]


def run_sensitivity(base: Base) -> Upgrades:
    """The 2x upgrades (explorer/design/sensitivity.py) and the link of each upgraded scenario."""
    res = sensitivity(base)
    return Upgrades(res, {r.change: share_query(base, base.scenario(r.overrides)) for r in res.rows})


def scaling_sizes(sc: Scenario) -> list[int]:
    """The GPU counts of the scaling curve (the library's default sizes for ``sc``)."""
    p = sc.parallelism
    unit = max(p.tp * p.pp * p.cp, sc.cluster.gpus_per_node) * sc.cluster.datacenters
    return default_sizes(sc.gpus, unit)


def run_scaling(base: Base, mode: str) -> list[ScalePoint]:
    return scaling(base, mode=mode)
