"""The Design-space tab's settings: its widgets' state, filled from the link's ``d.`` parameters
and written back to them.

The heatmap's two fields (``d.x``, ``d.y``), their values (``d.xv``, ``d.yv``), its metric
(``d.m``) and the scaling mode (``d.scale``) live in session state under :data:`KEYS`.  The link
carries only those that differ from their defaults, so ``?scenario=...&view=design`` stays short;
an unusable one in a link is replaced by its default with a warning naming it.
"""
from __future__ import annotations

from typing import Any

import streamlit as st

from ...config.dormant import unread
from ...config.schema import excerpt
from ...scenario import Scenario, ScenarioError
from ...workloads.registry import workload_for
from . import design_runs as runs
from .compare import FIELDS as COMPARE_FIELDS

# The heatmap prices training steps (the estimator refuses a serving scenario): no inference field.
FIELDS = tuple(k for k in COMPARE_FIELDS if k != "parallelism.dp" and not k.startswith("inference."))
DEFAULT_X, DEFAULT_Y = "parallelism.tp", "parallelism.pp"


def default_axes(sc: Scenario) -> tuple[str, str]:
    """The heatmap's default fields for ``sc``'s workload family: tp x pp where it has both, pp x
    micro-batch where it pipelines without tensor parallelism (a convnet), else its first number
    control that the scenario reads (a DLRM's hot share, a GNN's cache hit rate where features
    are fetched) against the link its own exchange
    crosses (NVLink on one node, the NIC beyond): a family without tp or pp would show one
    valid cell of tp x pp."""
    w = workload_for(sc.model)
    if {"tp", "pp"} <= set(w.dimensions):
        return DEFAULT_X, DEFAULT_Y
    if "pp" in w.dimensions:
        return "parallelism.pp", "training.micro_batch"
    # Not one that the scenario does not read (the GNN's cache hit rate where every feature is
    # local: every column alike).
    own = next((k for k, _, kind in w.controls if kind == "float" and unread(sc, k) is None),
               "training.micro_batch")
    link = "cluster.scale_up.bandwidth_GBps" if sc.cluster.nodes == 1 else "cluster.scale_out.nic_Gbps"
    return own, link
METRICS = {"iteration_time_s": "Iteration time", "mfu": "MFU"}
MODES = ("weak", "strong")
KEYS = {"x": "_d_x", "xv": "_d_xv", "y": "_d_y", "yv": "_d_yv", "m": "_d_m", "scale": "_d_scale"}


def _short(text: Any) -> str:
    s = excerpt(text) if not isinstance(text, str) else text
    return s if len(s) <= 40 else s[:37] + "..."


def init_state(link: dict[str, str], sc: Scenario) -> None:
    """Fill the tab's widgets from the link's ``d.`` parameters the first time it is drawn (and
    again after another tab was shown, from the state the link kept); an unusable one is
    replaced by its default and named in a warning."""
    ss = st.session_state
    if KEYS["x"] in ss:
        return
    warnings: list[str] = []

    def field(which: str, default: str, other: str | None) -> str:
        key = link.get(which, default)
        if key not in FIELDS or key == other:
            if which in link:
                warnings.append(f"ignored d.{which}={_short(key)}: not a field the heatmap can vary"
                                + (" (it is the other axis)" if key == other else ""))
            key = default if default != other else next(f for f in FIELDS if f != other)
        return key

    def values(which: str, key: str) -> str:
        if which in link:
            try:
                return runs.values_text(runs.parse_values(key, link[which]))
            except ScenarioError as exc:
                warnings.append(f"ignored d.{which}={_short(link[which])}: {exc}")
        return runs.values_text(runs.default_values(key, sc))

    dx, dy = default_axes(sc)
    x = field("x", dx, None)
    y = field("y", dy, x)
    ss[KEYS["x"]], ss[KEYS["y"]] = x, y
    ss[KEYS["xv"]], ss[KEYS["yv"]] = values("xv", x), values("yv", y)
    for which, options, default in (("m", tuple(METRICS), "iteration_time_s"), ("scale", MODES, "weak")):
        value = link.get(which, default)
        if value not in options:
            warnings.append(f"ignored d.{which}={_short(value)}: valid values are {', '.join(options)}")
            value = default
        ss[KEYS[which]] = value
    if not ss.get("_d_seen"):
        ss["_d_seen"], ss["_d_warnings"] = True, warnings


def link_params(current: dict[str, str], sc: Scenario) -> dict[str, str]:
    """The tab's state as the link's ``d.`` parameters (without ``d.``): the fields, values,
    metric and scaling mode that differ from their defaults.  ``current`` (the link's) is kept
    while the tab's widgets do not exist."""
    ss = st.session_state
    if KEYS["x"] not in ss:
        return current
    out: dict[str, str] = {}
    x, y = ss[KEYS["x"]], ss[KEYS["y"]]
    dx, dy = default_axes(sc)
    for which, key, default in (("x", x, dx), ("y", y, dy)):
        if key != default:
            out[which] = key
        try:
            text = runs.values_text(runs.parse_values(key, str(ss[KEYS[which + "v"]])))
        except ScenarioError:
            continue            # an invalid list stays out of the link
        if text != runs.values_text(runs.default_values(key, sc)):
            out[which + "v"] = text
    for which, options in (("m", tuple(METRICS)), ("scale", MODES)):
        value = ss.get(KEYS[which])
        if value in options[1:]:           # the first is the default; None (a cleared choice) too
            out[which] = value
    return out


def on_field(which: str) -> None:
    """An axis field was picked: its values box takes that field's default values."""
    ss = st.session_state
    sc = ss.get("_d_scenario")
    key = ss[KEYS[which]]
    ss[KEYS[which + "v"]] = runs.values_text(runs.default_values(key, sc)) if sc is not None else ""
    ss["_d_warnings"] = []
