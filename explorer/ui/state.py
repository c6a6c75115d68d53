"""Session state: the sidebar widgets <-> the scenario, and the link the page was opened with.

Every widget is keyed by the scenario field it sets (``parallelism.pp``).  The scenario on screen
is the chosen preset plus every widget value that differs from it, plus ``_extra``: fields a link
or an upload set that have no widget (``stage_layers``, MoE sizes, ...).

Streamlit forbids writing a widget's value once the widget exists in the current run, so
everything that replaces several widget values at once — a new preset, a model preset, an
uploaded file — happens in a widget callback, which runs before the next script run.

The Compare view's scenario B is A plus ``_b_overrides`` (dotted key -> value, from the link's
``b.`` parameters and the view's editor); :func:`resolve_b` validates it on top of the current A
and keeps the last valid B when it is not.
"""
from __future__ import annotations

import dataclasses
import functools
from typing import Any

import streamlit as st

from ..config.fp8_recipes import resolved_recipe
from ..config.loading import derive_model, derived_model_fields
from ..config.moe_dispatch import resolved_dispatcher
from ..config.schema import build, field_paths, one_line
from ..scenario import (
    Model,
    Scenario,
    ScenarioError,
    apply_overrides,
    from_dict,
    model_presets,
    parse_text,
    to_dict,
)
from ..share import (
    changed_fields,
    flatten,
    parse_query,
    preset_raw,
    shipped_scenarios,
)
from ..share_reference import closest_preset
from ..workloads.family import Workload
from ..workloads.registry import workload_for
from .controls import (
    DERIVED_WIDGETS,
    MODEL_KEYS,
    NULLABLE_KEYS,
    WIDGET_KEYS,
    hidden_keys,
    scenario_kind,
)

CUSTOM = "(custom)"
MAX_UPLOAD_BYTES = 200_000
FIELDS = field_paths(Scenario)


# Room for every shipped preset and more: the chooser used to name all of them on each rerun
# through a 16-entry cache, so with 19 presets every lookup missed and re-parsed its YAML.
@st.cache_data(max_entries=64, show_spinner=False)
def preset_scenario(name: str) -> tuple[dict, Scenario]:
    """A shipped scenario's raw mapping (dp left to be derived) and its validated form."""
    raw = preset_raw(name)
    return raw, from_dict(raw)


@st.cache_data(show_spinner=False)
def preset_titles() -> dict[str, str]:
    """Each shipped preset's file name -> its scenario's ``name``, read once: the scenario chooser
    labels every option on every rerun."""
    return {n: preset_scenario(n)[1].name for n in shipped_scenarios()}


def _field_default(key: str) -> Any:
    f = FIELDS.get(key)
    if f is None or f.default is dataclasses.MISSING:
        return None
    return f.default


def widget_values(sc: Scenario) -> dict[str, Any]:
    """The value every sidebar widget shows for scenario ``sc`` (presets by name; fields of an
    absent section, e.g. ``model.moe`` of a dense model, at their defaults)."""
    flat = flatten(to_dict(sc))
    # Fields the loader derived from another model section are not in to_dict: shown as derived.
    flat.update({f"model.{k}": getattr(sc.model, k) for k in derived_model_fields(sc.model)})
    values = {}
    for key in WIDGET_KEYS:
        value = flat.get(key)
        value = _field_default(key) if value is None else value
        # Lists as to_dict gives them (a default is a tuple): a typed list equal to it is no change.
        values[key] = list(value) if isinstance(value, tuple) else value
    values["model.preset"] = sc.model.preset or CUSTOM
    # A preset with some fields changed (hardware.gpu.based_on) shows as that preset; the changed
    # fields are the link's, kept beside the widgets (``_extra``) and applied on top of it.
    values["hardware.gpu"] = sc.hardware.gpu.origin or CUSTOM
    # The NVLink domain is left out of to_dict when it is the derived one; the widget shows the
    # number the simulation uses.
    values["cluster.scale_up.domain_gpus"] = sc.cluster.scale_up.domain_gpus
    # The power limit in force: the board power unless capped (explorer/physics/power.py).
    values["hardware.power_cap_W"] = sc.hardware.power_cap_W or sc.hardware.gpu.power_W
    # The attention width in force: hidden / heads unless the model decouples it (model.head_dim).
    values["model.head_dim"] = resolved_head_dim(sc.model)
    # Likewise the MoE dispatcher in force (deepep under node-limited routing, else alltoall).
    comm = sc.communication
    values["communication.moe_dispatcher"] = resolved_dispatcher(comm.moe_dispatcher, sc.model.moe)
    # And the FP8 recipe in force (mxfp8 on Blackwell, else delayed).
    gpu = sc.hardware.gpu
    values["training.fp8_recipe"] = resolved_recipe(sc.training.fp8_recipe, gpu.origin, gpu.name)
    return values


