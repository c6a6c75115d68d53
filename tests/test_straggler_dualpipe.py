"""A straggler under DualPipe slows the rank it sits on: each DualPipe chunk is held by two ranks
(one per direction), so the slowdown follows the rank that runs a pass, not the chunk both share."""
from __future__ import annotations

from explorer.scenario import load
from explorer.simulate import simulate

from conftest import ROOT

TEACH = ROOT / "scenarios" / "teaching-8gpu.yaml"     # PP 4 x DP 2
DUAL = {"parallelism.schedule": "dualpipe"}


def _busy(res, cls_name: str) -> float:
    """Compute-stream seconds of the class named ``cls_name``."""
    cls = next(c.index for c in res.classes if c.name == cls_name)
    return sum(t.end - t.start for t in res.tasks if t.cls == cls and t.stream == "compute")


def test_dualpipe_straggler_slows_its_own_rank_only():
    base = simulate(load(TEACH, DUAL))
    slow = simulate(load(TEACH, {**DUAL, "cluster.stragglers.count": 1, "cluster.stragglers.slowdown": 2.0}))
    last, first = "stage 3 (straggler replica)", "stage 0 (straggler replica)"
    at_speed = _busy(base, "stage 3")
    # The straggler (the last rank) runs every pass of its two chunks twice as long: its compute
    # about doubles; rank 0, which shares those chunks in the other direction, keeps its own speed.
    assert _busy(slow, last) > 1.8 * at_speed
    assert abs(_busy(slow, first) - _busy(base, "stage 0")) < 1e-9
    assert slow.iteration_time_s > base.iteration_time_s
