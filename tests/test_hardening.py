"""Hostile input (issue 8): each reproduction ends in one clear line — exit code 2 naming the
field in the CLI, a warning naming the parameter in a share link, a ScenarioError for an upload —
fast, and never a traceback.  The CLI runs in-process (explorer.cli.main) with capsys."""
from __future__ import annotations

import importlib
import subprocess
import sys
import time

import pytest

from explorer import cli
from explorer.config.inputs import MAX_BYTES, MAX_DEPTH, parse_document, parse_value
from explorer.config.schema import excerpt
from explorer.fold.budget import MAX_WORK, estimate
from explorer.scenario import ScenarioError, apply_overrides, from_dict, load, parse_text
from explorer.share import parse_query, preset_raw

from conftest import ROOT

# The module, not the function explorer/__init__.py re-exports under the same name.
SIMULATE_MODULE = importlib.import_module("explorer.simulate")
TEACHING = (ROOT / "scenarios" / "teaching-8gpu.yaml").read_text(encoding="utf-8")


def run(capsys, *args: str) -> tuple[int, str, str]:
    code = cli.main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def one_line_error(capsys, args, *fragments: str, code: int = 2) -> str:
    """Run the CLI; assert the exit code, nothing on stdout and exactly one stderr line holding
    every fragment; return that line."""
    rc, out, err = run(capsys, *args)
    assert rc == code, (rc, err)
    assert out == ""
    lines = err.splitlines()
    assert len(lines) == 1 and err.endswith("\n") and "Traceback" not in err, err
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    return lines[0]


def link_warning(key: str, value: str) -> str:
    """Open a link that sets ``key=value`` on teaching-8gpu: the value must be dropped with
    exactly one warning naming the key; return it."""
    view = parse_query({"scenario": "teaching-8gpu", key: value})
    assert view.scenario == "teaching-8gpu" and view.overrides == {}
    assert len(view.warnings) == 1 and "\n" not in view.warnings[0], view.warnings
    assert view.warnings[0].startswith(f"ignored {key}="), view.warnings[0]
    return view.warnings[0]


def upload_error(text: str) -> str:
    """An upload (the app calls parse_text, then from_dict) fails with one line; return it."""
    with pytest.raises(ScenarioError) as info:
        from_dict(parse_text(text, "upload.yaml"))
    msg = str(info.value)
    assert "\n" not in msg and "\r" not in msg
    return msg


# -- 1. explicit YAML tags ----------------------------------------------------------------------
TAGGED = [("!!int abc", "!!int"), ("!!bool maybe", "!!bool"), ("!!float ''", "!!float"),
          ("!!timestamp x", "!!timestamp"),
          ("!!python/object/apply:os.system [ls]", "!!python/object/apply:os.system"),
          ("!custom 4", "!custom")]


@pytest.mark.parametrize("value,tag", TAGGED)
def test_1_explicit_tag_in_set_value_is_one_line(capsys, value, tag):
    one_line_error(capsys, ["run", "teaching-8gpu", "--set", f"parallelism.pp={value}"],
                   "error: parallelism.pp: explicit YAML tag", f"'{tag}'", "not accepted")


@pytest.mark.parametrize("value,tag", TAGGED)
def test_1_explicit_tag_in_link_is_dropped_with_a_warning(value, tag):
    warning = link_warning("parallelism.pp", value)
    assert f"explicit YAML tag '{tag}'" in warning


@pytest.mark.parametrize("value,tag", TAGGED)
def test_1_explicit_tag_in_file_and_upload(capsys, tmp_path, value, tag):
    text = TEACHING.replace("pp: 4", f"pp: {value}")
    assert text != TEACHING
    path = tmp_path / "tagged.yaml"
    path.write_text(text, encoding="utf-8")
    one_line_error(capsys, ["validate", str(path)], str(path), "parallelism.pp", f"'{tag}'")
    assert f"parallelism.pp: explicit YAML tag '{tag}'" in upload_error(text)