def set_widgets(sc: Scenario) -> None:
    st.session_state.update(widget_values(sc))


def resolved_head_dim(m: Model) -> int | None:
    """``model.head_dim`` as the simulation uses it: its own value, else hidden / heads when that is a
    whole number (explorer/workloads/transformer/attention.head_dims)."""
    if m.head_dim:
        return m.head_dim
    return m.hidden // m.heads if m.heads and m.hidden % m.heads == 0 else None


def preset_model(name: str) -> Model:
    """The model of preset ``name`` with its derived defaults filled (kv_heads, ffn_hidden, head_dim)."""
    m = build(Model, derive_model({**model_presets()[name], "preset": name}), "model")
    return dataclasses.replace(m, kv_heads=m.kv_heads or m.heads, ffn_hidden=m.ffn_hidden or 4 * m.hidden,
                               head_dim=resolved_head_dim(m))


# The derived widgets the user typed a value into since their source last set them (state._pin_typed_back
# pins those alone: a value a source left stale must not be taken for one typed).
TYPED = "_typed"


def on_preset_change() -> None:
    """A new shipped scenario: every control takes its value; link leftovers are dropped."""
    st.session_state[TYPED] = {}
    st.session_state["_extra"] = {}
    st.session_state["_warnings"] = []
    set_widgets(preset_scenario(st.session_state["_scenario"])[1])


def on_model_preset_change() -> None:
    """A model preset fills every model control (dimensions and MoE) with the preset's values;
    the rest of the scenario is unchanged."""
    name = st.session_state["model.preset"]
    if name == CUSTOM:
        return
    m = preset_model(name)
    flat = flatten({"model": dataclasses.asdict(m)})
    for key in MODEL_KEYS:
        value = flat.get(key)
        st.session_state[key] = _field_default(key) if value is None else value
    # Fields without a widget that belong to the old model would not fit the new one.
    st.session_state["_extra"] = {k: v for k, v in st.session_state.get("_extra", {}).items()
                                  if not k.startswith("model.")}


def on_upload() -> None:
    """Load an uploaded YAML/JSON scenario into the controls (relative to the current preset)."""
    up = st.session_state.get("_upload")
    if up is None:
        return
    try:
        if up.size > MAX_UPLOAD_BYTES:
            raise ScenarioError(up.name, f"is {up.size:,} bytes; the limit is {MAX_UPLOAD_BYTES:,}")
        # The bytes as they are: text that is not UTF-8 is refused, not silently altered.
        sc_up = from_dict(parse_text(up.getvalue(), up.name))
    except ScenarioError as exc:
        st.session_state["_upload_msg"] = ("error", f"Upload not loaded — {exc}")
        return
    base = preset_scenario(st.session_state["_scenario"])[1]
    if (sc_up.inference is None) != (base.inference is None):
        # The controls describe a scenario relative to its preset: a serving file (issue 37) loads onto a
        # serving preset, a training file onto a training one.
        want = "a serving scenario (serve-...)" if sc_up.inference is not None else "a training scenario"
        st.session_state["_upload_msg"] = ("error", f"Upload not loaded — {one_line(up.name)} is a "
                                           f"{'serving' if sc_up.inference else 'training'} scenario: "
                                           f"choose {want} as the preset first")
        return
    if sc_up.model.kind != base.model.kind:
        # Another model family (a GNN onto teaching-8gpu): described relative to a transformer the
        # link reopened a transformer (75.7 s for 8.5 ms); the nearest shipped scenario of its own
        # family becomes the preset, as the CLI's links do (explorer/share_reference.py).
        st.session_state["_scenario"] = closest_preset(sc_up)
        on_preset_change()
    load_into_controls(sc_up)
    st.session_state["_upload_msg"] = ("success", f"Loaded {one_line(up.name)}: {sc_up.name}")


