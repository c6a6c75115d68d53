"""import-trace on real Kineto traces (tests/fixtures/traces/, made by bench/make_traces.py with
torch.profiler on CPU, gloo, 2 ranks): every figure is checked against values read here, directly
from the JSON with json.load, by a method independent of explorer/traces/."""
from __future__ import annotations

import gzip
import json
import tracemalloc

import pytest

from explorer.cli import main
from explorer.traces import stream
from explorer.traces.load import read_rank

from conftest import ROOT

TRACES = ROOT / "tests" / "fixtures" / "traces"
SCENARIO = "teaching-8gpu"
COMM_PREFIXES = ("c10d::", "gloo:", "nccl:", "record_param_comms")


def _events(path) -> list[dict]:
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return json.load(fh)["traceEvents"]


def _steps(events) -> dict[int, tuple[float, float]]:
    return {int(e["name"].split("#")[1]): (e["ts"], e["ts"] + e["dur"])
            for e in events if e.get("ph") == "X" and e["name"].startswith("ProfilerStep#")}


def _union(spans, a, b) -> float:
    """Length of the union of ``spans`` clipped to [a, b] (us)."""
    clipped = sorted((max(s, a), min(e, b)) for s, e in spans if e > a and s < b)
    total, end = 0.0, a
    for s, e in clipped:
        if e > end:
            total += e - max(s, end)
            end = e
    return total


