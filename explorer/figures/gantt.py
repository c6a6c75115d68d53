"""The Gantt chart of one iteration: lanes = GPU class x stream, bars coloured by operation kind.

Numeric time axis in ms (``go.Bar`` with ``base``, DESIGN.md); bubbles are left empty.  SVG bars
cost one DOM element each, so beyond ``max_bars`` the timeline is aggregated the way pixels would
be: in each row and pixel column the kind that fills most of it is drawn.  Compute rows need at
least a third of a column busy to draw it (so idle time still looks idle); communication rows draw
any occupied column, shaded by how much of it is busy, so a collective that takes 9 % of the
iteration in slivers between GEMMs stays visible instead of vanishing under the threshold.
"""
from __future__ import annotations

import bisect
import math
from dataclasses import dataclass
from typing import Any, NamedTuple

import plotly.graph_objects as go

from .. import dimensions
from ..analysis.gantt_bar import GanttBar, SpanBar
from ..vocabulary import BLOCKING_DIMS, COMM_DIMS, KIND_COLORS, OFFLOAD, STREAMS, tier_of_limit
from .raster import rasterize as _rasterize

LANES = STREAMS + (OFFLOAD,)          # the copy-engine lane last (activation offloading)
COMM_LANES = frozenset(COMM_DIMS)
COMPUTE_KINDS = frozenset({"forward", "backward", "F&B", "weight-grad", "recompute", "optimizer",
                           "embedding/logits", "compress"})
KIND_ORDER = ("forward", "backward", "F&B", "weight-grad", "recompute", "optimizer", "compress",
              OFFLOAD) + COMM_DIMS
OVERLAPPED = " (overlapped)"
# Columns of the aggregated Gantt: about the chart's width in pixels at 1440 px (70% of the page).
RASTER_COLUMNS = 800
# Narrowest communication bar drawn, as a fraction of the time axis (about 2 px of an 800-px chart).
MIN_COMM_WIDTH = 0.0025
# Bars whose limiting tier is the WAN between datacenters keep their kind's colour and get this
# dark outline (and a legend entry), so the bars that cross the WAN stand out.
WAN_TIER, WAN_OUTLINE, WAN_OUTLINE_WIDTH = "scale-across", "#111111", 2.5
WAN_LEGEND = "crosses the WAN (outlined)"
# In aggregated bands the compute row splits in two: compute kinds above, blocking collectives
# below, so that both stay visible where they share a pixel column.
SPLIT_OFFSETS = {"compute": (-0.11, 0.28), "comm": (0.15, 0.2)}
# Each dimension's place in a band is its registry entry's (dimensions.Dimension.band).
BAND_OFFSETS = {"compute": (0.0, 0.5), **{d: dimensions.get(d).band for d in COMM_DIMS},
                OFFLOAD: (0.49, 0.06)}      # a thin line under the pp band: the host copies


@dataclass(frozen=True)
class GanttInfo:
    """What the Gantt chart drew: bars shown, operations in the timeline, whether merged."""

    bars: int
    operations: int
    merged: bool
    lanes: int


# A class label on the band axis needs about LABEL_PX lines of its font size in pixels; the plot
# area is the figure's height less the legend and the axis margins.
LABEL_PX = 1.5
PLOT_MARGIN_PX = 110

def _lane_key(lane: str) -> tuple[int, int]:
    """A lane's place within its class: the streams' order, a PipeDream replica's lane
    (``compute~3``) after its stream's, by replica number."""
    base, _, k = lane.partition("~")
    return (LANES.index(base) if base in LANES else 99, int(k) if k.isascii() and k.isdigit() else 0)


def lane_name(name: str, gpus: int) -> str:
    """A GPU class's lane label: its name and how many GPUs behave like it (``stage 0 ×2``)."""
    return f"{name} ×{gpus}"


def _base_kind(kind: str) -> str:
    return kind[: -len(OVERLAPPED)] if kind.endswith(OVERLAPPED) else kind


def _sort_key(kind: str) -> tuple[int, int]:
    base = _base_kind(kind)
    return (KIND_ORDER.index(base) if base in KIND_ORDER else 99, kind.endswith(OVERLAPPED))


