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
