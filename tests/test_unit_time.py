"""The textbook (unit-time) diagrams of the schedules (explorer/teaching/unit_time.py): small
grids written out by hand from the papers' rules (every pass one unit, a full backward two,
communication free), and the makespans of each paper's closed form."""
from __future__ import annotations

import pytest

from explorer.figures.unit_time import phase, unit_figure
from explorer.schedules import dualpipe
from explorer.teaching.unit_time import as_rows, makespan, unit_grid

# Each row: one rank; a digit is the micro-batch of a forward (or the units of a backward), '*' a
# weight-gradient unit, '#' a fused DualPipe pair, '.' idle.


def test_1f1b_two_stages_two_micro_batches_by_hand():
    """PipeDream-Flush (Narayanan et al. 2021): rank 0 warms up with 1 forward; rank 1 alternates."""
    assert as_rows(unit_grid("1f1b", 2, 2), 2) == ["12..11.22", ".111222.."]


def test_gpipe_by_hand():
    """GPipe (Huang et al. 2019 Fig. 2): all forwards, then all backwards."""
    assert as_rows(unit_grid("gpipe", 2, 2), 2) == ["12...1122", ".121122.."]


def test_1f1b_four_stages_eight_micro_batches():
    """SC21 Fig. 4 (top): warm-up p-1-s forwards, one forward one backward, cool-down."""
    rows = as_rows(unit_grid("1f1b", 4, 8), 4)
    assert rows[0].startswith("1234......115226") and rows[3].startswith("...11122233344455")
    assert rows[3].endswith("888......")


def test_zb_h1_fills_the_cool_down_with_weight_gradients():
    """Qi et al. 2024 Fig. 2: ZB-H1 on 4 ranks, 8 micro-batches."""
    rows = as_rows(unit_grid("zb-h1", 4, 8), 4)
    assert rows[0] == "1234...1*52*63*74*85*6*7*8*"
    assert rows[3] == "...11223344*55*66*77*88****"


@pytest.mark.parametrize("p, m", [(2, 4), (4, 8), (4, 12), (8, 16)])
def test_makespans_are_the_papers_closed_forms(p, m):
    """GPipe and 1F1B: (m+p-1)(F+B) with B = 2; interleaved: m v (F+B) + (p-1)(F+B) at chunk cost
    (SC21 Sec. 2.2.2); ZB-H1: m(F+B+W) + (p-1)(F+B-W) (Qi et al. Table 1); DualPipe: the critical
    path of the reference order (schedules/dualpipe.ideal_makespan) at F = B = W = 1."""
    assert makespan(unit_grid("gpipe", p, m)) == (m + p - 1) * 3
    assert makespan(unit_grid("1f1b", p, m)) == (m + p - 1) * 3
    assert makespan(unit_grid("interleaved", p, m, 2)) == m * 2 * 3 + (p - 1) * 3
    assert makespan(unit_grid("zb-h1", p, m)) == m * 3 + (p - 1) * 1
    if m >= 2 * p:
        assert makespan(unit_grid("dualpipe", p, m)) == dualpipe.ideal_makespan(p, m, 1, 1, 1)


@pytest.mark.parametrize("schedule, v", [("gpipe", 1), ("1f1b", 1), ("interleaved", 2), ("zb-h1", 1),
                                         ("zb-h2", 1), ("dualpipe", 1)])
def test_every_rank_does_all_its_work_once(schedule, v):
    p, m = 4, 8
    cells = unit_grid(schedule, p, m, v)
    for r in range(p):
        mine = [c for c in cells if c.rank == r]
        assert sum(c.units for c in mine) == m * v * 3
        ends = sorted((c.start, c.start + c.units) for c in mine)
        assert all(a[1] <= b[0] for a, b in zip(ends, ends[1:], strict=False))   # one op at a time


def test_step_through_phases_and_figure():
    cells = unit_grid("1f1b", 4, 8)
    assert phase(cells, 0, 0) == "warm-up" and phase(cells, 0, 5) == "idle (bubble)"
    assert phase(cells, 3, 10) == "steady state" and phase(cells, 0, 32) == "cool-down"
    assert phase(cells, 0, 33) == "done" and phase(cells, 3, 30) == "done"
    fig = unit_figure(cells, 4, "1F1B", upto=10)
    drawn = sum(len(tr.x) for tr in fig.data)
    assert drawn == sum(c.start < 10 for c in cells)
