"""Cross-field rules of ``hardware.power_cap_W`` (the clock relation is explorer/physics/power.py)."""
from __future__ import annotations

from collections.abc import Callable

from .schema import ScenarioError
from .sections import Scenario

# Lowest cap, as a share of the board power, the clock relation is used for: its fit rests on caps of
# 0.63-0.71 of the board power (physics/power.py) and it reaches zero clock at the static share 0.40,
# so caps below half the board power would be extrapolated where the relation no longer holds.
MIN_CAP_SHARE = 0.5


def rule_power_cap_within_board(sc: Scenario) -> None:
    """A power cap needs the GPU's board power and lies between half of it and all of it (a GPU's
    limit cannot be raised above its board power: nvidia-smi -pl accepts min..max power limit)."""
    cap, board = sc.hardware.power_cap_W, sc.hardware.gpu.power_W
    if cap is None:
        return
    if not board:
        raise ScenarioError("hardware.power_cap_W", f"{cap:g} W needs the GPU's board power: set "
                            "hardware.gpu.power_W or choose a GPU preset that has one")
    if not MIN_CAP_SHARE * board <= cap <= board:
        raise ScenarioError("hardware.power_cap_W", f"{cap:g} W is outside {MIN_CAP_SHARE * board:g}-"
                            f"{board:g} W (half to all of {sc.hardware.gpu.name or 'the GPU'}'s "
                            f"{board:g} W board power)")


POWER_RULES: tuple[Callable[[Scenario], None], ...] = (rule_power_cap_within_board,)
