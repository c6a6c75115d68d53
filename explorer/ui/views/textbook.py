"""The Timeline's *Step through the schedule*: this scenario's own timeline revealed up to a moment
with what every GPU class does and why (explorer/teaching/timeline_story.py), or the schedule's
textbook diagram at unit cost (F = B = W = 1, free communication; explorer/teaching/unit_time.py)
with one sentence per rank (explorer/teaching/schedule_story.py): which op waits for which rank in
a bubble, which deferred weight gradient or extra warm-up forward fills it."""
from __future__ import annotations

import streamlit as st

from ...figures.fonts import PRESENT_FONT_PX
from ...figures.step_through import step_figure
from ...figures.unit_time import unit_figure
from ...schedules import registry
from ...teaching.schedule_story import narrate
from ...teaching.timeline_story import narrate_at
from ...teaching.unit_time import makespan, textbook_micro_batches, unit_grid
from ..cache import ViewData
from ..export import chart
from ..widget_defaults import kept_expander

SCENARIO, TEXTBOOK = "this scenario's timeline", "textbook diagram (unit time)"
STEPS = 200              # positions of the scenario slider: fractions of the drawn timeline


def render(data: ViewData, present: bool) -> None:
    """The expander, for pipelines (pp > 1)."""
    sc = data.scenario
    p = sc.parallelism.pp
    if p < 2 or not data.passes:
        return
    sch = registry.get(sc.parallelism.schedule)
    textbook_ok = sch.timed is None and p <= 16
    # Kept across tab switches (the tab is not drawn meanwhile): widget_defaults.kept_expander, and
    # the choices inside with persist_state.
    box = kept_expander("Step through the schedule (this scenario or the textbook diagram)", "textbook")
    if not box.open:
        return
    with box:
        modes = [SCENARIO, TEXTBOOK] if textbook_ok else [SCENARIO]
        mode = st.radio("Step through", modes, key="step_mode", horizontal=True, persist_state="session",
                        help="The scenario's own durations and blocking communication, or the schedule "
                             "as the papers draw it: every pass one unit, communication free")
        if mode == TEXTBOOK and textbook_ok:
            _textbook(data, sch, present)
        else:
            _scenario(data, present)


def _scenario(data: ViewData, present: bool) -> None:
    span = max((q.end for mine in data.passes for q in mine), default=0.0)
    k = st.slider("Step through (share of the timeline drawn)", 0, STEPS, STEPS // 4, key="step_scenario",
                  persist_state="session",
                  help="Reveal the timeline up to this moment; the passes running at it are outlined")
    t = span * k / STEPS
    chart(step_figure(data.passes, data.names, t, span, height=160 + 28 * len(data.names),
                      font_size=PRESENT_FONT_PX if present else 12, fold=data.fold), key="step_chart",
          present=present, name="step-through")
    fold = (" The timeline is folded: this steps through the reduced run, whose shaded block stands for "
            f"{data.fold[2]:,} periods of {data.fold[3] * 1e3:,.1f} ms, on the reduced run's own time axis."
            if data.fold else "")
    if 0 < k < STEPS:
        st.markdown(f"At {t * 1e3:,.2f} ms:\n\n" + "\n".join(
            f"- {line}" for line in narrate_at(data.passes, data.names, t)))
    st.caption("The passes of the Gantt above, one row per GPU class; a pass includes the blocking "
               f"TP/CP/EP collectives inside it (compute waits for them).{fold}")


def _textbook(data: ViewData, sch, present: bool) -> None:
    sc = data.scenario
    p, v = sc.parallelism.pp, sc.parallelism.vpp
    m = textbook_micro_batches(sch.name, p, sc.micro_batches)
    cells = unit_grid(sch.name, p, m, v)
    T = makespan(cells)
    if st.session_state.get("textbook_t", 0) > T:
        # A kept position beyond a shorter schedule's end (fewer micro-batches since): its end, as a
        # new slider starts (a regression hunt found StreamlitValueAboveMaxError, 30 > 15).
        st.session_state["textbook_t"] = T
    t = st.slider("Step through (time unit)", 0, T, T, key="textbook_t", persist_state="session",
                  help="Reveal the schedule up to this unit; the ops running at it are outlined")
    title = (f"{sch.name}: p = {p}, m = {m}{f', v = {v}' if v > 1 else ''} at unit cost — "
             f"{T} units for {sum(c.units for c in cells) // p} of work per rank")
    chart(unit_figure(cells, p, title, upto=t if t < T else None, height=200 + 30 * p,
                      font_size=PRESENT_FONT_PX if present else 12,
                      min_label_px=PRESENT_FONT_PX if present else None),
          key="textbook_chart", present=present,
          name=f"textbook-{sch.name}")
    if 0 < t < T:          # the slider reveals units 0..t-1; the outlined ops run in unit t-1
        st.markdown(f"In unit {t - 1}:\n\n" + "\n".join(
            f"- **rank {r}** — {narrate(cells, p, r, t - 1, v)}" for r in range(p)))
    st.caption(f"As the papers draw it ({sch.citation}): every pass one unit, a full backward two, "
               "communication free. The chart above is the same order with this scenario's costs."
               + (" Primed numbers (3\u2032) are micro-batches fed at the last rank, the others at rank "
                  "0." if sch.two_directions else "")
               + (" An F&B cell reads forward|backward." if any(c.kind == "F&B" for c in cells) else "")
               + (f" A V: rank r holds stages r and {2 * p - 1}-r of {2 * p}; the turn on rank {p - 1} "
                  "is a local hand-off and the loss is on rank 0." if sch.placement is registry.Placement.V
                  else "")
               + _window_note(sch.window))


def _window_note(window) -> str:
    """What a diagram of one batch leaves out for a schedule whose iterations do not stop at a
    flush: a lecturer compared ZB-H2's diagram with ZB-H1's (the same units) and 2BW's idle units
    with its Bubble card's 0."""
    if window is registry.Window.OVERLAP:
        return (" One iteration drawn alone: its ranks' trailing idle units are filled by the next "
                "iteration's warm-up, which this diagram does not show (the Bubble card measures the "
                "overlapped iterations).")
    if window is registry.Window.ASYNC:
        return (" One batch drawn flushed: this schedule never flushes, so in steady state the next "
                "batch's passes fill these idle units (the Bubble card's steady state).")
    return ""
