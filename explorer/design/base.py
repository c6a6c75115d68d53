"""The scenario a design-space run starts from, as the raw mapping every variant overrides.

A run names a scenario (a shipped name or a file) and optional ``--set`` overrides.  Its variants
are that raw mapping plus dotted-key overrides, each validated by :func:`explorer.scenario.from_dict`
exactly as a file would be.  ``parallelism.dp`` is removed from the mapping unless the user sets or
varies it, so the data-parallel degree follows tp, pp, cp and the cluster size — as in the app and
in share links (explorer/share.py ``preset_raw``) — and a variant with ``parallelism.tp=4`` is a
4-way tensor-parallel layout of the same GPUs rather than a contradiction.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from typing import Any
from urllib.parse import parse_qsl, urlencode

from ..config.schema import excerpt
from ..fold.admit import unproven
from ..scenario import (
    SETTABLE,
    Scenario,
    ScenarioError,
    apply_overrides,
    from_dict,
    is_phase_key,
    is_settable,
    load_raw,
    resolve_scenario_path,
    set_dotted,
    shipped_scenarios,
    to_dict,
)
from ..share import DEFAULT_SCENARIO, MAX_PARAMS, SharedView, flatten, format_value, to_query
from ..share_reference import closest_preset, reference_scenario

DP_KEY = "parallelism.dp"


@dataclass(frozen=True)
class Base:
    """A run's starting point: ``raw`` (with --set applied, dp derived unless given), the shipped
    scenario it is (for share links; None for another file) and the name to print."""

    raw: Mapping[str, Any]
    shipped: str | None
    label: str
    sets: Mapping[str, Any] = field(default_factory=dict)

    @cached_property
    def reference(self) -> str:
        """The shipped scenario share links are written against: ``shipped``, else the nearest of
        the same family (share_reference.closest_preset) when the base is valid, else the app's
        default.  Found when a link is first written (about 0.1 s: commands that write none skip it)."""
        return self.shipped or _reference_for(self.raw)

    def variant_raw(self, overrides: Mapping[str, Any]) -> dict[str, Any]:
        """A deep copy of the raw mapping with ``overrides`` (dotted keys) applied."""
        return apply_overrides(self.raw, overrides)

    def scenario(self, overrides: Mapping[str, Any] | None = None) -> Scenario:
        """The validated scenario of ``overrides`` on this base (ScenarioError when invalid); a
        fold it is admitted for is not proven at load: the design tool's own simulation or estimate
        of it refuses it if the fold does not hold (fold/admit.unproven)."""
        with unproven():
            return from_dict(self.variant_raw(overrides or {}))


def check_key(key: str, flag: str = "--vary") -> None:
    """Raise a one-line ScenarioError naming ``key`` when it is not a field an override may set."""
    if is_settable(key) or is_phase_key(key):
        return
    try:
        set_dotted({}, key, None)      # raises the loader's message: deepest valid prefix, suggestions
    except ScenarioError as exc:
        raise ScenarioError(key, f"is not a scenario field ({flag}): {exc}") from None
    raise ScenarioError(key, f"is not a scenario field ({flag})")    # pragma: no cover - set_dotted raised


def shipped_name(name: str) -> str | None:
    """The shipped scenario that ``name`` (a shipped name or a path) resolves to, or None."""
    path = resolve_scenario_path(name).resolve()
    for stem, p in shipped_scenarios().items():
        if p.resolve() == path:
            return stem
    return None


def open_base(name: str, sets: Mapping[str, Any] | None = None, keep_dp: bool = False) -> Base:
    """The base of a run on scenario ``name`` with ``sets`` applied; ``keep_dp`` keeps the file's
    ``parallelism.dp`` (the caller varies it).  The base itself is not validated here: a sweep may
    start from a scenario only its variants make valid."""
    sets = dict(sets or {})
    for key in sets:
        check_key(key, "--set")
    raw = load_raw(resolve_scenario_path(name))
    if not keep_dp and DP_KEY not in sets and isinstance(raw.get("parallelism"), dict):
        raw["parallelism"].pop("dp", None)
    raw = apply_overrides(raw, sets)
    shipped = shipped_name(name)
    return Base(raw, shipped, shipped or excerpt(name).strip("'"), sets)


def _reference_for(raw: Mapping[str, Any]) -> str:
    """closest_preset of the scenario ``raw`` holds; the app's default when it is not valid (a
    sweep may start from a base only its variants make valid)."""
    try:
        return closest_preset(from_dict(apply_overrides(raw, {})))
    except ScenarioError:
        return DEFAULT_SCENARIO


_reference = reference_scenario

def share_query(base: Base, sc: Scenario) -> str | None:
    """The share-link query string (``scenario=...&dotted.key=value...``) that opens ``sc`` in the
    app (explorer/share.py ``to_query``).  A scenario that is not shipped is described relative to
    ``base.reference``, every differing field spelled out; None if that needs more parameters than
    a link reads."""
    name = base.reference
    query = to_query(SharedView(name), _reference(name), sc)
    if len(query) > MAX_PARAMS:
        return None
    return urlencode(query)


@lru_cache(maxsize=64)
def _reference_leaves(name: str) -> Mapping[str, Any]:
    return flatten(to_dict(_reference(name)))


def variant_query(base: Base, query: str | None, leaves: Mapping[str, Any]) -> str | None:
    """:func:`share_query` of the scenario the link ``query`` opens with the settable ``leaves``
    (dotted key -> the value as the scenario holds it) changed, when no derived default reads them
    (explorer/estimate/equivalence.py's unread network fields), without building it: each leaf is
    written as share.changed_fields writes it, or left out when the reference holds its value."""
    if query is None:
        return None
    ref = _reference_leaves(base.reference)
    pairs = dict(parse_qsl(query, keep_blank_values=True))
    name = pairs.pop("scenario")
    for key, value in leaves.items():
        field_ = SETTABLE[key]
        if ref.get(key) == value or (key not in ref and field_.default == value):
            pairs.pop(key, None)
        else:
            pairs[key] = format_value(value)
    out = {"scenario": name, **dict(sorted(pairs.items()))}
    return urlencode(out) if len(out) <= MAX_PARAMS else None


def cluster_overrides(sc: Scenario, gpus: int, flag: str = "--gpus") -> dict[str, Any]:
    """Overrides giving ``sc``'s cluster ``gpus`` GPUs.  A cluster is nodes x gpus_per_node, so
    whole nodes are added or removed; fewer GPUs than one node shrink that node (one node of
    ``gpus``).  Datacenters must still split the nodes evenly."""
    c = sc.cluster
    if gpus < 1:
        raise ScenarioError(flag, f"{gpus} must be at least 1")
    if gpus % c.gpus_per_node == 0:
        out: dict[str, Any] = {"cluster.nodes": gpus // c.gpus_per_node}
    elif gpus < c.gpus_per_node and c.gpus_per_node % gpus == 0 and c.datacenters == 1:
        out = {"cluster.gpus_per_node": gpus, "cluster.nodes": 1}
    else:
        raise ScenarioError(flag, f"{gpus} GPUs is not a whole number of {c.gpus_per_node}-GPU nodes "
                            f"(use a multiple of {c.gpus_per_node}, or a divisor of it for one node)")
    nodes = out["cluster.nodes"]
    if c.heterogeneous:
        return _datacenter_list(sc, nodes, gpus, flag)
    if nodes % c.datacenters:
        raise ScenarioError(flag, f"{gpus} GPUs = {nodes} nodes do not split evenly over {c.datacenters} "
                            f"datacenters (use a multiple of {c.gpus_per_node * c.datacenters})")
    return out


def _datacenter_list(sc: Scenario, nodes: int, gpus: int, flag: str) -> dict[str, Any]:
    """Datacenters that differ in size or GPU (explorer/variants/hetero.py) given ``nodes`` in all: each
    keeps its share of the nodes and its GPU preset, as the ``cluster.datacenters`` list (the
    node count is that list's sum, so ``cluster.nodes`` is not set)."""
    c = sc.cluster
    D = c.datacenters
    own = c.datacenter_nodes or (c.nodes // D,) * D
    if any((nodes * n) % c.nodes for n in own):
        step = c.gpus_per_node * c.nodes // math.gcd(c.nodes, *own)
        raise ScenarioError(flag, f"{gpus} GPUs do not keep the datacenters' shares of the nodes "
                            f"({' : '.join(map(str, own))}); use a multiple of {step}")
    out = []
    for d, n in enumerate(own):
        item: dict[str, Any] = {"name": c.datacenter_name(d), "nodes": nodes * n // c.nodes}
        if c.datacenter_gpus:
            item["gpu"] = c.datacenter_gpus[d]
        out.append(item)
    return {"cluster.datacenters": out}
