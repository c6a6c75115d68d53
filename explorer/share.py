"""Scenario <-> share-link query parameters.

A link is ``?scenario=<file in scenarios/ without extension>`` plus one parameter per field that
differs from that file, as its dotted key (``parallelism.pp=8``), plus ``view=`` for the tab and
``present=1`` for presentation mode.  The Compare view's scenario B is A plus overrides, each
written ``b.<dotted.key>=value`` (``b.parallelism.pp=2``) and validated like A's, on top of A.
The Design-space view's settings are ``d.<setting>=value`` (:data:`DESIGN_KEYS`: the heatmap's
fields ``d.x``/``d.y``, their values ``d.xv``/``d.yv``, metric ``d.m``, scaling mode
``d.scale``), kept here as short strings and validated by the view.
Parsing is defensive: names are checked against the shipped files (never used as paths), values
go through the bounded parser of inputs.py (no tags, aliases, deep nesting) with a size cap, and
anything invalid is dropped with a one-line warning that names it (keys and values quoted short
and escaped), so a hostile or stale link still opens on a valid scenario.  A key or value that is
not UTF-8 text (a lone surrogate, ``%ED%A0%80`` decoded leniently) is dropped the same way.
"""
from __future__ import annotations

import dataclasses
import functools
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .config.frameworks import profile
from .config.inputs import parse_value
from .config.overrides import reshaped
from .config.schema import excerpt, one_line, utf8_text
from .config.shipped import shipped_scenarios
from .estimate.equivalence import NETWORK_FIELDS
from .scenario import (
    SETTABLE,
    SETTABLE_ROOTS,
    Scenario,
    ScenarioError,
    apply_overrides,
    from_dict,
    is_settable,
    load_raw,
    to_dict,
)
from .share_limits import B_PREFIX, limit_of
from .teaching.tours import Tour, tours

DEFAULT_SCENARIO = "teaching-8gpu"
# The preset field of a section a link may set whole (hardware.gpu): the name the base expands.
_ROOT_PRESETS = frozenset(f"{root}.preset" for root in SETTABLE_ROOTS)
VIEWS = ("timeline", "memory", "traffic", "topology", "scenario", "compare", "design", "run", "serving")
D_PREFIX = "d."                # a link's Design-space view settings
DESIGN_KEYS = ("x", "xv", "y", "yv", "m", "scale")
RESERVED = {"scenario", "view", "present", "tour", "step"}
MAX_PARAMS = 100
NAME_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,80}$")
NOT_IN_LINKS = {"description"}  # long Markdown stays in the file, not the address bar


@dataclass
class SharedView:
    """What a link asks for, after validation."""

    scenario: str
    overrides: dict[str, Any] = field(default_factory=dict)
    b_overrides: dict[str, Any] = field(default_factory=dict)    # B = A plus these (Compare view)
    design: dict[str, str] = field(default_factory=dict)         # d.<setting> (Design-space view)
    view: str = VIEWS[0]
    present: bool = False
    tour: str | None = None          # a guided tour being played (explorer/teaching/tours.py) ...
    step: int = 1                    # ... at this step, 1-based
    warnings: list[str] = field(default_factory=list)


def _short(value: Any) -> str:
    """A key or value as a warning quotes it: at most 40 characters, control characters escaped."""
    text = one_line(value if isinstance(value, str) else excerpt(value))
    return text if len(text) <= 40 else text[:37] + "..."


