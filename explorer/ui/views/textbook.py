"""The Timeline's *Textbook diagram*: the scenario's schedule at unit cost (F = B = W = 1, free
communication; explorer/teaching/unit_time.py), with a step slider that reveals it unit by unit and
says what each rank is doing and why (explorer/teaching/schedule_story.py): which op waits for
which rank in a bubble, which deferred weight gradient or extra warm-up forward fills it."""
from __future__ import annotations

import streamlit as st

from ...figures.unit_time import unit_figure
from ...schedules import registry
from ...teaching.schedule_story import narrate
from ...teaching.unit_time import makespan, textbook_micro_batches, unit_grid
from ..cache import ViewData
from ..export import chart


def render(data: ViewData, present: bool) -> None:
    """The expander with the diagram, for schedules with a program order and pp > 1."""
    sc = data.scenario
    p, v = sc.parallelism.pp, sc.parallelism.vpp
    sch = registry.get(sc.parallelism.schedule)
    if p < 2 or sch.timed is not None or p > 16:
        return
    box = st.expander("Textbook diagram (unit time) and step-through", key="textbook", on_change="rerun")
    if not box.open:
        return
    with box:
        m = textbook_micro_batches(sch.name, p, sc.micro_batches)
        cells = unit_grid(sch.name, p, m, v)
        T = makespan(cells)
        t = st.slider("Step through (time unit)", 0, T, T, key="textbook_t",
                      help="Reveal the schedule up to this unit; the ops running at it are outlined")
        title = (f"{sch.name}: p = {p}, m = {m}{f', v = {v}' if v > 1 else ''} at unit cost — "
                 f"{T} units for {sum(c.units for c in cells) // p} of work per rank")
        chart(unit_figure(cells, p, title, upto=t if t < T else None, height=200 + 30 * p,
                          font_size=15 if present else 12), key="textbook_chart", present=present,
              name=f"textbook-{sch.name}")
        if 0 < t < T:          # the slider reveals units 0..t-1; the outlined ops run in unit t-1
            st.markdown(f"In unit {t - 1}:\n\n" + "\n".join(
                f"- **rank {r}** — {narrate(cells, p, r, t - 1, v)}" for r in range(p)))
        st.caption(f"As the papers draw it ({sch.citation}): every pass one unit, a full backward two, "
                   "communication free. The chart above is the same order with this scenario's costs."
                   + (" Primed numbers (3\u2032) are micro-batches fed at the last rank, the others at rank "
                      "0; an F&B cell reads forward|backward." if sch.two_directions else ""))
