"""A run's energy draws the training power only while its GPUs compute, and each datacenter's GPUs
at their own board power (a read-only hunt found 35 days of waiting for repairs charged at the
training draw, 2.3x the energy, and an all-B200 datacenter list charged at hardware.gpu's H100)."""
from __future__ import annotations

import pytest

from explorer.physics.power import STATIC_POWER_SHARE
from explorer.run import energy
from explorer.run.total import run_total
from explorer.scenario import load
from explorer.simulate import simulate

from conftest import ROOT

FSDP = ROOT / "scenarios" / "fsdp-llama3-8b.yaml"
MIXED = ROOT / "scenarios" / "mixed-generations.yaml"
REPAIRS = {"training.total_tokens": 1e11, "reliability.mtbf_gpu_hours": 500, "reliability.restart_s": 300,
           "reliability.repair_h": 24}


def total(path, overrides):
    return run_total(load(path, overrides), simulate)


def test_waiting_for_repairs_draws_the_idle_power():
    """Job MTBF 28,125 s on 64 H100s with 24 h repairs: the job waits while any node is down (a
    repair factor exp(-W / M) = 0.0463) and restarts in 300 s; its GPUs compute 4.6 % of the 37
    days and draw the static 0.40 x 700 W = 280 W the rest of the time."""
    t = total(FSDP, REPAIRS)
    p = t.phases[0]
    g = p.goodput
    assert p.idle_power_W == pytest.approx(STATIC_POWER_SHARE * 700.0) == 280.0
    busy = (1 - g.checkpoint_share - g.restart_share) * g.whole_share
    assert energy.busy_share(g, elastic=False) == pytest.approx(busy, rel=1e-12)
    assert busy == pytest.approx(0.0458, abs=5e-5)
    want = p.gpus * p.wall_s * (p.avg_power_W * busy + 280.0 * (1 - busy)) * t.pue / 3.6e9
    assert t.energy_MWh == pytest.approx(want, rel=1e-12)
    assert t.energy_MWh == pytest.approx(18.72, abs=0.01)          # 43.42 MWh at the training draw
    assert t.energy_MWh < 0.45 * p.gpus * p.wall_s * p.avg_power_W * t.pue / 3.6e9


def test_without_failures_every_second_computes():
    t = total(FSDP, {"training.total_tokens": 1e11})
    p = t.phases[0]
    assert energy.busy_share(p.goodput, elastic=False) == 1.0
    assert t.energy_MWh == pytest.approx(p.gpus * p.wall_s * p.avg_power_W * t.pue / 3.6e9, rel=1e-12)


def test_an_elastic_job_computes_through_its_repairs():
    t = total(FSDP, {**REPAIRS, "reliability.elastic": True})
    g = t.phases[0].goodput
    assert energy.busy_share(g, elastic=True) == pytest.approx(
        1 - g.checkpoint_share - g.restart_share - g.rejoin_share, rel=1e-12)
    assert energy.busy_share(g, elastic=True) > 0.9


def test_each_datacenter_draws_its_own_gpus_power():
    """mixed-generations: 64 nodes of H100 and 64 of B200.  hardware.gpu (the first datacenter's,
    unread by the simulation there) moved the energy by 43 %; now neither it nor anything else but
    the datacenters' GPUs sets it: the node-weighted mean of each GPU's draw at the run's compute
    share, between the all-H100 and the all-B200 lists."""
    tokens = {"training.total_tokens": 1e11}
    a = total(MIXED, {**tokens, "hardware.gpu": "h100-sxm"})
    b = total(MIXED, {**tokens, "hardware.gpu": "b200"})
    assert a.energy_MWh == pytest.approx(b.energy_MWh, rel=1e-12)
    sc = load(MIXED, tokens)
    res = simulate(sc)
    u = energy.compute_share(res.breakdown_s, res.iteration_time_s)
    h100 = STATIC_POWER_SHARE * 700 + (700 - STATIC_POWER_SHARE * 700) * u
    b200 = STATIC_POWER_SHARE * 1000 + (1000 - STATIC_POWER_SHARE * 1000) * u
    assert a.phases[0].avg_power_W == pytest.approx((h100 + b200) / 2, rel=1e-12)
    lists = {name: total(MIXED, {**tokens, "cluster.datacenters": [{"name": "a", "nodes": 64, "gpu": name},
                                                                   {"name": "b", "nodes": 64, "gpu": name}]})
             for name in ("h100-sxm", "b200")}
    per_gpu_hour = {k: v.energy_MWh / v.gpu_hours for k, v in lists.items()}
    assert per_gpu_hour["h100-sxm"] < a.energy_MWh / a.gpu_hours < per_gpu_hour["b200"]
