"""Overrides as dotted keys (``parallelism.pp=8``): the CLI's ``--set`` and share links.

An override edits the *raw* mapping (before validation), so a scenario with overrides goes
through exactly the same loading and rules as a file.  A key that names no field fails at once
with a one-line error naming the deepest valid prefix and what may follow it.

A run plan's phases are reached by index, as its errors name them: ``training.phases[1].tokens``,
``training.phases[1].steps``, ``training.phases[1].name`` and ``training.phases[1].overrides.KEY``
(KEY any key of ``--set``), so that ``sweep --vary`` can sweep a batch ramp or a phase's length.
"""
from __future__ import annotations

import copy
import re
from collections.abc import Iterable, Mapping
from typing import Any

from .inputs import parse_value
from .presets import preset
from .schema import ScenarioError, excerpt, field_paths, unknown_key_error
from .sections import Scenario

SETTABLE = field_paths(Scenario)
# The GPU may be given as a preset name in place of the mapping; the model preset likewise.
SETTABLE_ROOTS = {"hardware.gpu"}


# training.phases[i].(name | tokens | steps | overrides.KEY)
_PHASE_KEY = re.compile(r"^training\.phases\[(\d+)\]\.(name|tokens|steps|overrides\.(.+))$")
PHASE_FIELDS = ("name", "tokens", "steps", "overrides.KEY")


def phase_key(key: str) -> tuple[int, str, str | None] | None:
    """``training.phases[i].FIELD`` as (i, FIELD, the override's key or None); None for other keys.

    >>> phase_key("training.phases[2].overrides.training.global_batch")
    (2, 'overrides', 'training.global_batch')
    >>> phase_key("training.phases[0].tokens"), phase_key("training.global_batch")
    ((0, 'tokens', None), None)
    """
    m = _PHASE_KEY.match(key) if isinstance(key, str) else None
    if m is None:
        return None
    inner = m.group(3)
    return int(m.group(1)), "overrides" if inner is not None else m.group(2), inner


def is_phase_key(key: str) -> bool:
    """Whether ``key`` is a well-formed phase path whose override key (if any) is a settable field."""
    parsed = phase_key(key)
    return parsed is not None and (parsed[2] is None or (is_settable(parsed[2])
                                                         and phase_key(parsed[2]) is None))


def _set_phase(raw: dict[str, Any], key: str, index: int, what: str, inner: str | None, value: Any) -> None:
    """Set one field of the run plan's phase ``index`` (see the module docstring)."""
    if inner is not None and not is_phase_key(key):
        raise ScenarioError(key, f"{excerpt(inner)} is not a key of --set (a phase overrides scenario "
                                 "fields, e.g. training.phases[0].overrides.training.global_batch)")
    training = raw.get("training")
    phases = training.get("phases") if isinstance(training, dict) else None
    if not isinstance(training, dict) or not isinstance(phases, list) or not phases:
        raise ScenarioError(key, "the scenario has no training.phases to index")
    if index >= len(phases):
        raise ScenarioError(key, f"the scenario has {len(phases)} phases: index 0 .. {len(phases) - 1}")
    phase = dict(phases[index]) if isinstance(phases[index], dict) else {}
    if inner is None:
        phase[what] = value
        if what in ("tokens", "steps"):       # a phase has one length: the one given replaces the other
            phase.pop("steps" if what == "tokens" else "tokens", None)
    else:
        over = phase.get("overrides")
        phase["overrides"] = {**(over if isinstance(over, dict) else {}), inner: value}
    training["phases"] = [*phases[:index], phase, *phases[index + 1:]]


def is_settable(key: str) -> bool:
    """Whether a dotted key names a scenario field that an override may set."""
    return key in SETTABLE or key in SETTABLE_ROOTS


def set_dotted(raw: dict[str, Any], key: str, value: Any) -> None:
    """Set ``a.b.c = value`` in a raw scenario mapping, validating that the path names a field.

    A GPU given by preset name is expanded to its mapping first, so ``hardware.gpu.peak_tflops``
    changes one number of the preset and keeps the others.  A phase path (module docstring) sets that
    phase's field.
    """
    phase = phase_key(key)
    if phase is not None:
        _set_phase(raw, key, *phase, value)
        return
    if not isinstance(key, str) or not is_settable(key):
        _raise_unknown_path(str(key))
    parts = key.split(".")
    node = raw
    for i, part in enumerate(parts[:-1]):
        child = node.get(part)
        if isinstance(child, str) and ".".join(parts[: i + 1]) == "hardware.gpu":
            # One field of a preset changed: the rest, and its architecture, stay the preset's.
            child = {**preset("gpus", child, "hardware.gpu"), "based_on": child}
        if not isinstance(child, dict):
            child = {}
        node[part] = child
        node = child
    node[parts[-1]] = value


