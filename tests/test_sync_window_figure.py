"""The multi-step view of training.sync (explorer/figures/sync_window.py): its bars replay the
window's closed form (explorer/variants/lowcomm/window.py) — the window ends at window_s, the stalls sum to
the exposed synchronisation — and long runs of steps are folded."""
from __future__ import annotations

import pytest

from explorer.figures.sync_window import FOLD_OVER, fold_map, sync_window_figure, window_segments
from explorer.scenario import load
from explorer.simulate import simulate

from conftest import ROOT

SD = ROOT / "scenarios" / "streaming-diloco-1gbps.yaml"     # 1 Gb/s: fragments outlast their overlap


@pytest.mark.parametrize("over", [
    {}, {"training.sync.overlap_steps": 0}, {"training.sync.overlap_steps": 1},
    {"training.sync.fragments": 1}, {"training.sync.fragments": 3, "training.sync.overlap_steps": 2},
    {"training.sync.fragments": 7, "training.sync.inner_steps": 50, "training.sync.overlap_steps": 7},
    {"cluster.scale_across.bandwidth_Gbps": 100},
    {"training.sync.kind": "diloco"}, {"training.sync.kind": "local-sgd"},
    {"training.sync.kind": "independent"},
])
def test_bars_replay_the_closed_form(over):
    w = simulate(load(SD, over)).sync_window
    segs = window_segments(w)
    end = max(s.end for s in segs if s.lane != "WAN")
    assert end == pytest.approx(w.window_s, rel=1e-12)
    stalls = sum(s.end - s.start for s in segs if s.kind == "stall")
    assert stalls == pytest.approx(w.exposed_sync_s, abs=1e-9)
    steps = sum(round((s.end - s.start) / w.inner_step_s) for s in segs if s.kind == "compute")
    assert steps == w.inner_steps
    assert sum(s.kind == "sync" for s in segs) == (0 if w.kind == "independent" else
                                                   w.fragments if w.kind == "streaming-diloco" else 1)


def test_long_runs_fold_and_the_map_is_monotone():
    w = simulate(load(SD, {"training.sync.kind": "diloco", "training.sync.inner_steps": 500})).sync_window
    segs = window_segments(w)
    fmap = fold_map(segs, w.inner_step_s)
    assert len(fmap.cuts) == 1                       # steps 1-500: first, one block of 498, last
    a, b, width = fmap.cuts[0]
    assert b - a == pytest.approx(498 * w.inner_step_s) and width == w.inner_step_s
    ts = sorted({t for s in segs for t in (s.start, s.end)} | {a + 0.5 * (b - a)})
    drawn = [fmap(t) for t in ts]
    assert drawn == sorted(drawn)
    assert fmap(w.window_s) == pytest.approx(w.window_s - (b - a) + width)
    short = simulate(load(SD, {"training.sync.kind": "diloco",
                               "training.sync.inner_steps": FOLD_OVER})).sync_window
    assert fold_map(window_segments(short), short.inner_step_s).cuts == ()
    fig = sync_window_figure(w)
    assert any(ann.text == "x498" for ann in fig.layout.annotations)
