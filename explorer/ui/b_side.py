"""Scenario B of the Compare view: A plus the link's ``b.`` overrides (or the B editor's), the last
valid B kept while an edit is not valid, and the editor's callbacks (explorer/ui/views/compare.py)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import streamlit as st

from ..config.inputs import parse_value
from ..config.overrides import reshaped
from ..scenario import ScenarioError, apply_overrides, from_dict, to_dict
from ..share import flatten, format_value
from .state import current_raw


@dataclass(frozen=True)
class BSide:
    """Scenario B as the page shows it: the overrides of A it was built from (the link's ``b.``
    parameters), its raw mapping, and why the overrides being edited are not valid (or None)."""

    overrides: dict[str, Any]
    raw: dict[str, Any]
    error: str | None = None


def resolve_b(raw_a: dict[str, Any]) -> BSide:
    """B = A plus ``_b_overrides`` when that is a valid scenario (remembered as the last valid B);
    otherwise the last valid B (A itself before there was one) with the reason."""
    ss = st.session_state
    over = dict(ss.get("_b_overrides") or {})
    first: ScenarioError | None = None
    # As given, then with a new pipeline shape dropping A's split for the old one (reshaped).
    for tried in (over, reshaped(over, raw_a)):
        try:
            raw_b = apply_overrides(raw_a, tried)
            from_dict(raw_b)
        except ScenarioError as exc:
            first = first or exc
            continue
        ss["_b_good"] = (over, raw_b)
        return BSide(over, raw_b)
    good: tuple[dict[str, Any], dict[str, Any]] = ss.get("_b_good") or ({}, raw_a)
    return BSide(dict(good[0]), good[1], str(first))


def a_value(key: str) -> str:
    """The current A's value of ``key`` as the B editor pre-fills it (empty when A leaves it unset)."""
    try:
        flat = flatten(to_dict(from_dict(current_raw())))
    except ScenarioError:
        return ""
    value = flat.get(key)
    return "" if value is None else format_value(value)


def on_b_field_change() -> None:
    """A field was picked in the B editor: its value box shows B's value of it to edit (its
    override, or A's value when B does not override it)."""
    key = st.session_state["_b_field"]
    over = st.session_state.get("_b_overrides") or {}
    st.session_state["_b_value"] = format_value(over[key]) if key in over else a_value(key)


def on_b_set() -> None:
    """Set the editor's field to its value in B (last set last); a value that does not parse is
    refused with its one-line reason in ``_b_msg``.  Rules between fields are checked by
    :func:`resolve_b`, so a combination valid only together can be entered one field at a time."""
    ss = st.session_state
    key, text = str(ss.get("_b_field") or ""), str(ss.get("_b_value") or "")
    try:
        value = parse_value(text, key)
        if value is None:
            raise ScenarioError(key, "type a value to set in B")
    except ScenarioError as exc:
        ss["_b_msg"] = str(exc)
        return
    over = {k: v for k, v in (ss.get("_b_overrides") or {}).items() if k != key}
    over[key] = value
    ss["_b_overrides"] = over
    ss["_b_msg"] = None


def on_b_remove(key: str) -> None:
    """Drop one override of B (B falls back to A's value of that field)."""
    ss = st.session_state
    ss["_b_overrides"] = {k: v for k, v in (ss.get("_b_overrides") or {}).items() if k != key}
    ss["_b_msg"] = None
