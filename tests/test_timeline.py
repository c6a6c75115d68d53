"""Timeline rows: hidden communication on its lane, FLOPs on compute rows, caps and streaming."""
from __future__ import annotations

import json

import pytest

from explorer.result.timeline import COLUMNS, build_timeline, estimate_rows
from explorer.scenario import load
from explorer.simulate import simulate

from conftest import SCENARIO_FILES

LONG_CP = next(f for f in SCENARIO_FILES if f.stem == "long-context-cp")
TEACHING = next(f for f in SCENARIO_FILES if f.stem == "teaching-8gpu")
DEEPSEEK = next(f for f in SCENARIO_FILES if f.stem == "deepseek-v3")


def test_ring_attention_transfers_appear_on_the_cp_lane_even_when_hidden():
    tl = simulate(load(LONG_CP)).timeline
    c = tl.columns
    cp = [i for i in range(len(tl)) if c["lane"][i] == "cp"]
    assert cp and all(c["overlapped"][i] for i in cp if c["kind"][i] == "cp (overlapped)")
    assert any(c["kind"][i] == "cp (overlapped)" for i in cp)


def test_dualpipe_draws_the_all_to_all_hidden_in_fused_passes():
    c = simulate(load(DEEPSEEK)).timeline.columns
    assert "ep (overlapped)" in c["kind"]


def test_compute_rows_carry_flops_and_no_link_fields():
    r = simulate(load(TEACHING))
    c = r.timeline.columns
    rows = [i for i in range(len(c["lane"])) if c["lane"][i] == "compute" and c["kind"][i] != "optimizer"]
    assert all(c["bytes"][i] is None and c["tier"][i] is None and c["algorithm"][i] is None for i in rows)
    assert all(c["flops"][i] > 0 for i in rows)
    # Every FLOP of every pass is drawn once: the rows add up to the hardware FLOPs of the iteration.
    total = sum(c["flops"][i] for i in rows)
    expected = r.tflops_per_gpu * 1e12 * r.iteration_time_s * r.scenario.parallelism.pp
    assert total == pytest.approx(expected, rel=1e-9)
    comm = [i for i in range(len(c["lane"])) if c["lane"][i] != "compute"]
    assert all(c["flops"][i] is None for i in comm)


def test_row_cap_coarsens_then_truncates_and_says_so():
    r = simulate(load(TEACHING))
    full = build_timeline(r.tasks, ("a",) * 4)
    assert not full.coarse and not full.truncated
    coarse = build_timeline(r.tasks, ("a",) * 4, max_rows=len(full) // 2)
    assert coarse.coarse and not coarse.truncated and len(coarse) <= estimate_rows(r.tasks, coarse=True)
    cut = build_timeline(r.tasks, ("a",) * 4, max_rows=10)
    assert cut.truncated and len(cut) == 10
    assert len(full) <= estimate_rows(r.tasks)


def test_csv_and_trace_stream_in_chunks_to_the_same_text():
    tl = simulate(load(TEACHING)).timeline
    chunks = list(tl.iter_csv(chunk_rows=50))
    assert len(chunks) > 2 and "".join(chunks) == tl.to_csv()
    assert tl.to_csv().splitlines()[0] == ",".join(COLUMNS)
    streamed = json.loads("".join(tl.iter_trace_json(chunk_events=40)))
    assert streamed["traceEvents"] == json.loads(json.dumps(tl.to_trace()))["traceEvents"]
