"""The input boundary's last gaps (issue 32): text that is not UTF-8, YAML 1.1's number forms and
a ``--set`` key given twice.  Each ends in one line naming the field: exit code 2 in the CLI, a
ScenarioError for an upload, a warning naming the parameter in a share link (which then opens on
valid defaults).  The CLI runs in-process (explorer.cli.main) with capsys, except where the
failure was in writing to a real UTF-8 stdout: those run in a subprocess."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from explorer import cli
from explorer.config.inputs import parse_document, parse_value
from explorer.config.schema import one_line
from explorer.scenario import ScenarioError, from_dict, load, parse_text
from explorer.share import parse_query

from app_support import run_app
from conftest import ROOT

TEACHING = (ROOT / "scenarios" / "teaching-8gpu.yaml").read_text(encoding="utf-8")
LONE = "\ud800"                    # a lone (high) surrogate: no character, not encodable as UTF-8
LONE_ESCAPED = '"\\ud800"'         # the YAML/JSON double-quoted escape that produces it


def run(capsys, *args: str) -> tuple[int, str, str]:
    code = cli.main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def one_line_error(capsys, args, *fragments: str) -> str:
    """Run the CLI in-process: exit code 2, nothing on stdout, one stderr line holding every
    fragment; return that line."""
    rc, out, err = run(capsys, *args)
    assert (rc, out) == (2, ""), (rc, out, err)
    lines = err.splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    return lines[0]


def cli_subprocess(*args: str | bytes) -> subprocess.CompletedProcess:
    """The CLI as a user runs it: a real process whose stdout is UTF-8 (bytes arguments are passed
    as they are, so undecodable bytes reach Python as lone surrogates, PEP 383)."""
    return subprocess.run([sys.executable, "-m", "explorer", *args], cwd=ROOT, capture_output=True,
                          timeout=120, env={**os.environ, "PYTHONIOENCODING": "utf-8"})


def named(name_yaml: str) -> str:
    """teaching-8gpu with its name written as ``name_yaml``."""
    first, _, rest = TEACHING.partition("\n")
    assert first.startswith("name: ")
    return f"name: {name_yaml}\n{rest}"


def upload_error(text: str | bytes) -> str:
    """An upload (the app calls parse_text, then from_dict) fails with one line; return it."""
    with pytest.raises(ScenarioError) as info:
        from_dict(parse_text(text, "upload.yaml"))
    msg = str(info.value)
    assert "\n" not in msg and msg.encode("utf-8")
    return msg


# -- 1. text that cannot be encoded as UTF-8 ------------------------------------------------------------
def test_lone_surrogate_name_in_a_file_is_exit_2_naming_the_field(tmp_path):
    """Before: ``run`` and ``validate`` died printing the name (exit 1, internal error) and
    ``run --json`` exited 0 with "\\ud800" in its JSON."""
    path = tmp_path / "surrogate.yaml"
    path.write_text(named(LONE_ESCAPED), encoding="utf-8")
    for args in (["run", str(path)], ["run", str(path), "--json"], ["validate", str(path)]):
        proc = cli_subprocess(*args)
        err = proc.stderr.decode("utf-8")
        assert (proc.returncode, proc.stdout) == (2, b""), (args, proc.returncode, err)
        assert err.count("\n") == 1 and err.startswith(f"error: {path}: name: '\\ud800' cannot be "
                                                       "encoded as UTF-8"), err


def test_lone_surrogate_in_a_set_value_is_exit_2():
    proc = cli_subprocess("run", "teaching-8gpu", "--set", f"name={LONE_ESCAPED}", "--json")
    assert (proc.returncode, proc.stdout) == (2, b"")
    assert proc.stderr.decode() == ("error: name: '\\ud800' cannot be encoded as UTF-8 (it holds a lone "
                                    "surrogate such as \\ud800); write real characters (line 1)\n")


@pytest.mark.parametrize("raw", [b"\xed\xa0\x80", b"\xff"])
def test_undecodable_bytes_in_a_set_value_say_not_utf8(raw):
    """Bytes that are not UTF-8 in an argument arrive as lone surrogates (\\udcXX)."""
    proc = cli_subprocess("run", "teaching-8gpu", "--set", b"name=" + raw, "--json")
    err = proc.stderr.decode("utf-8")
    assert (proc.returncode, proc.stdout) == (2, b"")
    assert err.startswith("error: name: '\\udc") and "is not UTF-8 text" in err and err.count("\n") == 1


def test_lone_surrogate_in_an_upload_is_one_line():
    msg = upload_error(named(LONE_ESCAPED))
    assert msg == ("upload.yaml: name: '\\ud800' cannot be encoded as UTF-8 (it holds a lone surrogate "
                   "such as \\ud800); write real characters (line 1)")
    # A key, an item of a list, a value deep in a mapping: each named where it is.
    assert "model.conv: '\\udfff' cannot be encoded" in upload_error('model: {conv: "\\udfff"}')
    assert "parallelism.stage_layers[1]: '\\ud800'" in upload_error(
        'parallelism: {stage_layers: [1, "\\ud800"]}')
    # Bytes that are not UTF-8 (the app passes the upload's bytes as they are).
    assert upload_error(b"name: caf\xe9\n") == "upload.yaml: is not UTF-8 text"


def test_an_escaped_surrogate_pair_is_the_character_it_encodes():
    """JSON writes U+1F600 as "\\ud83d\\ude00" (json.dumps' default); YAML's escapes give the two
    halves, which are joined as JSON would join them."""
    sc = from_dict(parse_text(named('"\\ud83d\\ude00 run"')))
    assert sc.name == "\U0001f600 run"
    assert json.loads(json.dumps({"name": sc.name})) == {"name": "\U0001f600 run"}


def test_a_scenario_built_from_a_mapping_refuses_a_lone_surrogate():
    raw = parse_document(TEACHING)
    with pytest.raises(ScenarioError, match=r"^name: '\\ud800' cannot be encoded as UTF-8"):
        from_dict({**raw, "name": LONE})


@pytest.mark.parametrize("key", ["name", "b.name", "d.x", "view", f"parallelism.p{LONE}"])
def test_a_link_with_a_lone_surrogate_opens_on_defaults_with_one_warning(key):
    """Before: name= gave a warning that itself held the surrogate (the page could not send it),
    d.x= was kept as the Design view's setting."""
    view = parse_query({"scenario": "teaching-8gpu", key: f"a{LONE}b"})
    assert (view.scenario, view.overrides, view.b_overrides, view.design) == ("teaching-8gpu", {}, {}, {})
    assert view.view == "timeline"
    assert len(view.warnings) == 1, view.warnings
    warning = view.warnings[0]
    warning.encode("utf-8")                      # sendable to the browser
    assert warning == (f"ignored {one_line(key)}=a\\ud800b: not UTF-8 text (it holds a lone surrogate "
                       "such as \\ud800)")


@pytest.mark.parametrize("query,key", [
    ({"name": LONE_ESCAPED}, "name"),
    ({"b.name": LONE_ESCAPED, "view": "compare"}, "b.name"),
    ({"d.x": "parallelism.pp", "d.xv": f"{LONE_ESCAPED},2", "view": "design"}, "d.xv"),
], ids=["name", "b.name", "d.xv"])
def test_the_app_opens_a_link_with_an_escaped_lone_surrogate_with_a_warning(query, key):
    """Before: "Internal error" (the page could not send the surrogate to the browser)."""
    at = run_app(scenario="teaching-8gpu", **query)
    assert [e.value for e in at.error] == []
    warnings = [w.value for w in at.warning if f"ignored {key}=" in w.value]
    assert len(warnings) == 1 and "cannot be encoded as UTF-8" in warnings[0], [w.value for w in at.warning]
    if not key.startswith("d."):                 # (the Design view keeps its boxes' text, ASCII here)
        assert at.query_params.get(key) is None  # the address bar no longer carries it


def test_the_app_refuses_an_upload_with_a_lone_surrogate_in_one_line():
    at = run_app(scenario="teaching-8gpu", view="scenario")
    upload = ("surrogate.yaml", named(LONE_ESCAPED).encode(), "application/x-yaml")
    at.file_uploader(key="_upload").set_value(upload).run()
    assert not at.exception
    assert [e.value for e in at.error] == [
        "Upload not loaded — surrogate.yaml: name: '\\ud800' cannot be encoded as UTF-8 (it holds a lone "
        "surrogate such as \\ud800); write real characters (line 1)"]


def test_messages_escape_surrogates():
    assert one_line(f"a{LONE}\udcff") == "a\\ud800\\udcff"
    with pytest.raises(ScenarioError) as info:
        from_dict({**parse_document(TEACHING), f"x{LONE}": 1})
    str(info.value).encode("utf-8")


# -- 3. YAML 1.1 number forms ---------------------------------------------------------------------------
@pytest.mark.parametrize("text,value", [
    ("1:30", "1:30"), ("-1:30", "-1:30"), ("1:30.5", "1:30.5"),   # no base 60 (YAML 1.1: 90, -90, 90.5)
    ("030", 30), ("08", 8), ("-010", -10), ("+7", 7),             # leading zeros are decimal (1.1: octal 24)
    ("0o17", 15), ("0x1F", 31), ("1_000", 1000), ("0b11", "0b11"), ("0x_", "0x_"),
    ("1e6", 1e6), ("-.5", -0.5), ("1.5e3", 1500.0), ("5e-324", 5e-324), (".inf", float("inf")),
])
def test_plain_numbers_are_read_as_yaml_1_2(text, value):
    got = parse_value(text, "k")
    assert got == value and type(got) is type(value), (text, got)


def test_base_60_layers_is_not_an_integer_anywhere(capsys, tmp_path):
    """Before: ``layers: 1:30`` was 90 layers, silently."""
    text = TEACHING.replace("  layers: 24", "  layers: 1:30")
    assert text != TEACHING
    path = tmp_path / "sexagesimal.yaml"
    path.write_text(text, encoding="utf-8")
    one_line_error(capsys, ["run", str(path)], "error: model.layers: '1:30' is not an integer")
    one_line_error(capsys, ["run", "teaching-8gpu", "--set", "model.layers=1:30"],
                   "error: model.layers: '1:30' is not an integer")
    view = parse_query({"scenario": "teaching-8gpu", "model.layers": "1:30"})
    assert view.overrides == {} and view.warnings == [
        "ignored model.layers=1:30: model.layers: '1:30' is not an integer"]


def test_leading_zero_layers_are_decimal(capsys, tmp_path):
    """Before: ``layers: 030`` was the octal 24."""
    path = tmp_path / "octal.yaml"
    path.write_text(TEACHING.replace("  layers: 24", "  layers: 030"), encoding="utf-8")
    assert load(path).model.layers == 30
    outputs = [run(capsys, "run", "teaching-8gpu", "--set", f"model.layers={v}", "--json")
               for v in ("032", "32")]
    assert outputs[0] == outputs[1] and outputs[0][0] == 0
    assert outputs[0] != run(capsys, "run", "teaching-8gpu", "--set", "model.layers=26", "--json")
    assert parse_query({"scenario": "teaching-8gpu", "model.layers": "032"}).overrides == {"model.layers": 32}


def test_keys_equal_as_yaml_1_2_numbers_are_duplicates():
    with pytest.raises(ScenarioError, match="duplicate key 30; each key may appear once"):
        parse_document("30: a\n030: b\n")


# -- 3. a --set key given twice -----------------------------------------------------------------------------
def test_a_set_key_given_twice_is_exit_2(capsys):
    """Before: the second value silently won."""
    one_line_error(capsys, ["run", "teaching-8gpu", "--set", "parallelism.pp=4", "--set", "parallelism.pp=2"],
                   "error: parallelism.pp: given twice with --set (4, then 2); give each key once")
    one_line_error(capsys, ["validate", "teaching-8gpu", "--set", "name=a", "--set", " name =b"],
                   "error: name: given twice with --set ('a', then 'b')")


@pytest.mark.parametrize("command", [["sweep", "teaching-8gpu", "--vary", "parallelism.pp=2,4"],
                                     ["diff", "teaching-8gpu"]])
def test_a_set_key_given_twice_is_exit_2_in_every_command(capsys, command):
    one_line_error(capsys, [*command, "--set", "training.global_batch=16",
                            "--set", "training.global_batch=32"],
                   "training.global_batch: given twice with --set (16, then 32)")


def test_diff_set_b_may_change_a_key_of_set_but_not_twice(capsys):
    rc, out, err = run(capsys, "diff", "teaching-8gpu", "--set", "training.global_batch=16",
                       "--set-b", "training.global_batch=32", "--json")
    assert rc == 0, err
    assert json.loads(out)["b"]["tokens_per_s"] > 0
    one_line_error(capsys, ["diff", "teaching-8gpu", "--set-b", "training.global_batch=16",
                            "--set-b", "training.global_batch=32"],
                   "error: B: training.global_batch: given twice with --set-b (16, then 32)")


def test_the_python_loader_takes_a_shipped_name_as_the_command_line_does():
    """``load("llama3-405b-16k")`` is the shipped file, as ``python -m explorer run llama3-405b-16k``
    is (it had raised "no such scenario file" outside the CLI); a name that is neither a file nor
    shipped is refused with the closest shipped names."""
    from explorer.config.shipped import shipped_scenarios
    by_name = load("llama3-405b-16k", {"communication.dp_overlap": False})
    by_path = load(shipped_scenarios()["llama3-405b-16k"], {"communication.dp_overlap": False})
    assert by_name == by_path and not by_name.communication.dp_overlap
    with pytest.raises(ScenarioError, match="no such scenario file .closest shipped: teaching-8gpu"):
        load("teaching-8gup")
