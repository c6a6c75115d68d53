"""Every sidebar widget's default is its value (explorer/ui/sidebar.py's module docstring).

Seen in Chromium: presentation mode opens with the sidebar collapsed; a click within a second of
opening reran the page before the browser had mounted the sidebar's widgets, which then mounted
with that run's defaults and sent them back as changes — the scenario became the first preset, or
the link's toggles switched off (1 in 5 fresh sessions).  A widget whose default equals its value
shows the value however late it mounts; this checks the defaults the browser receives."""
from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from app_support import run_app


def _mismatches(at: AppTest) -> list[str]:
    """Sidebar widgets whose default (what a late-mounted widget shows) is not their value."""
    bad = []
    for w in at.sidebar.selectbox:
        shown = w.options[w.proto.default] if w.proto.HasField("default") else None
        if shown != w.format_func(w.value):
            bad.append(f"{w.key}: default {shown!r}, value {w.value!r}")
    for group in (at.sidebar.toggle, at.sidebar.number_input, at.sidebar.text_input):
        for w in group:
            if w.disabled:                      # a list shown read-only: no value to send back
                continue
            try:
                default = w.proto.default if w.proto.HasField("default") else None
            except ValueError:                  # a field without presence (a toggle's bool)
                default = w.proto.default
            if default != w.value:
                bad.append(f"{w.key}: default {default!r}, value {w.value!r}")
    return bad


@pytest.mark.parametrize("query", [
    # The session that lost its state: V-Half in presentation mode, toggles the preset turns on.
    {"scenario": "zero-bubble-8gpu", "parallelism.schedule": "v-half", "present": "1"},
    # Numbers, choices and a list field a link sets away from the preset's.
    {"scenario": "megatron-gpt3-175b", "parallelism.tp": "4", "communication.dp_overlap": "false",
     "cluster.scale_out.nic_Gbps": "100", "training.recompute": "selective"},
])
def test_a_link_gives_every_sidebar_widget_its_value_as_default(query):
    at = run_app(**query)
    assert not _mismatches(at)
    # A toggle the preset sets on: its default must say so too.
    assert any(w.value is True for w in at.sidebar.toggle)


def test_a_preset_chosen_in_the_sidebar_is_every_widget_default_too():
    at = run_app(scenario="teaching-8gpu")
    at.sidebar.selectbox(key="_scenario").set_value("megatron-gpt3-175b").run()
    assert not at.exception
    assert at.sidebar.selectbox(key="_scenario").value == "megatron-gpt3-175b"
    assert not _mismatches(at)
