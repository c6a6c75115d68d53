"""A narrowed layout space counted from one enumeration (explorer/design/catalog.py) has exactly
what enumerating it gives, for every narrowing step the app's planner takes, on scenarios with
MoE, a WAN (latency-timed schedules), interleaving and the scenario's own schedule."""
from __future__ import annotations

from dataclasses import replace

import pytest

from explorer.design import open_base
from explorer.design.catalog import Catalog, enumerated_extent
from explorer.design.space import Layout, LayoutBuilder, Space, enumerate_layouts, search_raw
from explorer.ui.views import design_search

MIXTRAL = {"model.preset": "mixtral-8x7b", "cluster.nodes": 2}


@pytest.mark.parametrize("name,sets", [("teaching-8gpu", {}), ("two-datacenters", {}),
                                       ("zero-bubble-8gpu", {}), ("teaching-8gpu", MIXTRAL)])
@pytest.mark.slow
def test_every_planner_step_counts_as_enumeration_does(name, sets):
    base = open_base(name, sets)
    parsed = LayoutBuilder(search_raw(base.raw)).parsed
    own = Layout.of(base.scenario())
    catalog = Catalog(parsed, schedules=design_search._step_schedules(own), vpps=(own.vpp, 2))
    space = Space()
    assert catalog.extent(space) == enumerated_extent(parsed, space)
    for _, _, step in design_search._steps(own):
        alone = step(Space())
        assert catalog.extent(alone) == enumerated_extent(parsed, alone), alone
        space = step(space)
        assert catalog.extent(space) == enumerated_extent(parsed, space), space


@pytest.mark.slow
def test_the_catalog_rebuilds_each_layout_in_enumeration_order():
    parsed = LayoutBuilder(search_raw(open_base("two-datacenters").raw)).parsed
    catalog = Catalog(parsed)
    assert [catalog.layout(i) for i in range(len(catalog))] == list(enumerate_layouts(parsed))
    narrow = replace(Space(), zero=(1,), max_micro_batch=1)
    mask = catalog.mask(narrow)
    kept = [catalog.layout(i) for i in range(len(catalog)) if mask[i]]
    assert kept == list(enumerate_layouts(parsed, narrow))


def test_the_space_reaches_the_scenarios_own_micro_batch_above_sixteen():
    """A hunt: resnet50-cloud-dp trains on 64 images per GPU; the search stopped at micro-batch 16,
    so neither its own 64 nor the 32 that fits with room on a 3.8 GiB GPU was tried.  The default
    space reaches the scenario's own micro-batch; a narrowed one (the planner's "1 or 2") keeps its
    own limit, and the catalog counts as enumeration does."""
    parsed = LayoutBuilder(search_raw(open_base("resnet50-cloud-dp").raw)).parsed
    assert parsed.training.micro_batch == 64
    mbs = {lay.micro_batch for lay in enumerate_layouts(parsed)}
    assert {16, 32, 64} <= mbs and max(mbs) == 64
    narrow = replace(Space(), max_micro_batch=2)
    assert {lay.micro_batch for lay in enumerate_layouts(parsed, narrow)} <= {1, 2}
    catalog = Catalog(parsed)
    for space in (Space(), narrow):
        assert catalog.extent(space) == enumerated_extent(parsed, space)
