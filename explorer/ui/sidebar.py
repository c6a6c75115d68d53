"""The sidebar: the preset chooser and one expander per concern, every widget keyed by its field.

Every widget is also given its current value as its default (``index``, ``value``:
explorer/ui/widget_defaults.py): presentation mode's collapsed sidebar, clicked within a second of
opening, mounted its widgets after a later run with that run's defaults and sent them back (the
scenario became the first preset, or link toggles switched off, in about 1 of 5 fresh sessions)."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import streamlit as st

from ..config.replica_field import SCHEDULES as REPLICA_SCHEDULES
from ..scenario import ScenarioError, from_dict, gpu_presets, model_presets
from ..share import shipped_scenarios
from ..workloads.family import Workload
from ..workloads.registry import nouns
from .controls import DERIVED_KEYS, DERIVED_WIDGETS, ORDERS, SECTIONS, Control, hidden_keys
from .derived_widgets import on_source_change, on_typed
from .field_text import parse_list, to_text
from .kind_switch import on_kind_change, preset_kinds
from .plain import plain
from .state import (
    CUSTOM,
    FIELDS,
    current_raw,
    on_model_preset_change,
    on_preset_change,
    preset_scenario,
    preset_titles,
    preset_workload,
    sidebar_kind,
    sidebar_mla,
    sidebar_workload,
)
from .widget_defaults import index_of

KINDS = {"training": "Training", "serving": "Serving"}


def render() -> dict[str, Any]:
    """Draw the sidebar; return a placeholder per section for its error message."""
    titles = preset_titles()
    kind = sidebar_kind()
    serving = kind != "training"
    # Training or serving (issue 37): the chooser lists the presets of one kind; switching loads the
    # other kind's first preset, with the model and GPU carried over where they serve/train.
    st.session_state["_kind"] = "serving" if serving else "training"
    st.sidebar.segmented_control("Workload", list(KINDS), key="_kind", format_func=KINDS.__getitem__,
                                 default=st.session_state["_kind"],
                                 on_change=on_kind_change,
                                 help="Train a model, or serve it (prefill and decode). The scenarios "
                                      "below are of this kind.")
    kinds = preset_kinds()
    options = [n for n in shipped_scenarios() if (kinds[n] != "training") == serving]
    st.sidebar.selectbox("Scenario", options, key="_scenario", index=index_of(options, "_scenario"),
                         on_change=on_preset_change,
                         format_func=lambda n: f"{n} — {titles[n]}",
                         help="A preset from scenarios/; every change below is relative to it.")
    placeholders = {}
    # The controls other workload families and the other kind (training, serving) own are hidden;
    # decided once, not per widget (each lookup copies the preset's scenario out of Streamlit's
    # cache).  Where the first hidden model control would be, the family says what it makes of them
    # (a ResNet derives the transformer's fields).
    family = sidebar_workload()
    hidden = hidden_keys(family, kind, sidebar_mla())
    # A request-length mix (from a link or a file: it has no control) sets the lengths; the two
    # boxes it replaces would change nothing (config/inference.py, serving/mix.py).
    mix = st.session_state.get("_extra", {}).get("inference.mix") if serving else None
    if mix:
        hidden = hidden | MIX_REPLACES
    first = "Serving" if serving else "Parallelism"
    for name, items in SECTIONS:
        if all(c.key in hidden for c in items):
            continue                          # a whole section of the other kind
        with st.sidebar.expander(name, expanded=name == first):
            placeholders[name] = st.empty()
            said = False
            for control in items:
                if mix and control.key == MIX_CAPTION_AT:
                    st.caption(mix_caption(mix))
                if control.key in hidden and control.key.startswith("model.") and not said:
                    said = True
                    caption = _caption(family)
                    if caption:
                        st.caption(caption)
                if control.key == BATCH_KEY and control.key not in hidden:
                    control = control._replace(label=f"Global batch ({_samples()})")
                _widget(control, hidden)
    return placeholders


MIX_REPLACES = frozenset({"inference.prompt_tokens", "inference.output_tokens"})
MIX_CAPTION_AT = "inference.prompt_tokens"


def mix_caption(mix: list | tuple) -> str:
    """The request-length mix in one line, where the prompt and output boxes would be."""
    kinds = [k for k in mix if isinstance(k, dict)]
    total = sum(float(k.get("share", 1.0)) for k in kinds) or 1.0
    said = "; ".join(f"{float(k.get('share', 1.0)) / total:.0%} {k.get('prompt_tokens')} + "
                     f"{k.get('output_tokens')}" for k in kinds)
    return (f"Requests: a mix of {len(kinds)} kinds (prompt + output tokens: {said}), from the link or "
            "file; it sets the lengths, so the prompt and output boxes are hidden.")


def list_summary(value: list | tuple | dict) -> str:
    """A list-valued field in one line: its length and the names of its items when they have one
    (``4: A, B, C, D``)."""
    items = list(value.values()) if isinstance(value, dict) else list(value)
    names = [str(i.get("name")) for i in items if isinstance(i, dict) and i.get("name")]
    return f"{len(items)}: {', '.join(names)}" if names else f"{len(items)} items"


BATCH_KEY = "training.global_batch"


def _typed(key: str):
    """on_typed for a derived widget (state._pin_typed_back reads what the user typed), else no callback."""
    return on_typed if key in DERIVED_KEYS else None


def _number(value: Any, low: float, high: float, kind: type) -> Any:
    """A number box's default: its value in the box's type, or None (an empty box, as before) for
    a value it cannot show."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
        return None
    if kind is int and value != int(value):
        return None
    return kind(value)




