"""The sidebar's derived widgets: a control whose choice sets others' defaults (a fabric its NIC speed
and latency, a GPU its NVLink domain, bandwidth and rack: controls.DERIVED_WIDGETS) re-derives them,
and a derived widget the user typed into is remembered (state._pin_typed_back pins it)."""
from __future__ import annotations

from typing import Any

import streamlit as st

from ..scenario import ScenarioError, from_dict
from .controls import DERIVED_WIDGETS, KEPT_WHERE_SET, UNSET_WHEN_DERIVED
from .state import TYPED, current_raw, preset_scenario, widget_values


def on_typed(key: str) -> None:
    """The user typed into derived widget ``key`` (controls.DERIVED_KEYS)."""
    st.session_state[TYPED] = {**st.session_state.get(TYPED, {}), key: True}


def _untyped(keys) -> None:
    """``keys`` were set by their source (or a preset, link or upload), not typed."""
    typed = st.session_state.get(TYPED, {})
    if any(k in typed for k in keys):
        st.session_state[TYPED] = {k: v for k, v in typed.items() if k not in keys}


def on_source_change(source: str) -> None:
    """A control that sets others' defaults changed (fabric, framework): the widgets it derives
    (controls.DERIVED_WIDGETS) take the values the loader derives for the new choice, so what the
    sidebar shows is what is simulated.  Left as they are when the scenario is invalid."""
    derived = DERIVED_WIDGETS[source]
    _untyped(derived)
    if source == "hardware.gpu":
        # A link's edits of the old GPU's fields are not the new GPU's.
        st.session_state["_extra"] = {k: v for k, v in st.session_state.get("_extra", {}).items()
                                      if not k.startswith("hardware.gpu.")}
    base = widget_values(preset_scenario(st.session_state["_scenario"])[1])
    if all(st.session_state.get(s) == base.get(s) for s in DERIVED_WIDGETS):
        # Back to the scenario's own choices, every source: its own values (a file may set them
        # explicitly).  With another source still changed (a GB200 chosen, then the node count set
        # back) the loader derives them, as below (a regression hunt found the H100's domain of 8
        # shown, and simulated, for a GB200 rack).
        for key in derived:
            st.session_state[key] = base[key]
        return
    raw = current_raw()
    base_raw = preset_scenario(st.session_state["_scenario"])[0]
    for key in derived:
        section, _, leaf = key.rpartition(".")
        node = raw
        for part in section.split("."):
            node = node.setdefault(part, {}) if isinstance(node, dict) else {}
        if not isinstance(node, dict):
            continue
        if _kept(key, base, base_raw):
            node[leaf] = base[key]        # the scenario's own value, not the new choice's default
        else:
            node.pop(leaf, None)          # let the loader derive it from the new choice
    try:
        values = widget_values(from_dict(raw))
    except ScenarioError:
        # A split or replicas written for the old pipeline are unset whatever else is invalid (the
        # global batch at the new depth, say): the message then names a field the sidebar shows.
        for key in derived:
            if key in UNSET_WHEN_DERIVED:
                st.session_state[key] = None
        return
    for key in derived:
        st.session_state[key] = values[key]


def _kept(key: str, base: dict[str, Any], base_raw: dict[str, Any]) -> bool:
    """Whether derived widget ``key`` shows the scenario's own value: the scenario sets it and every
    source that derives it, but those that keep it (KEPT_WHERE_SET: the GPU keeps a box's PCIe
    link), is the scenario's — whatever order the sources were changed in (a regression hunt found
    GPU then PCIe then NVSwitch simulating 450 GB/s where GPU alone kept the scenario's 300)."""
    if not _sets(base_raw, key):
        return False
    ss = st.session_state
    return all(ss.get(src) == base.get(src) for src, keys in DERIVED_WIDGETS.items()
               if key in keys and key not in KEPT_WHERE_SET.get(src, ()))


def _sets(raw: dict[str, Any], key: str) -> bool:
    """Whether the raw mapping ``raw`` gives dotted field ``key`` a value of its own."""
    node: Any = raw
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return node is not None
