"""The Timeline tab: the Gantt chart, where the time goes, the bottleneck in words."""
from __future__ import annotations

import plotly.graph_objects as go
import streamlit as st

from ... import figures
from ...analysis.gantt_bar import GanttBar
from ...figures.fonts import PRESENT_FONT_PX
from ...figures.gantt_present import for_projector
from ...figures.of_run import HOST_WAIT_COLOR
from ...schedules import registry
from ...schedules.registry import Window
from ...serving.result import WINDOW_STEPS
from ...teaching.explain import bar_peak, explain_bar
from ...vocabulary import COMM_DIMS
from ..cache import ViewData, bubble_story
from ..export import chart
from ..plain import plain
from ..summary import Summary
from ..widget_defaults import kept_expander
from . import collective, sync, textbook

# What the chart shows for schedules whose iterations overlap (the metrics measure a steady state).
WINDOW_NOTE = {Window.OVERLAP: "one iteration alone", Window.ASYNC: "two iterations back to back"}


def gantt_figure(data: ViewData, present: bool) -> go.Figure:
    """The cached Gantt, redrawn for presentation mode on a copy (the cache stays untouched):
    18-px text and the lane labels that fit (figures/gantt_present.py)."""
    return for_projector(data.gantt) if present else data.gantt


def render(data: ViewData, raw_json: str, present: bool) -> None:
    j = data.summary
    font = PRESENT_FONT_PX if present else 12
    left, right = st.columns([7, 3], gap="small")
    with left:
        event = chart(gantt_figure(data, present), key="gantt", present=present,
                      config={"displaylogo": False, "scrollZoom": True}, on_select="rerun",
                      selection_mode="points")
        _explain(data, event, present)
        _captions(data)
        sync.render(data, raw_json, present)
        textbook.render(data, present)
    with right:
        st.info(plain(j.bottleneck))
        if not present:
            # Always drawn (disabled when the sentence names no single bar, e.g. the bubble), so that
            # the widget and its state never come and go with the scenario.
            st.toggle("Explain the bar it names", key="explain_bottleneck", persist_state="session",
                      disabled=bottleneck_bar(data) is None,
                      help="Shows the derivation of the longest bar of the category this sentence names "
                           "(a click on the chart shows that bar instead); none for the bubble")
        if j.layout.pp > 1 and not present:
            st.caption(j.bubble_explanation)
            # Under the ideal pipeline card and formula agree: nothing to decompose.
            if not present and not data.scenario.parallelism.ideal_pipeline:
                why = kept_expander("Card against formula, term by term", "bubble_story")
                if why.open:
                    with why:
                        st.markdown(bubble_story(raw_json))
        chart(figures.breakdown(j.breakdown_s, j.iteration_time_s,
                                title=_breakdown_title(data.breakdown_name, present),
                                height=_breakdown_height(j, present), font_size=font),
                        key="breakdown", present=present, config={"displayModeBar": False})
        if j.layout.pp > 1 and present:
            # On a projector the breakdown comes first: below the long formula sentence its bubble
            # bar fell under a 1280x720 screen's edge, the bar a tour step asks the class to read.
            st.caption(j.bubble_explanation)
        kinds = j.warning_kinds or ("",) * len(j.warnings)
        for w, kind in zip(j.warnings, kinds, strict=True):
            # A split moved to fit memory, modules recomputed under recompute none or a kernel that runs
            # in another's place is what the run did (a note); the rest are faults to fix.
            if kind in ("split", "recompute", "kernel"):
                st.info(plain(w), icon="ℹ️")
            else:
                st.warning(plain(w), icon="⚠️")
        for unread, reason in j.dormant:
            # A setting nothing reads here (config/dormant.py): said, so a control that moves
            # nothing is never a silent no-op.
            st.info(plain(f"Not read: {unread} — {reason}."), icon="ℹ️")
    if not present:
        with st.expander("How to read this"):
            st.markdown(HOW_TO_READ)


def _breakdown_height(j: Summary, present: bool) -> int:
    """The breakdown's height: in presentation mode 26 px per category at 18 px (below the bottleneck
    sentence; the Gantt beside it decides the screen) plus title and axis."""
    return max(240, 120 + 26 * sum(v > 0 for v in j.breakdown_s.values())) if present else 300


# The word a bottleneck sentence starts with -> the Gantt traces (kinds) whose bars it talks about.
BOTTLENECK_KINDS = {**{d: (d,) for d in COMM_DIMS},
                    "optimizer": ("optimizer",), "compute": ("forward", "backward", "F&B"),
                    "recompute": ("recompute", "backward"), "offload": ("offload",)}


def bottleneck_bar(data: ViewData) -> GanttBar | None:
    """The longest Gantt bar of the category the bottleneck sentence names (None for the bubble,
    which is no bar, or an aggregated chart without exact bars)."""
    first = data.summary.bottleneck.split(" ", 1)[0].lower()
    kinds = BOTTLENECK_KINDS.get(first)
    if kinds is None:
        return None
    best: GanttBar | None = None
    for tr in data.gantt.data:
        if tr.name not in kinds or tr.customdata is None:
            continue
        for row in tr.customdata:
            bar = GanttBar.from_customdata(row)
            if bar is not None and (best is None or bar.duration_ms > best.duration_ms):
                best = bar
    return best


