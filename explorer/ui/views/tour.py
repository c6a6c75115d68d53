"""The guided-tour bar (explorer/teaching/tours.py): the tour's title, the step's narration, previous/next.

A step is a share link; moving to a step replaces the address bar with that link (plus
``tour``/``step``) and re-initialises the page from it, exactly as opening the link would, so a
tour step and its link always show the same thing.  A bare link ``?tour=NAME&step=N`` is completed
with the step's link before the page reads it (:func:`open_link`).  The sidebar's tour list starts
a tour.

In presentation mode the bar is one line: the narration folds into an expander (closed), so the
title, the cards, the whole chart and the bottleneck sentence stay on a 1280x720 screen.
"""
from __future__ import annotations

from functools import cache
from typing import Any

import streamlit as st

from ...scenario import Scenario, ScenarioError, apply_overrides, from_dict
from ...share import SharedView, changed_fields, parse_query, preset_raw
from ...teaching.tours import expand_link, tours
from ..state import preset_scenario


def open_link() -> None:
    """Before the first run of a session reads the link: a bare tour link becomes its step's own
    link (explorer/teaching/tours.py), in the address bar too."""
    params = {k: st.query_params.get_all(k)[-1] for k in st.query_params}
    full = expand_link(params)
    if full != params:
        st.query_params.from_dict(full)


def go(name: str, step: int, present: bool, labels: dict[str, str]) -> None:
    """Open step ``step`` (1-based) of tour ``name`` (a widget callback: it runs before the next
    script run, which re-initialises the page from the new link)."""
    s = tours()[name].steps[step - 1]
    query = {**s.params, "tour": name, "step": str(step), **({"present": "1"} if present else {})}
    st.query_params.from_dict(query)
    st.session_state.pop("_init", None)
    st.session_state["view_tab"] = labels.get(s.params.get("view", "timeline"), labels["timeline"])


def step_by(name: str, delta: int, present: bool, labels: dict[str, str]) -> None:
    """Move ``delta`` steps from the step the address bar holds now (a widget callback).

    Relative, not the step the button was drawn for: clicks faster than a rerun run their
    callbacks one after another before the page is drawn again, each with the arguments of the
    last drawn page, so three Next clicks bound to "go to 2" landed on step 2; read from the link
    that the previous callback wrote, they land on 4 (or, when the browser merges two clicks
    into one, on 3 — never behind)."""
    n = len(tours()[name].steps)
    try:
        now = int(st.query_params.get("step", "1")) if st.query_params.get("tour") == name else 1
    except ValueError:
        now = 1
    go(name, min(max(now + delta, 1), n), present, labels)


def playing(view: SharedView) -> bool:
    """Whether ``view`` plays a tour (share.parse_query has checked its name and step)."""
    return view.tour is not None and view.tour in tours()


def step_title(view: SharedView) -> str | None:
    """The title of the step ``view`` plays, or None outside a tour: the page's heading during a
    tour, since a step changes its scenario (the serving tour's TP-16 step ran under the preset's
    title "... TP 8")."""
    if not playing(view) or view.tour is None:
        return None
    return tours()[view.tour].steps[view.step - 1].title


@cache
def _step_scenario(name: str, step: int) -> tuple[str, Scenario] | None:
    """Step ``step`` of tour ``name``: its preset and the scenario its link opens (tours are shipped
    data: built once per process), None when its link does not load."""
    view = parse_query(tours()[name].steps[step - 1].params)
    try:
        return view.scenario, from_dict(apply_overrides(preset_raw(view.scenario), view.overrides))
    except ScenarioError:
        return None


def step_changes(view: SharedView, sc: Scenario) -> tuple[str | None, str | None]:
    """During a tour: what the step sets on its preset (one line for under the heading) and what
    differs from the step in ``sc`` (the user changed a control: the narration no longer describes
    what is shown), each None when there is nothing to say; (None, None) outside a tour."""
    if not playing(view) or view.tour is None:
        return None, None
    got = _step_scenario(view.tour, view.step)
    if got is None:
        return None, None
    preset, own = got
    sets = _keys(changed_fields(preset_scenario(preset)[1], own))
    said = (f"This step runs the preset {preset} with {sets}" if sets
            else f"This step runs the preset {preset} as shipped")
    changed = _keys(changed_fields(own, sc))
    return said, (f"Changed since this tour step: {changed} — the narration describes the step as it "
                  "set them" if changed else None)


def _keys(changed: dict[str, str], shown: int = 4) -> str:
    """``key=value, ...`` of a link's changed fields, the first ``shown`` of them (+N more)."""
    items = [f"{k}={v}" if len(v) <= 24 else k for k, v in changed.items() if k != "name"]
    more = f" (+{len(items) - shown} more)" if len(items) > shown else ""
    return ", ".join(items[:shown]) + more


def render_bar(view: SharedView, present: bool, labels: dict[str, str], slots: int = 0) -> list[Any]:
    """The bar of the tour ``view`` is playing, if any; returns ``slots`` more places at the end of
    its row (presentation mode puts the page's Export and Copy link there).

    Presentation mode: one line without a frame, the narration folded in an expander (closed) whose
    label names the step (the tour's title opens the narration), Previous/Next as arrows — so that
    at 1280x720 the title, the cards, the whole chart and the bottleneck sentence stay on the
    screen.  Opening the narration
    moves the page down by its height, and closing it moves the page back.
    """
    if not playing(view) or view.tour is None:
        return []
    tour = tours()[view.tour]
    n, i = len(tour.steps), view.step
    step = tour.steps[i - 1]
    head_text = f"**Tour · {tour.title}** — step {i} of {n}: *{step.title}*"
    with st.container(border=not present, key="tour_bar"):
        # (Previous's label needs about 130 px: a 1/8 share was cut to "← Pre…" at 1280 px with
        # the sidebar open.)
        widths = [7.0, 0.8, 0.8] + [1.3] * slots if present else [4.5, 1.2, 1] + [1] * slots
        # Top-aligned in presentation: the buttons stay put when the narration opens below its label.
        head, prev, nxt, *extra = st.columns(widths, vertical_alignment="top" if present else "center")
        if present:
            # The step's title is the page's heading (page._title_row): the label names the tour.
            with head.expander(f"**Tour step {i} of {n}** · {tour.title}", expanded=False):
                st.markdown(f"**Tour · {tour.title}**\n\n{step.text}")
        else:
            head.markdown(head_text)
        prev.button("" if present else "Previous", key="tour_prev", disabled=i == 1, use_container_width=True,
                    icon=":material/arrow_back:", on_click=step_by, args=(tour.name, -1, present, labels),
                    help="Previous step")
        nxt.button("" if present else "Next", key="tour_next", disabled=i == n, use_container_width=True,
                   icon=":material/arrow_forward:", on_click=step_by, args=(tour.name, 1, present, labels),
                   help="Next step")
        if not present:
            st.markdown(step.text)
    return extra


def render_launcher(present: bool, labels: dict[str, str]) -> None:
    """The sidebar's list of tours, each a button that opens its first step."""
    with st.sidebar.expander("Guided tours"):
        for t in tours().values():
            st.button(t.title, key=f"tour_start_{t.name}", use_container_width=True, on_click=go,
                      args=(t.name, 1, present, labels), help=f"{len(t.steps)} steps")
