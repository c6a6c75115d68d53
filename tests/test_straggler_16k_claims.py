"""Claims of scenarios/straggler-16k.yaml (uncommitted with the scenario)."""
from __future__ import annotations

import pytest

from explorer.scenario import load
from explorer.simulate import simulate

from conftest import ROOT


def test_straggler_16k_claims():
    """scenarios/straggler-16k.yaml's description: one GPU at 70% speed takes the iteration from
    7.12 to 8.58 s (MFU 37% -> 30%); the 127 replicas at speed wait about 1.5 s; a second straggler
    adds 0.24 s, slowdown 1.1 costs 0.20 s; 32 classes, a few hundredths of a second per run."""
    import time
    path = ROOT / "scenarios" / "straggler-16k.yaml"
    t0 = time.perf_counter()
    r = simulate(load(path))
    assert time.perf_counter() - t0 < 3.0
    base = simulate(load(path, {"cluster.stragglers.count": 0}))
    assert base.iteration_time_s == pytest.approx(7.12, abs=0.01)
    assert r.iteration_time_s == pytest.approx(8.58, abs=0.01)
    assert base.mfu == pytest.approx(0.366, abs=0.002) and r.mfu == pytest.approx(0.304, abs=0.002)
    assert r.classes[r.breakdown_class].name == "stage 15 (straggler replica)"
    assert r.breakdown_s["compute"] == pytest.approx(5.45, abs=0.01)
    rows = {row["name"]: row for row in r.replicas}
    assert rows["at speed"]["replicas"] == 127
    assert rows["at speed"]["wait_s"] == pytest.approx(1.5, abs=0.05)
    assert len(r.classes) == 32 and sum(c.gpus for c in r.classes) == 16384
    two = simulate(load(path, {"cluster.stragglers.count": 2})).iteration_time_s
    mild = simulate(load(path, {"cluster.stragglers.slowdown": 1.1})).iteration_time_s
    assert two == pytest.approx(8.83, abs=0.01) and mild == pytest.approx(7.33, abs=0.01)