def load_into_controls(sc_up) -> None:
    """Set the controls (and the fields without one, ``_extra``) to scenario ``sc_up``, relative
    to the current preset: the view and its share link then show ``sc_up``."""
    base = preset_scenario(st.session_state["_scenario"])[1]
    values = flatten(to_dict(sc_up))
    changed = changed_fields(base, sc_up)
    hidden = hidden_keys(workload_for(sc_up.model), scenario_kind(base), sc_up.model.mla is not None)
    st.session_state["_extra"] = {k: values[k] for k in changed
                                  if (k not in WIDGET_KEYS or k in hidden) and k in values}
    st.session_state[TYPED] = {}
    set_widgets(sc_up)
    _pin_lost(sc_up)


def _pin_lost(intended: Scenario) -> None:
    """Keep in ``_extra`` the fields the controls would otherwise lose: a widget showing the preset's
    own value is left out of the scenario, so a field another change derives anew came back as that
    derivation — a link with ``cluster.scale_out.fabric=roce-100`` and the preset's NIC of 400 Gb/s
    showed 400 in the sidebar and simulated the RoCE preset's 100 (8.775 s, not 7.347).  One extra
    load, when the link or upload is read."""
    try:
        got = flatten(to_dict(from_dict(current_raw())))
    except ScenarioError:
        return                         # refused as it is: the page says why
    want = flatten(to_dict(intended))
    lost = {k: v for k, v in want.items() if k in WIDGET_KEYS and got.get(k) != v}
    if lost:
        st.session_state["_extra"] = {**st.session_state.get("_extra", {}), **lost}


def init_state() -> None:
    """First run of a browser session: the link decides everything."""
    view = parse_query(dict(st.query_params))
    st.session_state["_scenario"] = view.scenario
    st.session_state[TYPED] = {}
    st.session_state["_view"] = view
    st.session_state["_warnings"] = list(view.warnings)
    base_raw, base_sc = preset_scenario(view.scenario)
    sc = from_dict(apply_overrides(base_raw, view.overrides))
    set_widgets(sc)
    # A field whose control this kind of scenario hides (a pool of a co-located serving preset)
    # rides along as it would without a control.
    hidden = hidden_keys(workload_for(sc.model), scenario_kind(base_sc), sc.model.mla is not None)
    st.session_state["_extra"] = {k: v for k, v in view.overrides.items()
                                  if k not in WIDGET_KEYS or k in hidden}
    _pin_lost(sc)
    st.session_state["_last_good"] = None
    st.session_state["_link_json"] = None
    st.session_state["_b_overrides"] = dict(view.b_overrides)
    st.session_state["_b_good"] = None
    st.session_state["_b_msg"] = None
    st.session_state["_init"] = True


def sidebar_kind() -> str:
    """The kind of the chosen preset: the controls describe a scenario relative to it, and an upload
    or a link never changes a preset's kind (on_upload refuses a file of the other kind)."""
    return scenario_kind(preset_scenario(st.session_state["_scenario"])[1])


def sidebar_workload() -> Workload:
    """The workload family the sidebar describes (explorer/workloads/registry.py): its model
    preset's, or (a custom model) the shipped scenario's model's."""
    name = st.session_state.get("model.preset")
    if name and name != CUSTOM and name in model_presets():
        return preset_workload(name)
    return workload_for(preset_scenario(st.session_state["_scenario"])[1].model)


def sidebar_mla() -> bool:
    """Whether the model the sidebar describes has multi-head latent attention (controls.MLA_UNREAD):
    its model preset's, a link's model.mla fields, or the shipped scenario's model."""
    name = st.session_state.get("model.preset")
    if name and name != CUSTOM and name in model_presets():
        return preset_model(name).mla is not None
    if any(k.startswith("model.mla.") for k in st.session_state.get("_extra", {})):
        return True
    return preset_scenario(st.session_state["_scenario"])[1].model.mla is not None


@functools.cache
def preset_workload(name: str) -> Workload:
    """The family of model preset ``name`` (built once: the sidebar asks on every rerun)."""
    return workload_for(preset_model(name))


