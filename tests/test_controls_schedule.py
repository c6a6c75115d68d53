"""Direction tests for the pipeline-schedule controls added with the cross-datacenter schedules
(tests/test_controls.py collects COVERED from every tests/test_controls_<area>.py)."""
from __future__ import annotations

import pytest

from explorer.config import shipped_scenarios
from explorer.scenario import load
from explorer.simulate import simulate

COVERED = {"parallelism.max_in_flight": "test_max_in_flight_trades_memory_for_the_wan_round_trip"}


def _run(**ov):
    return simulate(load(shipped_scenarios()["cross-region-pp"], ov))


def test_max_in_flight_trades_memory_for_the_wan_round_trip():
    """CrossPipe's memory cap (parallelism.max_in_flight) over a 60 ms WAN: a stage before the
    boundary can keep the round trip covered only with enough micro-batches in flight, so a
    tighter cap is slower and needs less activation memory; 1F1B's own order ignores the cap."""
    wan = {"parallelism.schedule": "crosspipe", "cluster.scale_across.latency_ms": 60}
    runs = [_run(**wan, **{"parallelism.max_in_flight": cap}) for cap in (2, 4, 9)]
    times = [r.iteration_time_s for r in runs]
    mems = [r.memory.total for r in runs]
    assert times[0] > 3 * times[2] and times[0] > times[1] > times[2]
    assert mems[0] < mems[1] < mems[2]
    plain = _run(**{"parallelism.max_in_flight": 2}).iteration_time_s
    assert plain == _run().iteration_time_s


# The V-shaped schedules (issue 35): selectable like every registered schedule, and each moves the
# bubble and the activation memory the way its paper says (Qi et al. 2024; deepseek-ai/DualPipe).
V_SCHEDULES = ("zb-v", "v-half", "v-min", "dualpipe-v")


def _zb(schedule: str, **ov):
    return simulate(load(shipped_scenarios()["zero-bubble-8gpu"], {"parallelism.schedule": schedule, **ov}))


def _activations(r) -> float:
    return max(m.as_GB()["activations"] for m in r.memory_by_class)


def test_the_v_schedules_are_choices_of_the_schedule_control():
    from explorer.config.sections import SCHEDULES
    from explorer.ui.controls import CONTROLS
    assert set(V_SCHEDULES) <= set(SCHEDULES)
    assert any(c.key == "parallelism.schedule" and c.kind == "choice" for c in CONTROLS)


def test_v_schedules_trade_bubble_for_activation_memory_as_their_papers_say():
    """8 ranks, 16 micro-batches: ZB-V about 1F1B's activations (Qi et al. 2024 Table 1: V-ZB, p
    micro-batches) with a bubble below ZB-H1's; V-Half and V-Min about 1/2 and 1/3 of 1F1B's
    activations ((p+2)//2 = 5 and (p+4)//3 = 4 of p = 8 here, on an uneven split of 32 layers over
    16 chunks), paid for with more bubble, V-Min's the most.  Bubbles compared on the ideal
    pipeline (equal chunks): the real split's 5-layer ranks pace every schedule alike.  The V split
    is pinned (one 3-layer chunk on rank 1, its 15th): which of two nearly equal splits the
    time-balancing search picks moves with the GEMM rate (at the sustained clock it put the 3-layer
    chunk on rank 4, the 12th, whose rank holds more micro-batches: ZB-V 1.16x 1F1B's activations)."""
    v_split = {"parallelism.stage_layers": [1] + [2] * 13 + [3, 2]}
    one = _zb("1f1b")
    zbv, half, vmin = (_zb(s, **v_split) for s in ("zb-v", "v-half", "v-min"))
    assert _activations(zbv) == pytest.approx(_activations(one), rel=0.1)
    assert _activations(vmin) < _activations(half) < 0.8 * _activations(one)
    assert _activations(vmin) < 0.6 * _activations(one)
    assert zbv.iteration_time_s < half.iteration_time_s < one.iteration_time_s
    bubble = {s: _zb(s, **{"parallelism.ideal_pipeline": True}).bubble_fraction
              for s in ("1f1b", "zb-h1", "zb-v", "v-half", "v-min")}
    assert bubble["zb-v"] < bubble["zb-h1"] < bubble["v-half"] < bubble["v-min"] < bubble["1f1b"]


def test_dualpipe_v_keeps_one_copy_of_the_parameters():
    """DualPipe's rank holds a stage of each direction (two copies of the parameters on the
    pipeline); DualPipeV's V gives each of its 2p stages one rank (README: half DualPipe's devices
    for the same stages, i.e. half its parameters per GPU here)."""
    dual, vee = _zb("dualpipe"), _zb("dualpipe-v")
    params = [sum(m.as_GB()["params"] for m in r.memory_by_class) for r in (dual, vee)]   # 8 ranks each
    assert params[1] == pytest.approx(params[0] / 2, rel=0.05)
    assert vee.bubble_fraction < _zb("1f1b").bubble_fraction


@pytest.mark.parametrize("schedule", V_SCHEDULES)
def test_ideal_v_pipeline_bubble_equals_the_registry_formula(schedule):
    """Equal chunks, free communication, no edges or optimizer: the bubble card equals the
    schedule's closed form (the exact idle share of its order at the pass costs) to float rounding."""
    r = _zb(schedule, **{"parallelism.ideal_pipeline": True})
    assert r.bubble_fraction == pytest.approx(r.bubble_formula, rel=1e-9)
