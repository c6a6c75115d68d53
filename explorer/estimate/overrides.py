"""Many configurations given as dotted-key overrides of one base: validated quickly, then estimated.

``from_dict(apply_overrides(base_raw, ov))`` copies the whole raw mapping, resolves the presets,
rebuilds every section from it checking each field's type and bounds (about a millisecond, most of
it typing.get_type_hints), fills the derived defaults and runs the cross-field rules.  For a sweep
of one base, the base's sections are built once; a row then

- converts each overridden value with the schema's own checks (schema.convert_scalar /
  convert_tuple with the field's type and metadata, None only where the field is optional) and puts
  it into a copy of the built base (config.frozen.evolve along the path);
- fills the derived defaults and runs every rule, the simulator's too (loading.fill_defaults,
  runnable.validate: a hunt found advise pricing a placement from_dict refuses), exactly
  as from_dict does.

What it skips is re-checking the fields nobody overrode: they were checked when the base was
built, and no check of a field reads another field (those are the rules, which all run).  An
override the fast path does not express the way the raw mapping would — a preset name
(``model.preset``, ``hardware.gpu`` as a whole), a key that names no settable leaf, a value that
fails its check (so that the message is the one from_dict gives first), a section the base leaves
empty — goes through from_dict itself.  Touching ``hardware.gpu.<field>`` drops the GPU's preset
name and keeps it as ``based_on``, as set_dotted does when it expands the preset into a mapping.
tests/test_estimator.py checks that the scenarios and the messages equal from_dict's.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..config.frozen import evolve
from ..config.loading import fill_defaults, resolve_presets
from ..config.schema import build
from ..engine.gc_pause import paused_collector
from ..scenario import Scenario, ScenarioError, apply_overrides, from_dict, validate
from . import prime
from .equivalence import equivalents
from .many import estimate_profiles, profile
from .result import Estimates
from .values import SLOW, convert, field_spec


class _Rebuilder:
    """Sections of one base with leaf changes applied (config.frozen.evolve along the path), each
    distinct (section, its changes) built once: a sweep's rows share the sections they change
    alike (a grid of 5,184 rows changes its parallelism section in 144 ways), and the values of
    one key converted once."""

    def __init__(self) -> None:
        self._sections: dict[tuple, Any] = {}
        self._values: dict[tuple, Any] = {}

    def convert(self, path: str, value: Any) -> Any:
        """:func:`values.convert`, memoised on the path, the value and its type (1, 1.0 and True differ)."""
        try:
            key = (path, type(value), value)
            got = self._values.get(key, _MISSING)
        except TypeError:                   # an unhashable value (a list for a tuple field)
            return convert(path, value)
        if got is _MISSING:
            got = self._values[key] = convert(path, value)
        return got

    def apply(self, base: Scenario, changes: dict[tuple[str, ...], dict[str, Any]]) -> Scenario | None:
        """``base`` with the leaf changes applied section by section (None: a section is empty)."""
        tree: dict = {}
        for section, leaves in changes.items():
            node = tree
            for name in section:
                node = node.setdefault(name, {})
            node[_LEAVES] = leaves
        try:
            return self._rebuilt(base, tree)
        except LookupError:
            return None

    def _rebuilt(self, obj: Any, node: dict, root: bool = True) -> Any:
        leaves = node.get(_LEAVES, {})
        kids = []
        for sub, child in node.items():
            if sub is _LEAVES:
                continue
            part = getattr(obj, sub)
            if part is None:
                raise LookupError(sub)
            kids.append((sub, self._rebuilt(part, child, False)))
        if root:
            return evolve(obj, **leaves, **dict(kids))   # the whole scenario: one per row, not memoised
        try:
            key = (id(obj), tuple((k, type(v), v) for k, v in leaves.items()),
                   tuple((k, id(v)) for k, v in kids))
            got = self._sections.get(key)
        except TypeError:
            return evolve(obj, **leaves, **dict(kids))
        if got is None:
            # The key holds ids of obj and of the rebuilt children: obj is a section of the base or
            # a memoised rebuild and each child is held by the memoised result, so none is freed
            # and no id reused meanwhile.
            got = self._sections[key] = evolve(obj, **leaves, **dict(kids))
        return got


_MISSING = object()
_LEAVES = object()                  # the key of a node's own leaf changes in _Rebuilder.apply's tree


def scenarios_from_overrides(base_raw: Mapping[str, Any], overrides: Sequence[Mapping[str, Any]]
                             ) -> tuple[list[Scenario | None], list[str | None]]:
    """Each override's validated scenario (None when invalid) and its one-line ScenarioError text
    (None when valid), equal to ``from_dict(apply_overrides(base_raw, ov))``'s."""
    try:
        built = build(Scenario, resolve_presets(base_raw))
        for section in ("model", "training"):
            if section not in base_raw:
                raise ScenarioError(section, "is required")
    except ScenarioError:
        built = None                      # every row fails as from_dict fails: let it say so
    out: list[Scenario | None] = []
    reasons: list[str | None] = []
    rebuild = _Rebuilder()
    for ov in overrides:
        sc = _fast(built, ov, rebuild) if built is not None else SLOW
        try:
            if not isinstance(sc, Scenario):          # SLOW: this override needs from_dict
                sc = from_dict(apply_overrides(base_raw, ov))
            else:
                sc = fill_defaults(sc)
                validate(sc)
            out.append(sc)
            reasons.append(None)
        except ScenarioError as exc:
            out.append(None)
            reasons.append(str(exc))
    return out, reasons