def _on_wan(limit: str | None) -> bool:
    """Whether a bar's call is limited by the WAN (its bandwidth or its latency)."""
    return bool(limit) and tier_of_limit(str(limit)) == WAN_TIER


def _marker(kind: str, opacity=None, wan: list[bool] | None = None) -> dict:
    m = dict(color=KIND_COLORS.get(_base_kind(kind), "#999"), line=dict(width=0))
    if wan is not None and any(wan):
        m["line"] = dict(color=WAN_OUTLINE, width=[WAN_OUTLINE_WIDTH if w else 0 for w in wan])
    if kind.endswith(OVERLAPPED):
        # Hidden under compute: hatched, so it reads as "happening, not waited for".
        m["pattern"] = dict(shape="/", fgcolor="white", size=5, solidity=0.35, fillmode="overlay")
    if opacity is not None:
        m["opacity"] = opacity
    return m


def gantt(columns: dict[str, list], lane_names: tuple[str, ...], iteration_s: float,
          max_bars: int = 4000, height: int | None = None, font_size: int = 12,
          bands: bool | None = None,
          fold: tuple[float, float, int, float] | None = None) -> tuple[go.Figure, GanttInfo]:
    """Gantt chart of the timeline table (see timeline.COLUMNS); ``lane_names[k]`` names GPU class
    k on the axis (:func:`lane_name`: its name and multiplicity).

    With few GPU classes every (class, stream) pair is its own labelled lane.  With many
    (``bands``, default when there are more than 6 classes) each class is one band: the compute
    stream in the middle — blocking TP/CP/EP collectives drawn on it in their own colour, since
    compute waits for them — the ``dp`` stream as a thin lane above and ``pp`` below.

    ``fold``: the rows are a folded timeline (timeline.folded_timeline) whose block between start
    and end seconds repeats K times, one period apart; it is shaded and labelled "xK", and the time
    axis is labelled in the full iteration's time (``iteration_s``: the drawn span).
    """
    n = len(columns["start_s"])
    classes = sorted(set(columns["gpu_class"])) or [0]
    bands = len(classes) > 6 if bands is None else bands
    lanes_present = sorted({(columns["gpu_class"][i], columns["lane"][i]) for i in range(n)},
                           key=lambda x: (x[0], *_lane_key(x[1])))
    short = dict(enumerate(lane_names))
    label = {k: f"{short[k[0]]} · {k[1]}" for k in lanes_present}

    def where(c: int, lane: str):
        """(y, thickness) of a bar: a category label, or a numeric band position."""
        if not bands:
            return label[(c, lane)], None
        off, width = BAND_OFFSETS.get(lane, (0.0, 0.5))
        return c + off, width

    fig = go.Figure()
    merged = n > max_bars
    if merged:
        bars_drawn = _aggregated(fig, columns, iteration_s, max_bars, bands, where, short)
    else:
        _exact(fig, columns, bands, where, short, iteration_s)
        bars_drawn = n
    # Every kind in the timeline gets a legend entry, even one too thin to win a pixel column.
    drawn = {t.name for t in fig.data}
    for kind in sorted({columns["kind"][i] for i in range(n)} - drawn, key=_sort_key):
        fig.add_trace(go.Bar(x=[None], y=[None], orientation="h", name=kind, marker=_marker(kind)))
    if any(_on_wan(t) for t in columns.get("tier", ())):
        outline = dict(color=WAN_OUTLINE, width=WAN_OUTLINE_WIDTH)
        fig.add_trace(go.Bar(x=[None], y=[None], orientation="h", name=WAN_LEGEND,
                             marker=dict(color="white", line=outline)))
    if bands:
        rows_count = len(classes)
        h = height or max(380, min(600, 80 + 28 * rows_count))
        # Label every class while the labels fit the plot's height; beyond, every k-th one (the
        # first and last kept), so that 64 stages do not print on top of each other.
        step = max(1, math.ceil(rows_count * LABEL_PX * font_size / max(h - PLOT_MARGIN_PX, 1)))
        ticks = classes[::step]
        if ticks[-1] != classes[-1]:
            ticks = ticks[:-1] + [classes[-1]] if len(ticks) > 1 else ticks + [classes[-1]]
        yaxis = dict(tickmode="array", tickvals=ticks, ticktext=[short[k] for k in ticks],
                     range=[max(classes) + 0.6, min(classes) - 0.6], automargin=True, showgrid=False,
                     zeroline=False, tickfont=dict(size=font_size))
    else:
        order = [label[k] for k in lanes_present]
        yaxis = dict(categoryorder="array", categoryarray=order[::-1], automargin=True,
                     tickfont=dict(size=font_size), tickmode="array", tickvals=order, ticktext=order)
        rows_count = len(order)
        h = height or max(380, min(600, 70 + 24 * rows_count))
    fig.update_layout(
        barmode="overlay", height=h, margin=dict(l=10, r=10, t=30, b=40), bargap=0.25,
        legend=dict(orientation="h", yanchor="bottom", y=1.0, x=0, font=dict(size=font_size)),
        xaxis=dict(title="time (ms)", range=[0, iteration_s * 1e3 * 1.01], showgrid=True, zeroline=False),
        yaxis=yaxis, font=dict(size=font_size), hoverlabel=dict(font_size=font_size), uirevision="gantt")
    if fold is not None:
        x0, x1, repeats, period = fold
        fig.add_vrect(x0=x0 * 1e3, x1=x1 * 1e3, fillcolor="rgba(90,90,90,0.08)", line_width=1,
                      line_dash="dot")
        # The label sits mid-height on an opaque box: at the block's top corner it covered stage 0.
        fig.add_annotation(x=(x0 + x1) / 2 * 1e3, y=0.5, yref="paper", showarrow=False,
                           text=f"<b>×{repeats:,}</b> periods", font=dict(size=font_size + 1),
                           bgcolor="rgba(255,255,255,0.9)", bordercolor="#666", borderwidth=1)
        vals, texts, unit = folded_ticks(iteration_s, x0, x1, repeats, period)
        fig.update_xaxes(tickmode="array", tickvals=vals, ticktext=texts,
                         title=f"time ({unit}) — folded: the shaded block stands for {repeats:,} "
                               f"periods of {period * 1e3:,.1f} ms")
    return fig, GanttInfo(bars_drawn, n, merged, rows_count)


