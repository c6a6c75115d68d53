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
