"""The design-space commands as a user runs them: ``python -m explorer sweep|search|sensitivity|scaling``
in a subprocess, their JSON contracts (issue 11) and one-line errors."""
from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from cli_support import cli

ROOT = Path(__file__).resolve().parents[1]


def ok_json(*args: str):
    proc = cli(*args, "--json")
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 1
    return json.loads(lines[0]), proc.stderr


def test_sweep_json_contract_and_csv(tmp_path):
    out = tmp_path / "sweep.csv"
    rows, _ = ok_json("sweep", "llama3-405b-16k", "--vary", "parallelism.tp=4,8",
                      "--vary", "cluster.scale_out.nic_Gbps=200,400", "--set", "parallelism.zero=1",
                      "--full", "--csv", str(out))
    assert [r["overrides"] for r in rows] == [
        {"parallelism.tp": tp, "cluster.scale_out.nic_Gbps": nic} for tp in (4, 8) for nic in (200, 400)]
    bad, good = rows[:2], rows[2:]
    for r in bad:
        assert not r["valid"] and "iteration_time_s" not in r
        assert r["reason"].startswith("training.global_batch: 2048 leaves (8) micro-batches")
    for r in good:
        assert r["valid"] and "reason" not in r
        assert {"iteration_time_s", "mfu", "memory_GB_total", "fits", "breakdown_s", "link"} <= set(r)
        assert r["link"].startswith("scenario=llama3-405b-16k&")
    assert good[0]["iteration_time_s"] > good[1]["iteration_time_s"]        # faster NICs, faster iteration
    table = list(csv.DictReader(out.open(encoding="utf-8")))
    assert [t["valid"] for t in table] == ["False", "False", "True", "True"]
    assert float(table[3]["iteration_time_s"]) == good[1]["iteration_time_s"]


def test_sweep_text_counts_reasons():
    proc = cli("sweep", "teaching-8gpu", "--vary", "parallelism.pp=1,2,3,4,8",
               "--vary", "training.micro_batch=1,2,4")
    assert proc.returncode == 0, proc.stderr
    assert "15 combinations: 11 valid (11 fit in memory), 4 invalid" in proc.stdout
    assert "      3 x parallelism: tp*pp*cp = 3 does not divide the 8 GPUs" in proc.stdout
    assert "fastest that fits:" in proc.stdout


