"""The guided-tour bar (explorer/tours.py): the tour's title, the step's narration, previous/next.

A step is a share link; moving to a step replaces the address bar with that link (plus
``tour``/``step``) and re-initialises the page from it, exactly as opening the link would, so a
tour step and its link always show the same thing.  The sidebar's tour list starts a tour.
"""
from __future__ import annotations

import streamlit as st

from ...share import SharedView
from ...tours import tours


def go(name: str, step: int, present: bool, labels: dict[str, str]) -> None:
    """Open step ``step`` (1-based) of tour ``name`` (a widget callback: it runs before the next
    script run, which re-initialises the page from the new link)."""
    s = tours()[name].steps[step - 1]
    query = {**s.params, "tour": name, "step": str(step), **({"present": "1"} if present else {})}
    st.query_params.from_dict(query)
    st.session_state.pop("_init", None)
    st.session_state["view_tab"] = labels.get(s.params.get("view", "timeline"), labels["timeline"])


def render_bar(view: SharedView, present: bool, labels: dict[str, str]) -> None:
    """The bar of the tour ``view`` is playing, if any."""
    if view.tour is None or view.tour not in tours():
        return
    tour = tours()[view.tour]
    n, i = len(tour.steps), view.step
    step = tour.steps[i - 1]
    with st.container(border=True):
        head, prev, nxt = st.columns([6, 1, 1], vertical_alignment="center")
        head.markdown(f"**Tour · {tour.title}** — step {i} of {n}: *{step.title}*")
        prev.button("Previous", key="tour_prev", disabled=i == 1, use_container_width=True,
                    icon=":material/arrow_back:", on_click=go, args=(tour.name, i - 1, present, labels))
        nxt.button("Next", key="tour_next", disabled=i == n, use_container_width=True,
                   icon=":material/arrow_forward:", on_click=go, args=(tour.name, i + 1, present, labels))
        st.markdown(step.text)


def render_launcher(present: bool, labels: dict[str, str]) -> None:
    """The sidebar's list of tours, each a button that opens its first step."""
    with st.sidebar.expander("Guided tours"):
        for t in tours().values():
            st.button(t.title, key=f"tour_start_{t.name}", use_container_width=True, on_click=go,
                      args=(t.name, 1, present, labels), help=f"{len(t.steps)} steps")
