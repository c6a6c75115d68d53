"""The app's GPU power limit control (hardware.power_cap_W): shows the board power by default, a lower
limit slows the step, and switching the GPU re-derives it (no stale B200 limit on an H100)."""
from __future__ import annotations

from app_support import run_app, seconds


def test_power_limit_control_defaults_to_the_board_and_slows_when_lowered():
    at = run_app(scenario="teaching-8gpu")
    widget = at.number_input(key="hardware.power_cap_W")
    assert widget.value == 700.0                       # H100 SXM board power (gpus.yaml)
    before = seconds(at)
    widget.set_value(500.0).run()
    assert not at.exception and not at.error
    assert seconds(at) > before


def test_power_limit_follows_the_gpu():
    at = run_app(scenario="teaching-8gpu")
    at.selectbox(key="hardware.gpu").set_value("b200").run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert at.number_input(key="hardware.power_cap_W").value == 1000.0
