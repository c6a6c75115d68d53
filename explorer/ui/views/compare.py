"""The Compare tab: scenario A (the sidebar) against B (A plus overrides edited here).

Shows the metric cards of A and B with B's differences, the waterfall of the iteration-time
difference by category, both Gantt charts on one time axis and memory side by side.  B is
simulated through the same byte-bounded cache as A (cache.view_data), so switching back and forth
between overrides costs nothing the second time.  An invalid B shows its one-line reason and the
last valid B stays on screen.
"""
from __future__ import annotations

import dataclasses
import json
from typing import Any

import plotly.graph_objects as go
import streamlit as st

from ... import figures
from ...analysis.compare import Comparison, Delta, compare
from ...analysis.verdict import MemoryVerdict, over_memory_sentences
from ...figures import compare as cfig
from ...figures.gantt import GanttInfo, lane_name
from ...fold.budget import check_unfolded_budget
from ...result.timeline import build_timeline
from ...run.compare import RUN_KEYS, loss_line, run_delta, run_value
from ...scenario import SETTABLE, ScenarioError, from_dict
from ...share import format_value
from ..b_side import BSide, on_b_field_change, on_b_remove, on_b_set
from ..cache import BYTES_PER_BAR, MAX_BARS, ByteBoundedLRU, ViewData, view_data
from ..controls import WIDGET_KEYS
from ..export import chart
from ..plain import plain
from ..widget_defaults import index_of, text_of
from .metrics import fmt_time, rate_text
from .run import run_summary
from .timeline import gantt_figure

# Fields the editor offers: the sidebar's first (in its order; a serving scenario's own after the
# training ones), then every other settable field.
FIELDS: tuple[str, ...] = tuple(dict.fromkeys(
    [k for k in WIDGET_KEYS if k != "model.preset" and not k.startswith("inference.")]
    + [k for k in WIDGET_KEYS if k.startswith("inference.")]
    + [k for k, f in SETTABLE.items() if k not in ("name", "description") and not f.metadata.get("derived")]))
DEFAULT_FIELD = "parallelism.pp"
# Which way is better for each card: "inverse" = less is better (Streamlit colours a fall green).
BETTER = {"iteration_time_s": "inverse", "time_per_step_s": "inverse", "tokens_per_s": "normal",
          "mfu": "normal", "tflops_per_gpu": "normal", "bubble_fraction": "inverse",
          "memory_GB_total": "inverse"}


def render(data: ViewData, raw_json: str, b: BSide, present: bool) -> None:
    """The tab.  ``data`` is A's cached view (``raw_json`` its key), ``b`` the B that
    :func:`b_side.resolve_b` settled on."""
    _editor(b, present)
    b_json = json.dumps(b.raw, sort_keys=True, default=str)
    try:
        data_b = view_data(b_json)
    except ScenarioError as exc:           # valid rules but beyond the work budget
        st.error(f"B cannot be simulated — {plain(str(exc))}", icon="⚠️")
        return
    cmp = compare(data.json, data_b.json)
    _cards(cmp, present)
    _runs(raw_json, b_json)
    font = 15 if present else 12
    left, right = st.columns([3, 2], gap="small")
    with left:
        (da, real_a), (db, real_b) = unfolded(data, raw_json), unfolded(data_b, b_json)
        # Presentation mode's 18 px lane labels need about 30 px a lane, its legend two columns.
        cap, per_lane, columns = (360, 30, 2) if present else (330, 22, None)
        pair = (gantt_figure(da, present), gantt_figure(db, present))
        heights = (cfig.gantt_height(da.gantt_info.lanes, cap, per_lane),
                   cfig.gantt_height(db.gantt_info.lanes, cap, per_lane))
        titles = (f"A · {_short(data.scenario.name)}", _b_title(b))
        if real_a and real_b:
            ga, gb = cfig.shared_time_axis(*pair, heights=heights, titles=titles, columns=columns)
        else:   # a folded drawing's axis is compressed: no common scale exists, say so
            ga, gb = (cfig.titled(f, t, h, columns) for f, t, h in zip(pair, titles, heights, strict=True))
            st.caption("A folded steady state too long to draw in full: each chart keeps its own folded "
                       "time axis (labelled in real time); the waterfall gives the exact difference.")
        chart(ga, key="gantt_a", present=present, config={"displaylogo": False, "scrollZoom": True})
        chart(gb, key="gantt_b", present=present, config={"displaylogo": False, "scrollZoom": True})
    with right:
        chart(cfig.waterfall(cmp, height=330 if present else 320, font_size=font), key="waterfall",
              present=present, config={"displayModeBar": False})
        chart(cfig.memory_side_by_side(cmp, height=290 if present else 300, font_size=font),
                        key="memory_ab", present=present, config={"displayModeBar": False})
    if not present:
        with st.expander("How to read this"):
            st.markdown(HOW_TO_READ)