def _nice_step(raw: float) -> float:
    """The 1-2-5 x 10^k step nearest above ``raw`` (axis ticks)."""
    mag = 10.0 ** math.floor(math.log10(raw)) if raw > 0 else 1.0
    return next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)


def folded_ticks(span_s: float, x0: float, x1: float, repeats: int,
                 period: float) -> tuple[list[float], list[str], str]:
    """Tick positions (ms on the drawn axis) and labels in the iteration's own time for a folded
    Gantt: left of the block the drawn time is the real time; the block [x0, x1] (one period of
    every stage, skewed across stages) stands for ``repeats`` periods, so a point right of it is
    (repeats - 1) x period later than drawn (explorer/fold/tasks.py: a task n periods later is
    shifted by n x delta).  Inside the block no tick is placed: its time is ambiguous.  Labels are
    in s when the real iteration is 10 s or longer, else ms."""
    shift = (repeats - 1) * period
    total = span_s + shift
    unit, scale = ("s", 1.0) if total >= 10 else ("ms", 1e3)
    step = _nice_step(span_s / 8) if span_s > 0 else 1.0
    keep = 0.04 * span_s                        # no tick crowding the block's edges
    drawn = [0.0, x0, x1] + [k * step for k in range(1, int(span_s / step) + 1)
                             if abs(k * step - x0) > keep and abs(k * step - x1) > keep
                             and not x0 < k * step < x1]
    drawn = sorted(set(drawn))

    def real(t: float) -> float:
        return t + shift if t >= x1 else t

    def fmt(v: float) -> str:
        v *= scale
        # One decimal up to 1,000: the block's end and the next tick can be <1 unit apart.
        return "0" if v == 0 else f"{v:,.0f}" if abs(v) >= 1000 else f"{v:,.1f}"

    return [t * 1e3 for t in drawn], [fmt(real(t)) for t in drawn], unit


