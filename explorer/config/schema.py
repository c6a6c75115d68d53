"""Strict conversion of plain mappings (parsed YAML/JSON) into frozen dataclasses.

Every scenario section is a frozen dataclass whose fields carry their constraints in
``dataclasses.field(metadata=...)``.  :func:`build` walks a mapping against such a class and
raises :class:`ScenarioError` with a one-line message naming the dotted field, the bad value and
what would be valid.  Keeping the rules next to the field definitions means the validator, the
README reference and the app's widgets all read one source of truth.

Recognised metadata keys:
``min`` / ``max``        inclusive numeric bounds
``gt``                   exclusive lower bound
``why``                  the physical reason for the bounds, quoted in the error message
``choices``              allowed values (strings, or integers such as a ResNet's depth)
``required``             the key must be given (its default is a placeholder)
``derived``              filled by the loader, never by the user (not listed as a valid key)
``doc``                  one-line description (used by the README reference and app help)
``valid``                what a structured field accepts, in words (the README's "valid" column)
``convert`` / ``dump``   a structured value's own reader (value, path) -> field and writer back
``min_items`` / ``max_items``  bounds on a list's length (a field indexed ``i mod len`` needs one item)
"""
from __future__ import annotations

import dataclasses
import difflib
import functools
import math
import re
import types
import typing
from collections.abc import Mapping
from typing import Any

# Characters that would break a one-line message or rewrite a terminal: C0/C1 controls (newline,
# ESC of ANSI sequences), Unicode line/paragraph separators, zero-width and bidi-override marks,
# and surrogates (U+D800-U+DFFF), which no UTF-8 output (a terminal, the app's page) can encode.
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff\ud800-\udfff]")
MAX_FIELD_CHARS = 120          # a field path in a message; longer ones are user-made keys


def one_line(text: str) -> str:
    """``text`` with every control, separator or bidi character written as its Python escape
    (``\\n``, ``\\x1b``), so it prints as one line and cannot drive a terminal."""
    return _UNSAFE.sub(lambda m: repr(m.group())[1:-1], text)


def utf8_text(text: str) -> str | None:
    """``text`` if it can be encoded as UTF-8 (printed, sent to a browser, written to a file);
    a surrogate pair written as two escapes, as JSON does (``"\\ud83d\\ude00"``), joined into its
    character; None when a lone surrogate (``"\\ud800"``) remains, which is no character at all.

    >>> utf8_text("caf\\u00e9"), utf8_text("\\ud83d\\ude00") == "\\U0001f600", utf8_text("a\\ud800")
    ('café', True, None)
    """
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        pass
    try:
        return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le")
    except UnicodeDecodeError:
        return None


NOT_UTF8 = "cannot be encoded as UTF-8 (it holds a lone surrogate such as \\ud800); write real characters"


class ScenarioError(ValueError):
    """Invalid scenario input; ``str(err)`` is a one-line message starting with the field.

    The field and message are escaped with :func:`one_line` here, once, so no caller can produce
    a two-line error from a key or value that contains a newline or an ANSI escape."""

    def __init__(self, field: str, message: str) -> None:
        field = one_line(str(field))
        if len(field) > MAX_FIELD_CHARS:
            field = field[:MAX_FIELD_CHARS - 3] + "..."
        self.field = field
        message = one_line(str(message))
        super().__init__(f"{field}: {message}" if field else message)


EXCERPT_CHARS = 40             # how much of a bad value a message quotes


def _bounded_repr(value: Any, budget: int) -> str:
    """``repr(value)`` cut after about ``budget`` characters, without ever building the whole
    representation (a value may be a huge list or a 4,000-digit integer, whose ``repr`` raises)."""
    if isinstance(value, str):
        return repr(value[:budget + 1])
    if isinstance(value, bool) or value is None or isinstance(value, float):
        return repr(value)
    if isinstance(value, int):
        if value.bit_length() > 100:          # ~30 digits: say how big, not what
            # str() is exact but refused beyond 4,300 digits; log10 takes any int.
            digits = len(str(abs(value))) if value.bit_length() < 14_000 else int(math.log10(abs(value))) + 1
            return f"<integer of {digits} digits>"
        return repr(value)
    if isinstance(value, (list, tuple, dict)):
        items = value.items() if isinstance(value, dict) else value
        opening, closing = (("{", "}") if isinstance(value, dict) else ("(", ")") if isinstance(value, tuple)
                            else ("[", "]"))
        out = opening
        for i, item in enumerate(items):
            if len(out) > budget:
                return out + "..."
            if i:
                out += ", "
            # Each level costs at least its opening bracket, so a self-referencing value ends.
            if isinstance(value, dict):
                out += _bounded_repr(item[0], budget - len(out) - 1) + ": "
                out += _bounded_repr(item[1], budget - len(out) - 1)
            else:
                out += _bounded_repr(item, budget - len(out) - 1)
        return out + closing
    try:
        text = repr(value)
    except Exception:                         # noqa: BLE001 - a message must never fail
        text = f"<{type(value).__name__}>"
    return text[:budget + 1]