# Gantt charts of folded scenarios drawn in full for the comparison (a folded chart's time axis is
# compressed, so two of them cannot share one); bounded by bytes like the view cache.
_UNFOLDED = ByteBoundedLRU(64 * 2**20)


def unfolded(data: ViewData, raw_json: str) -> tuple[ViewData, bool]:
    """``data`` with a Gantt on the iteration's real time axis, and whether it is: unchanged when
    the steady state is not folded; a folded one is re-drawn unfolded (cached) when its full
    timeline is within the work budget, else left folded (False)."""
    if data.fold is None:
        return data, True
    try:
        check_unfolded_budget(data.scenario)
    except ScenarioError:
        return data, False
    fig, info = _UNFOLDED.get_or_compute(raw_json, lambda: _draw_unfolded(raw_json),
                                         lambda v: v[1].bars * BYTES_PER_BAR + 4096)
    return dataclasses.replace(data, gantt=fig, gantt_info=info, fold=None), True


def _draw_unfolded(raw_json: str) -> tuple[go.Figure, GanttInfo]:
    from ...simulate import simulate

    res = simulate(from_dict(json.loads(raw_json)))
    draw = build_timeline(res.tasks, tuple(c.label for c in res.classes), max_segments=MAX_BARS)
    lanes = tuple(lane_name(c.name, c.gpus) for c in res.classes)
    return figures.gantt(draw.columns, lanes, res.iteration_time_s, max_bars=MAX_BARS)


def _short(text: str, n: int = 60) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def _b_title(b: BSide) -> str:
    """``B · A + pp = 2, ...`` (cut to a title's length)."""
    if not b.overrides:
        return "B · same as A"
    return "B · A + " + _short(", ".join(f"{k.rpartition('.')[2]} = {format_value(v)}"
                                         for k, v in b.overrides.items()))


def _editor(b: BSide, present: bool) -> None:
    """B's overrides as removable chips, a field picker and a value box; the one-line reason when
    the overrides being edited (or a value typed) are invalid."""
    over = st.session_state.get("_b_overrides") or {}
    st.session_state.setdefault("_b_field", DEFAULT_FIELD)
    with st.container(horizontal=True, vertical_alignment="center", gap="small"):
        st.markdown("**B = A +**" if over else "**B = A** — set a field to compare:")
        for key, value in over.items():
            st.button(f"{key} = {format_value(value)}", key=f"_b_rm_{key}", icon=":material/close:",
                      on_click=on_b_remove, args=(key,), help="Remove this override from B")
        box = st.popover("Edit B", icon=":material/edit:") if present else None
    with box or st.container():
        c1, c2, c3 = st.columns([3, 2, 1], vertical_alignment="bottom", gap="small")
        # Each with its current value as its default: presentation's popover mounts them only when
        # opened, after later runs (explorer/ui/widget_defaults.py; a hunt found B set a field nobody
        # picked, to A's own value).
        c1.selectbox("Field of B", FIELDS, index=index_of(FIELDS, "_b_field"), key="_b_field",
                     on_change=on_b_field_change, label_visibility="collapsed",
                     help="Any scenario field (dotted key, as --set takes it)")
        if "_b_value" not in st.session_state:
            on_b_field_change()
        c2.text_input("Value in B", value=text_of("_b_value"), key="_b_value", label_visibility="collapsed",
                      placeholder="value in B (YAML: 8, 1e6, true, ring, [5,7,7,5])")
        c3.button("Set in B", key="_b_set", on_click=on_b_set, type="primary", width="stretch")
    msg = st.session_state.get("_b_msg")
    if msg:
        st.error(f"Not set — {plain(str(msg))}", icon="⚠️")
    if b.error:
        st.error(f"B is not valid — {plain(str(b.error))}; showing the last valid B.", icon="⚠️")


def _fmt(d: Delta, v: float) -> str:
    if d.key in ("iteration_time_s", "time_per_step_s"):
        return fmt_time(v)
    if d.key in ("mfu", "bubble_fraction"):
        return f"{v:.1%}"
    if d.key == "tflops_per_gpu":
        return rate_text(v)          # the Run cards' digits (a hunt read 47 here beside their 47.3)
    if d.key == "memory_GB_total":
        return f"{v:.1f} GB"
    return f"{v:,.0f}"


def delta_text(d: Delta) -> str:
    """B - A short enough for a card at 1280 px: time in its unit, shares in points, throughput
    as a percentage, TFLOP/s and memory in their units."""
    if d.key in ("iteration_time_s", "time_per_step_s"):
        return f"{d.delta * 1e3:+,.1f} ms" if abs(d.delta) < 1 else f"{d.delta:+,.3f} s"
    if d.key in ("mfu", "bubble_fraction"):
        return f"{d.delta * 100:+.1f} pt"
    if d.key == "tflops_per_gpu":
        return f"{d.delta:+,.1f}"
    if d.key == "memory_GB_total":
        return f"{d.delta:+,.1f} GB"
    return f"{d.relative:+.1%}" if d.relative is not None else f"{d.delta:+,.0f}"


