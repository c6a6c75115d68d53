"""V-Half and V-Min orders beyond schedules.vshape.splice_base are spliced from two reorderings of
the base count (one steady period of 6 passes inserted per micro-batch on every rank): the same
order, pass by pass, as reordering the whole count (schedules/v_reorder.py)."""
from __future__ import annotations

import pytest

from explorer.schedules.v_reorder import reorder
from explorer.schedules.vshape import building_block, reordered, splice_base


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
