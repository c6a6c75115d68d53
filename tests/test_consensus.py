"""The consensus curve (explorer/design/consensus.py, `python -m explorer consensus`): the window's
closed form per (replicas, period), the knee, the CLI."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from explorer.config.loading import load_raw
from explorer.design.consensus import KNEE_SHARE, consensus
from explorer.scenario import load
from explorer.simulate import simulate

from conftest import ROOT

DL = ROOT / "scenarios" / "diloco-cross-region.yaml"


def test_points_are_the_simulated_windows_and_knees_the_first_flat_period():
    curve = consensus(load_raw(DL), replicas=(2, 4), periods=(1, 10, 100))
    assert len(curve.points) == 6 and not curve.skipped
    for p in curve.points:
        if p.replicas == 4:     # the shipped layout: four regions
            res = simulate(load(DL, {"training.sync.inner_steps": p.inner_steps}))
            assert p.time_per_step_s == pytest.approx(res.time_per_step_s, rel=1e-12)
        assert p.sync_share == pytest.approx(1 - p.inner_step_s / p.time_per_step_s)
    for D, knee in curve.knees.items():
        pts = [p for p in curve.points if p.replicas == D]
        flat = [p.inner_steps for p in pts if p.sync_share <= KNEE_SHARE]
        assert knee == (min(flat) if flat else None)
        times = [p.time_per_step_s for p in pts]
        assert times == sorted(times, reverse=True)           # syncing less often never costs more


def test_more_replicas_cost_more_per_sync():
    """The ring all-reduce's 2(D-1)/D of the model leaves each datacenter: more at 16 than at 2."""
    curve = consensus(load_raw(DL), replicas=(2, 16), periods=(1,))
    two, sixteen = curve.points
    assert sixteen.time_per_step_s - sixteen.inner_step_s > two.time_per_step_s - two.inner_step_s


def test_cli_prints_the_grid_and_json():
    out = subprocess.run([sys.executable, "-m", "explorer", "consensus", "diloco-cross-region", "--replicas",
                          "2,4", "--periods", "1,100", "--json"], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["kind"] == "diloco" and len(data["points"]) == 4 and set(data["knees"]) == {"2", "4"}
    bad = subprocess.run([sys.executable, "-m", "explorer", "consensus", "diloco-cross-region", "--periods",
                          "0"], capture_output=True, text=True, cwd=ROOT)
    assert bad.returncode == 2 and "--periods" in bad.stderr and len(bad.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("name", ["teaching-8gpu", "deepseek-v3"])
def test_a_one_datacenter_scenario_made_several_keeps_whole_replicas_in_each(name):
    """Found by a hunt: consensus on teaching-8gpu ended in "internal error (KeyError): (1, 2)".  Its
    variants were loaded without the simulator's checks, so 4 pipeline stages spread over 2
    datacenters reached the synchronisation window, which assumes whole replicas per datacenter.
    The datacenters now hold whole pipelines (span dp), and every replica count is priced."""
    curve = consensus(load_raw(ROOT / "scenarios" / f"{name}.yaml"), replicas=(2, 4), periods=(1, 100))
    assert not curve.skipped and {p.replicas for p in curve.points} == {2, 4}
    assert all(p.time_per_step_s >= p.inner_step_s > 0 for p in curve.points)


def test_advise_refuses_what_run_refuses_instead_of_crashing():
    """Found by a hunt: advise streaming-diloco-1gbps crashed with KeyError (1, 2).  The estimator's
    fast validation ran the configuration's rules but not the simulator's, so a placement whose
    pipelines span the datacenters — which from_dict refuses for streaming DiLoCo — was priced."""
    from explorer.estimate.overrides import scenarios_from_overrides
    raw = load_raw(ROOT / "scenarios" / "streaming-diloco-1gbps.yaml")
    raw["parallelism"].pop("dp", None)
    ov = {"parallelism.span": "pp", "parallelism.order": "tp-cp-ep-dp-pp", "parallelism.pp": 2,
          "parallelism.schedule": "gpipe"}
    scs, why = scenarios_from_overrides(raw, [ov])
    assert scs == [None]
    assert why[0].startswith("training.sync.kind: streaming-diloco needs whole model replicas")


def test_a_kind_the_curve_does_not_model_is_said_to_be_priced_as_diloco():
    """Found by a hunt: consensus streaming-diloco-1gbps priced plain DiLoCo (1.934 s a step against
    run's 1.622 s) under a "# diloco" header and said nothing."""
    raw = load_raw(ROOT / "scenarios" / "streaming-diloco-1gbps.yaml")
    curve = consensus(raw, replicas=(2,), periods=(100,))
    assert curve.kind == "diloco" and curve.scenario_kind == "streaming-diloco"
    assert curve.to_json()["scenario_kind"] == "streaming-diloco"
    from explorer.commands.consensus import consensus_text
    assert "the scenario's streaming-diloco is priced as diloco" in consensus_text(curve, "x")


def test_a_layout_over_memory_gets_no_knee_and_says_so(capsys):
    """two-datacenters on 16 GiB GPUs needs 39.9 GB per GPU in its inner step: the curve had marked
    knees at H=50 with nothing said about memory.  Now no knee is marked on such a row, the JSON
    names the replica counts over memory, and the text and stderr warn; on its own 80 GiB GPUs the
    knees are back."""
    from explorer.cli import main
    args = ["consensus", "two-datacenters", "--replicas", "2,4", "--periods", "1,50"]
    assert main([*args, "--set", "hardware.gpu.memory_GB=16", "--json"]) == 0
    out = capsys.readouterr()
    j = json.loads(out.out)
    assert j["knees"] == {"2": None, "4": None} and set(j["over_memory"]) == {"2", "4"}
    over = j["over_memory"]["2"]
    assert over["memory_GB"] > over["memory_capacity_GB"] == pytest.approx(17.18, abs=0.01)
    assert all(p["fits"] is False for p in j["points"])
    assert "warning: memory: at 2 replicas each GPU needs" in out.err
    assert main([*args, "--set", "hardware.gpu.memory_GB=16"]) == 0
    text = capsys.readouterr().out
    assert "*" not in text.split("\n", 1)[1] and "# warning: memory: at 4 replicas" in text
    assert main([*args, "--json"]) == 0
    j = json.loads(capsys.readouterr().out)
    assert j["knees"] == {"2": 50, "4": 50} and j["over_memory"] == {}


@pytest.mark.parametrize("replicas", ["auto", "[15,1]"])
def test_stage_replicas_are_refused_in_one_line_naming_them(replicas):
    """A hunt: pipedream-vgg16 (PipeDream's own stage replicas) gave "cannot run" on every row, with
    stage_replicas auto a message that contradicted itself ("1920 gives 15 micro-batches of 64: too
    few ...; at least 1024"): its replicas are the pipeline's own data parallelism over the cluster,
    which consensus's replicated clusters cannot repeat.  Now one line names the field and the way
    out, exit 2."""
    from cli_support import cli

    got = cli("consensus", "pipedream-vgg16", "--set", f"parallelism.stage_replicas={replicas}")
    assert got.returncode == 2 and got.stdout == ""
    line = got.stderr.strip()
    assert "\n" not in line and line.startswith("error: parallelism.stage_replicas: consensus replicates")
    assert "--set parallelism.stage_replicas=null" in line