# The A/B marker beside the cards; a card's delta description (A's value, presentation mode) wraps
# under the delta instead of being cut to an ellipsis.
CARD_CSS = """<style>
.ab-side {font-size: 1.5rem; white-space: nowrap; font-weight: 700; text-align: center; color: #555;}
div:has(> [data-testid="stMetricDeltaDescription"]) {flex-wrap: wrap; row-gap: 2px;}
[data-testid="stMetricDeltaDescription"] {flex-shrink: 0; max-width: none; overflow: visible;}
[data-testid="stMetricDeltaDescription"] * {overflow: visible; text-overflow: clip; white-space: nowrap;}
</style>"""


def _cards(cmp: Comparison, present: bool) -> None:
    """Two rows of cards, A above B, B's with B - A (green where B is better, but never for a B
    that does not fit: its gains are not wins).  A side over memory is said above the cards and
    its memory card reads "does not fit".  Presentation mode has room for one row: B's cards,
    each with B - A and A's value beside it."""
    st.markdown(CARD_CSS, unsafe_allow_html=True)
    for sentence in over_memory_sentences(cmp.a, cmp.b):
        st.error(sentence, icon=":material/block:")
    fits = {"A": MemoryVerdict.of_run(cmp.a).fits, "B": MemoryVerdict.of_run(cmp.b).fits}
    for side in ("B",) if present else ("A", "B"):
        cols = st.columns([0.3] + [1] * len(cmp.metrics), gap="small", vertical_alignment="center")
        cols[0].markdown(f"<div class='ab-side'>{'A→B' if present else side}</div>", unsafe_allow_html=True)
        for col, d in zip(cols[1:], cmp.metrics, strict=True):
            kwargs: dict[str, Any] = {}
            if side == "B":
                text = delta_text(d)
                same = not any(ch in "123456789" for ch in text)      # no change at this precision
                kwargs = dict(delta="same as A" if same else text, delta_arrow="off" if same else "auto",
                              # A B that cannot run gains nothing: no green (its memory growth stays red).
                              delta_color=("off" if same or (not fits["B"] and d.key != "memory_GB_total")
                                           else BETTER[d.key]))
                if present:
                    kwargs["delta_description"] = f"from {_fmt(d, d.a)}"
            elif d.key == "memory_GB_total":
                kwargs = dict(help=f"of {cmp.a['memory_capacity_GB']:.1f} GB per GPU")
            label = d.label
            if d.key == "memory_GB_total" and not fits[side]:
                label = "Memory: does not fit"
                run = cmp.a if side == "A" else cmp.b
                kwargs["help"] = f"of {run['memory_capacity_GB']:.1f} GB per GPU: this layout cannot run"
            col.metric(label, _fmt(d, d.a if side == "A" else d.b), border=True, **kwargs)


def _runs(raw_a: str, raw_b: str) -> None:
    """Both run plans side by side, when A and B have one (issue 38: days, GPU-hours, goodput,
    energy and B - A; the CLI's ``diff`` prints the same block)."""
    a, b = run_summary(raw_a), run_summary(raw_b)
    if a is None and b is None:
        return
    if a is None or b is None:
        st.caption(f"Whole run: only {'B' if b else 'A'} has a run plan (training.phases or total_tokens).")
        return
    d = run_delta(a, b)
    st.markdown("**Whole run**, A against B")
    st.dataframe([{"": label, "A": run_value(k, a.get(k)), "B": run_value(k, b.get(k)),
                   "B − A": run_value(k, d[k], signed=True)} for k, label in RUN_KEYS],
                 hide_index=True, width="stretch")
    said = loss_line(a, b)
    if said:
        st.caption(said)


HOW_TO_READ = (
    "- **A** is the scenario of the sidebar; **B** is A plus the overrides above (the address bar "
    "carries them as `b.<field>=value`, so the link reopens this comparison).\n"
    "- **The waterfall** starts at A's iteration time, adds what B spends more (red) or less (green) "
    "in each category — compute, recompute, exposed tp/cp/ep/pp/dp communication, pipeline bubble, "
    "optimizer — and ends at B's time. Each side is broken down on its own busiest stage, as in the "
    "Timeline tab, so the bars sum exactly to the difference.\n"
    "- **The Gantt charts** share one time axis: the shorter iteration ends early.\n"
    "- **Memory**: the fullest stage of each side, by kind, against each GPU's capacity.\n"
    "- The same comparison on the command line: `python -m explorer diff SCENARIO --set-b key=value`.")