def _samples() -> str:
    """What one element of the global batch is in the family the sidebar describes (sequences,
    images, samples, seed nodes, sentences: workloads/family.Nouns.sample), read from the scenario
    the widgets describe, or the shipped scenario's while those are not valid."""
    try:
        m = from_dict(current_raw()).model
    except ScenarioError:
        m = preset_scenario(st.session_state["_scenario"])[1].model
    return nouns(m).sample


def _caption(family: Workload) -> str:
    """What workload ``family`` makes of the other families' fields (derived at load), or its
    one-line summary while the scenario is not valid; empty when it has nothing to say."""
    if family.caption is None:
        return ""
    try:
        m = from_dict(current_raw()).model
    except ScenarioError:
        return family.summary
    return family.caption(m)


def _derived_dp() -> str:
    s = st.session_state
    replicas = s.get("parallelism.stage_replicas")
    if _replicas_shown() and replicas:
        # PipeDream's stage replicas replace the data-parallel degree (config/replica_rules.py).
        per = "auto" if isinstance(replicas, str) or not any(replicas) else " + ".join(map(str, replicas))
        return f"**dp = 1**: the stages' own replicas ({per} GPUs) replace data parallelism"
    denom = s["parallelism.tp"] * s["parallelism.pp"] * s["parallelism.cp"]
    gpus = s["cluster.nodes"] * s["cluster.gpus_per_node"]
    if sidebar_kind() != "training" and denom and gpus % denom == 0:
        n = gpus // denom
        return f"**{n} model replica{'s' if n > 1 else ''}** (dp, derived: {gpus} GPUs / (tp·pp))"
    if denom and gpus % denom == 0:
        return f"**dp = {gpus // denom}** (derived: {gpus} GPUs / (tp·pp·cp))"
    return f"**dp undefined**: tp·pp·cp = {denom} does not divide {gpus} GPUs"


def _replicas_shown() -> bool:
    """PipeDream's stage replicas are offered with a pipeline (pp > 1) and a schedule that runs
    them (config/replica_field.SCHEDULES), and while they are set (so they can be cleared)."""
    s = st.session_state
    return bool(s.get("parallelism.stage_replicas")) or (
        s.get("parallelism.pp", 1) > 1 and s.get("parallelism.schedule") in REPLICA_SCHEDULES)


def _layers_shown() -> bool:
    """The layer split is offered with a pipeline (pp > 1), and while it is set (so it can be cleared)."""
    s = st.session_state
    return bool(s.get("parallelism.stage_layers")) or s.get("parallelism.pp", 1) > 1


# List boxes shown only when they mean something (and while set, so that they can be cleared).
_SHOWN_WHEN = {"parallelism.stage_replicas": _replicas_shown, "parallelism.stage_layers": _layers_shown}


def on_list_text(key: str) -> None:
    """A list's text input changed: its value when it reads as one (the loader checks the rest),
    else the one-line reason, shown under the input while the last value stays in force."""
    s = st.session_state
    try:
        s[key] = parse_list(str(s.get(f"_text.{key}") or ""), key)
    except ScenarioError as exc:
        s[f"_err.{key}"] = str(exc)
        return
    s.pop(f"_err.{key}", None)


def on_optional_toggle(key: str, default: float) -> None:
    """An optional number switched on (``default`` to start from) or off (unset: None)."""
    s = st.session_state
    s[key] = default if s.get(f"_on.{key}") else None


def _list_widget(c: Control, help_: str | None) -> None:
    s = st.session_state
    err = s.get(f"_err.{c.key}")
    if err is None:               # the text follows the value (a preset or a link may change it)
        s[f"_text.{c.key}"] = to_text(s.get(c.key), c.key)
    st.text_input(c.label, value=s.get(f"_text.{c.key}", ""), key=f"_text.{c.key}", on_change=on_list_text,
                  args=(c.key,), help=help_)
    if err:
        st.error(plain(err), icon="⚠️")


