"""The page: link -> state -> sidebar -> scenario -> cached results -> address bar -> views.

The address bar always holds ``scenario=<preset>`` plus every field that differs from it, the
Compare view's B as ``b.<field>`` overrides of A, the view and presentation mode, so it is the
share link.  An invalid combination of controls shows its one-line reason in the sidebar section
of the field and at the top, while the last valid result stays on screen.  An unexpected error
shows a short message with an id; its traceback goes to the server log, never to the page.
"""
from __future__ import annotations

import dataclasses
import json
from typing import Any
from urllib.parse import urlencode, urlsplit, urlunsplit

import streamlit as st

from ..scenario import Scenario, ScenarioError, from_dict
from ..share import SharedView, changed_fields, modified_note, to_query
from ..share_limits import unlinked
from ..share_reference import link_scenario
from . import export, sidebar, style
from .b_side import resolve_b
from .cache import ViewData, view_data
from .controls import section_of
from .errors import internal_error
from .plain import plain
from .preload import load_all
from .state import current_raw, init_state, preset_scenario
from .views import compare, design, files, memory, metrics, timeline, topology, tour, traffic
from .views import run as run_view
from .views import serving as serving_view

# Before any session thread can run a view: each lazily imported module complete (preload.py).
load_all()

VIEW_LABELS = {"timeline": "Timeline", serving_view.KEY: serving_view.LABEL, "memory": "Memory",
               "traffic": "Traffic", "topology": "Topology", "scenario": "Scenario & files",
               "compare": "Compare", "design": "Design space", run_view.KEY: run_view.LABEL}


def share_link(query: dict[str, str]) -> str:
    return f"{page_base(st.context.url or '')}?{urlencode(query)}"


def page_base(url: str) -> str:
    """``url`` without its query, with the root's "/" (Streamlit reports the root page as
    ``http://host:port``, and the link read ``http://host:port?scenario=...``, unlike the address
    bar)."""
    parts = urlsplit(url)
    if not parts.scheme:
        return url.split("?")[0]
    return urlunsplit((parts.scheme, parts.netloc, parts.path or "/", "", ""))


def _resolve(placeholders: dict[str, Any]) -> tuple[dict, Scenario, ScenarioError | None]:
    """The scenario of the controls, or the last valid one with the reason this one is not."""
    try:
        raw = current_raw()
        sc = from_dict(raw)
    except ScenarioError as exc:
        placeholders[section_of(exc.field)].error(plain(str(exc)), icon="⚠️")
        return _last_good(exc)
    return raw, sc, None


def _last_good(exc: ScenarioError) -> tuple[dict, Scenario, ScenarioError]:
    """The last scenario that was shown, with ``exc`` (why the controls' one is not); the page
    stops with the error when there is none yet."""
    last = st.session_state.get("_last_good")
    if last is None:
        st.error(f"Invalid scenario — {plain(str(exc))}")
        st.stop()
    return (*last, exc)


def _view_data(raw: dict) -> tuple[ViewData, str] | None:
    raw_json = json.dumps(raw, sort_keys=True, default=str)
    try:
        return view_data(raw_json), raw_json
    except ScenarioError as exc:          # e.g. beyond the work budget
        st.error(plain(str(exc)), icon="⚠️")
        st.session_state["_last_good"] = None
    return None


# What a scenario needs for the tabs not every page has.
_TAB_NEEDS = {run_view.KEY: "a scenario with a run plan (training.total_tokens or training.phases)",
              serving_view.KEY: "a serving scenario (an inference section)"}


def _simulated(placeholders: dict[str, Any]) -> tuple[dict, Scenario, ScenarioError | None,
                                                       tuple[ViewData, str]] | None:
    """The scenario to show and its simulation: the controls' one, or — when it is invalid, or
    refused only when simulated (a fold whose period is not proven, beyond the work budget) — the
    last one shown, with the reason (nothing the user had on screen is lost)."""
    raw, sc, error = _resolve(placeholders)
    if error is None:
        raw_json = json.dumps(raw, sort_keys=True, default=str)
        try:
            got = view_data(raw_json), raw_json
        except ScenarioError as exc:
            placeholders[section_of(exc.field)].error(plain(str(exc)), icon="⚠️")
            raw, sc, error = _last_good(exc)
        else:
            st.session_state["_last_good"] = (raw, sc)
            return raw, sc, None, got
    got2 = _view_data(raw)
    return None if got2 is None else (raw, sc, error, got2)


def _title_row(title: str, view: SharedView, present: bool, note: str | None = None,
               step: str | None = None) -> tuple[Any, Any | None, bool]:
    """The scenario's title and the places of Copy link and of presentation's Export menu (filled
    after the views, from the charts they drew); whether the tour bar is drawn.  A tour in
    presentation mode gives the title the full width (on one line up to ~60 characters at 1280 px)
    and takes both buttons onto its own one-line bar.  ``note`` (the scenario is not its preset as
    shipped, or not the tour step as it set it) marks the title *modified* and, off the projector,
    is said under it.  ``step``: what the tour step sets on its preset, said under it off the projector."""
    marker = " · *modified*" if note else ""
    if present and tour.playing(view):
        st.markdown(f"## {plain(title)}{marker}")
        exports, link = tour.render_bar(view, present, VIEW_LABELS, slots=2)
        return link, exports.empty(), True
    head, *menu, link = st.columns([6, 1, 1] if present else [5, 1], vertical_alignment="center")
    head.markdown(f"{'##' if present else '###'} {plain(title)}{marker}")
    if step and not present:
        head.caption(plain(step))
    if note and not present:          # a projector's one screen keeps only the marker
        head.caption(plain(note))
    return link, (menu[0].empty() if menu else None), False