def _first(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return str(value[-1]) if value else ""
    return str(value)


def parse_query(params: Mapping[str, Any]) -> SharedView:
    """Validate a link's parameters; return the view to show and what was ignored, and why."""
    shipped = shipped_scenarios()
    out = SharedView(DEFAULT_SCENARIO)
    items = list(params.items())
    if len(items) > MAX_PARAMS:
        out.warnings.append(f"link has {len(items)} parameters; only the first {MAX_PARAMS} were read")
        items = items[:MAX_PARAMS]
    raw_overrides: dict[str, Any] = {}
    raw_b: dict[str, Any] = {}
    for key, value in items:
        key, value = str(key), _first(value)
        if utf8_text(key) != key or utf8_text(value) != value:
            # No browser sends a lone surrogate, and no page, log or terminal can show one.
            out.warnings.append(f"ignored {_short(key)}={_short(value)}: not UTF-8 text (it holds a "
                                "lone surrogate such as \\ud800)")
            continue
        if len(key) > 100:
            out.warnings.append(f"ignored a parameter with a {len(key)}-character name")
            continue
        limit = limit_of(key)
        if len(value) > limit:
            out.warnings.append(f"ignored {_short(key)}: its value has {len(value):,} characters "
                                f"(limit {limit})")
            continue
        if key == "scenario":
            if NAME_RE.match(value) and value in shipped:
                out.scenario = value
            else:
                out.warnings.append(f"ignored scenario={_short(value)!s}: not a shipped scenario "
                                    f"(valid: {', '.join(shipped)}); showing {DEFAULT_SCENARIO}")
        elif key == "view":
            if value in VIEWS:
                out.view = value
            else:
                out.warnings.append(f"ignored view={_short(value)}: valid views are {', '.join(VIEWS)}")
        elif key == "present":
            out.present = value.lower() in ("1", "true", "yes", "on")
        elif key == "tour":
            if NAME_RE.match(value) and value in tours():
                out.tour = value
            else:
                out.warnings.append(f"ignored tour={_short(value)}: not a tour (valid: {', '.join(tours())})")
        elif key == "step":
            out.step = int(value) if value.isascii() and value.isdigit() and 0 < int(value) <= 1000 else 0
        elif key.startswith(D_PREFIX):
            if key[len(D_PREFIX):] in DESIGN_KEYS:
                out.design[key[len(D_PREFIX):]] = one_line(value)
            else:
                out.warnings.append(f"ignored {_short(key)}: not a Design-space setting "
                                    f"(valid: {', '.join(D_PREFIX + k for k in DESIGN_KEYS)})")
        else:
            target, name = (raw_b, key[len(B_PREFIX):]) if key.startswith(B_PREFIX) else (raw_overrides, key)
            if name in NOT_IN_LINKS or not is_settable(name):
                out.warnings.append(f"ignored {_short(key)}: not a scenario field")
                continue
            try:
                target[name] = parse_value(value, key)
            except ScenarioError as exc:
                out.warnings.append(f"ignored {key}={_short(value)}: {exc}")
    if out.tour is not None:
        n = len(tours()[out.tour].steps)
        if not 1 <= out.step <= n:
            out.warnings.append(f"ignored step: tour {out.tour} has steps 1 to {n}; showing step 1")
            out.step = 1
    base = preset_raw(out.scenario)
    out.overrides = accept_overrides(base, raw_overrides, out.warnings)
    out.b_overrides = accept_overrides(apply_overrides(base, out.overrides), raw_b, out.warnings, B_PREFIX)
    return out


def preset_raw(name: str) -> dict[str, Any]:
    """A shipped scenario's raw mapping with ``parallelism.dp`` removed, so that the data-parallel
    degree follows tp, pp, cp and the cluster size (links and the app keep degrees consistent by
    deriving dp; a link may still set it explicitly)."""
    raw = load_raw(shipped_scenarios()[name])
    par = raw.get("parallelism")
    if isinstance(par, dict):
        par.pop("dp", None)
    return raw


def accept_overrides(base: Mapping[str, Any], overrides: Mapping[str, Any],
                     warnings: list[str], prefix: str = "") -> dict[str, Any]:
    """The overrides that keep the scenario valid: all of them if together they are valid,
    otherwise each one in link order if it is valid on top of those accepted before it.  Each
    one dropped adds a warning naming it as the link wrote it (``prefix`` + key)."""
    if not overrides:
        return {}
    try:
        from_dict(apply_overrides(base, overrides))
        return dict(overrides)
    except ScenarioError:
        pass
    shaped = reshaped(overrides, base)
    if shaped != overrides:
        try:       # a new pipeline shape without the split written for the old one (as the sidebar does)
            from_dict(apply_overrides(base, shaped))
            return shaped
        except ScenarioError:
            pass
    accepted: dict[str, Any] = {}
    for key, value in overrides.items():
        trial = {**accepted, key: value}
        try:
            from_dict(apply_overrides(base, trial))
            accepted = trial
        except ScenarioError as exc:
            warnings.append(f"ignored {prefix}{_short(key)}={_short(value)}: {exc}")
    return accepted


def flatten(d: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested mapping -> {dotted.key: leaf value}."""
    out: dict[str, Any] = {}
    for k, v in d.items():
        path = f"{prefix}{k}"
        if isinstance(v, Mapping):
            out.update(flatten(v, path + "."))
        else:
            out[path] = v
    return out


def format_value(v: Any) -> str:
    """A leaf value as a short YAML scalar that :func:`parse_query` reads back to the same value."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float) and v.is_integer() and abs(v) < 1e15:
        return str(int(v))
    if isinstance(v, Mapping) or (isinstance(v, (list, tuple)) and any(isinstance(x, Mapping) for x in v)):
        return json.dumps(v, ensure_ascii=False, separators=(",", ":"))    # phases: YAML reads JSON
    if isinstance(v, (list, tuple)):
        return "[" + ",".join(format_value(x) for x in v) + "]"
    if v is None:
        return "null"
    if isinstance(v, str):
        # A string YAML would read as something else ("a: b" a mapping, "true", "12", "[x]",
        # "# x") is written quoted, as JSON, which YAML reads back as that string.
        try:
            plain = parse_value(v, "value") == v
        except ScenarioError:
            plain = False
        return v if plain else json.dumps(v, ensure_ascii=False)
    return str(v)


def changed_fields(base: Scenario, current: Scenario) -> dict[str, str]:
    """Dotted keys whose value differs between two scenarios, formatted for a link.

    ``parallelism.dp`` is left out when it equals GPUs/(tp*pp*cp): the link derives it.
    """
    a, b = dict(_flat(base)), flatten(to_dict(current))
    for root in SETTABLE_ROOTS:
        if isinstance(a.get(root), str) and root not in b:
            # The base names a preset (hardware.gpu: h100-sxm) and the current scenario gives the mapping:
            # compared field by field with the preset's, so a custom GPU's empty fields are written as
            # null below, else the link reopens with the preset's (its measured GEMM rate, NVLink SHARP).
            name = a.pop(root)
            a.update(flatten({root: _fields(base, root)}))
            if f"{root}.based_on" in SETTABLE:
                # A dotted key on the base expands its preset as a mapping based on it
                # (config/overrides.py): a GPU given whole is based on nothing, written as null below.
                a[f"{root}.based_on"] = name
    out = {}
    for key in sorted(b):
        if key in NOT_IN_LINKS or a.get(key) == b[key]:
            continue
        field = SETTABLE.get(key)
        if key not in a and field is not None and field.default == b[key]:
            continue        # a section new to the link (e.g. moe) needs only its non-default fields
        # PipeDream's partitioner's choice (``auto``, held as pp zeros: config/replica_rules.py) is
        # written as the word, which reopens to the same zeros ("[0,0]" read as if it were counts).
        auto = key == "parallelism.stage_replicas" and b[key] and not any(b[key])
        out[key] = "auto" if auto else format_value(b[key])
    # Keys only in the base: fields the current scenario leaves empty (to_dict omits None) — one the
    # user cleared (model.gnn.local_share), or a preset GPU's field a custom GPU does not give.  The
    # link reopens on the base, so each is written as null, else the base's value comes back.  (A
    # whole section the current scenario lacks cannot be set by a dotted key: its fields are left.)
    for key in sorted(set(a) - set(b)):
        # (hardware.gpu's preset is the name the base expands, not a key of the mapping a link sets.)
        if key not in NOT_IN_LINKS and key in SETTABLE and key not in _ROOT_PRESETS \
                and _leaf_is_none(current, key):
            out[key] = format_value(None)
    p = current.parallelism
    if out.get("parallelism.dp") is not None and current.dp == current.gpus // (p.tp * p.pp * p.cp):
        del out["parallelism.dp"]
    # The framework's gradient bucket follows dp where the scenario leaves it out (config/loading.py):
    # a link written after a change of nodes pinned the new derived size (fsdp-llama3-8b: 512 MB,
    # while the sidebar showed 256) and kept it through later changes.  Derived on both sides, it
    # stays out of the link, which derives it the same way.
    if "communication.bucket_MB" in out and _derived_bucket(base) and _derived_bucket(current):
        del out["communication.bucket_MB"]
    return out


# The flattened base of the last links written: a sweep writes every cell's link against one reference.
_LAST_BASE: list[tuple[Scenario, dict[str, Any]]] = []


def _flat(base: Scenario) -> dict[str, Any]:
    """flatten(to_dict(base)), kept for the same scenario object (scenarios are frozen)."""
    last = _LAST_BASE[-1] if _LAST_BASE else None      # read once: the app's sessions share it
    if last is not None and last[0] is base:
        return last[1]
    got = flatten(to_dict(base))
    _LAST_BASE[:] = [(base, got)]
    return got


def _derived_bucket(sc: Scenario) -> bool:
    """Whether ``sc``'s gradient bucket is its framework's default for its dp and dtype."""
    derived = profile(sc.training.framework).default_bucket_MB(sc.dp, sc.training.dtype)
    return sc.communication.bucket_MB == derived


def _section(sc: Scenario, path: str) -> Any:
    """The section of ``sc`` at dotted ``path`` ("" for ``sc`` itself), or None when one on the way
    is absent."""
    node: Any = sc
    for name in filter(None, path.split(".")):
        node = getattr(node, name, None)
        if node is None:
            return None
    return node


def _fields(sc: Scenario, key: str) -> dict[str, Any]:
    """The section at dotted ``key`` of ``sc`` as a mapping of its fields that are set."""
    node = _section(sc, key)
    return {f.name: v for f in dataclasses.fields(node) if (v := getattr(node, f.name)) is not None}


def _leaf_is_none(sc: Scenario, key: str) -> bool:
    """Whether dotted ``key`` of ``sc`` is a field set to None (False when a section on the way is
    absent)."""
    path, _, name = key.rpartition(".")
    node = _section(sc, path)
    return node is not None and hasattr(node, name) and getattr(node, name) is None


@functools.lru_cache(maxsize=64)
def _shipped_raw(name: str) -> dict[str, Any]:
    """preset_raw(name), read once: only ever copied (apply_overrides), never changed."""
    return preset_raw(name)


def reopening(name: str, changed: dict[str, str], current: Scenario) -> dict[str, str]:
    """``changed`` (changed_fields of ``current`` against shipped scenario ``name``) plus every field
    that a link of ``changed`` would otherwise reopen differently, checked by reopening it as
    parse_query does.  A value equal to the shipped scenario's is left out of ``changed``, but another
    change may derive that field anew: with ``cluster.scale_out.fabric=roce-100`` a NIC of 400 Gb/s,
    the shipped one's, came back as the RoCE preset's 100 (a heatmap cell of 7.347 s reopened at
    8.775 s).  Such fields are written too; derived ones that reopen alike (dp, a framework's bucket)
    stay out."""
    out = dict(changed)
    if all(k in NETWORK_FIELDS for k in out):
        return out        # rates and latencies derive no other field: a network sweep's links skip the check
    for _ in range(3):               # a field written can derive others anew: until none is missing
        try:
            values = {k: parse_value(v, k) for k, v in out.items()}
            reopened = from_dict(apply_overrides(_shipped_raw(name), values))
        except ScenarioError:
            return out               # the link does not open as a whole: accept_overrides says why
        a, b = flatten(to_dict(reopened)), flatten(to_dict(current))
        missing = {k: format_value(v) for k, v in b.items()
                   if k not in out and k in SETTABLE and k not in NOT_IN_LINKS and a.get(k) != v}
        if not missing:
            return out
        out = dict(sorted({**out, **missing}.items()))
    return out


def to_query(view: SharedView, base: Scenario, current: Scenario) -> dict[str, str]:
    """Query parameters for the address bar: scenario, changed fields, B's overrides (``b.``),
    the Design-space settings (``d.``), view, present."""
    q = {"scenario": view.scenario, **reopening(view.scenario, changed_fields(base, current), current)}
    q.update({B_PREFIX + k: format_value(v) for k, v in view.b_overrides.items()})
    q.update({D_PREFIX + k: v for k, v in view.design.items() if k in DESIGN_KEYS})
    if view.view != VIEWS[0]:
        q["view"] = view.view
    if view.present:
        q["present"] = "1"
    if view.tour is not None:
        q.update(tour=view.tour, step=str(view.step))
    return q


def modified_note(preset: str, changed: Mapping[str, str], shown: int = 5) -> str | None:
    """One line saying the scenario is not its preset file as shipped, e.g. ``Modified from the
    preset teaching-8gpu: model.preset, cluster.nodes (+2 more)`` (``changed``: changed_fields);
    None when nothing but the name or description differs.  The preset's own title and
    description no longer describe what is shown, so the page says so beside them."""
    keys = [k for k in changed if k not in ("name", *NOT_IN_LINKS)]
    # A preset switch (model.preset, hardware.gpu's preset) explains the fields it brings: first.
    keys.sort(key=lambda k: not k.endswith(".preset"))
    if not keys:
        return None
    more = f" (+{len(keys) - shown} more)" if len(keys) > shown else ""
    return f"Modified from the preset {preset}: {', '.join(keys[:shown])}{more}"


def check_tour(tour: Tour) -> list[str]:
    """Problems of ``tour``: per step, what the app would ignore of its link (empty: all apply)."""
    problems = []
    for i, step in enumerate(tour.steps, 1):
        view = parse_query(step.params)
        problems += [f"step {i} ({step.title}): {w}" for w in view.warnings]
        if "scenario" not in step.params:
            problems.append(f"step {i} ({step.title}): the link names no scenario")
    return problems