def test_sweep_typo_in_a_key_is_exit_2_naming_it():
    proc = cli("sweep", "teaching-8gpu", "--vary", "cluster.scale_ot.nic_Gbps=100,200")
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.startswith("error: cluster.scale_ot.nic_Gbps: is not a scenario field")
    assert len(proc.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("spec", ["=1,2", " =1,2"])
def test_sweep_vary_without_a_key_says_so(spec):
    """``--vary =1,2`` read "error: is not a scenario field (--vary): unknown key (valid keys: ...)",
    naming no key; now it says none is given, as ``--set =3`` does (tests/test_cli.py)."""
    proc = cli("sweep", "teaching-8gpu", "--vary", spec)
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == (f"error: --vary: '{spec}' names no field before '='; give dotted.key=v1,v2,..., "
                           "e.g. parallelism.tp=1,2\n")
    set_says = cli("run", "teaching-8gpu", "--set", "=3").stderr
    assert set_says == ("error: --set: '=3' names no field before '='; give dotted.key=value, "
                        "e.g. parallelism.tp=4\n")


@pytest.mark.slow
def test_search_json_contract():
    rows, err = ok_json("search", "teaching-8gpu", "--top", "3", "--zero", "0,1", "--recompute", "none")
    assert len(rows) == 3
    times = [r["iteration_time_s"] for r in rows]
    assert times == sorted(times)
    for r in rows:
        assert {"overrides", "iteration_time_s", "memory_GB_total", "link", "fits", "layout"} <= set(r)
        assert r["fits"] and r["link"].startswith("scenario=teaching-8gpu")
        assert r["overrides"]["parallelism.zero"] in (0, 1) and r["overrides"]["training.recompute"] == "none"
    assert "layouts enumerated" in err and "fit in memory" in err


def test_search_of_a_scenario_the_estimator_does_not_price_says_what_it_ranked_on():
    """cloud-25g-dp compresses its gradients (the estimator leaves that to the simulation): the
    search ranks on the uncompressed proxy, says so, and reports full simulations only."""
    rows, err = ok_json("search", "cloud-25g-dp", "--top", "2", "--schedules", "1f1b", "--zero", "0,1",
                        "--recompute", "none")
    assert len(rows) == 2 and rows[0]["iteration_time_s"] <= rows[1]["iteration_time_s"]
    assert "ranked on a proxy the estimator prices (uncompressed gradients)" in err
    assert "fit in memory (on the proxy)" in err


def test_search_bad_flags_are_exit_2():
    proc = cli("search", "teaching-8gpu", "--gpus", "12")
    assert proc.returncode == 2 and proc.stderr.startswith("error: --gpus: 12 GPUs is not a whole number")
    proc = cli("search", "teaching-8gpu", "--zero", "5")
    assert proc.returncode == 2 and proc.stderr.startswith("error: --zero:")
    proc = cli("search", "teaching-8gpu", "--address", "tcp://127.0.0.1:8786")
    assert proc.returncode == 2 and proc.stderr.startswith("error: --address: needs --executor dask")
    # A bad field is refused before the layouts are estimated (it was, after 33 s of them).
    proc = cli("search", "teaching-8gpu", "--set", "parallelism.pipeline_layout=[1,2,3]", "--workers", "1")
    assert proc.returncode == 2
    # (On a loaded machine the progress line "search: starting, 0.5 s" may come first: the error is
    # the last line, and no layout was scored.)
    assert proc.stderr.splitlines()[-1].startswith("error: parallelism.pipeline_layout: has 3 entries")
    assert "layouts" not in proc.stderr


def test_sensitivity_json_contract_and_table():
    rows, _ = ok_json("sensitivity", "two-datacenters")
    assert len(rows) == 8
    assert all({"change", "iteration_time_s", "speedup", "overrides"} <= set(r) for r in rows)
    speedups = [r["speedup"] for r in rows]
    assert speedups == sorted(speedups, reverse=True)
    by = {r["change"]: r for r in rows}
    assert by["2x scale-across bandwidth"]["overrides"] == {"cluster.scale_across.bandwidth_Gbps": 3200}
    proc = cli("sensitivity", "teaching-8gpu")
    assert proc.returncode == 0 and proc.stdout.splitlines()[2].startswith("2x compute")


def test_scaling_json_contract():
    rows, _ = ok_json("scaling", "teaching-8gpu", "--gpus", "8,16,32", "--mode", "strong")
    assert [r["gpus"] for r in rows] == [8, 16, 32] and all(r["valid"] for r in rows)
    assert all({"iteration_time_s", "mfu", "exposed_s", "dp", "global_batch", "link"} <= set(r) for r in rows)
    assert [r["global_batch"] for r in rows] == [16, 16, 16]
    assert rows[0]["iteration_time_s"] > rows[2]["iteration_time_s"]


@pytest.mark.parametrize("gpus,said", [
    ("8,,16", "error: --gpus: '8,,16' has an empty item; give GPU counts separated by single commas "
              "(e.g. 8,16,32)"),
    ("8,16,", "error: --gpus: '8,16,' has an empty item; give GPU counts separated by single commas "
              "(e.g. 8,16,32)"),
    ("100000000000", "error: --gpus: 100,000,000,000 is out of range (give 1 to 10,000,000)"),
    ("8,0", "error: --gpus: 0 is out of range (give 1 to 10,000,000)"),
    ("8,x", "error: --gpus: 'x' is not a whole number (give 1 to 10,000,000)"),
])
def test_scaling_bad_gpus_is_one_line_exit_2(gpus, said):
    """``8,,16`` ran as 8,16 (the empty item dropped) and 1e11 GPUs gave an "invalid:
    training.global_batch" row, both exit 0: now one line naming --gpus, search's bound and wording."""
    proc = cli("scaling", "teaching-8gpu", "--gpus", gpus)
    assert (proc.returncode, proc.stdout, proc.stderr) == (2, "", said + "\n")
    assert cli("search", "teaching-8gpu", "--gpus", "100000000000").stderr.endswith(
        "--gpus: 100,000,000,000 is out of range (give 1 to 10,000,000)\n")


def test_sensitivity_says_when_its_base_does_not_fit():
    """A hunt found ``sensitivity`` rank upgrades of a layout needing 154.7 of 85.9 GB per GPU without a
    word; run warns, diff says such a B cannot run.  teaching-8gpu with ZeRO-1 on 8.05 GB GPUs needs
    9.5 GB: the table's second line says so, --json keeps its one list (each row's memory and fit)
    and says it on stderr; the base that fits says nothing."""
    sets = ("--set", "parallelism.zero=1", "--set", "hardware.gpu.memory_GB=7.5")
    proc = cli("sensitivity", "teaching-8gpu", *sets)
    assert proc.returncode == 0
    assert proc.stdout.splitlines()[1] == (
        "# warning: memory: the base needs 9.5 of 8.1 GB per GPU: it does not fit, so these are the gains "
        "of a layout that cannot run as set")
    proc = cli("sensitivity", "teaching-8gpu", *sets, "--json")
    rows = json.loads(proc.stdout)
    assert all(r["fits"] is False and r["memory_GB_total"] > 8.05 for r in rows)
    assert "warning: memory: the base needs 9.5 of 8.1 GB" in proc.stderr
    proc = cli("sensitivity", "teaching-8gpu")
    assert "warning" not in proc.stdout and "# warning" not in proc.stdout