def _aggregated(fig: go.Figure, columns: dict[str, list], iteration_s: float, max_bars: int, bands: bool,
                where, short: dict[int, str]) -> int:
    def row_of(c: int, lane: str, kind: str) -> tuple:
        if bands and (lane == "compute" or lane in BLOCKING_DIMS):
            return (c, "compute" if kind in COMPUTE_KINDS else "comm")
        return (c, lane)

    rows = []
    tiers = columns.get("tier") or [None] * len(columns["start_s"])
    wan_spans: dict[tuple, list[tuple[float, float]]] = {}
    for i in range(len(columns["start_s"])):
        key = row_of(columns["gpu_class"][i], columns["lane"][i], columns["kind"][i])
        rows.append((key, columns["kind"][i], columns["start_s"][i], columns["end_s"][i],
                     key[1] == "comm" or key[1] in COMM_LANES))
        if _on_wan(tiers[i]):
            span = (columns["start_s"][i], columns["end_s"][i])
            wan_spans.setdefault((key, columns["kind"][i]), []).append(span)
    merged_spans = {k: _merge(v) for k, v in wan_spans.items()}
    bins = RASTER_COLUMNS
    raster = _rasterize(rows, iteration_s, bins)
    while len(raster) > max_bars and bins > 100:
        bins //= 2          # coarser columns until the bar budget holds
        raster = _rasterize(rows, iteration_s, bins)
    by_kind: dict[str, list[_Cell]] = {}
    for (c, row), kind, s, e, ops, fill in raster:
        if bands and row in SPLIT_OFFSETS:
            pos = (c + SPLIT_OFFSETS[row][0], SPLIT_OFFSETS[row][1])
        else:
            pos = where(c, row)
        comm = row == "comm" or row in COMM_LANES
        wan = _overlaps(merged_spans.get(((c, row), kind), ([], [])), s, e)
        by_kind.setdefault(kind, []).append(_Cell(pos[0], pos[1], s, e, fill, comm, wan,
                                                      SpanBar(ops, (e - s) * 1e3, short[c], row, fill * 100)))
    R = SpanBar.ref
    for kind in sorted(by_kind, key=_sort_key):
        bars = by_kind[kind]
        fig.add_trace(go.Bar(
            y=[b.y for b in bars], width=[b.width for b in bars] if bands else None,
            base=[b.start * 1e3 for b in bars], x=[(b.end - b.start) * 1e3 for b in bars],
            orientation="h", name=kind,
            marker=_marker(kind, [0.3 + 0.7 * b.fill if b.comm else 1.0 for b in bars],
                           [b.wan for b in bars]),
            customdata=[b.hover.customdata() for b in bars],
            hovertemplate=(f"<b>{kind}</b> (mostly) · {R('lane')} · {R('row')}<br>"
                           f"busy {R('busy_pct', ':.0f')}% of this span · "
                           f"{R('operations')} operations start here<br>"
                           f"span {R('span_ms', ':.3f')} ms from %{{base:.3f}} ms (aggregated view)"
                           "<extra></extra>")))
    return len(raster)


class _Cell(NamedTuple):
    """One aggregated bar before drawing: its band position and thickness, span in seconds, the
    busy share of its row over the span, whether it is communication (shaded by how busy) and
    crosses the WAN (outlined), and its hover record."""

    y: Any                    # a lane label, or a band's numeric position
    width: float | None
    start: float
    end: float
    fill: float
    comm: bool
    wan: bool
    hover: SpanBar