def _explain(data: ViewData, event, present: bool = False) -> None:
    """The derivation of the bar the user clicked (explorer/teaching/explain.py), or else, with the
    bottleneck sentence's toggle on, of the bar that sentence names."""
    points = (getattr(event, "selection", None) or {}).get("points") or []
    custom = points[0].get("customdata") if points else None
    # A clicked bar: its record, or None for a bar of the aggregated chart (explain_bar says so).
    bar = GanttBar.from_customdata(custom)
    if not custom:
        bar = bottleneck_bar(data) if st.session_state.get("explain_bottleneck") and not present else None
        if bar is None:
            st.caption("Click a bar of the Gantt to see how its duration comes about.")
            return
    gpu = data.scenario.hardware.gpu
    with st.container(border=True):
        st.markdown("**Explain this bar**")
        # The dtype's dense peak, as the kernel model reads it (a V100's fp32: its CUDA cores).
        peak, dtype = bar_peak(gpu, data.scenario.training.dtype)
        st.markdown(explain_bar(bar, peak, gpu.name, dtype))
        if bar is not None:
            collective.render_call(data, bar)


def _captions(data: ViewData) -> None:
    j = data.summary
    window = registry.get(j.layout.schedule).window
    notes = []
    if data.json.get("inference") is not None:
        # Prefill and decode are both forwards (one colour): a lecturer read the whole axis (62 ms)
        # as a step beside the tour's 6.7 ms decode step.
        notes.append(f"A serving timeline: each GPU class's first, long bar is one request's prefill, "
                     f"then {WINDOW_STEPS} decode steps of the whole batch follow; the cards and the "
                     "breakdown measure one decode step.")
    wait = [sh for sh in data.gantt.layout.shapes if sh.fillcolor == HOST_WAIT_COLOR]
    if wait:
        # The breakdown has no category of its own for it: a reader took the 96 % compute for work.
        ms = (wait[0].x1 - wait[0].x0)
        notes.append(f"The host sets the pace: the GPUs finish their step and wait {ms:,.1f} ms for the next "
                     "input (shaded); the breakdown counts that wait in compute.")
    if j.dp_priority:
        notes.append("P3 bucket priorities: the next iteration starts on its first layers while later "
                     "buckets are still reduced; the metrics measure that steady-state period.")
    if window in WINDOW_NOTE:
        notes.append(f"Iterations of this schedule overlap: the chart shows {WINDOW_NOTE[window]}; the "
                     "metrics and breakdown measure the steady state.")
    if len(data.labels) > 6:
        notes.append("One band per pipeline stage: compute in the middle (blocking TP/CP/EP collectives "
                     "in their colours just below it), the `dp` stream above, `pp` transfers below.")
    if data.fold is not None:
        _, _, k, period = data.fold
        notes.append(f"Steady state folded: every stage repeats the same {period * 1e3:,.1f} ms pattern "
                     f"{k:,} times, so the chart draws it once (shaded, ×{k:,}) and the time axis right of "
                     "it counts every repeat; the metrics are those of the full iteration, exactly.")
    info = data.gantt_info
    if info.merged or data.full_rows > info.operations:
        how = ("then aggregated to screen resolution: a bar shows the kind that fills most of its pixels; "
               "collectives that block compute get their own row, shaded by how much of the span they fill"
               if info.merged else "one bar per pass and kind")
        notes.append(f"Large timeline: {data.full_rows:,} per-layer operations drawn as {info.bars:,} bars "
                     f"({how}). Download the Perfetto trace for every single operation.")
    for n in notes:
        st.caption(n)


HOW_TO_READ = (
    "- **Lanes** are GPU classes (one per pipeline stage; ×N says how many GPUs behave identically) times "
    "streams: `compute` runs forward (blue), backward (orange), weight gradients (yellow), recompute "
    "(mauve), DualPipe's fused forward+backward (violet) and the optimizer (grey); `tp`/`cp`/`ep` show "
    "collectives — solid where they block compute, hatched where they run hidden under it; `pp` the "
    "activations sent to the next stage; `dp` gradient buckets and ZeRO gathers.\n"
    "- **Empty space on a compute lane is idle time**: the pipeline bubble, or waiting for communication. "
    "Zoom with the mouse wheel or a box, double-click to reset; hover a bar for its FLOPs or bytes, group "
    "size, algorithm, limiting tier and achieved bandwidth.\n"
    "- **The breakdown** splits the iteration of the busiest stage into compute, recompute, exposed "
    "communication per dimension, bubble and optimizer; it sums to the iteration time.\n"
    "- **The cards**: *MFU* = model FLOPs without recompute / (time × GPUs × bf16 peak) (PaLM, App. B); "
    "*TFLOP/s per GPU* counts the hardware FLOPs executed, recompute included (Megatron-LM's convention); "
    "*Bubble* is the pipeline's idle share averaged over stages (the busiest stage's below it); *Memory* "
    "is weights + gradients + optimizer state + peak activations on the fullest stage.")


# Characters of the breakdown's title on one line of its column at 1280 px in presentation mode
# ("Where the time goes · stage 15 (straggler rep" was cut there).
PRESENT_TITLE_CHARS = 36


def _breakdown_title(name: str, present: bool) -> str:
    """The breakdown chart's title; on a projector a long one puts the stage's name on a line of
    its own."""
    title = f"Where the time goes · {name}"
    if present and len(title) > PRESENT_TITLE_CHARS:
        return f"Where the time goes<br>{name}"
    return title