def current_raw() -> dict[str, Any]:
    """The scenario the widgets describe, as a raw mapping (the preset plus what differs).  The
    controls of the other workload families (a ResNet's, or the transformer fields a ResNet derives)
    are left out."""
    base_raw, base_sc = preset_scenario(st.session_state["_scenario"])
    extra = st.session_state.get("_extra", {})
    raw = apply_overrides(base_raw, extra)
    base_values = widget_values(base_sc)
    hidden = hidden_keys(sidebar_workload(), sidebar_kind(), sidebar_mla())
    overrides = {}
    for key in WIDGET_KEYS:
        value = st.session_state.get(key)
        # None is "no value" but for a field that may be unset (stage_replicas, local_share).
        if value == base_values[key] or (value is None and key not in NULLABLE_KEYS) or key in hidden:
            continue
        if key in ("model.preset", "hardware.gpu") and value == CUSTOM:
            continue
        overrides[key] = value
    if overrides.get("model.preset"):
        # A new model preset replaces the dims the old one had: start the model from it.
        raw["model"] = {"preset": overrides.pop("model.preset")}
        # The model's fields without a widget (an upload's model.gnn.local_share) are the new model's
        # (on_model_preset_change drops them when the user picks another preset).
        raw = apply_overrides(raw, {k: v for k, v in extra.items() if k.startswith("model.")})
    if "hardware.gpu" in overrides:
        # A GPU preset chosen over the base's replaces the base's mapping: a link's edits of that
        # preset's fields (``hardware.gpu=gb200&hardware.gpu.power_W=1000``) go on top of it, before
        # the values the GPU derives (its power limit in force) are compared with the widgets'.
        raw = apply_overrides(raw, {"hardware.gpu": overrides.pop("hardware.gpu")})
        raw = apply_overrides(raw, {k: v for k, v in extra.items() if k.startswith("hardware.gpu.")})
    out = apply_overrides(raw, _without_derived(raw, overrides))
    return _pin_typed_back(out, base_values, hidden)


def _pin_typed_back(raw: dict[str, Any], base_values: dict[str, Any],
                    hidden: frozenset[str]) -> dict[str, Any]:
    """``raw`` with every derived widget the user typed (:data:`TYPED`) that shows its preset's own
    value written in, where the loader would now derive another: a hunt set the fabric to roce-100
    (NIC 100 Gb/s) and typed the preset's 200 back; the widget, equal to the preset's, was left out,
    the loader derived 100 again, and the sidebar showed 200 beside a run at 100.  One extra load,
    only when a source of derived values differs from its preset's."""
    ss = st.session_state
    if all(ss.get(src) == base_values.get(src) for src in DERIVED_WIDGETS):
        return raw
    typed = {k for k in ss.get(TYPED, {})
             if k not in hidden and ss.get(k) is not None and ss.get(k) == base_values.get(k)}
    if not typed:
        return raw
    try:
        loaded = widget_values(from_dict(raw))
    except ScenarioError:
        return raw                    # refused as it is: the page says why
    pins = {k: ss[k] for k in typed if loaded.get(k) != ss[k]}
    return apply_overrides(raw, pins) if pins else raw


# Widgets that show a value the loader derives from other fields (widget_values): the NVLink
# domain, the attention width, the MoE dispatcher, the FP8 recipe and the power limit in force.
SHOWN_IN_FORCE = ("cluster.scale_up.domain_gpus", "model.head_dim", "communication.moe_dispatcher",
                  "training.fp8_recipe", "hardware.power_cap_W", "cluster.scale_out.nics_per_node",
                  "cluster.scale_up.bandwidth_GBps", "communication.comm_sms")


def _without_derived(raw: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """``overrides`` less the SHOWN_IN_FORCE values that are what the loader would derive anyway
    (a GPU switch re-derives its rack, recipe and board power): the link and the "Modified from"
    note then name what the user changed, not its consequences.  One extra load, only when such a
    value differs from the preset's."""
    shown = [k for k in SHOWN_IN_FORCE if k in overrides]
    if not shown:
        return overrides
    rest = {k: v for k, v in overrides.items() if k not in shown}
    try:
        derived = widget_values(from_dict(apply_overrides(raw, rest)))
    except ScenarioError:
        return overrides
    return {**rest, **{k: overrides[k] for k in shown if derived.get(k) != overrides[k]}}