def main() -> None:
    present_link = str(st.query_params.get("present", "")).lower() in ("1", "true", "yes", "on")
    st.set_page_config(page_title="CommExplorer", page_icon="📡", layout="wide",
                       initial_sidebar_state="collapsed" if present_link else "expanded")
    if "_init" not in st.session_state:
        tour.open_link()              # ?tour=NAME&step=N alone: that step's own link
        init_state()
    view: SharedView = st.session_state["_view"]
    present = view.present
    style.inject(present)
    placeholders = sidebar.render()
    tour.render_launcher(present, VIEW_LABELS)
    shown = _simulated(placeholders)
    if shown is None:
        return
    raw, sc, error, (data, raw_json) = shown
    # Link warnings describe the link as opened; once the user changes something they are stale.
    if st.session_state.get("_link_json") is None:
        st.session_state["_link_json"] = raw_json
    elif st.session_state["_link_json"] != raw_json:
        st.session_state["_warnings"] = []

    # Address bar = share link.
    name = st.session_state["_scenario"]
    view.scenario = name
    tab_label = st.session_state.get("view_tab")
    if tab_label:
        view.view = next((k for k, v in VIEW_LABELS.items() if v == tab_label), view.view)
    # The Run tab only for a scenario with a run plan, the Serving curve only for a serving one: a
    # link naming a tab this scenario has not is told so, and the link drops it.
    labels = serving_view.labels(run_view.labels(VIEW_LABELS, sc), sc)
    if view.view not in labels:
        st.session_state["_warnings"] = [*st.session_state.get("_warnings", []), (
            f"ignored view={view.view}: the {VIEW_LABELS[view.view]} tab is only for "
            f"{_TAB_NEEDS.get(view.view, 'some scenarios')}; showing the Timeline")]
        view.view = "timeline"
    b_side = resolve_b(raw)
    view.b_overrides = b_side.overrides
    view.design = design.link_params(view.design, sc)
    # A model of another family is written against a preset of its own family (share_reference.py).
    base = preset_scenario(name)[1]
    linked = link_scenario(name, base, sc)
    query = to_query(view if linked == name else dataclasses.replace(view, scenario=linked),
                     base if linked == name else preset_scenario(linked)[1], sc)
    if dict(st.query_params) != query:
        st.query_params.from_dict(query)

    # During a tour the heading is the step's title: the step changes its scenario, whose own name
    # (say "... TP 8" on the step that runs TP 16) would contradict it; the name is said under it.
    # An exported chart is titled as the page is.
    heading = tour.step_title(view) or sc.name
    export.begin_run(heading)
    # A tour's step is the scenario its narration describes: "modified" there only once the user
    # changed a control (the narration then no longer describes what is shown).
    step_sets, step_changed = tour.step_changes(view, sc)
    note = None if view.tour else modified_note(name, changed_fields(preset_scenario(name)[1], sc))
    st.session_state["_modified_note"] = note          # the description (files view) says it too
    preset_words = note and f"{note} — the title and description are the preset's."
    shown_note = step_changed if view.tour else preset_words
    link_box, exports_box, bar_drawn = _title_row(heading, view, present, shown_note, step=step_sets)
    st.session_state["_share_link"] = share_link(query)      # also the HTML report's (views/files.py)
    with link_box.popover("Copy link", icon=":material/link:", use_container_width=True):
        lost = unlinked(query)
        if lost:           # a value too long for a link: said, not claimed exact (a hunt found a plan lost)
            st.warning(f"This link does not carry {', '.join(lost)}: it reopens this view without "
                       "it. Share the scenario file instead (Scenario & files, Download scenario (YAML)).",
                       icon="⚠️")
        else:
            st.caption("This link reopens exactly this view:")
        st.code(st.session_state["_share_link"], language=None, wrap_lines=True)
    for w in st.session_state.get("_warnings", []):
        st.warning(f"Link: {plain(w)}", icon="⚠️")
    notice = st.session_state.pop("_notice", None)       # once: what the Workload switch could not carry
    if notice:
        st.info(notice, icon="ℹ️")
    if not bar_drawn:
        tour.render_bar(view, present, VIEW_LABELS)
    if error is not None:
        st.error(f"{plain(str(error))} — showing the last valid scenario.", icon="⚠️")

    if view.view != "compare":        # the Compare view shows A's cards beside B's
        metrics.render(data, present)
    default = labels.get(view.view, VIEW_LABELS["timeline"])
    tabs = st.tabs(list(labels.values()), key="view_tab", default=default, on_change="rerun")
    for tab, key in zip(tabs, labels, strict=True):
        if tab.open is False:
            continue
        with tab:
            try:
                if key == "timeline":
                    timeline.render(data, raw_json, present)
                elif key == "memory":
                    memory.render(data, present)
                elif key == "traffic":
                    traffic.render(data, raw, present)
                elif key == "topology":
                    topology.render(data, present)
                elif key == "compare":
                    compare.render(data, raw_json, b_side, present)
                elif key == "design":
                    design.render(data, raw_json, query, present)
                elif key == run_view.KEY:
                    run_view.render(raw_json, present)
                elif key == serving_view.KEY:
                    serving_view.render(data.json.get("inference"), present)
                else:
                    files.render(data, raw_json, present)
            except Exception:  # noqa: BLE001 - the page must survive any view's bug
                internal_error(f"drawing the {VIEW_LABELS[key]} view")
    if exports_box is not None:
        export.render_menu(exports_box)


def run() -> None:
    """Entry point of ``app.py``: the page, with any unexpected error reported, never a traceback."""
    try:
        main()
    except Exception:  # noqa: BLE001
        internal_error("computing this scenario")
