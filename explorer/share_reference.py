"""Which shipped scenario a link to a scenario that is not shipped is written against.

A link names a shipped scenario and the fields that differ from it (explorer/share.py).  For a
file of the user's own, the reference used to be the app's default (teaching-8gpu): a GNN, DLRM
or serving file was then described as a 1.3B transformer plus 40 changes, and the fields the
other family's derive step fills came back as the transformer's (a copied gnn-sage-papers100m
reopened at 844.6 s instead of 12.9 ms).  The reference is now the shipped scenario of the same
model family and workload (training or serving) from which the fewest fields change and whose
link reopens the scenario exactly; the default only when none does.
"""
from __future__ import annotations

from functools import lru_cache

from .config.inputs import parse_value
from .config.shipped import shipped_scenarios
from .scenario import Scenario, ScenarioError, apply_overrides, from_dict, to_dict
from .share import DEFAULT_SCENARIO, NOT_IN_LINKS, SETTABLE, changed_fields, flatten, preset_raw, reopening

# The nearest few candidates (by changed fields) whose links are reopened to check them.
CHECKED = 4


@lru_cache(maxsize=64)
def reference_scenario(name: str) -> Scenario:
    """The scenario a link to shipped scenario ``name`` starts from (dp derived, as links do)."""
    return from_dict(preset_raw(name))


def link_scenario(name: str, base: Scenario, sc: Scenario) -> str:
    """The shipped scenario the app's link to ``sc`` names: ``name`` (the preset on screen, whose
    scenario is ``base``) while ``sc`` is of its family, else :func:`closest_preset`.  A link names
    a preset and the fields that differ, and a dotted key cannot remove another family's fields: a
    hunt switched teaching-8gpu's model to resnet-50 and the link reopened the 1.3B transformer
    ("model.layers: 24 does not match model.conv"), as dlrm-dcnv2 switched to llama3-8b reopened
    the DLRM."""
    return name if _family(base) == _family(sc) else closest_preset(sc)


def _family(sc: Scenario) -> tuple[str, bool]:
    return (sc.model.kind, sc.inference is not None)


def _reopens(name: str, sc: Scenario) -> bool:
    """Whether the link of ``sc`` against ``name`` opens ``sc`` again, field for field."""
    link = reopening(name, changed_fields(reference_scenario(name), sc), sc)
    try:
        values = {k: parse_value(v, k) for k, v in link.items()}
        back = from_dict(apply_overrides(preset_raw(name), values))
    except ScenarioError:
        return False
    a, b = flatten(to_dict(back)), flatten(to_dict(sc))
    return all(a.get(k) == v for k, v in b.items() if k in SETTABLE and k not in NOT_IN_LINKS)


def closest_preset(sc: Scenario) -> str:
    """The shipped scenario to write ``sc``'s link against (module docstring)."""
    ranked = []
    for name in shipped_scenarios():
        try:
            ref = reference_scenario(name)
        except ScenarioError:
            continue
        if _family(ref) == _family(sc):
            ranked.append((len(changed_fields(ref, sc)), name))
    for _, name in sorted(ranked)[:CHECKED]:
        if _reopens(name, sc):
            return name
    return DEFAULT_SCENARIO