def _optional_widget(c: Control, meta: Mapping[str, Any], help_: str | None) -> None:
    s = st.session_state
    s[f"_on.{c.key}"] = s.get(c.key) is not None
    if isinstance(s.get(c.key), int):          # a link's "1": the float box refuses an int value
        s[c.key] = float(s[c.key])
    low, high = float(meta.get("min", 0.0)), float(meta.get("max", 1e12))
    st.toggle(c.label, value=s[f"_on.{c.key}"], key=f"_on.{c.key}", help=help_, on_change=on_optional_toggle,
              args=(c.key, float(meta.get("start", high if high <= 1.0 else low))))
    if s.get(c.key) is not None:
        st.number_input(c.label, min_value=low, max_value=high, value=_number(s[c.key], low, high, float),
                        key=c.key, format="%g", label_visibility="collapsed", on_change=_typed(c.key),
                        args=(c.key,) if c.key in DERIVED_KEYS else None)


def _widget(c: Control, hidden: frozenset[str]) -> None:
    if c.key in hidden:
        return
    if c.key in _SHOWN_WHEN and not _SHOWN_WHEN[c.key]():
        # Its text box is hidden this run: keep the text beside the value, so a page that still
        # holds the box from the last run (a rerun racing the change) reads a text, not a gap.
        st.session_state[f"_text.{c.key}"] = to_text(st.session_state.get(c.key), c.key)
        return
    field = FIELDS.get(c.key)
    meta = field.metadata if field is not None else {}
    help_ = meta.get("doc")
    key = c.key
    if c.kind == "list":
        _list_widget(c, help_)
        return
    if c.kind == "optional":
        _optional_widget(c, meta, help_)
        return
    value = st.session_state.get(key)
    if isinstance(value, (list, tuple, dict)):
        # A list form (cluster.datacenters as named datacenters) has no number box: it is shown and
        # kept as the scenario gives it (current_raw passes it through), never coerced to a count.
        st.text_input(c.label, value=list_summary(value), disabled=True,
                      help=f"{help_ or ''} — given as a list in the scenario; edit it in the YAML "
                           "(Scenario & files) or the link")
        return
    if c.kind == "dp":
        st.markdown(_derived_dp())
    elif c.kind == "model":
        # Each preset says its family (a DLRM, a GNN, a convnet): picking one switches the controls.
        models = [CUSTOM] + list(model_presets())
        st.selectbox(c.label, models, index=index_of(models, key), key=key, on_change=on_model_preset_change,
                     format_func=lambda n: n if n == CUSTOM else f"{n} · {preset_workload(n).name}",
                     help="Loads the preset's dimensions into the controls below; its workload family "
                          "brings that family's controls")
    elif c.kind == "gpu":
        opts = list(gpu_presets()) + ([CUSTOM] if st.session_state.get(key) == CUSTOM else [])
        st.selectbox(c.label, opts, index=index_of(opts, key), key=key,
                     help="Vendor peak figures (explorer/data/gpus.yaml)",
                     on_change=on_source_change, args=(key,))
    elif c.kind == "choice":
        choices = list(meta["choices"])
        st.selectbox(c.label, choices, index=index_of(choices, key), key=key, help=help_,
                     on_change=_typed(key), args=(key,) if key in DERIVED_KEYS else None)
    elif c.kind == "source":
        choices = list(meta["choices"])
        st.selectbox(c.label, choices, index=index_of(choices, key), key=key, help=help_,
                     on_change=on_source_change, args=(key,))
    elif c.kind == "order":
        orders = list(dict.fromkeys([st.session_state[key]] + ORDERS))
        st.selectbox(c.label, orders, index=index_of(orders, key), key=key, help=help_)
    elif c.kind == "bool":
        st.toggle(c.label, value=bool(value), key=key, help=help_)
    elif c.kind == "int":
        derives = key in DERIVED_WIDGETS      # e.g. nodes re-derive the NVLink domain
        st.number_input(c.label, min_value=int(meta.get("min", 0)), max_value=int(meta.get("max", 10**9)),
                        value=_number(value, int(meta.get("min", 0)), int(meta.get("max", 10**9)), int),
                        step=1, key=key, help=help_, on_change=on_source_change if derives else _typed(key),
                        args=(key,) if derives or key in DERIVED_KEYS else None)
    else:
        # The input stops at the field's physical bounds; validation names the field otherwise.
        low, high = float(meta.get("min", meta.get("gt", 0.0))), float(meta.get("max", 1e12))
        st.number_input(c.label, min_value=low, max_value=high, value=_number(value, low, high, float),
                        key=key, help=help_, format="%g", on_change=_typed(key),
                        args=(key,) if key in DERIVED_KEYS else None)