def _import(capsys, path, *extra) -> dict:
    assert main(["import-trace", str(path), "--scenario", SCENARIO, "--json", *extra]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("job", ["ddp", "pipe"])
def test_categories_sum_to_the_measured_iteration_read_from_the_json(capsys, job):
    out = _import(capsys, TRACES / job)
    ranks = [_steps(_events(p)) for p in sorted((TRACES / job).glob("rank*.json.gz"))]
    # The iteration of step N ends with its slowest rank; the measurement is the mean over steps.
    per_step = [max(r[n][1] - r[n][0] for r in ranks) * 1e-6 for n in sorted(ranks[0])]
    expected = sum(per_step) / len(per_step)
    assert out["iterations"] == 4 == len(per_step)
    assert out["iteration_time_s"]["measured"] == pytest.approx(expected, rel=1e-9)
    total = sum(c["measured_s"] for c in out["categories"].values())
    assert total == pytest.approx(expected, rel=0.01)
    exposed = sum(out["categories"][d]["measured_s"] for d in ("tp", "cp", "ep", "pp", "dp", "emb", "gnn"))
    assert out["exposed_comm_s"]["measured"] == pytest.approx(exposed, rel=1e-9)
    assert out["categories"]["compute"]["measured_s"] > 0
    # The simulated side is the scenario's own run.
    assert main(["run", SCENARIO, "--json"]) == 0
    run = json.loads(capsys.readouterr().out)
    assert out["iteration_time_s"]["simulated"] == pytest.approx(run["iteration_time_s"], rel=1e-12)
    assert {k: v["simulated_s"] for k, v in out["categories"].items()} == pytest.approx(run["breakdown_s"])


def test_pipeline_send_recv_is_pp_and_equals_the_union_of_the_collective_calls(capsys):
    """The pipe job's ranks run one thread: its exposed pp time is exactly the union of its
    send/recv calls in the step, computed here from the raw events."""
    out = _import(capsys, TRACES / "pipe")
    events = {r: _events(TRACES / "pipe" / f"rank{r}.json.gz") for r in (0, 1)}
    for row in out["per_step"]:
        ev = events[row["rank"]]
        a, b = _steps(ev)[row["step"]]
        comm = [(e["ts"], e["ts"] + e["dur"]) for e in ev
                if e.get("ph") == "X" and e["name"].startswith(COMM_PREFIXES)]
        assert row["categories"]["pp"] == pytest.approx(_union(comm, a, b) * 1e-6, rel=1e-9, abs=1e-9)
        assert row["categories"]["pp"] > 0.1 * row["iteration_time_s"]
        assert row["categories"]["dp"] == 0


def test_ddp_all_reduce_is_dp_and_partly_hidden_behind_the_backward(capsys):
    out = _import(capsys, TRACES / "ddp")
    exposed = out["exposed_comm_s"]["measured"]
    in_flight = out["comm_total_s"]["measured"]["dp"]
    assert out["categories"]["dp"]["measured_s"] == pytest.approx(exposed)
    assert 0 < exposed < in_flight                # some of the all-reduce ran beside compute
    assert out["categories"]["pp"]["measured_s"] == 0
    assert out["categories"]["optimizer"]["measured_s"] > 0     # Optimizer.step#SGD.step


@pytest.mark.parametrize("job", ["ddp", "pipe"])
def test_a_trace_with_its_collectives_removed_shows_no_communication(capsys, tmp_path, job):
    for src in sorted((TRACES / job).glob("rank*.json.gz")):
        with gzip.open(src, "rt", encoding="utf-8") as fh:
            doc = json.load(fh)
        doc["traceEvents"] = [e for e in doc["traceEvents"]
                              if not str(e.get("name", "")).startswith(COMM_PREFIXES)]
        (tmp_path / src.name.removesuffix(".gz")).write_text(json.dumps(doc), encoding="utf-8")
    out = _import(capsys, tmp_path)
    assert out["exposed_comm_s"]["measured"] == 0
    assert all(v == 0 for v in out["comm_total_s"]["measured"].values())
    total = sum(c["measured_s"] for c in out["categories"].values())
    assert total == pytest.approx(out["iteration_time_s"]["measured"], rel=0.01)


def _truncated_gz(tmp_path):
    p = tmp_path / "cut.json.gz"
    p.write_bytes((TRACES / "ddp" / "rank0.json.gz").read_bytes()[:5000])
    return p


def _truncated_json(tmp_path):
    p = tmp_path / "cut.json"
    with gzip.open(TRACES / "ddp" / "rank0.json.gz", "rt", encoding="utf-8") as fh:
        p.write_text(fh.read()[:30000], encoding="utf-8")
    return p


def _write(name, text):
    def make(tmp_path):
        p = tmp_path / name
        p.write_text(text, encoding="utf-8")
        return p
    return make


@pytest.mark.parametrize(("make", "says"), [
    (_write("notes.json", "hello, world"), "not a Chrome-trace JSON object"),
    (_truncated_json, "truncated"),
    (_truncated_gz, "cannot be read to its end"),
    (_write("nostep.json", '{"traceEvents": [{"ph": "X", "name": "aten::mm", "ts": 1, "dur": 2}]}'),
     "no ProfilerStep#N"),
    (_write("other.json", '{"name": "a config file", "value": 3}'), "no \"traceEvents\""),
    (_write("bad.json", '{"traceEvents": [{"ph": "X", "ts": 1,, "dur": 2}]}'), "not valid JSON"),
    (_write("deep.json", '{"traceEvents": [' + "[" * 100_000), "nests JSON too deeply"),
    (_write("empty.json", '{"traceEvents": []}'), "empty"),
    # Iterations of no length (or written in seconds: 0.04 "µs"), and iterations with nothing in
    # them, were compared as measured runs with exit 0.
    (_write("zero.json", '{"traceEvents": [{"ph": "X", "name": "ProfilerStep#1", "ts": 0, "dur": 0}]}'),
     "last 0 µs"),
    (_write("seconds.json", '{"traceEvents": [{"ph": "X", "name": "ProfilerStep#1", "ts": 1.0, "dur": 0.04},'
                            ' {"ph": "X", "name": "aten::mm", "ts": 1.0, "dur": 0.03}]}'), "microseconds"),
    (_write("huge.json", '{"traceEvents": [{"ph": "X", "name": "ProfilerStep#1", "ts": 1e308, "dur": 5e4},'
                         ' {"ph": "X", "name": "aten::mm", "ts": 1e308, "dur": 4e4}]}'), "last 0 µs"),
    (_write("steps.json", '{"traceEvents": [{"ph": "X", "name": "ProfilerStep#1", "ts": 0, "dur": 5e4},'
                          ' {"ph": "X", "name": "ProfilerStep#2", "ts": 5e4, "dur": 5e4}]}'),
     "nothing to measure"),
    (lambda tmp_path: tmp_path, "no .json or .json.gz trace"),
    (lambda tmp_path: tmp_path / "missing.json", "does not exist"),
])
def test_hostile_input_is_one_line_naming_the_file(capsys, tmp_path, make, says):
    path = make(tmp_path)
    assert main(["import-trace", str(path), "--scenario", SCENARIO, "--json"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and says in err and path.name in err, err


def test_small_chunks_decode_the_same_events(monkeypatch):
    """Chunk boundaries fall inside strings, numbers and between events: same events as json.load."""
    path = TRACES / "pipe" / "rank1.json.gz"
    monkeypatch.setattr(stream, "CHUNK_CHARS", 7)
    streamed = [ev for key, ev in stream.iter_trace(path) if key == "event"]
    assert streamed == _events(path)


@pytest.mark.slow          # about 3 s (README: slow tier)
def test_memory_stays_below_the_file_size(tmp_path):
    """A 6 MB trace (nested CPU ops, as torch writes them) is read with a peak allocation under
    half the file: json.load would hold the text and every event dict at once."""
    events = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1,
               "ts": 0.0, "dur": 1e7}]
    for i in range(12_000):
        t = 100.0 * i
        events += [{"ph": "X", "cat": "cpu_op", "name": "aten::linear", "pid": 1, "tid": 1, "ts": t,
                    "dur": 60.0, "args": {"External id": 3 * i, "Input Dims": [[64, 256], [1024, 256]]}},
                   {"ph": "X", "cat": "cpu_op", "name": "aten::t", "pid": 1, "tid": 1, "ts": t + 1,
                    "dur": 5.0, "args": {"External id": 3 * i + 1, "Input Dims": [[1024, 256]]}},
                   {"ph": "X", "cat": "cpu_op", "name": "aten::addmm", "pid": 1, "tid": 1, "ts": t + 7,
                    "dur": 50.0, "args": {"External id": 3 * i + 2, "Input Dims": [[64, 256], [256, 1024]]}}]
    path = tmp_path / "big.json"
    path.write_text(json.dumps({"traceEvents": events}), encoding="utf-8")
    del events
    size = path.stat().st_size
    tracemalloc.start()
    try:
        trace = read_rank(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert size > 5e6
    assert peak < size / 2
    (work,) = [lane.work for lane in trace.lanes.values()]
    assert len(work) == 12_000          # children merged into their parent op


def test_a_public_gpu_trace_names_nccl_kernels_by_the_call_that_launched_them(capsys):
    """HTA's sampled 2-rank NCCL trace (fixtures README): every NCCL kernel is called SendRecv, but
    those launched by nccl:all_to_all are expert-parallel (ep) and the others data-parallel (dp).
    Per step, the in-flight time of each is the union of its kernels, computed here from the JSON
    through each kernel's correlation to its cudaLaunchKernel inside the CPU collective."""
    out = _import(capsys, TRACES / "hta_sampled", "--set", "parallelism.zero=0")
    assert out["measured_on"] == "gpu kernels" and out["iterations"] == 2
    events = {r: _events(TRACES / "hta_sampled" / f"rank{r}.json.gz") for r in (0, 1)}
    for row in out["per_step"]:
        ev = events[row["rank"]]
        a, b = _steps(ev)[row["step"]]
        launch = {e["args"]["correlation"]: e for e in ev if e.get("cat") == "cuda_runtime"
                  and "correlation" in e.get("args", {})}
        a2a = [e for e in ev if e.get("name") == "nccl:all_to_all"]
        spans = {"ep": [], "dp": []}
        for k in (e for e in ev if e.get("cat") == "kernel" and e["name"].startswith("ncclKernel")):
            at = launch[k["args"]["correlation"]]
            dim = "ep" if any(c["ts"] <= at["ts"] <= c["ts"] + c["dur"] for c in a2a) else "dp"
            spans[dim].append((k["ts"], k["ts"] + k["dur"]))
        for dim in ("ep", "dp"):
            assert row["comm_total_s"][dim] == pytest.approx(_union(spans[dim], a, b) * 1e-6, rel=1e-9)
        assert row["comm_total_s"]["pp"] == 0
        assert sum(row["categories"].values()) == pytest.approx(row["iteration_time_s"], rel=1e-9)
    assert out["categories"]["ep"]["measured_s"] > 0 and out["categories"]["dp"]["measured_s"] > 0


def test_process_groups_place_collectives_in_the_scenarios_dimensions(capsys, tmp_path):
    """A hand-written GPU trace of one 1 ms step (us): compute 0-100; an all-reduce kernel 100-300
    launched inside record_param_comms of group "1" (ranks 0-7); another 400-500 of group "2"
    (ranks 0, 8, ..., 120).  On megatron-gpt3-175b's layout (tp 8 innermost, then dp 16) group 1
    is tp and group 2 is dp: tp 0.2 ms, dp 0.1 ms, compute 0.1 ms, bubble 0.6 ms exactly."""
    ALL_REDUCE = {"Collective name": "allreduce"}  # noqa: N806 - a constant of this test

    def x(name, cat, tid, ts, dur, **args):
        return {"ph": "X", "name": name, "cat": cat, "pid": 1, "tid": tid, "ts": ts, "dur": dur, "args": args}
    events = [
        x("ProfilerStep#7", "user_annotation", 1, 0, 1000),
        x("aten::mm", "cpu_op", 1, 1, 30),
        x("record_param_comms", "cpu_op", 1, 40, 20, **{"Process Group Name": "1", **ALL_REDUCE}),
        x("cudaLaunchKernel", "cuda_runtime", 1, 50, 5, correlation=11),
        x("record_param_comms", "cpu_op", 1, 340, 20, **{"Process Group Name": "2", **ALL_REDUCE}),
        x("cudaLaunchKernel", "cuda_runtime", 1, 350, 5, correlation=12),
        x("ampere_sgemm_128x64_nn", "kernel", 7, 0, 100, correlation=10),
        x("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", "kernel", 8, 100, 200, correlation=11),
        x("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", "kernel", 8, 400, 100, correlation=12),
    ]
    info = {"rank": 0, "world_size": 1024, "pg_config": [{"pg_name": "1", "ranks": list(range(8))},
                                                         {"pg_name": "2", "ranks": list(range(0, 128, 8))}]}
    path = tmp_path / "rank0.json"
    path.write_text(json.dumps({"distributedInfo": info, "traceEvents": events}), encoding="utf-8")
    assert main(["import-trace", str(path), "--scenario", "megatron-gpt3-175b", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    got = {k: v["measured_s"] for k, v in out["categories"].items() if v["measured_s"]}
    assert got == pytest.approx({"compute": 1e-4, "tp": 2e-4, "dp": 1e-4, "bubble": 6e-4}, rel=1e-9)
    assert out["measured_on"] == "gpu kernels"
    assert out["iteration_time_s"]["measured"] == pytest.approx(1e-3)


def test_an_iteration_marker_named_by_the_user_replaces_profiler_steps(capsys):
    out = _import(capsys, TRACES / "ddp", "--iteration-marker", "ProfilerStep#3")
    ranks = [_steps(_events(p)) for p in sorted((TRACES / "ddp").glob("rank*.json.gz"))]
    assert out["iterations"] == 1
    assert out["iteration_time_s"]["measured"] == pytest.approx(max(r[3][1] - r[3][0] for r in ranks) * 1e-6)
    args = ["import-trace", str(TRACES / "ddp"), "--scenario", SCENARIO, "--iteration-marker", "nope"]
    assert main(args) == 2
    assert "has no event named 'nope'" in capsys.readouterr().err


LOADER = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"


def _stalled_trace(tmp_path) -> str:
    """Three 10 ms steps as Kineto writes them: on the CPU ProfilerStep#N and a train_step marker,
    each starting with a 3 ms data-loader stall; on the GPU, ProfilerStep#N's copy over its kernels
    only (a 3 ms GEMM, a 1 ms all-reduce, a 2.8 ms GEMM: 6.8 ms from 3.1 ms into the step)."""
    events = []
    for n in range(3):
        t0 = 10_000 * n
        events += [
            {"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{n + 1}", "pid": 1, "tid": 1,
             "ts": t0, "dur": 10_000},
            {"ph": "X", "cat": "user_annotation", "name": "train_step", "pid": 1, "tid": 1, "ts": t0 + 10,
             "dur": 9_980},
            {"ph": "X", "cat": "cpu_op", "name": LOADER, "pid": 1, "tid": 1, "ts": t0 + 10, "dur": 3_000},
            {"ph": "X", "cat": "gpu_user_annotation", "name": f"ProfilerStep#{n + 1}", "pid": 0, "tid": 7,
             "ts": t0 + 3_100, "dur": 6_800},
            {"ph": "X", "cat": "kernel", "name": "sm90_xmma_gemm_bf16", "pid": 0, "tid": 7, "ts": t0 + 3_100,
             "dur": 3_000},
            {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_bf16_RING_LL", "pid": 0,
             "tid": 20, "ts": t0 + 6_100, "dur": 1_000},
            {"ph": "X", "cat": "kernel", "name": "sm90_xmma_gemm_bf16", "pid": 0, "tid": 7, "ts": t0 + 7_100,
             "dur": 2_800}]
    path = tmp_path / "stalled.json"
    path.write_text(json.dumps({"traceEvents": events}))
    return str(path)


def test_the_gpus_wait_between_steps_is_in_the_iteration(capsys, tmp_path):
    """Kineto's GPU copy of ProfilerStep#N spans its kernels only: read as the iteration it dropped
    the 3.2 ms the GPU waits for the data loader (6.8 ms measured for 10 ms steps, 9.98 ms with
    --iteration-marker on the same trace).  Each GPU step now runs until the next one starts; the
    last, whose end the trace does not show, is left out."""
    path = _stalled_trace(tmp_path)
    layout = ["--set", "parallelism.pp=1", "--set", "parallelism.tp=1", "--set", "parallelism.dp=8"]
    gpu = _import(capsys, path, *layout)
    assert gpu["steps"] == [1, 2]
    assert gpu["iteration_time_s"]["measured"] == pytest.approx(10e-3, rel=1e-12)
    assert gpu["categories"]["bubble"]["measured_s"] == pytest.approx(3.2e-3, rel=1e-9)
    marked = _import(capsys, path, *layout, "--iteration-marker", "train_step")
    assert marked["iteration_time_s"]["measured"] == pytest.approx(9.98e-3, rel=1e-12)
    assert marked["categories"]["bubble"]["measured_s"] == pytest.approx(3.18e-3, rel=1e-9)
