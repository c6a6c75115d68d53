"""A keyed widget's current value passed as its default too (``index``, ``value``, ``default``).

The value a link, a callback or the page writes into the session state reaches the browser once,
with the run that follows.  A browser that mounts the widget only after a later run — presentation
mode's collapsed sidebar clicked within a second of opening, a popover (presentation's *Axes* of the
Design space, the Compare view's *Edit B*) opened after any rerun — shows that later run's default
instead and sends it back as a change: the scenario became the first preset, a heatmap's axes both
tp, B a field nobody picked.  With the default equal to the value, a late mount shows the value.
(Streamlit logs such a default beside a session-state value once per key; .streamlit/config.toml
turns that log off.)
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import streamlit as st


def index_of(options: Sequence[Any], key: str) -> int:
    """The position of widget ``key``'s value among ``options`` (0 when it is not one of them)."""
    value = st.session_state.get(key)
    return list(options).index(value) if value in options else 0


def text_of(key: str) -> str:
    """A text box's value, "" when it has none yet."""
    value = st.session_state.get(key)
    return "" if value is None else str(value)


def kept_expander(label: str, key: str):
    """A lazily run expander (``on_change="rerun"``, ``.open``) that keeps its open state across
    runs that do not draw it.  The page draws only the open tab, and Streamlit drops the state of a
    widget a finished run did not draw: switching Timeline -> Memory -> Timeline closed *Step
    through the schedule*, which the pipeline-bubbles tour asks a class to open and then to switch
    tabs (a hunt).  Its last state is kept beside it (``_open.<key>``) and is its default."""
    box = st.expander(label, key=key, on_change="rerun", expanded=bool(st.session_state.get(f"_open.{key}")))
    st.session_state[f"_open.{key}"] = bool(box.open)
    return box
