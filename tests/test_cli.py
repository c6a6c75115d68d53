"""The command line from the repository root: ``explorer.cli.main`` in this process, its stdout,
stderr and exit code captured (:func:`cli`), and ``python -m explorer`` in a subprocess where the
entry point itself is what is tested (:func:`cli_process`).

A subprocess costs about half a second (the interpreter and the imports); ``main`` called here
takes the command's own time only.  Shipped-scenario runs are cached per process, each made when a
test first asks for it (test workers then share the scenarios out, none runs them all).
"""
from __future__ import annotations

import csv
import io
import itertools
import json
import math
import subprocess
from pathlib import Path

import pytest
import yaml

from cli_support import cli, cli_process

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = sorted(p.stem for p in (ROOT / "scenarios").glob("*.yaml"))


def ok(*args: str) -> subprocess.CompletedProcess:
    proc = cli(*args)
    assert proc.returncode == 0, f"{args}: exit {proc.returncode}\n{proc.stderr}"
    assert "Traceback" not in proc.stderr
    return proc


def run_json(*args: str) -> dict:
    proc = ok("run", *args, "--json")
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 1, proc.stdout[:500]
    out = json.loads(lines[0])
    assert isinstance(out, dict)
    return out


class _Runs(dict):
    """``run NAME --json`` of a shipped scenario, made on first use and kept."""

    def __missing__(self, name: str) -> dict:
        self[name] = out = run_json(name)
        return out


_RUNS = _Runs()


@pytest.fixture
def runs() -> dict[str, dict]:
    """One ``run NAME --json`` per shipped scenario, each when first read."""
    return _RUNS


def test_shipped_scenarios_present():
    assert set(SHIPPED) >= {"teaching-8gpu", "megatron-gpt3-175b", "llama3-405b-16k", "two-datacenters"}


# --------------------------------------------------------------------------------------------
# run --json
# --------------------------------------------------------------------------------------------
EXPECTED_GPUS = {"teaching-8gpu": 8, "megatron-gpt3-175b": 1024, "llama3-405b-16k": 16384,
                 "two-datacenters": 1024}


@pytest.mark.parametrize("name", SHIPPED)
def test_run_json_shape(runs, name):
    d = runs[name]
    for key in ("name", "gpus", "iteration_time_s", "tokens_per_s", "tflops_per_gpu", "mfu",
                "bubble_fraction", "breakdown_s", "memory_GB", "comm_bytes_per_gpu", "bottleneck",
                "warnings"):
        assert key in d, key
    assert isinstance(d["name"], str) and d["name"]
    if name in EXPECTED_GPUS:
        assert d["gpus"] == EXPECTED_GPUS[name]
    assert isinstance(d["gpus"], int) and d["gpus"] >= 1
    T = d["iteration_time_s"]
    assert isinstance(T, float) and math.isfinite(T) and T > 0
    assert d["tokens_per_s"] > 0 and d["tflops_per_gpu"] > 0
    assert 0 < d["mfu"] < 1
    assert 0 <= d["bubble_fraction"] < 1
    assert isinstance(d["breakdown_s"], dict) and d["breakdown_s"]
    assert all(isinstance(v, (int, float)) and v >= 0 for v in d["breakdown_s"].values())
    mem = d["memory_GB"]
    parts = ("params", "grads", "optimizer", "activations", "reserved")     # reserved: NCCL's buffers
    assert set(mem) >= {*parts, "total"}
    assert all(mem[k] >= 0 for k in parts)
    assert mem["params"] > 0 and mem["total"] > 0
    assert mem["total"] == pytest.approx(sum(mem[k] for k in parts), rel=1e-9)
    comm = d["comm_bytes_per_gpu"]
    assert set(comm) >= {"tp", "cp", "ep", "pp", "dp"}
    assert all(isinstance(v, (int, float)) and v >= 0 for v in comm.values())
    assert isinstance(d["bottleneck"], str) and d["bottleneck"].strip()
    assert isinstance(d["warnings"], list) and all(isinstance(w, str) for w in d["warnings"])


@pytest.mark.parametrize("name", SHIPPED)
def test_breakdown_sums_to_iteration_time(runs, name):
    d = runs[name]
    assert math.isclose(sum(d["breakdown_s"].values()), d["iteration_time_s"], rel_tol=1e-9, abs_tol=0.0)


