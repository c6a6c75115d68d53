"""Stepping through this scenario's own timeline (explorer/teaching/timeline_story.py): the Gantt's
rows condensed into passes, and the sentence per GPU class at a moment."""
from __future__ import annotations

import pytest

from explorer.cli import load_scenario
from explorer.result.timeline import COLUMNS, folded_timeline
from explorer.simulate import simulate
from explorer.teaching.timeline_story import narrate_at, passes


def _columns(rows: list[tuple]) -> dict[str, list]:
    """Timeline columns from (class, lane, kind, start, end, micro_batch, chunk, overlapped) rows."""
    cols: dict[str, list] = {k: [] for k in COLUMNS}
    for cls, lane, kind, s, e, mb, ch, ov in rows:
        row = dict.fromkeys(COLUMNS)
        row.update(gpu_class=cls, lane=lane, kind=kind, start_s=s, end_s=e, duration_s=e - s, micro_batch=mb,
                   chunk=ch, overlapped=ov)
        for k in COLUMNS:
            cols[k].append(row[k])
    return cols


def test_rows_become_passes():
    """Per-layer rows of one pass merge; a backward made of recompute, input- and weight-gradient
    pieces is one pass; a blocking TP collective joins its pass and is counted, an overlapped one
    is not; another micro-batch starts a new pass."""
    cols = _columns([
        (0, "compute", "forward", 0.0, 1.0, 0, 0, False),
        (0, "tp", "tp", 1.0, 1.5, 0, 0, False),
        (0, "compute", "forward", 1.5, 2.5, 0, 0, False),
        (0, "tp", "tp (overlapped)", 1.5, 2.0, 0, 0, True),
        (0, "compute", "forward", 2.5, 3.0, 1, 0, False),
        (0, "compute", "recompute", 4.0, 4.5, 0, 0, False),
        (0, "compute", "backward", 4.5, 5.5, 0, 0, False),
        (0, "compute", "weight-grad", 5.5, 6.0, 0, 0, False),
        (0, "compute", "weight-grad", 6.0, 6.5, 1, 0, False),
        (0, "pp", "pp", 3.0, 3.2, 1, 0, False),
    ])
    (mine,) = passes(cols)
    assert [(p.kind, p.mb, p.start, p.end) for p in mine] == [
        ("forward", 0, 0.0, 2.5), ("forward", 1, 2.5, 3.0), ("backward+recompute", 0, 4.0, 6.0),
        ("weight-grad", 1, 6.0, 6.5)]
    assert mine[0].comm_s == pytest.approx(0.5)
    lines = narrate_at([mine], ["stage 0"], 1.2)
    assert lines == ["stage 0: warm-up — forward of micro-batch 0, 2,500.00 ms (0.00-2,500.00 ms); "
                     "20% of it blocking collectives"]
    assert narrate_at([mine], ["stage 0"], 3.5) == [
        "stage 0: idle (bubble) until 4,000.00 ms, when its backward (recomputing its activations first) "
        "of micro-batch 0 starts — it needs a neighbouring stage's gradient first"]
    assert narrate_at([mine], ["stage 0"], 6.2)[0].startswith("stage 0: cool-down — weight gradient")
    assert narrate_at([mine], ["stage 0"], 7.0)[0].startswith("stage 0: done")


def test_a_1f1b_scenario_steps_through_its_passes():
    """teaching-8gpu (1F1B, p = 4, m = 8): every stage has one forward and one backward per
    micro-batch and an optimizer step (17 passes); their time is the compute stream's; the last
    stage's first backward follows its first forward at once and is in the steady state."""
    res = simulate(load_scenario("teaching-8gpu"))
    draw = folded_timeline(res.tasks, tuple(c.label for c in res.classes))
    all_passes = passes(draw.columns)
    assert [len(m) for m in all_passes] == [17, 17, 17, 17]
    c = draw.columns
    for k, mine in enumerate(all_passes):
        busy = sum(c["end_s"][i] - c["start_s"][i] for i in range(len(c["start_s"]))
                   if c["gpu_class"][i] == k and c["lane"][i] == "compute")
        assert sum(p.end - p.start for p in mine) == pytest.approx(busy, rel=1e-9)
    last = all_passes[3]
    assert [p.kind for p in last[:3]] == ["forward", "backward", "forward"]
    names = [cl.name for cl in res.classes]
    at = (last[1].start + last[1].end) / 2
    said = narrate_at(all_passes, names, at)[3]
    assert said.startswith("stage 3: steady state — backward of micro-batch 0")
    assert "idle (bubble)" in narrate_at(all_passes, names, last[0].start / 2)[3]
