"""Direction tests for the pipeline-schedule controls added with the cross-datacenter schedules
(tests/test_controls.py collects COVERED from every tests/test_controls_<area>.py)."""
from __future__ import annotations

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
