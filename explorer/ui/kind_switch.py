"""The Workload switch above the scenario list (issue 37): training or serving presets, and moving
the model on screen from one kind to the other."""
from __future__ import annotations

import streamlit as st

from ..scenario import ScenarioError, apply_overrides, from_dict
from ..share import shipped_scenarios
from ..simulate import simulate
from .controls import scenario_kind
from .state import CUSTOM, on_preset_change, preset_scenario, set_widgets, sidebar_kind, widget_values


@st.cache_data(show_spinner=False)
def preset_kinds() -> dict[str, str]:
    """Each shipped preset's kind (:func:`scenario_kind`), read once: the chooser filters on it."""
    return {n: scenario_kind(preset_scenario(n)[1]) for n in shipped_scenarios()}


# The first preset of each kind is where the Workload switch lands.
KIND_HOME = {"training": "teaching-8gpu", "serving": "serve-llama3-70b-tp8"}


def on_kind_change() -> None:
    """The Workload switch (Training / Serving): load that kind's home preset, carrying over the
    model preset and GPU of the scenario on screen when the result is a valid scenario (a dense or
    MoE transformer served on the home preset's node; a model of another family, or one that does
    not fit, leaves the preset as shipped and says why in ``_notice``, shown once on the page)."""
    kind = st.session_state.get("_kind")
    if kind not in KIND_HOME or (sidebar_kind() != "training") == (kind == "serving"):
        return                            # deselected, or already that kind
    model, gpu = st.session_state.get("model.preset"), st.session_state.get("hardware.gpu")
    st.session_state["_scenario"] = KIND_HOME[kind]
    on_preset_change()
    base_raw, base_sc = preset_scenario(KIND_HOME[kind])
    carried = {k: v for k, v in (("model.preset", model), ("hardware.gpu", gpu))
               if v and v != CUSTOM and v != widget_values(base_sc)[k]}
    if not carried:
        return
    with_what = " and ".join(map(str, carried.values()))
    try:
        sc = from_dict(carried_raw(base_raw, carried))
    except ScenarioError as exc:
        st.session_state["_notice"] = f"{KIND_HOME[kind]} as shipped: with {with_what} it is not valid: {exc}"
        return
    # A model over the GPUs' memory is not carried either (a hunt carried llama3-70b onto the 8-GPU
    # teaching node at 508.2 of 85.9 GB, and DeepSeek-V3 onto an 8-GPU server whose weights alone
    # overflow, with its TPOT card shown): the verdict of the simulation the page would show.
    r = simulate(sc)
    if r.memory_over_capacity:
        need, cap = r.binding_memory
        gb = f"{need.total / 1e9:.1f} of {cap / 1e9:.1f} GB"
        st.session_state["_notice"] = (f"{KIND_HOME[kind]} as shipped: with {with_what} it needs {gb} "
                                       "per GPU, over its memory")
        return
    set_widgets(sc)


def carried_raw(base_raw: dict, carried: dict) -> dict:
    """``base_raw`` with the carried model preset and GPU, as the sidebar builds it
    (state.current_raw): a model preset replaces the model's mapping, whose dimensions were the old
    model's (a dotted model.preset would keep the home preset's explicit layers and hidden size)."""
    rest = {k: v for k, v in carried.items() if k != "model.preset"}
    raw = apply_overrides(base_raw, rest)
    if "model.preset" in carried:
        raw["model"] = {"preset": carried["model.preset"]}
    return raw
