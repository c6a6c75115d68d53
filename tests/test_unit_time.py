"""The textbook (unit-time) diagrams of the schedules (explorer/teaching/unit_time.py): small
grids written out by hand from the papers' rules (every pass one unit, a full backward two,
communication free), and the makespans of each paper's closed form."""
from __future__ import annotations

import pytest

from explorer.figures.unit_time import phase, unit_figure
from explorer.schedules import dualpipe
from explorer.teaching.schedule_story import narrate
from explorer.teaching.unit_time import Cell, as_rows, makespan, textbook_micro_batches, unit_grid

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


def _tags(cells: list[Cell], p: int, attr: str) -> list[str]:
    """A second row per rank: ``attr`` (the chunk or the direction) of the op in each unit, '*' for
    weight gradients, '.' for idle — the dark/light colours of the papers' figures."""
    rows = [["."] * makespan(cells) for _ in range(p)]
    for c in cells:
        for t in range(c.start, c.start + c.units):
            rows[c.rank][t] = "*" if c.kind == "W" else str(getattr(c, attr))
    return ["".join(r) for r in rows]


def test_zb_h2_is_the_papers_parallelogram():
    """Qi et al. 2024 Sec. 3.2 and Fig. 3 (ZB-H2, 4 stages, 8 micro-batches): rank i runs 2(p-1-i)
    lone forwards, 2i forward/input-gradient pairs, the steady triples (F x, B x-2(p-1-i),
    W x-2(p-1)), then 2(p-1-i) input/weight pairs and 2i lone weight gradients.  No rank idles
    between its first and last op: the parallelogram of the figure, p - 1 units longer than 3m."""
    assert as_rows(unit_grid("zb-h2", 4, 8), 4) == [
        "12345671*82*3*4*5*6*7*8*...",
        ".1234516273*84*5*6*7*8***..",
        "..123142536475*86*7*8*****.",
        "...11223344556677*88*******",
    ]


def test_interleaved_is_sc21_figure_4():
    """Narayanan et al. SC21 Fig. 4 (bottom): 4 devices, 8 micro-batches, 2 chunks per device, a
    chunk's backward twice its forward.  Device 1 warms up with (p-1-r)·2 + (v-1)·p = 10 forwards
    (micro-batches 1-4 of chunk 1, 1-4 of chunk 2, 5-6 of chunk 1), alternates one forward and one
    backward, and the flush happens (p-1)(F+B) = 9 units after the last device's work: 57 units
    against 1F1B's 66 at the same chunk cost (the figure's point)."""
    cells = unit_grid("interleaved", 4, 8, 2)
    assert as_rows(cells, 4) == [
        "12341234567...11822.53364471182233.44.55.66.77.8855667788",
        ".123412345..11622733844511622733844.55.66.77.8855667788..",
        "..1234123.11422533644711822533644755866.77.8855667788....",
        "...123411122233344451162273384455566677788855667788......",
    ]
    assert _tags(cells, 4, "chunk") == [
        "00001111000...11011.11111110010000.00.11.11.11.1100000000",
        ".000011110..11011011011100100100100.11.11.11.1100000000..",
        "..0000111.11111011011000000100100111111.11.1100000000....",
        "...000011111111111100000000000011111111111100000000......",
    ]
    assert makespan(cells) == 57 and 2 * makespan(unit_grid("1f1b", 4, 8)) == 66     # a stage = 2 chunks


def test_dualpipe_is_deepseek_v3_figure_5():
    """DeepSeek-V3 report Fig. 5: 8 ranks, 20 micro-batches (10 from each end), a full backward
    two units, F&B three.  Rank 0: 6 lone forwards, one forward of each direction, 3 (B, W, F) of
    the reverse direction, then the fused (F0, B1), (F1, B0) pairs; rank i's steady pair around
    forward 8 of direction 0 (0-based, as the figure numbers) is (F0 8, B1 4, F1 5+i, B0 1+i) for
    i = 0..4.  The lower half mirrors the upper (direction 1 for 0)."""
    cells = unit_grid("dualpipe", 8, 20)
    rows = as_rows(cells, 8)
    assert rows[:4] == [
        "123456711*22*33*4###...###############77.###88.###99.###aa7*8*9*a*",
        ".123451621*32*4###..#####################77.###88.###9977.a8*9*a**",
        "..123142531*4###.###########################77.###8877.998.a9*a***",
        "...11223344511#################################7777.8888.99.aa****",
    ]
    assert rows[4:] == rows[:4][::-1]
    lanes = _tags(cells, 8, "lane")
    assert lanes[0] == "000000011*11*11*1000...11100011100011111.11111.11111.111110*0*0*0*"
    assert lanes[7] == lanes[0].translate(str.maketrans("01", "10"))
    for i in range(5):
        mine = [c for c in cells if c.rank == i and c.kind == "F&B"]
        k = next(j for j, c in enumerate(mine) if c.lane == 0 and c.mb == 8)
        first, second = mine[k], mine[k + 1]
        assert (first.b_lane, first.b_mb) == (1, 4)
        assert (second.lane, second.mb, second.b_lane, second.b_mb) == (1, 5 + i, 0, 1 + i)


