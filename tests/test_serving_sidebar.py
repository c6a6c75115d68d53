"""The serving sidebar (issue 37): what it hides on a serving scenario (explorer/ui/controls.hidden_keys)
is what serving does not read — refused by the loader or without effect on every shipped serving
preset.  The inference controls' direction tests are in tests/test_controls_inference.py."""
from __future__ import annotations

import pytest

from explorer.scenario import ScenarioError, apply_overrides, from_dict
from explorer.share import preset_raw
from explorer.simulate import simulate
from explorer.ui.controls import CONTROLS, POOL_KEYS, POOLED_UNREAD, SERVING_KEYS, hidden_keys
from explorer.ui.state import FIELDS, widget_values
from explorer.workloads.registry import workload_for

LLAMA, DSV3, DRAM = "serve-llama3-70b-tp8", "serve-deepseek-v3-disaggregated", "serve-3d-dram"
SERVING_PRESETS = (LLAMA, DSV3, DRAM)


def fig(preset: str, **over) -> dict:
    """run --json's ``inference`` of ``preset`` with dotted overrides (``__`` for ``.``)."""
    raw = apply_overrides(preset_raw(preset), {k.replace("__", "."): v for k, v in over.items()})
    return simulate(from_dict(raw)).to_json_dict()["inference"]


@pytest.fixture(scope="module")
def base() -> dict[str, dict]:
    return {p: fig(p) for p in SERVING_PRESETS}


def _probe(c, value):
    if c.kind == "bool":
        return not value
    if c.kind in ("int", "float", "optional"):
        return (value or 1) * 2
    return None


@pytest.mark.parametrize("preset", SERVING_PRESETS)
def test_what_the_sidebar_hides_on_a_serving_scenario_is_not_read(preset, base):
    """Every control hidden on ``preset`` (beyond other families' model fields) is refused or leaves
    its serving figures unchanged when set."""
    raw = preset_raw(preset)
    sc = from_dict(raw)
    kind = "serving" if sc.inference.disaggregated is None else "disaggregated"
    family = workload_for(sc.model)
    hidden = hidden_keys(family, kind) - hidden_keys(family, "training") - {"parallelism.dp"}
    assert hidden, "the sidebar hides nothing on a serving scenario"
    values = widget_values(sc)
    moved = []
    for c in CONTROLS:
        if c.key not in hidden:
            continue
        v = values.get(c.key)
        probe = _probe(c, v)
        if probe is None:                     # a choice: any other option
            probe = next((o for o in FIELDS[c.key].metadata.get("choices", ()) if o != v), None)
        if probe is None:
            continue
        try:
            got = fig(preset, **{c.key.replace(".", "__"): probe})
        except ScenarioError:
            continue
        if got != base[preset]:
            moved.append(c.key)
    assert not moved, f"hidden on {preset} but read: {moved}"


def test_pool_keys_and_scenario_degrees_swap_on_a_disaggregated_preset():
    family = workload_for(from_dict(preset_raw(DSV3)).model)
    assert POOL_KEYS <= hidden_keys(family, "serving")
    assert not POOL_KEYS & hidden_keys(family, "disaggregated")
    assert POOLED_UNREAD <= hidden_keys(family, "disaggregated")
    assert SERVING_KEYS <= hidden_keys(family, "training")


def test_moe_routing_controls_are_shown_where_serving_reads_them():
    """Found by a hunt: the node limit, load imbalance and skew sliders moved nothing on
    serve-deepseek-v3-disaggregated.  The busiest expert rank now paces serving's expert GEMMs and
    all-to-alls as it paces training's (serving/step.py), so imbalance and skew are shown and move
    the figures; the node limit prices only training's deduplicated dispatch: hidden for serving."""
    family = workload_for(from_dict(preset_raw(DSV3)).model)
    assert "model.moe.max_nodes" in hidden_keys(family, "disaggregated")
    assert "model.moe.max_nodes" in hidden_keys(family, "serving")
    shown = {"model.moe.imbalance", "model.moe.skew"}
    assert not shown & hidden_keys(family, "disaggregated") and not shown & hidden_keys(family, "training")
    assert fig(DSV3, model__moe__imbalance=2.0) != fig(DSV3)
    assert fig(DSV3, model__moe__max_nodes=1) == fig(DSV3)