def test_run_json_values_follow_the_scenario(runs):
    t = runs["teaching-8gpu"]
    # pp 4 x dp 2, no TP/CP/EP: only pp and dp bytes are sent.
    sent = t["comm_bytes_per_gpu"]
    assert sent["tp"] == sent["cp"] == sent["ep"] == 0
    assert t["comm_bytes_per_gpu"]["pp"] > 0 and t["comm_bytes_per_gpu"]["dp"] > 0
    # 16 sequences of 2048 tokens per iteration.
    assert t["tokens_per_s"] == pytest.approx(16 * 2048 / t["iteration_time_s"], rel=1e-9)
    assert t["bubble_fraction"] > 0.1
    g = runs["megatron-gpt3-175b"]
    assert g["comm_bytes_per_gpu"]["tp"] > 0  # tp 8
    assert g["tokens_per_s"] == pytest.approx(1536 * 2048 / g["iteration_time_s"], rel=1e-9)
    assert runs["llama3-405b-16k"]["gpus"] == 16384


def test_set_overrides_change_the_result(runs):
    base = runs["teaching-8gpu"]
    d = run_json("teaching-8gpu", "--set", "parallelism.pp=2", "--set", "parallelism.dp=4")
    assert d["gpus"] == base["gpus"] == 8
    assert d["iteration_time_s"] != pytest.approx(base["iteration_time_s"], rel=1e-6)
    assert d["bubble_fraction"] != pytest.approx(base["bubble_fraction"], rel=1e-6)
    # Two stages with 4 micro-batches bubble less than four stages with 8 (1/5 vs 3/11).
    assert d["bubble_fraction"] < base["bubble_fraction"]
    if "parallelism" in d:
        assert (d["parallelism"]["pp"], d["parallelism"]["dp"]) == (2, 4)
    assert math.isclose(sum(d["breakdown_s"].values()), d["iteration_time_s"], rel_tol=1e-9)


def test_trace_and_csv_outputs(tmp_path):
    trace, table = tmp_path / "out.json", tmp_path / "out.csv"
    d = run_json("teaching-8gpu", "--trace", str(trace), "--csv", str(table))
    T = d["iteration_time_s"]

    doc = json.loads(trace.read_text(encoding="utf-8"))
    assert isinstance(doc, dict) and isinstance(doc["traceEvents"], list)
    events = doc["traceEvents"]
    complete = [e for e in events if e.get("ph") == "X"]
    assert complete
    for e in complete:
        for key in ("ts", "dur", "pid", "tid"):
            assert key in e, e
        assert isinstance(e["ts"], (int, float)) and isinstance(e["dur"], (int, float))
        assert e["ts"] >= 0 and e["dur"] >= 0 and e["name"]
    # Microseconds: the last event ends at the iteration time.
    assert max(e["ts"] + e["dur"] for e in complete) == pytest.approx(T * 1e6, rel=1e-6)
    names = [e for e in events if e.get("ph") == "M" and e.get("name") == "process_name"]
    assert names and all(e["args"]["name"] for e in names)
    assert {e["pid"] for e in complete} <= {e["pid"] for e in names}
    assert len(names) == 4  # one process per pipeline stage of teaching-8gpu (pp 4)
    assert {e["name"] for e in complete} >= {"forward", "backward"}

    text = table.read_text(encoding="utf-8")
    assert text.splitlines()[0].startswith("gpu_class,lane,kind,start_s,end_s")
    rows = list(csv.DictReader(io.StringIO(text)))
    assert rows
    assert max(float(r["end_s"]) for r in rows) == pytest.approx(T, rel=1e-6)
    assert all(float(r["end_s"]) >= float(r["start_s"]) for r in rows)
    assert {r["lane"] for r in rows} >= {"compute", "pp", "dp"}


def test_readable_summary(runs):
    proc = ok("run", "teaching-8gpu")
    out = proc.stdout
    assert "iteration time" in out and "bottleneck" in out
    assert out.lstrip().startswith(runs["teaching-8gpu"]["name"])
    with pytest.raises(json.JSONDecodeError):
        json.loads(out)
    assert f"{runs['teaching-8gpu']['iteration_time_s'] * 1e3:.1f} ms" in out


