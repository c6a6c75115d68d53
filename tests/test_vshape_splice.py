"""V-Half and V-Min orders beyond schedules.vshape.splice_base are spliced from two reorderings of
the base count (one steady period of 6 passes inserted per micro-batch on every rank): the same
order, pass by pass, as reordering the whole count (schedules/v_reorder.py)."""
from __future__ import annotations

import pytest

from explorer.schedules import registry
from explorer.schedules.pipeline import peak_activations
from explorer.schedules.v_reorder import reorder
from explorer.schedules.vshape import ORDERS, building_block, reordered, splice_base


@pytest.mark.parametrize("k", [1, 2])
@pytest.mark.parametrize("p", [2, 3, 4, 5, 6, 7, 8])
def test_a_spliced_order_is_the_reordered_one(p, k):
    base = splice_base(p)
    for m in (base + 2, base + 3, base + 5, base + 9, 3 * base + 1):
        assert reordered(p, m, k) == reorder(building_block(p, k), m), (p, k, m)


@pytest.mark.slow
@pytest.mark.parametrize("k", [1, 2])
@pytest.mark.parametrize("p", [12, 16, 24, 32])
def test_a_spliced_order_is_the_reordered_one_on_deep_pipelines(p, k):
    base = splice_base(p)
    for m in (base + 2, base + 5, 2 * base):
        assert reordered(p, m, k) == reorder(building_block(p, k), m), (p, k, m)


def test_below_the_base_the_order_is_reordered_whole():
    assert reordered(4, splice_base(4), 2) == reorder(building_block(4, 2), splice_base(4))


@pytest.mark.parametrize("name", ["zb-v", "v-half", "v-min"])
@pytest.mark.parametrize("p", [2, 3, 4, 6, 8])
def test_in_flight_replays_the_settled_count_and_equals_the_whole_replay(name, p):
    """The registry's in_flight replays a V order at most at its settled count (vshape.in_flight:
    splice_base + 2 for V-Half and V-Min, 2p + 2 for ZB-V), because more micro-batches only add
    steady periods; every rank's count equals the replay of the whole order up to 4p + 12."""
    count, order_of = registry.get(name).in_flight, ORDERS[name]
    for m in range(1, 4 * p + 13):
        for rank in range(p):
            whole = round(peak_activations(order_of(rank, p, m, 1), [1.0, 1.0]))
            assert count(rank, p, m, 1) == whole, (name, p, m, rank)
