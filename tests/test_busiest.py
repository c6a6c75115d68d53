"""The stage a breakdown is read from (explorer/analysis/busiest.py): most work, then the latest
end, then the lowest index, with seconds equal to a relative 1e-9 taken as equal — in the
simulation and in the estimator alike."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from explorer.analysis.busiest import TIE_REL, busiest_stage, busiest_stages


def test_the_most_work_wins_whatever_ends_last():
    assert busiest_stage([1.0, 2.0, 1.5], [9.0, 3.0, 9.0]) == 1


def test_work_a_few_ulps_apart_is_a_tie_broken_by_the_end():
    """Seed 114233 of tests/test_fold.py: 70.02032710085473 and 70.02032710085584 s of work (1.1e-12
    apart in the full simulation, equal when folded); stage 0 ends last, so stage 0 either way."""
    ends = [70.29360362637321, 70.10997546983135]
    assert busiest_stage([70.02032710085473, 70.02032710085584], ends) == 0
    assert busiest_stage([70.02032710085517, 70.02032710085517], ends) == 0


def test_equal_work_and_ends_go_to_the_lowest_stage():
    assert busiest_stage([5.0, 5.0, 5.0], [7.0, 7.0 * (1 + TIE_REL / 2), 6.0]) == 0


def test_work_beyond_the_tolerance_is_not_a_tie():
    assert busiest_stage([1.0, 1.0 + 10 * TIE_REL], [5.0, 1.0]) == 1


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([1.0, 2.0, 2.0 + 1e-13, 3.0]),
                          st.sampled_from([4.0, 5.0, 5.0 - 1e-12])), min_size=1, max_size=6),
       st.integers(1, 4))
def test_the_rows_version_is_the_scalar_one(stages, rows):
    """The estimator's vector of rows (pricing/breakdown.py) picks what simulate.assemble picks."""
    busy = np.array([[b for b, _ in stages]] * rows)
    end = np.array([[e for _, e in stages]] * rows)
    want = busiest_stage([b for b, _ in stages], [e for _, e in stages])
    assert busiest_stages(busy, end).tolist() == [want] * rows