def _fast(built: Scenario, ov: Mapping[str, Any], rebuild: _Rebuilder) -> Any:
    """The unfilled scenario of one override, or SLOW."""
    changes: dict[tuple[str, ...], dict[str, Any]] = {}
    for key, value in ov.items():
        if not isinstance(key, str) or key == "model.preset":
            return SLOW
        conv = rebuild.convert(key, value)
        if conv is SLOW:
            return SLOW
        field = field_spec(key)
        if field is None:                        # rebuild.convert found it settable: never here
            return SLOW
        section = field[0]
        changes.setdefault(section, {})[key.rsplit(".", 1)[-1]] = conv
        if section == ("hardware", "gpu") and built.hardware.gpu.preset is not None:
            # set_dotted expands the preset name into a mapping based on it.
            changes[section]["preset"] = None
            changes[section].setdefault("based_on", built.hardware.gpu.preset)
    sc = rebuild.apply(built, changes)
    return SLOW if sc is None else sc


def estimate_overrides(base_raw: Mapping[str, Any],
                       overrides: Sequence[Mapping[str, Any]]) -> tuple[Estimates, list[str | None]]:
    """Estimates of ``base_raw`` under each override (dotted key -> value, as ``--set`` and share
    links give them), and per row the one-line reason it is invalid (None when valid; its row is
    NaN and ``fits`` False).  Overrides equal but for network fields the scenario never reads
    (estimate/equivalence.py: the WAN of one datacenter) are validated and priced once."""
    n = len(overrides)
    eff, rep = equivalents(base_raw, overrides)
    distinct = [i for i in range(n) if rep[i] == i]
    # Thousands of rows allocate short-lived objects whose collections find little to free
    # (explorer/engine/gc_pause.py): about 15 % of a sweep's distinct networks.
    with paused_collector():
        scenarios, found = scenarios_from_overrides(base_raw, [eff[i] for i in distinct])
        valid = [k for k, sc in enumerate(scenarios) if sc is not None]
        # A network sweep's rows: each call priced over all of their networks at once (prime.py).
        prime.prime_networks(scenarios, [eff[i] for i in distinct])
        est, refused = estimate_profiles([profile(sc) for sc in scenarios if sc is not None])
    for k, why in zip(valid, refused, strict=True):
        if why is not None:
            found[k] = why
    slot = {i: k for k, i in enumerate(distinct)}
    rows = np.array([slot[rep[i]] for i in range(n)], dtype=int)
    reasons = [found[k] for k in rows.tolist()]
    ok = np.array([i for i in range(n) if reasons[i] is None], dtype=int)
    pos = np.full(len(distinct), -1)
    pos[valid] = np.arange(len(valid))
    part = est.take(pos[rows[ok]]) if len(ok) else None
    return Estimates.scatter(n, [(ok, part)] if part is not None else []), reasons