# --------------------------------------------------------------------------------------------
# collective, validate, list
# --------------------------------------------------------------------------------------------
def test_collective_all_reduce_json():
    proc = ok("collective", "teaching-8gpu", "--op", "all-reduce", "--ranks", "8", "--sizes", "1M,1G",
              "--json")
    rows = json.loads(proc.stdout)
    assert isinstance(rows, list) and len(rows) == 2
    assert [r["size_bytes"] for r in rows] == [2**20, 2**30]
    n = 8
    for r in rows:
        for key in ("size_bytes", "time_s", "algbw_GBps", "busbw_GBps", "algorithm"):
            assert key in r
        assert r["time_s"] > 0 and r["algbw_GBps"] > 0
        assert isinstance(r["algorithm"], str) and r["algorithm"]
        assert r["algbw_GBps"] == pytest.approx(r["size_bytes"] / r["time_s"] / 1e9, rel=1e-9)
        assert r["busbw_GBps"] == pytest.approx(r["algbw_GBps"] * 2 * (n - 1) / n, rel=1e-9)
    assert rows[1]["time_s"] > rows[0]["time_s"]
    assert rows[1]["algbw_GBps"] > rows[0]["algbw_GBps"]  # latency matters less at 1 GiB
    # Inside one 450 GB/s NVSwitch node the bus bandwidth cannot be above ~2x link speed (NVLS).
    assert rows[1]["busbw_GBps"] < 2 * 450


def test_collective_header_names_the_hardware_priced():
    """The table's header named only the scenario ("one 8-GPU node") after --set had put 16 B200
    nodes under it; it now says the GPU, nodes and links priced, and that --set changed them."""
    head = ok("collective", "teaching-8gpu", "--op", "all-reduce", "--ranks", "8", "--sizes", "1M").stdout
    assert head.startswith("# all-reduce on 8 ranks of 8 x H100 SXM (1 x 8 GPUs), nvswitch 450 GB/s, "
                           "8 x 400 Gb/s")
    assert "with --set" not in head.splitlines()[0]
    moved = ok("collective", "teaching-8gpu", "--op", "all-reduce", "--ranks", "16", "--sizes", "1M",
               "--set", "hardware.gpu=b200", "--set", "cluster.nodes=2", "--set", "parallelism.dp=4",
               "--set", "cluster.scale_out.nic_Gbps=200").stdout.splitlines()[0]
    assert moved.startswith("# all-reduce on 16 ranks of 16 x B200 (2 x 8 GPUs),") and "8 x 200 Gb/s" in moved
    mixed = ok("collective", "mixed-generations", "--op", "all-reduce", "--ranks", "8", "--sizes", "1M")
    assert "512 x H100 SXM + 512 x B200 (128 x 8 GPUs)" in mixed.stdout.splitlines()[0]
    assert "with --set" in moved


def test_collective_gpus_per_thread_prices_nccl_tests_minus_g():
    # nccl-tests -g 8: one thread launches every call on 8 GPUs, 8 x nccl_table.HOST_LAUNCH_US = 42.0 us
    # per call at least; together-nccl-tests' H100 all_gather -g 8 shows 41.7 us at 1 MiB and 41.3 us at
    # 4 MiB (reference/nccl_multinode.csv).  At 1 GiB the GPUs take longer than the launches: unchanged.
    args = ("collective", "llama3-405b-16k", "--op", "all-gather", "--ranks", "8", "--sizes", "1M,1G",
            "--json")
    one = json.loads(ok(*args).stdout)
    eight = json.loads(ok(*args, "--gpus-per-thread", "8").stdout)
    assert one[0]["time_s"] < 30e-6 and one[0]["tier"] != "host launch"
    assert eight[0]["time_s"] == pytest.approx(42.0e-6, rel=1e-12) and eight[0]["tier"] == "host launch"
    assert eight[0]["busbw_GBps"] == pytest.approx(2**20 / 42.0e-6 / 1e9 * 7 / 8, rel=1e-12)
    assert eight[1] == one[1]
    assert "8 GPUs per thread" in ok(*args[:-1], "--gpus-per-thread", "8").stdout.splitlines()[0]
    # One process per GPU still launches each call: a send/recv of 8 B inside a node (0.6 us of NVLink
    # latency in the model) is paced by the one launch, 5.25 us.
    p2p = json.loads(ok("collective", "teaching-8gpu", "--op", "send-recv", "--ranks", "2", "--sizes", "8",
                        "--json").stdout)
    assert p2p[0]["time_s"] == pytest.approx(5.25e-6, rel=1e-12) and p2p[0]["tier"] == "host launch"


