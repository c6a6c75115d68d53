"""Direction tests for the fields of datacenters that differ (explorer/variants/hetero.py): each moves the
iteration the way its physics says, strictly.  tests/test_controls.py collects ``COVERED``; closed
forms are in tests/test_heterogeneous.py."""
from __future__ import annotations

from test_scenario_claims import sim

MG = "mixed-generations"


def test_speed_split_lets_the_faster_generation_carry_more():
    """parallelism.batch_split: on H100 + B200 with DP across, even makes the B200s wait; speed gives
    them more micro-batches and the iteration is strictly shorter (and never longer than even's)."""
    even = sim(MG)
    speed = sim(MG, {"parallelism.batch_split": "speed"})
    assert speed.iteration_time_s < even.iteration_time_s
    m = {x["name"]: x["micro_batches"] for x in speed.replicas}
    assert m["blackwell"] > m["hopper"]


COVERED = {
    "parallelism.batch_split": "test_speed_split_lets_the_faster_generation_carry_more",
}
