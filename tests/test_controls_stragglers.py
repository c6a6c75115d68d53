"""Direction tests for cluster.stragglers: more slow GPUs, or slower ones, never speed the
iteration up, and on the teaching scenario they strictly slow it.  tests/test_controls.py collects
``COVERED``; the closed form and properties are in tests/test_stragglers.py."""
from __future__ import annotations

from explorer.scenario import load
from explorer.simulate import simulate

from conftest import ROOT

TEACHING = ROOT / "scenarios" / "teaching-8gpu.yaml"


def _time(count: int, slowdown: float) -> float:
    return simulate(load(TEACHING, {"cluster.stragglers.count": count,
                                    "cluster.stragglers.slowdown": slowdown})).iteration_time_s


def test_more_stragglers_slow_the_step():
    """cluster.stragglers.count at slowdown 2: 0 < 1 (the last stage slow) < 2 (two stages slow)."""
    assert _time(0, 2.0) < _time(1, 2.0) < _time(2, 2.0)


def test_a_slower_straggler_slows_the_step():
    """cluster.stragglers.slowdown with one straggler: 1.0 (none) < 1.5 < 3.0."""
    assert _time(1, 1.0) < _time(1, 1.5) < _time(1, 3.0)


COVERED = {
    "cluster.stragglers.count": "test_more_stragglers_slow_the_step",
    "cluster.stragglers.slowdown": "test_a_slower_straggler_slows_the_step",
}