def test_step_through_says_why():
    """The sentence under the diagram: a bubble names whose output it waits for, ZB-H2's extra
    warm-up forwards fill 1F1B's wait while GPipe's do not, a ZB-H1 weight gradient fills the wait
    for the next forward, and a DualPipe F&B names both directions."""
    zb1 = unit_grid("zb-h1", 4, 8)
    assert narrate(zb1, 4, 0, 4) == ("idle (bubble): its input gradient of micro-batch 1 waits for rank "
                                     "1's gradient of micro-batch 1 (there at unit 7)")
    assert narrate(zb1, 4, 1, 9) == ("weight gradient of micro-batch 1, deferred: it fills the wait for "
                                     "rank 0's activations of micro-batch 5 (there at unit 10)")
    assert "drain in the cool-down" in narrate(zb1, 4, 3, 26)
    zb2 = unit_grid("zb-h2", 4, 8)
    assert narrate(zb2, 4, 0, 2).startswith("warm-up: forward 3 of 7 before its first backward")
    assert "the 3 extra fill the wait 1F1B has" in narrate(zb2, 4, 0, 2)
    assert "only hold more activations" in narrate(unit_grid("gpipe", 4, 8), 4, 0, 5)
    assert narrate(zb2, 4, 2, 7) == ("steady state: input gradient of micro-batch 2, sent on to rank 1 "
                                     "at once; its weight gradient waits")
    dp = unit_grid("dualpipe", 8, 20)
    assert narrate(dp, 8, 0, 17).startswith("forward of micro-batch 8 from rank 0 overlapped with the "
                                            "backward of micro-batch 4 from rank 7")
    assert narrate(dp, 8, 0, 20) == ("idle (bubble): its forward of micro-batch 5 fused with the backward "
                                     "of micro-batch 1 waits for rank 1's activations of micro-batch 5 "
                                     "(there at unit 23)")
    assert narrate(dp, 8, 6, 60) == ("weight gradient of micro-batch 10 from rank 0, deferred: it fills the "
                                     "wait for rank 5's gradient of micro-batch 9 (there at unit 61)")
    assert narrate(dp, 8, 0, 70) == "done"


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


def test_presentation_mode_leaves_out_a_label_rather_than_shrink_it_below_18_px():
    """A V schedule at p = 8 draws 2pm cells, whose numbers Plotly had shrunk to fit below a
    projector's 18 px; presentation mode asks for 18 px or nothing (uniformtext hide)."""
    cells = unit_grid("v-half", 8, 16)
    shown = unit_figure(cells, 8, "V-Half", font_size=18, min_label_px=18)
    assert shown.layout.uniformtext.minsize == 18 and shown.layout.uniformtext.mode == "hide"
    plain = unit_figure(cells, 8, "V-Half")
    assert plain.layout.uniformtext.minsize is None


def test_a_full_backward_and_an_input_gradient_backward_look_different():
    """DualPipe's diagram runs both: they shared one legend colour; the input-gradient one is striped."""
    fig = unit_figure(unit_grid("dualpipe", 4, 8), 4, "DualPipe")
    style = {tr.name: (tr.marker.color, tr.marker.pattern.shape) for tr in fig.data}
    full, inputs = style["backward (B+W)"], style["backward (input grads)"]
    assert full != inputs and inputs[1] == "/" and not full[1]


@pytest.mark.parametrize("schedule, vs", [("gpipe", (1,)), ("1f1b", (1,)), ("interleaved", (2, 3)),
                                          ("zb-h1", (1,)), ("zb-h2", (1,)), ("dualpipe", (1,)),
                                          ("chimera", (1,)), ("2bw", (1,))])
@pytest.mark.slow
def test_the_app_draws_every_scenario_that_runs(schedule, vs):
    """The app draws at most 12 micro-batches, but never fewer than the schedule needs: DualPipe at
    p = 8 and m = 16 once deadlocked on 12 (an internal error hid the whole Timeline)."""
    for p in (2, 3, 4, 7, 8, 12, 13, 16):
        for v in vs:
            for m in range(1, 37):
                try:
                    unit_grid(schedule, p, m, v)
                except (RuntimeError, ValueError):
                    continue                       # the scenario's rules refuse it before the view
                drawn = textbook_micro_batches(schedule, p, m)
                assert drawn <= max(m, 12)
                assert makespan(unit_grid(schedule, p, drawn, v)) > 0
    assert textbook_micro_batches("dualpipe", 8, 16) == 16 and textbook_micro_batches("1f1b", 8, 64) == 12