def test_collective_send_recv_on_many_ranks_is_nccl_tests_sendrecv_ring():
    # sendrecv_perf on 16 ranks of two nodes: every rank sends to the next, so ranks 7 -> 8 and 15 -> 0
    # cross the network through one GPU's NIC share, and that pair sets the time (busbw ~ one NIC, as
    # together-nccl-tests' B200 sweeps show: 42-44 GB/s on 400 Gb/s NDR).  Two ranks in one node: NVLink.
    args = ("collective", "llama3-405b-16k", "--op", "send-recv", "--sizes", "64M", "--json")
    ring = json.loads(ok(*args, "--ranks", "16").stdout)[0]
    pair = json.loads(ok(*args, "--ranks", "2").stdout)[0]
    assert ring["tier"] == "scale-out" and pair["tier"] == "scale-up"
    # One 400 Gb/s NIC at NDR's efficiency 0.94: 47 GB/s, less the latency.
    assert 44 < ring["busbw_GBps"] < 47 and pair["busbw_GBps"] > 300
    # One rank has no peer: nothing moves, and the loop is paced by its launches alone.
    alone = json.loads(ok(*args, "--ranks", "1").stdout)[0]
    assert alone["algorithm"] == "none" and alone["busbw_GBps"] == 0 and alone["tier"] == "host launch"


@pytest.mark.parametrize("name", SHIPPED)
def test_validate(name):
    proc = ok("validate", name)
    assert proc.stdout.startswith("ok")
    assert proc.stderr == ""


def test_list_prints_each_scenario_with_its_title_aligned():
    proc = ok("list")
    lines = proc.stdout.splitlines()
    assert [line.split()[0] for line in lines] == SHIPPED
    width = max(map(len, SHIPPED))
    for name, line in zip(SHIPPED, lines, strict=True):
        title = yaml.safe_load((ROOT / "scenarios" / f"{name}.yaml").read_text(encoding="utf-8"))["name"]
        assert line == f"{name:<{width}}  {title}"


# --------------------------------------------------------------------------------------------
# Bad input: exit 2, exactly one line "error: ..." on stderr, no traceback
# --------------------------------------------------------------------------------------------
def assert_one_line_error(proc: subprocess.CompletedProcess, *fragments: str) -> str:
    assert proc.returncode == 2, f"exit {proc.returncode}; stderr: {proc.stderr}"
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    line = lines[0]
    assert line.startswith("error:") and line[len("error:"):].strip(), line
    for fragment in fragments:
        assert fragment in line, f"{fragment!r} not in {line!r}"
    return line


@pytest.mark.parametrize("args,fragments", [
    (["run", "does/not/exist.yaml"], ["does/not/exist.yaml", "no such scenario file"]),
    (["run", "teaching-8gup"], ["teaching-8gup", "no such scenario file", "closest shipped: teaching-8gpu",
                                "explorer list"]),
    (["run", "teaching-8gpu", "--set", "nonsense.key=1"], ["nonsense", "unknown key"]),
    (["run", "teaching-8gpu", "--set", "parallelism.tp=3"], ["parallelism", "tp*pp*dp*cp"]),
    (["validate", "teaching-8gpu", "--set", "parallelism.tpp=2"], ["parallelism.tpp", "did you mean 'tp'"]),
    (["collective", "teaching-8gpu", "--op", "bogus", "--ranks", "8"], ["--op", "'bogus'", "all-reduce"]),
    (["collective", "teaching-8gpu", "--op", "all-reduce", "--ranks", "0"], ["--ranks", "0", "8 GPUs"]),
    (["collective", "teaching-8gpu", "--op", "all-reduce", "--ranks", "8", "--sizes", "12Q"],
     ["--sizes", "'12Q'"]),
    (["frobnicate"], ["frobnicate"]),
    (["collective", "megatron-gpt3-175b", "--op", "all-reduce", "--ranks", "8", "--algorithm", "nvls"],
     ["--algorithm", "nvls", "ring"]),
    (["collective", "teaching-8gpu", "--op", "all-gather", "--ranks", "8", "--gpus-per-thread", "9"],
     ["--gpus-per-thread", "9", "between 1 and 8"]),
    (["collective", "teaching-8gpu", "--op", "all-gather", "--ranks", "8", "--gpus-per-thread", "x"],
     ["--gpus-per-thread", "'x'"]),
    # Found by a verdict hunt: "=3" listed the scenario's sections as "valid keys" without naming
    # any field; an empty replica list read as none and the GPU count was blamed on parallelism.dp.
    (["run", "teaching-8gpu", "--set", "=3"], ["--set", "'=3'", "names no field", "dotted.key=value"]),
    (["run", "pipedream-vgg16", "--set", "parallelism.stage_replicas=[]"],
     ["parallelism.stage_replicas", "[] is empty", "parallelism.pp = 2"]),
], ids=["missing-file", "unknown-scenario", "unknown-set-key", "invalid-tp", "misspelt-set-key", "bad-op",
        "zero-ranks", "bad-size", "unknown-subcommand", "nvls-on-a100", "too-many-gpus-per-thread",
        "gpus-per-thread-not-a-number", "empty-set-key", "empty-stage-replicas"])