def test_1_implicit_date_is_a_string_not_a_crash():
    # YAML 1.1 would construct a date and raise ValueError for month 99.
    assert parse_value("2024-99-99", "name") == "2024-99-99"
    assert "is not an integer" in link_warning("parallelism.pp", "2024-99-99")


# -- 2. stage_layers strings ----------------------------------------------------------------------
@pytest.mark.parametrize("value,index,item", [("--5,1,1,1", 0, "'--5'"), ("6,²,7,4", 1, "'²'"),
                                              ("6,٣,7,4", 1, "'٣'"), (f"{'9' * 5000},1,1,1", 0, "'999")])
def test_2_stage_layers_string_items_need_ascii_integers(capsys, value, index, item):
    one_line_error(capsys, ["run", "teaching-8gpu", "--set", f"parallelism.stage_layers={value}"],
                   f"error: parallelism.stage_layers[{index}]: {item}", "is not an integer")


# -- 3. a 400-digit integer in a float field -------------------------------------------------------
def test_3_huge_integer_in_a_float_field(capsys):
    one_line_error(capsys, ["run", "teaching-8gpu", "--set", f"cluster.scale_out.nic_Gbps={'9' * 400}"],
                   "error: cluster.scale_out.nic_Gbps: <integer of 400 digits> is too large",
                   "valid: 1..100000")
    with pytest.raises(ScenarioError,
                       match=r"^communication\.bucket_MB: <integer of 401 digits> is too large"):
        from_dict(apply_overrides(preset_raw("teaching-8gpu"), {"communication.bucket_MB": 10**400}))


def test_3_number_beyond_python_int_limit_is_rejected_at_the_boundary(capsys):
    # int() refuses more than 4,300 digits (ValueError); the parser stops at 1,000 characters.
    one_line_error(capsys, ["run", "teaching-8gpu", "--set", f"parallelism.pp={'9' * 5000}"],
                   "parallelism.pp", "a number of 5,000 characters")


# -- 4. deep nesting ---------------------------------------------------------------------------------
@pytest.mark.parametrize("text", ["[" * 1000, "{a: " * 600,
                                  "model:\n" + "".join(" " * i + "- \n" for i in range(1, 60))])
def test_4_deep_nesting_is_one_line_not_recursion_error(capsys, tmp_path, text):
    path = tmp_path / "deep.yaml"
    path.write_text(text, encoding="utf-8")
    one_line_error(capsys, ["run", str(path)], f"error: {path}: ", f"nesting deeper than {MAX_DEPTH} levels")
    assert f"nesting deeper than {MAX_DEPTH} levels" in upload_error(text)
    one_line_error(capsys, ["run", "teaching-8gpu", "--set", f"hardware.gpu={text}"], "hardware.gpu",
                   "nesting")