def excerpt(value: Any, limit: int = EXCERPT_CHARS) -> str:
    """A short, escaped, single-line quotation of a (possibly huge or hostile) value."""
    text = one_line(_bounded_repr(value, limit))
    return text if len(text) <= limit else text[:limit - 3] + "..."


_describe = excerpt


def _fmt_bound(x: Any) -> str:
    """A bound as people write it: 100000 not 1e+05, 0.001 not 1e-03."""
    if isinstance(x, float) and x.is_integer() and abs(x) < 1e16:
        return str(int(x))
    return repr(x) if isinstance(x, float) else str(x)


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
        if "choices" in meta and value not in meta["choices"]:
            raise ScenarioError(path, f"{value} is not one of {', '.join(map(str, meta['choices']))}")
    elif tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ScenarioError(path, f"{_describe(value)} is not a number")
        try:
            value = float(value)
        except OverflowError:                 # an integer beyond 1.8e308 (e.g. 400 digits)
            raise ScenarioError(path, f"{_describe(value)} is too large"
                                + _valid_range(meta)) from None
        if value != value or value in (float("inf"), float("-inf")):
            raise ScenarioError(path, f"{_describe(value)} is not a finite number")
    elif tp is str:
        if not isinstance(value, str):
            raise ScenarioError(path, f"{_describe(value)} is not a string")
        if utf8_text(value) != value:
            raise ScenarioError(path, f"{_describe(value)} {NOT_UTF8}")
        if "choices" in meta and value not in meta["choices"]:
            raise ScenarioError(path, f"{_describe(value)} is not one of {', '.join(meta['choices'])}")
        if len(value) > meta.get("max_len", 20000):
            raise ScenarioError(path, f"text of {len(value)} characters is longer than "
                                f"{meta.get('max_len', 20000)}")
        return value
    else:  # pragma: no cover - schema definition error, not user error
        raise TypeError(f"unsupported field type {tp!r} at {path}")
    if "gt" in meta and not value > meta["gt"]:
        raise ScenarioError(path, f"{_describe(value)} must be greater than {_fmt_bound(meta['gt'])}"
                            + _valid_range(meta))
    if "min" in meta and value < meta["min"]:
        raise ScenarioError(path, f"{_describe(value)} is below the minimum {_fmt_bound(meta['min'])}"
                            + _valid_range(meta))
    if "max" in meta and value > meta["max"]:
        raise ScenarioError(path, f"{_describe(value)} is above the maximum {_fmt_bound(meta['max'])}"
                            + _valid_range(meta))
    return value


def _valid_range(meta: Mapping[str, Any]) -> str:
    """`` (valid: lo..hi; why)`` from a field's metadata, or what part of it exists."""
    low = meta.get("min", meta.get("gt"))
    parts = []
    if low is not None and "max" in meta:
        parts.append(f"valid: {'>' if 'min' not in meta else ''}{_fmt_bound(low)}..{_fmt_bound(meta['max'])}")
    if "why" in meta:
        parts.append(meta["why"])
    return f" ({'; '.join(parts)})" if parts else ""


# An integer as a list item: ASCII digits only, at most 18 of them ("--5", "²" or a 5,000-digit
# run stay strings and are reported as "not an integer").
_INT_ITEM = re.compile(r"[+-]?[0-9]{1,18}")


def convert_tuple(value: Any, item: Any, path: str, meta: Mapping[str, Any]) -> tuple:
    """A YAML list (or comma-separated string) of scalars as a tuple, each item checked."""
    if isinstance(value, str):
        value = [v.strip() for v in value.split(",") if v.strip()]
        value = [int(v) if _INT_ITEM.fullmatch(v) else v for v in value]
    if not isinstance(value, (list, tuple)):
        raise ScenarioError(path, f"{_describe(value)} is not a list")
    if len(value) > meta.get("max_items", 100000):
        raise ScenarioError(path, f"{len(value)} items is more than {meta.get('max_items')}")
    if len(value) < meta.get("min_items", 0):
        raise ScenarioError(path, f"has {len(value)} items; give at least {meta['min_items']}")
    return tuple(convert_scalar(v, item, f"{path}[{i}]", meta) for i, v in enumerate(value))


def unknown_key_error(key: Any, known: list[str], path: str) -> ScenarioError:
    """Error for a key the schema does not define, with the closest valid spelling if any."""
    name = str(key) if isinstance(key, str) else _describe(key)
    where = f"{path}.{name}" if path else name
    # Only keys of plausible length are compared: difflib is quadratic in the key's length.
    close = difflib.get_close_matches(name, known, n=1) if len(name) <= 64 else []
    hint = f"; did you mean '{close[0]}'?" if close else ""
    return ScenarioError(where, f"unknown key (valid keys: {', '.join(known)}){hint}")


