"""Helpers of the tour claim tests (tests/test_tour_*.py): a step's scenario as its link gives it,
every step simulated, and a step's narration on one line."""
from __future__ import annotations

from explorer.result.record import Result
from explorer.scenario import Scenario, apply_overrides, from_dict
from explorer.share import parse_query, preset_raw
from explorer.simulate import simulate
from explorer.teaching.tours import tours


def step_scenario(tour: str, i: int) -> Scenario:
    """Step ``i`` (from 1) of ``tour``: its link's scenario, the link parsed without a warning."""
    v = parse_query(tours()[tour].steps[i - 1].params)
    assert not v.warnings
    return from_dict(apply_overrides(preset_raw(v.scenario), v.overrides))


def simulate_steps(tour: str) -> dict[int, Result]:
    """Every step of ``tour`` simulated, by step number."""
    return {i: simulate(step_scenario(tour, i)) for i in range(1, len(tours()[tour].steps) + 1)}


def step_text(tour: str, i: int) -> str:
    """Step ``i``'s narration with its line breaks and runs of spaces as single spaces."""
    return " ".join(tours()[tour].steps[i - 1].text.split())