def test_4_nesting_within_the_limit_is_parsed():
    assert parse_value("[" * MAX_DEPTH + "]" * MAX_DEPTH, "k") is not None
    with pytest.raises(ScenarioError, match="nesting deeper than 32 levels"):
        parse_value("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1), "k")


def test_4_oversized_file_is_rejected_without_reading_it_whole(capsys, tmp_path):
    path = tmp_path / "big.yaml"
    path.write_text("# " + "x" * (MAX_BYTES + 10), encoding="utf-8")
    one_line_error(capsys, ["validate", str(path)], str(path), f"{MAX_BYTES:,} bytes")
    with pytest.raises(ScenarioError, match=f"at most {MAX_BYTES:,} are accepted"):
        parse_text("#" * (MAX_BYTES + 1))


# -- 5. alias bomb ("billion laughs") -----------------------------------------------------------------
BOMB = ('a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
        + "".join(f"{n}: &{n} [{', '.join(['*' + p] * 9)}]\n"
                  for p, n in zip("abcdefgh", "bcdefghi", strict=True))
        + "model: *i\n")


def test_5_alias_bomb_fails_fast(capsys, tmp_path):
    assert len(BOMB.encode()) < 900                  # the issue's 855-byte class of document
    path = tmp_path / "bomb.yaml"
    path.write_text(BOMB, encoding="utf-8")
    start = time.perf_counter()
    one_line_error(capsys, ["run", str(path)], str(path), "anchors and aliases", "not accepted")
    assert "anchors and aliases" in upload_error(BOMB)
    assert "anchors and aliases" in link_warning("parallelism.stage_layers", "&x [1, 2]")
    assert time.perf_counter() - start < 1.0


def test_5_messages_quote_a_short_excerpt_of_huge_values():
    big = [["lol"] * 1000] * 1000                     # what an expanded alias bomb would be
    start = time.perf_counter()
    with pytest.raises(ScenarioError) as info:
        from_dict({"model": big, "training": {"global_batch": 8}})
    assert time.perf_counter() - start < 0.5
    assert str(info.value).startswith("model: [['lol', 'lol', ") and len(str(info.value)) < 120
    assert excerpt(10**5000) == "<integer of 5001 digits>"   # repr() itself would raise
    loop: list = []
    loop.append(loop)
    assert excerpt(loop).startswith("[[[[") and len(excerpt(loop)) <= 40


# -- 6. subnormal and out-of-range numbers --------------------------------------------------------------
@pytest.mark.parametrize("key,valid", [
    ("cluster.scale_up.bandwidth_GBps", "valid: 0.01..1000000"),
    ("cluster.scale_out.nic_Gbps", "valid: 1..100000"),
    ("cluster.scale_across.bandwidth_Gbps", "valid: 0.001..1000000"),
    ("hardware.compute_efficiency", "valid: 0.01..1"),
    ("communication.bucket_MB", "valid: 0.001..100000"),
    ("hardware.gpu.peak_tflops", "valid: 0.1..100000"),
    ("hardware.gpu.memory_GB", "valid: 0.1..100000"),
    ("hardware.gpu.hbm_GBps", "valid: 1..10000000"),
])
@pytest.mark.parametrize("value", ["5e-324", "1e-320", "-1"])
def test_6_subnormal_or_negative_physical_quantities_are_rejected(capsys, key, valid, value):
    one_line_error(capsys, ["run", "teaching-8gpu", "--set", f"{key}={value}"],
                   f"error: {key}: {float(value)!r} is below the minimum", valid)


@pytest.mark.parametrize("key,value,valid", [("cluster.scale_out.nic_Gbps", "1e7", "valid: 1..100000"),
                                             ("cluster.scale_across.latency_ms", "1e5", "valid: 0..10000"),
                                             ("hardware.compute_efficiency", "1.5", "valid: 0.01..1")])
def test_6_values_above_physical_range_are_rejected(capsys, key, value, valid):
    one_line_error(capsys, ["run", "teaching-8gpu", "--set", f"{key}={value}"], f"{key}: ",
                   "above the maximum", valid)


class _InfiniteResult:
    def to_json_dict(self) -> dict:
        return {"iteration_time_s": float("inf")}


@pytest.mark.parametrize("flag", [["--json"], []])
def test_6_a_non_finite_result_is_an_internal_error_never_infinity(capsys, monkeypatch, flag):
    monkeypatch.setattr(SIMULATE_MODULE, "simulate", lambda sc: _InfiniteResult())
    line = one_line_error(capsys, ["run", "teaching-8gpu", *flag], "internal error (InternalError)",
                          "non-finite", code=1)
    assert "Infinity" not in line


# -- 7. newlines in keys and names ---------------------------------------------------------------------
def test_7_key_with_newline_gives_one_line(capsys, tmp_path):
    path = tmp_path / "nl.yaml"
    path.write_text(TEACHING.replace("  pp: 4", '  "p\\np": 4\n  pp: 4'), encoding="utf-8")
    one_line_error(capsys, ["run", str(path)], "error: parallelism.p\\np: unknown key")
    one_line_error(capsys, ["run", "teaching-8gpu", "--set", "parallelism.p\np=4"], "parallelism.p\\np",
                   "unknown key")
    one_line_error(capsys, ["run", "no\nsuch\x1b[2J"], "error: no\\nsuch\\x1b[2J: no such scenario file")
    view = parse_query({"scenario": "teaching-8gpu", "p\np\x1b[31m": "1"})
    assert view.warnings == ["ignored p\\np\\x1b[31m: not a scenario field"]


# -- 8. duplicate keys and sections -----------------------------------------------------------------------
@pytest.mark.parametrize("text,where,line", [
    (TEACHING + "\nparallelism: {pp: 2}\n", "'parallelism'", None),
    (TEACHING.replace("  pp: 4", "  pp: 4\n  pp: 2"), "'parallelism.pp'", None),
    ("model: {layers: 4, layers: 5}", "'model.layers'", 1),
    ("1: a\n0x1: b\n", "1", 2),
])
def test_8_duplicate_keys_are_rejected_naming_the_key(capsys, tmp_path, text, where, line):
    path = tmp_path / "dup.yaml"
    path.write_text(text, encoding="utf-8")
    msg = one_line_error(capsys, ["run", str(path)], f"duplicate key {where}; each key may appear once")
    if line is not None:
        assert msg.endswith(f"(line {line})")
    assert f"duplicate key {where}" in upload_error(text)


def test_8_duplicate_key_in_a_set_value(capsys):
    one_line_error(capsys, ["run", "teaching-8gpu", "--set", "hardware.gpu={name: X, name: Y}"],
                   "hardware.gpu", "duplicate key 'name'")


def test_8_merge_keys_are_rejected():
    with pytest.raises(ScenarioError, match=r"merge keys \(<<\) are not accepted"):
        parse_document("model:\n  <<: {layers: 2}\n  layers: 3\n")


# -- 9. unbounded work: the budget ------------------------------------------------------------------------
ISSUE_9 = {"scenario": "teaching-8gpu", "model.layers": "1024", "cluster.nodes": "128",
           "parallelism.pp": "1024", "training.global_batch": "256"}


def test_9_issue_link_opens_fast_on_a_valid_scenario_within_budget():
    start = time.perf_counter()
    view = parse_query(ISSUE_9)
    sc = from_dict(apply_overrides(preset_raw(view.scenario), view.overrides))
    assert time.perf_counter() - start < 2.0
    assert estimate(sc).work <= MAX_WORK
    assert view.warnings and all("\n" not in w for w in view.warnings)


def test_9_issue_case_in_the_cli_names_the_knobs(capsys):
    sets = [x for k, v in ISSUE_9.items() if k != "scenario" for x in ("--set", f"{k}={v}")]
    start = time.perf_counter()
    one_line_error(capsys, ["run", "teaching-8gpu", *sets, "--set", "parallelism.dp="],
                   "error: training.global_batch: 256 pipeline units x 1,024 pipeline chunks",
                   "about 1,049,088 engine tasks", "beyond the simulation budget",
                   "training.micro_batch", "parallelism.pp", "parallelism.vpp", "parallelism.token_slices")
    assert time.perf_counter() - start < 2.0


def test_9_the_megatron_1t_row_stays_within_budget():
    from explorer.fidelity.calibration import megatron_rows, megatron_scenario
    sc = megatron_scenario(megatron_rows()[-1])
    assert (sc.parallelism.pp, sc.micro_batches) == (64, 512)
    # 1F1B: 64 stages x (2 x 512 compute + 1 optimizer) + 2 x 512 x 63 transfers + 64 x 8 dp buckets.
    assert estimate(sc).tasks == 64 * (2 * 512 + 1) + 2 * 512 * 63 + 64 * 8 == 130_624
    assert estimate(sc).work <= MAX_WORK


@pytest.mark.parametrize("name", sorted(p.stem for p in (ROOT / "scenarios").glob("*.yaml")))
def test_9_estimate_bounds_the_real_task_graph(name):
    from explorer.taskgraph.make import iteration_builder
    sc = load(ROOT / "scenarios" / f"{name}.yaml")
    real = len(iteration_builder(sc).build().tasks)
    e = estimate(sc)
    assert real <= e.tasks <= 3 * real
    assert e.timeline_rows >= e.tasks - sc.parallelism.pp


# -- 12. the CLI: escaped names, internal errors, usage, pipes ----------------------------------------------
def test_12_ansi_escapes_in_the_name_are_printed_escaped(capsys, tmp_path):
    path = tmp_path / "ansi.yaml"
    path.write_text(TEACHING.replace("name: ", 'name: "\\e[31mred\\e[0m\\ttab" #', 1), encoding="utf-8")
    rc, out, err = run(capsys, "run", str(path))
    assert rc == 0 and err == ""
    assert out.splitlines()[0] == "\\x1b[31mred\\x1b[0m\\ttab"
    assert "\x1b" not in out
    rc, out, err = run(capsys, "validate", str(path))
    assert rc == 0 and out.startswith("ok: \\x1b[31mred\\x1b[0m\\ttab: 8 GPUs") and "\x1b" not in out


def test_12_unexpected_exception_is_one_line_internal_error(capsys, monkeypatch):
    def boom(sc):
        raise RuntimeError("boom\nsecond line")
    monkeypatch.setattr(SIMULATE_MODULE, "simulate", boom)
    line = one_line_error(capsys, ["run", "teaching-8gpu"], code=1)
    assert line == "internal error (RuntimeError): boom\\nsecond line"


def test_12_no_arguments_prints_usage(capsys):
    rc, out, err = run(capsys)
    assert rc == 2 and out == ""
    assert err.startswith("usage: python -m explorer") and "run" in err and "list" in err


class _ClosedPipe:
    def write(self, text: str) -> int:
        raise BrokenPipeError(32, "Broken pipe")

    def flush(self) -> None:
        raise BrokenPipeError(32, "Broken pipe")


def test_12_broken_pipe_in_process_is_quiet(capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdout", _ClosedPipe())
    assert cli.main(["list"]) == 0
    assert capsys.readouterr().err == ""


def test_12_broken_pipe_through_a_real_pipe_is_quiet():
    proc = subprocess.Popen([sys.executable, "-m", "explorer", "run", "teaching-8gpu"], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()                                # the reader (| head) is gone before any output
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 0
    assert err == ""


def test_budget_counts_the_builder_bucket_tasks():
    """The budget's copy of the bucket-task cap is the builder's (kept apart to avoid an import cycle)."""
    from explorer.fold import budget
    from explorer.taskgraph.techniques import dp_buckets
    assert budget.MAX_BUCKET_TASKS == dp_buckets.MAX_BUCKET_TASKS


@pytest.mark.parametrize("path, overrides, field", [
    # Found by bench/fuzz.py: each passed validation and failed only when simulated.
    ("gossip-exponential.yaml", {"training.frozen_layers": 45}, "training.frozen_layers"),
    ("serve-deepseek-v3-disaggregated.yaml", {"inference.arrival_rate": 2e8}, "inference.arrival_rate"),
    # DualPipe's pair split grows with the square of the layers: 2,048 took 73 s and 12.7 GB, a fuzzed
    # 100,000 ran out of memory; 512 (0.55 s) is the most it searches.
    ("deepseek-v3.yaml", {"model.layers": 513}, "model.layers"),
    # Serving prices no training step, so failed nodes and stragglers change nothing (and failed
    # nodes raised a KeyError building the survivors' training scenario).
    ("serve-deepseek-v3-disaggregated.yaml", {"cluster.faults.failed_nodes": 15}, "cluster.faults"),
    ("serve-deepseek-v3-disaggregated.yaml", {"cluster.faults.degraded_nodes": 2}, "cluster.faults"),
    ("serve-llama3-70b-tp8.yaml", {"cluster.stragglers.count": 1, "cluster.stragglers.slowdown": 1.5},
     "cluster.stragglers"),
    # A family without a compression factor (a link, seed 1205), or a dimension it does not use.
    ("dlrm-dcnv2.yaml", {"communication.compression.kind": "int4"}, "communication.compression.kind"),
    ("gnn-sage-papers100m.yaml", {"communication.compression.kind": "powersgd"},
     "communication.compression.kind"),
])
def test_what_the_simulation_would_refuse_is_refused_at_load(path, overrides, field):
    from explorer.scenario import ScenarioError, load
    with pytest.raises(ScenarioError) as err:
        load(ROOT / "scenarios" / path, overrides)
    assert str(err.value).startswith(f"{field}: ") and "\n" not in str(err.value)


def test_a_given_split_lifts_the_pair_split_limit_and_512_layers_load():
    from explorer.scenario import load
    assert load(ROOT / "scenarios" / "deepseek-v3.yaml", {"model.layers": 512}).model.layers == 512
    layout = [64] * 16
    sc = load(ROOT / "scenarios" / "deepseek-v3.yaml",
              {"model.layers": 1024, "parallelism.pipeline_layout": layout})
    assert sc.parallelism.pipeline_layout == tuple(layout)


def test_a_serving_files_unknown_training_key_is_named_not_an_attribute_error():
    """A serving scenario's training section with a key no training field has (fuzzed file): the
    one-line unknown-key error, not an AttributeError from comparing it with a default."""
    from explorer.scenario import ScenarioError, from_dict, load_raw
    raw = load_raw(ROOT / "scenarios" / "serve-llama3-70b-tp8.yaml")
    raw["training"] = {"3wF": 1}
    with pytest.raises(ScenarioError) as err:
        from_dict(raw)
    assert str(err.value).startswith("training.3wF: unknown key (valid keys: global_batch")


def test_no_reduced_runs_when_no_engine_route_fits_the_budget(monkeypatch):
    """megatron-gpt3-175b with 1,024 token slices (fuzzed link): its array fold proves no period;
    the full run (about 3.0 M work) and the task fold's reduced runs (2.0 M) are both beyond the
    300,000 budget, so a simulation that reaches them refuses at once — it used to run 28 reduced
    simulations (25 s) before refusing.  (Load refuses it first since the array fold is proven
    there: the test below; here the scenario is built past that rule to reach the simulation's.)"""
    import explorer.fold.run as route
    from explorer.config import from_dict as config_from_dict
    from explorer.fold.budget import MAX_WORK, estimate, folded_estimate
    from explorer.scenario import ScenarioError, apply_overrides, load_raw
    from explorer.simulate import simulate
    raw = apply_overrides(load_raw(ROOT / "scenarios" / "megatron-gpt3-175b.yaml"),
                          {"parallelism.token_slices": 1024})
    sc = config_from_dict(raw)
    assert estimate(sc).work > MAX_WORK and folded_estimate(sc).work > MAX_WORK

    def never(*args, **kwargs):
        raise AssertionError("the task fold was attempted")
    monkeypatch.setattr(route, "attempt_folded_once", never)
    with pytest.raises(ScenarioError) as err:
        simulate(sc)
    assert err.value.field == "training.global_batch" and "could not be folded" in str(err.value)


@pytest.mark.parametrize("name", ["megatron-gpt3-175b", "campus-4-buildings", "cross-region-pp"])
def test_a_pipeline_admitted_by_its_array_fold_alone_is_refused_at_load_when_the_fold_fails(capsys, name):
    """1,024 token slices (fuzz seed 424242: 32 micro-batches per pipeline, 32,768 units): only the
    array fold's first attempt fit the budget; the full count as one array row and the task fold's
    reduced runs did not.  Load admitted it and the simulation refused it (a valid scenario that
    does not run).  The fold is now attempted at load: it proves no period, so load refuses it with
    the simulation's one-line message, in the CLI with exit 2."""
    from explorer.config import from_dict as config_from_dict
    from explorer.fold.admit import array_work as admitted_work
    from explorer.fold.budget import MAX_WORK, estimate, folded_estimate
    from explorer.fold.cost import array_work
    from explorer.scenario import ScenarioError, apply_overrides, from_dict, load_raw
    raw = apply_overrides(load_raw(ROOT / "scenarios" / f"{name}.yaml"), {"parallelism.token_slices": 1024})
    sc = config_from_dict(raw)
    assert admitted_work(sc) <= MAX_WORK < array_work(sc, [sc.micro_batches])
    assert estimate(sc).work > MAX_WORK and folded_estimate(sc).work > MAX_WORK
    with pytest.raises(ScenarioError) as err:
        from_dict(raw)
    msg = str(err.value)
    assert err.value.field == "training.global_batch" and "could not be folded" in msg and "\n" not in msg
    assert cli.main(["run", str(ROOT / "scenarios" / f"{name}.yaml"),
                     "--set", "parallelism.token_slices=1024"]) == 2
    assert "could not be folded" in capsys.readouterr().err


def test_an_array_fold_proven_at_load_is_what_the_simulation_uses():
    """The 1T row at pp 128 with 4,096 micro-batches is admitted by its array fold alone (the full
    count as one array row is 2.6 M work): load proves the fold and keeps it; the simulation that
    follows takes it instead of folding again (taken once), and reads what a fresh fold reads."""
    from test_array_run import one_t_raw

    import explorer.fold.admit as admit
    from explorer.fold.arrays.fold import attempt_arrays
    from explorer.fold.budget import MAX_WORK
    from explorer.fold.cost import array_work
    from explorer.scenario import from_dict
    from explorer.simulate import simulate
    sc = from_dict(one_t_raw(128, 4096))
    assert array_work(sc, [sc.micro_batches]) > MAX_WORK
    kept = admit._proven[0][1]
    assert admit._proven[0][0] == sc
    res = simulate(sc)
    assert admit._proven == []                     # taken by the simulation
    again = simulate(sc)                           # folds afresh
    fresh = attempt_arrays(sc)
    assert fresh is not kept and fresh.measures == kept.measures
    assert res.iteration_time_s == again.iteration_time_s and res.breakdown_s == again.breakdown_s


@pytest.mark.parametrize("key", ["model.dlrm.pooling", "model.dlrm.rows"])
def test_an_empty_per_table_list_is_refused_at_load(capsys, key):
    """``model.dlrm.pooling=[]`` (fuzzed --set, seed 1205): table i reads item i mod len, so an
    empty list raised ZeroDivisionError while validating; it is now the one-line error, exit 2."""
    assert cli.main(["run", str(ROOT / "scenarios" / "dlrm-dcnv2.yaml"), "--set", f"{key}=[]"]) == 2
    assert capsys.readouterr().err.strip() == f"error: {key}: has 0 items; give at least 1"


def test_gossip_with_more_degraded_nodes_than_a_replica_has_runs():
    """gossip-exponential (Llama 3 8B, replicas of one node) with 4 degraded nodes (fuzzed --set,
    seed 1205): validation accepted it and the replica's own scenario, keeping the 4 degraded nodes
    on its 1, was refused while simulating.  The replica keeps the degraded nodes it holds (the last
    one's: 1), and the exchange through the slow NICs is what they cost."""
    from explorer.scenario import load
    from explorer.simulate import simulate
    over = {"cluster.faults.degraded_nodes": 4, "cluster.faults.nic_factor": 0.5}
    base = simulate(load(ROOT / "scenarios" / "gossip-exponential.yaml"))
    slow = simulate(load(ROOT / "scenarios" / "gossip-exponential.yaml", over))
    assert slow.exchange.exchange_s == pytest.approx(2 * base.exchange.exchange_s, rel=1e-3)
    assert slow.iteration_time_s > base.iteration_time_s


@pytest.mark.parametrize("sharding", ["table_wise", "row_wise", "column_wise", "table_row_wise"])
def test_a_dlrm_of_100000_sharded_tables_validates_and_runs_at_once(sharding):
    """``model.dlrm.tables`` allows 100,000 tables; with every table sharded (``dp_max_rows: 0``) the
    sharding plan rebuilt the set of sharded tables once per table — 10^10 steps, a link that never
    opened (fuzz seed 777).  The set is built once: it loads and simulates (0.1-0.35 s here)."""
    from explorer.scenario import load
    from explorer.simulate import simulate
    over = {"model.dlrm.tables": 100_000, "model.dlrm.dp_max_rows": 0, "model.dlrm.sharding": sharding}
    sc = load(ROOT / "scenarios" / "dlrm-dcnv2.yaml", over)
    assert sc.model.dlrm.tables == 100_000 and simulate(sc).iteration_time_s > 0