@dataclasses.dataclass(frozen=True)
class _Plan:
    """How :func:`build` reads one dataclass: its field names, and per field (name, Field, type
    without Optional, whether None is allowed, kind: section, sections, tuple or scalar, and the
    item type of a tuple kind)."""

    names: frozenset[str]
    fields: tuple[tuple[str, dataclasses.Field, Any, bool, str, Any], ...]


@functools.cache
def _plan(cls: type) -> _Plan:
    """The field plan of ``cls``, made once per class: resolving its string annotations
    (typing.get_type_hints) took half of every from_dict, which sweeps call per combination."""
    hints = typing.get_type_hints(cls)
    out = []
    for f in dataclasses.fields(cls):
        tp, optional = _unwrap_optional(hints[f.name])
        item = typing.get_args(tp)[0] if typing.get_origin(tp) is tuple else None
        if dataclasses.is_dataclass(tp):
            kind = "section"
        elif item is not None:
            kind = "sections" if dataclasses.is_dataclass(item) else "tuple"
        else:
            kind = "scalar"
        out.append((f.name, f, tp, optional, kind, item))
    return _Plan(frozenset(name for name, *_ in out), tuple(out))


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
    explorer.config.schema.ScenarioError: bandwidth_GBps: 0.0 must be greater than 0
    """
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise ScenarioError(path, f"{_describe(data)} is not a mapping of keys to values")
    plan = _plan(cls)
    for key in data:
        if key not in plan.names:
            raise unknown_key_error(key, user_keys(cls), path)
    kwargs: dict[str, Any] = {}
    for name, f, tp, optional, kind, item in plan.fields:
        sub = f"{path}.{name}" if path else name
        if name not in data:
            if f.metadata.get("required") or (f.default is dataclasses.MISSING
                                              and f.default_factory is dataclasses.MISSING):
                hint = f"; {f.metadata['hint']}" if "hint" in f.metadata else ""
                raise ScenarioError(sub, f"is required ({f.metadata.get('doc', 'no default')}{hint})")
            continue
        value = data[name]
        if value is None:
            if optional:
                kwargs[name] = None
                continue
            raise ScenarioError(sub, f"is empty; expected {_type_name(tp)}")
        if "convert" in f.metadata:             # a structured value with its own reader (run_plan.py)
            kwargs[name] = f.metadata["convert"](value, sub)
        elif kind == "section":
            kwargs[name] = build(tp, value, sub)
        elif kind == "sections":
            kwargs[name] = build_items(item, value, sub, f.metadata)
        elif kind == "tuple":
            kwargs[name] = convert_tuple(value, item, sub, f.metadata)
        else:
            kwargs[name] = convert_scalar(value, tp, sub, f.metadata)
    return cls(**kwargs)


def build_items(cls: type, value: Any, path: str, meta: Mapping[str, Any]) -> tuple:
    """A YAML list of mappings as a tuple of ``cls`` (e.g. WAN links), each built strictly."""
    if not isinstance(value, (list, tuple)):
        raise ScenarioError(path, f"{_describe(value)} is not a list of mappings")
    if len(value) > meta.get("max_items", 100000):
        raise ScenarioError(path, f"{len(value)} items is more than {meta.get('max_items')}")
    return tuple(build(cls, v, f"{path}[{i}]") for i, v in enumerate(value))


def reject_derived(cls: type, data: Any, path: str = "") -> None:
    """Refuse, as an unknown key, any derived field of ``cls`` (nested sections and lists of
    sections included) that a user's mapping ``data`` gives: the loader fills those (a GPU's preset
    name, the datacenters' sizes and GPUs, the per-stage slowdown of a straggler replica), and a
    value given for one would be read as if the loader had derived it."""
    if not isinstance(data, Mapping):
        return
    for name, f, tp, _, kind, item in _plan(cls).fields:
        if name not in data:
            continue
        if f.metadata.get("derived"):
            raise unknown_key_error(name, user_keys(cls), path)
        sub = f"{path}.{name}" if path else name
        if kind == "section":
            reject_derived(tp, data[name], sub)
        elif kind == "sections" and isinstance(data[name], (list, tuple)):
            for i, v in enumerate(data[name]):
                reject_derived(item, v, f"{sub}[{i}]")


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
            out[f.name] = f.metadata["dump"](value) if "dump" in f.metadata else dump(value)
        return out
    if isinstance(obj, tuple):
        return [dump(v) for v in obj]
    return obj


def field_paths(cls: type, prefix: str = "") -> dict[str, dataclasses.Field]:
    """All leaf fields of a dataclass tree by dotted path (for --set, share links and docs)."""
    out: dict[str, dataclasses.Field] = {}
    for name, f, tp, _, kind, _ in _plan(cls).fields:
        path = f"{prefix}{name}"
        if kind == "section":
            out.update(field_paths(tp, path + "."))
        else:
            out[path] = f
    return out
