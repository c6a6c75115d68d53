"""Strict conversion of plain mappings (parsed YAML/JSON) into frozen dataclasses.

Every scenario section is a frozen dataclass whose fields carry their constraints in
``dataclasses.field(metadata=...)``.  :func:`build` walks a mapping against such a class and
raises :class:`ScenarioError` with a one-line message naming the dotted field, the bad value and
what would be valid.  Keeping the rules next to the field definitions means the validator, the
README reference and the app's widgets all read one source of truth.

Recognised metadata keys:
``min`` / ``max``        inclusive numeric bounds
``gt``                   exclusive lower bound (bandwidths must be > 0)
``choices``              allowed string values
``required``             the key must be given (its default is a placeholder)
``derived``              filled by the loader, never by the user (not listed as a valid key)
``doc``                  one-line description (used by the README reference and app help)
"""
from __future__ import annotations

import dataclasses
import difflib
import types
import typing
from typing import Any, Mapping


class ScenarioError(ValueError):
    """Invalid scenario input; ``str(err)`` is a one-line message starting with the field."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        super().__init__(f"{field}: {message}" if field else message)


def _describe(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _type_name(tp: Any) -> str:
    return {int: "an integer", float: "a number", bool: "true or false", str: "a string"}.get(
        tp, getattr(tp, "__name__", str(tp)))


def _unwrap_optional(tp: Any) -> tuple[Any, bool]:
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1 and len(typing.get_args(tp)) == 2:
            return args[0], True
    return tp, False


def convert_scalar(value: Any, tp: Any, path: str, meta: Mapping[str, Any]) -> Any:
    """Check one scalar against its declared type and metadata; return the converted value."""
    if tp is bool:
        if not isinstance(value, bool):
            raise ScenarioError(path, f"{_describe(value)} is not true or false")
        return value
    if tp is int:
        # YAML gives 1e3 as a float; accept integral floats but never bools.
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise ScenarioError(path, f"{_describe(value)} is not an integer")
    elif tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ScenarioError(path, f"{_describe(value)} is not a number")
        value = float(value)
        if value != value or value in (float("inf"), float("-inf")):
            raise ScenarioError(path, f"{_describe(value)} is not a finite number")
    elif tp is str:
        if not isinstance(value, str):
            raise ScenarioError(path, f"{_describe(value)} is not a string")
        if "choices" in meta and value not in meta["choices"]:
            raise ScenarioError(path, f"{_describe(value)} is not one of {', '.join(meta['choices'])}")
        if len(value) > meta.get("max_len", 20000):
            raise ScenarioError(path, f"text of {len(value)} characters is longer than {meta.get('max_len', 20000)}")
        return value
    else:  # pragma: no cover - schema definition error, not user error
        raise TypeError(f"unsupported field type {tp!r} at {path}")
    if "gt" in meta and not value > meta["gt"]:
        raise ScenarioError(path, f"{_describe(value)} must be greater than {meta['gt']}")
    if "min" in meta and value < meta["min"]:
        raise ScenarioError(path, f"{_describe(value)} is below the minimum {meta['min']}"
                            + (f" (valid: {meta['min']}..{meta['max']})" if "max" in meta else ""))
    if "max" in meta and value > meta["max"]:
        raise ScenarioError(path, f"{_describe(value)} is above the maximum {meta['max']}"
                            + (f" (valid: {meta.get('min', meta.get('gt', ''))}..{meta['max']})"))
    return value


def convert_tuple(value: Any, item: Any, path: str, meta: Mapping[str, Any]) -> tuple:
    """A YAML list (or comma-separated string) of scalars as a tuple, each item checked."""
    if isinstance(value, str):
        value = [v.strip() for v in value.split(",") if v.strip()]
        value = [int(v) if v.lstrip("-").isdigit() else v for v in value]
    if not isinstance(value, (list, tuple)):
        raise ScenarioError(path, f"{_describe(value)} is not a list")
    if len(value) > meta.get("max_items", 100000):
        raise ScenarioError(path, f"{len(value)} items is more than {meta['max_items']}")
    return tuple(convert_scalar(v, item, f"{path}[{i}]", meta) for i, v in enumerate(value))


def unknown_key_error(key: Any, known: list[str], path: str) -> ScenarioError:
    """Error for a key the schema does not define, with the closest valid spelling if any."""
    where = f"{path}.{key}" if path else str(key)
    close = difflib.get_close_matches(str(key), known, n=1)
    hint = f"; did you mean '{close[0]}'?" if close else ""
    return ScenarioError(where, f"unknown key (valid keys: {', '.join(known)}){hint}")


def build(cls: type, data: Any, path: str = "") -> Any:
    """Build dataclass ``cls`` from mapping ``data``, validating keys, types and bounds.

    Missing keys take the field default; a field without default is required.

    >>> from dataclasses import dataclass, field
    >>> @dataclass(frozen=True)
    ... class Link:
    ...     bandwidth_GBps: float = field(default=1.0, metadata={"gt": 0})
    >>> build(Link, {"bandwidth_GBps": 2}).bandwidth_GBps
    2.0
    >>> build(Link, {"bandwidth_GBps": 0})
    Traceback (most recent call last):
    ...
    explorer.schema.ScenarioError: bandwidth_GBps: 0.0 must be greater than 0
    """
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise ScenarioError(path, f"{_describe(data)} is not a mapping of keys to values")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    hints = typing.get_type_hints(cls)
    for key in data:
        if key not in fields:
            raise unknown_key_error(key, user_keys(cls), path)
    kwargs: dict[str, Any] = {}
    for name, f in fields.items():
        sub = f"{path}.{name}" if path else name
        if name not in data:
            if f.metadata.get("required") or (f.default is dataclasses.MISSING
                                              and f.default_factory is dataclasses.MISSING):
                hint = f"; {f.metadata['hint']}" if "hint" in f.metadata else ""
                raise ScenarioError(sub, f"is required ({f.metadata.get('doc', 'no default')}{hint})")
            continue
        tp, optional = _unwrap_optional(hints[name])
        value = data[name]
        if value is None:
            if optional:
                kwargs[name] = None
                continue
            raise ScenarioError(sub, f"is empty; expected {_type_name(tp)}")
        if dataclasses.is_dataclass(tp):
            kwargs[name] = build(tp, value, sub)
        elif typing.get_origin(tp) is tuple:
            kwargs[name] = convert_tuple(value, typing.get_args(tp)[0], sub, f.metadata)
        else:
            kwargs[name] = convert_scalar(value, tp, sub, f.metadata)
    return cls(**kwargs)


def user_keys(cls: type) -> list[str]:
    """The keys a user may write in a mapping for ``cls`` (derived fields excluded)."""
    return [f.name for f in dataclasses.fields(cls) if not f.metadata.get("derived")]


def dump(obj: Any) -> Any:
    """Inverse of :func:`build`: a dataclass tree as plain dicts, omitting ``None`` fields."""
    if dataclasses.is_dataclass(obj):
        out = {}
        for f in dataclasses.fields(obj):
            value = getattr(obj, f.name)
            if value is None or f.metadata.get("derived"):
                continue
            out[f.name] = dump(value)
        return out
    if isinstance(obj, tuple):
        return [dump(v) for v in obj]
    return obj


def field_paths(cls: type, prefix: str = "") -> dict[str, dataclasses.Field]:
    """All leaf fields of a dataclass tree by dotted path (for --set, share links and docs)."""
    out: dict[str, dataclasses.Field] = {}
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        path = f"{prefix}{f.name}"
        tp, _ = _unwrap_optional(hints[f.name])
        if dataclasses.is_dataclass(tp):
            out.update(field_paths(tp, path + "."))
        else:
            out[path] = f
    return out