def _bar(c: dict[str, list], i: int, kind: str, flops: list | None, short: dict[int, str]) -> GanttBar:
    """The hover record of row ``i`` of the timeline table ``c``: its texts, and the raw numbers
    *Explain this bar* derives from (explorer/teaching/explain.py)."""
    dur_s = c["duration_s"][i]
    compute = c["lane"][i] == "compute"
    f = (flops[i] if flops is not None else None) if compute else None
    if compute:
        rate = f"{f / dur_s / 1e12:.0f} TFLOP/s achieved" if f and dur_s > 0 else ""
        what, how = (f"{_fmt_flops(f)} · {rate}" if f else "memory-bound work (HBM traffic)"), ""
    else:
        bw = f" · achieved {c['busbw_GBps'][i]:.1f} GB/s bus bandwidth" if c["busbw_GBps"][i] else ""
        what = f"{_fmt_bytes(c['bytes'][i])} over a group of {c['group'][i] or '–'}"
        how = f"{c['algorithm'][i] or 'p2p'} · limited by {c['tier'][i] or '–'}{bw}"
    return GanttBar(kind=kind, micro_batch=c["micro_batch"][i], chunk=c["chunk"][i],
                    detail=c["detail"][i] or "", where=f"{short[c['gpu_class'][i]]} · {c['lane'][i]}",
                    duration_ms=dur_s * 1e3,
                    what=what, how=how, flops=f or 0.0,
                    bytes=0.0 if compute else c["bytes"][i] or 0.0,
                    group=0 if compute else c["group"][i] or 0,
                    busbw_GBps=0.0 if compute else c["busbw_GBps"][i] or 0.0,
                    tier="" if compute else c["tier"][i] or "",
                    algorithm="" if compute else c["algorithm"][i] or "")


def _merge(spans: list[tuple[float, float]]) -> tuple[list[float], list[float]]:
    """Disjoint sorted intervals covering ``spans``, as (starts, ends)."""
    starts: list[float] = []
    ends: list[float] = []
    for a, b in sorted(spans):
        if ends and a <= ends[-1]:
            ends[-1] = max(ends[-1], b)
        else:
            starts.append(a)
            ends.append(b)
    return starts, ends


def _overlaps(merged: tuple[list[float], list[float]], s: float, e: float) -> bool:
    """Whether [s, e) meets one of the disjoint intervals of :func:`_merge`."""
    starts, ends = merged
    k = bisect.bisect_left(starts, e) - 1        # the last interval starting before e
    return k >= 0 and ends[k] > s


def _fmt_bytes(n) -> str:
    if not n:
        return "–"
    for unit, k in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if n >= k:
            return f"{n / k:.2f} {unit}"
    return f"{n:.0f} B"


def _fmt_flops(f) -> str:
    if not f:
        return "–"
    for unit, k in (("PFLOP", 1e15), ("TFLOP", 1e12), ("GFLOP", 1e9), ("MFLOP", 1e6)):
        if f >= k:
            return f"{f / k:.2f} {unit}"
    return f"{f:.0f} FLOP"


_R = GanttBar.ref
_HOVER_HEAD = (f"<b>{_R('kind')}</b> {_R('detail')} · {_R('where')}<br>"
               f"micro-batch {_R('micro_batch')} · chunk {_R('chunk')}<br>"
               f"start %{{base:.3f}} ms · duration {_R('duration_ms', ':.3f')} ms<br>{_R('what')}")
COMPUTE_HOVER = _HOVER_HEAD + "<extra></extra>"
COMM_HOVER = _HOVER_HEAD + f"<br>{_R('how')}<extra></extra>"


def _exact(fig: go.Figure, c: dict[str, list], bands: bool, where, short: dict[int, str],
           iteration_s: float) -> None:
    flops = c.get("flops")
    by_kind: dict[str, list[int]] = {}
    for i in range(len(c["start_s"])):
        by_kind.setdefault(c["kind"][i], []).append(i)
    for kind in sorted(by_kind, key=_sort_key):
        ii = by_kind[kind]
        pos = [where(c["gpu_class"][i], c["lane"][i]) for i in ii]
        custom = [_bar(c, i, kind, flops, short).customdata() for i in ii]
        compute = c["lane"][ii[0]] == "compute"
        # A collective of 2 ms in an 8 s iteration is narrower than a pixel: communication bars are
        # drawn at least MIN_COMM_WIDTH of the axis wide so that they stay visible (the hover gives
        # the true duration).
        least = 0.0 if compute else MIN_COMM_WIDTH * iteration_s * 1e3
        fig.add_trace(go.Bar(
            y=[p[0] for p in pos], width=[p[1] for p in pos] if bands else None,
            base=[c["start_s"][i] * 1e3 for i in ii], x=[max(c["duration_s"][i] * 1e3, least) for i in ii],
            orientation="h", name=kind, customdata=custom,
            marker=_marker(kind, wan=[_on_wan(c["tier"][i]) for i in ii] if "tier" in c else None),
            hovertemplate=COMPUTE_HOVER if compute else COMM_HOVER))