def _raise_unknown_path(key: str) -> None:
    """One-line error for a dotted key that names no field: the deepest valid prefix and what
    may follow it, or a hint when the key names a whole section."""
    if any(p.startswith(key + ".") for p in SETTABLE):
        example = next(p for p in SETTABLE if p.startswith(key + "."))
        raise ScenarioError(key, f"is a section, not a field; set its fields one by one, e.g. {example}")
    parts = key.split(".")
    depth = 0
    while depth < len(parts) - 1 and any(p.startswith(".".join(parts[: depth + 1]) + ".") for p in SETTABLE):
        depth += 1
    prefix = ".".join(parts[:depth])
    children = sorted({p[len(prefix) + 1 if prefix else 0:].split(".")[0] for p in SETTABLE
                       if not prefix or p.startswith(prefix + ".")})
    children = [c for c in children if not _is_derived(f"{prefix}.{c}" if prefix else c)]
    raise unknown_key_error(parts[depth], children, prefix)


def _is_derived(path: str) -> bool:
    """Whether ``path`` is a leaf field filled by the loader only (never offered to users)."""
    f = SETTABLE.get(path)
    return f is not None and bool(f.metadata.get("derived"))


def apply_overrides(raw: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """A deep copy of ``raw`` with each dotted-key override applied in order."""
    out = copy.deepcopy(dict(raw))
    for key, value in overrides.items():
        set_dotted(out, key, value)
    return out


def parse_assignment(text: str) -> tuple[str, Any]:
    """Parse ``dotted.key=value`` (value as YAML, through the bounded parser of inputs.py) as the
    CLI's ``--set`` gives it.

    >>> parse_assignment("parallelism.stage_layers=[7,9]")
    ('parallelism.stage_layers', [7, 9])
    """
    if "=" not in text:
        raise ScenarioError("--set", f"{excerpt(text)} is not of the form dotted.key=value")
    key, _, value = text.partition("=")
    if not key.strip():
        # "=3" named no field, and the message for the empty key listed the sections without one.
        raise ScenarioError("--set", f"{excerpt(text)} names no field before '='; give dotted.key=value, "
                                     "e.g. parallelism.tp=4")
    return key.strip(), parse_value(value, key.strip())


def parse_assignments(texts: Iterable[str], flag: str = "--set") -> dict[str, Any]:
    """Several ``--set`` texts as one mapping of overrides; a key given twice is an error (the
    second would silently win, and one of the two values is a mistake).

    >>> parse_assignments(["parallelism.pp=2", "parallelism.pp=4"])
    Traceback (most recent call last):
    ...
    explorer.config.schema.ScenarioError: parallelism.pp: given twice with --set (2, then 4); ...
    """
    out: dict[str, Any] = {}
    for text in texts:
        key, value = parse_assignment(text)
        if key in out:
            raise ScenarioError(key, f"given twice with {flag} ({excerpt(out[key])}, then {excerpt(value)}); "
                                "give each key once")
        out[key] = value
    return out


# Lists written for one pipeline shape: a new depth, chunk count or layer count unsets them (the
# sidebar's DERIVED_WIDGETS do the same; a hunt found a Compare link's b.parallelism.pp=2 ignored
# because scenario A's four-stage layer split came along).
SHAPE_LISTS = {"parallelism.pp": ("parallelism.stage_layers", "parallelism.stage_replicas",
                                  "parallelism.pipeline_layout"),
               "parallelism.vpp": ("parallelism.stage_layers", "parallelism.pipeline_layout"),
               "model.layers": ("parallelism.stage_layers", "parallelism.pipeline_layout")}


def reshaped(overrides: Mapping[str, Any], base: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """``overrides`` with the lists of :data:`SHAPE_LISTS` unset (None) where they change a shape and
    leave those lists alone — those the raw ``base`` sets, when given."""
    out = dict(overrides)
    for source, lists in SHAPE_LISTS.items():
        if source in overrides:
            out.update({k: None for k in lists if k not in overrides and (base is None or _sets(base, k))})
    return out


def _sets(raw: Mapping[str, Any], key: str) -> bool:
    """Whether the raw mapping gives dotted ``key`` a value (not None)."""
    node: Any = raw
    for part in key.split("."):
        if not isinstance(node, Mapping) or node.get(part) is None:
            return False
        node = node[part]
    return True
