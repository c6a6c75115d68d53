"""One override's value as the scenario would hold it: the schema's own type and bounds checks.

A sweep row sets dotted leaves (``network.scale_out.bandwidth_GBps: 50``).  :func:`converted`
runs exactly the conversion schema.build runs on that leaf (schema.convert_scalar /
convert_tuple with the field's type and metadata, None only where the field is optional), so the
fast path of estimate/overrides.py and the equivalence of estimate/equivalence.py store the same
value from_dict would.  A leaf the fast path cannot set on its own (a derived field, a whole
section, a tuple of sections) or a value its check rejects comes back as :data:`SLOW`.
"""
from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from functools import cache
from typing import Any

from ..config.schema import convert_scalar, convert_tuple
from ..scenario import SETTABLE, Scenario, ScenarioError

SLOW = object()                     # marker: this override needs from_dict


@cache
def field_spec(path: str) -> tuple[tuple[str, ...], Any, bool, Mapping[str, Any]] | None:
    """(section path, leaf type, optional, metadata) of a settable leaf, or None when the fast path
    cannot set it (a derived field, a whole section)."""
    f = SETTABLE.get(path)
    if f is None or f.metadata.get("derived"):
        return None
    parts = path.split(".")
    cls: Any = Scenario
    for name in parts[:-1]:
        tp, _ = _unwrap(typing.get_type_hints(cls)[name])
        if not dataclasses.is_dataclass(tp):
            return None
        cls = tp
    tp, optional = _unwrap(typing.get_type_hints(cls)[parts[-1]])
    if dataclasses.is_dataclass(tp):
        return None
    if typing.get_origin(tp) is tuple and any(dataclasses.is_dataclass(a) for a in typing.get_args(tp)):
        return None                   # a tuple of sections (WAN links): built by from_dict only
    return tuple(parts[:-1]), tp, optional, f.metadata


def _unwrap(tp: Any) -> tuple[Any, bool]:
    """``X | None`` -> (X, True); anything else -> (tp, False) (as schema.build reads a type)."""
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1 and len(typing.get_args(tp)) == 2:
            return args[0], True
    return tp, False


def convert(path: str, value: Any) -> Any:
    """The override's value as schema.build would store it, or SLOW."""
    spec = field_spec(path)
    if spec is None:
        return SLOW
    _, tp, optional, meta = spec
    try:
        if value is None:
            return None if optional else SLOW
        if typing.get_origin(tp) is tuple:
            return convert_tuple(value, typing.get_args(tp)[0], path, meta)
        return convert_scalar(value, tp, path, meta)
    except ScenarioError:
        return SLOW


def value_passes(path: str, value: Any) -> bool:
    """Whether ``value`` passes the check of the settable leaf ``path`` (schema conversion)."""
    return convert(path, value) is not SLOW


def converted(path: str, value: Any) -> Any:
    """``value`` as the scenario holds the settable leaf ``path`` (schema conversion); a value
    the check rejects raises its ScenarioError."""
    got = convert(path, value)
    if got is SLOW:
        raise ScenarioError(path, f"{value!r} is not valid here")
    return got