def test_bad_input(args, fragments):
    proc = cli(*args)
    assert_one_line_error(proc, *fragments)
    assert proc.stdout == ""


def test_malformed_yaml(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("model: {layers: 2\ntraining: [\n", encoding="utf-8")
    proc = cli("run", str(bad))
    assert_one_line_error(proc, str(bad), "not valid YAML")
    assert proc.stdout == ""


def test_unwritable_trace_path(tmp_path):
    proc = cli("run", "teaching-8gpu", "--trace", str(tmp_path / "missing-dir" / "t.json"))
    assert_one_line_error(proc, "missing-dir")


def test_gpu_mapping_missing_field_is_a_clean_error(tmp_path):
    path = tmp_path / "custom-gpu.yaml"
    path.write_text(
        "model: {layers: 4, hidden: 512, heads: 8, seq_len: 512}\n"
        "training: {global_batch: 8}\n"
        "hardware: {gpu: {name: X, peak_tflops: 100, memory_GB: 40}}\n"
        "cluster: {gpus_per_node: 8, nodes: 1}\n"
        "parallelism: {tp: 1, pp: 1}\n", encoding="utf-8")
    assert_one_line_error(cli("run", str(path), "--json"), "hardware.gpu.hbm_GBps")


def test_sizes_sweep_doubles_like_nccl_tests():
    """``--sizes A:B`` = nccl-tests ``-b A -e B -f 2``: powers of two from A to B (issue 10 contract)."""
    from explorer.cli import parse_sizes
    sizes = parse_sizes("8:16G")
    assert sizes[0] == 8 and sizes[-1] == 16 * 2**30 and len(sizes) == 32
    assert all(b == 2 * a for a, b in itertools.pairwise(sizes))
    assert parse_sizes("1M:4M,1G") == [2**20, 2**21, 2**22, 2**30]


def test_a_reversed_sweep_is_one_line_exit_2():
    r = cli("collective", "teaching-8gpu", "--op", "all-reduce", "--ranks", "8", "--sizes", "2G:1M")
    err = r.stderr.strip()
    assert r.returncode == 2 and err.startswith("error: --sizes:") and "\n" not in err


@pytest.mark.slow
def test_the_module_entry_point_prints_and_exits_as_main_does():
    """``python -m explorer`` itself (the other tests call ``main`` in this process): a run's JSON
    line is the in-process one, the em dash of a scenario's name survives the real stdout, a bad
    field exits 2 in one line and no arguments print the usage with exit 2."""
    proc = cli_process("run", "gnn-sage-papers100m", "--json")
    assert proc.returncode == 0 and "Traceback" not in proc.stderr
    assert json.loads(proc.stdout) == json.loads(cli("run", "gnn-sage-papers100m", "--json").stdout)
    text = cli_process("run", "gnn-sage-papers100m")
    assert text.returncode == 0 and text.stdout.splitlines()[0] == json.loads(proc.stdout)["name"]
    assert "\u2014" in text.stdout.splitlines()[0]
    bad = cli_process("run", "teaching-8gpu", "--set", "parallelism.tp=0")
    assert bad.returncode == 2 and bad.stderr.startswith("error: parallelism.tp")
    assert bad.stderr.strip().count("\n") == 0 and bad.stdout == ""
    bare = cli_process()
    assert bare.returncode == 2 and "usage:" in bare.stderr
