"""Network sweeps: rows equal but for network fields a scenario never reads are priced once, and every
row still gets its own exact figures, share link and validation (explorer/estimate/equivalence.py).

The premise is checked on the full simulation: random scenarios with random values of the fields
equivalence.unread_fields drops give identical results.  Then the sweep's rows are compared with the
full simulation of each row's own scenario (to 1e-9, over random networks), its links with
share_query of each row's scenario, and its invalid rows with from_dict's messages.
"""
from __future__ import annotations

import random

import numpy as np
import pytest
from test_random_scenarios import random_raw

from explorer.design.base import open_base, share_query
from explorer.design.scaling import scaling
from explorer.design.sensitivity import sensitivity
from explorer.design.sweep import combinations, sweep
from explorer.estimate.equivalence import NETWORK_FIELDS, WAN_FIELDS, equivalents, unread_fields
from explorer.scenario import ScenarioError, apply_overrides, from_dict
from explorer.simulate import simulate
from explorer.ui.views.design_runs import MAX_VALUES, parse_values
from explorer.variants.registry import needs_simulation
from explorer.vocabulary import CATEGORIES

_RANDOM_VALUES = {
    "cluster.scale_up.bandwidth_GBps": lambda r: r.choice([50.0, 300.0, 900.0]),
    "cluster.scale_up.latency_us": lambda r: r.choice([0.0, 0.6, 3.0]),
    "cluster.scale_out.nic_Gbps": lambda r: r.choice([25.0, 200.0, 800.0]),
    "cluster.scale_out.latency_us": lambda r: r.choice([0.0, 2.7, 40.0]),
    "cluster.scale_out.efficiency": lambda r: r.choice([0.3, 0.9]),
    "cluster.scale_out.oversubscription": lambda r: r.choice([1.0, 8.0]),
    "cluster.scale_across.bandwidth_Gbps": lambda r: r.choice([1.0, 400.0, 6400.0]),
    "cluster.scale_across.latency_ms": lambda r: r.choice([0.0, 5.0, 80.0]),
    "cluster.scale_across.topology": lambda r: r.choice(["mesh", "ring", "hub"]),
}


def _figures(r) -> list[float]:
    return [r.iteration_time_s, r.memory.total, r.mfu, *(r.breakdown_s[k] for k in CATEGORIES)]


def _random_unread_cases(seed: int, n: int):
    rng = random.Random(seed)
    while n:
        raw = random_raw(rng)
        if rng.random() < 0.5:                 # one NVLink domain: nothing crosses the fabric
            raw["cluster"].update(nodes=1, datacenters=1)
        try:
            sc = from_dict(raw)
        except ScenarioError:
            continue
        unread = unread_fields(sc)
        if not unread:
            continue
        n -= 1
        yield raw, {k: _RANDOM_VALUES[k](rng) for k in sorted(unread)}


@pytest.mark.parametrize("seed", [1, 2])
def test_the_fields_equivalence_drops_change_nothing_in_the_full_simulation(seed):
    for raw, ov in _random_unread_cases(seed, 6):
        a = simulate(from_dict(raw))
        b = simulate(from_dict(apply_overrides(raw, ov)))
        assert _figures(a) == _figures(b), ov


def test_unread_fields_are_the_wan_on_one_datacenter_and_the_fabric_on_one_domain():
    one_dc = from_dict(apply_overrides(_raw("llama3-405b-16k"), {}))
    assert unread_fields(one_dc) == frozenset(WAN_FIELDS)
    assert unread_fields(from_dict(_raw("two-datacenters"))) == frozenset()
    node = from_dict(_raw("teaching-8gpu"))
    assert unread_fields(node) == {k for k in NETWORK_FIELDS if not k.startswith("cluster.scale_up.")}


def _raw(name: str) -> dict:
    return dict(open_base(name).raw)


def test_a_one_datacenter_network_grid_prices_its_distinct_networks_only():
    base = open_base("llama3-405b-16k")
    combos = combinations({"cluster.scale_out.nic_Gbps": [100, 200, 400, 800, 1600],
                           "cluster.scale_up.bandwidth_GBps": [100, 450, 900, 1800],
                           "cluster.scale_across.latency_ms": [0.5, 5, 50]})
    eff, rep = equivalents(base.raw, combos)
    assert len(set(rep)) == 20                        # 5 x 4: the WAN latency is not read
    assert all("cluster.scale_across.latency_ms" not in e for e in eff)
    # An override that changes the cluster's shape keeps every key (two datacenters read the WAN).
    shaped = {"cluster.datacenters": 2, "cluster.scale_across.latency_ms": 50}
    assert equivalents(base.raw, [shaped])[0] == [shaped]


def test_network_sweep_rows_equal_the_full_simulation_of_their_own_scenario():
    rng = random.Random(5)
    for name in ("two-datacenters", "zero-bubble-8gpu", "llama3-70b-1k" if _shipped("llama3-70b-1k")
                 else "teaching-8gpu"):
        base = open_base(name)
        vary = {"cluster.scale_out.nic_Gbps": sorted(rng.sample([50, 100, 200, 400, 800], 2)),
                "cluster.scale_up.bandwidth_GBps": sorted(rng.sample([100, 300, 900], 2)),
                "cluster.scale_across.latency_ms": [0.5, 20.0]}
        res = sweep(base, vary, executor=None)
        assert len(res.points) == 8
        for p in res.points:
            assert p.valid, p.reason
            r = simulate(base.scenario(p.overrides))
            # The estimator's documented agreement (estimate/__init__.py): time, memory, fit, MFU.
            assert p.figures["iteration_time_s"] == pytest.approx(r.iteration_time_s, rel=1e-9, abs=0)
            assert p.figures["memory_GB_total"] == pytest.approx(r.memory.total / 1e9, rel=1e-9)
            assert p.figures["fits"] is (not r.memory_over_capacity)
            assert p.figures["mfu"] == pytest.approx(r.mfu, rel=1e-9)
            assert sum(p.figures["breakdown_s"].values()) == pytest.approx(r.iteration_time_s, rel=1e-9)


def _shipped(name: str) -> bool:
    try:
        open_base(name)
    except ScenarioError:
        return False
    return True


def test_rows_that_share_figures_keep_their_own_links():
    base = open_base("llama3-405b-16k")
    # 5.0 ms is the reference's own WAN latency: its link must leave the field out.
    vary = {"cluster.scale_out.nic_Gbps": [200, 400], "cluster.scale_across.latency_ms": [0.5, 5.0, 12],
            "cluster.scale_across.topology": ["mesh", "ring"]}
    res = sweep(base, vary, executor=None)
    times = {p.overrides["cluster.scale_out.nic_Gbps"]: p.iteration_time_s for p in res.points}
    assert times[200] > times[400]                   # the NIC is read: the figures move with it
    for p in res.points:
        assert p.iteration_time_s == times[p.overrides["cluster.scale_out.nic_Gbps"]]
        assert p.link == share_query(base, base.scenario(p.overrides)), p.overrides
    assert sum("latency_ms" not in (p.link or "") for p in res.points) == 4


def test_an_unread_field_with_an_invalid_value_is_reported_as_from_dict_reports_it():
    base = open_base("llama3-405b-16k")
    res = sweep(base, {"cluster.scale_out.nic_Gbps": [400], "cluster.scale_across.latency_ms": [5, -1]},
                executor=None, links=False)
    good, bad = res.points
    assert good.valid and not bad.valid
    with pytest.raises(ScenarioError) as exc:
        from_dict(apply_overrides(base.raw, bad.overrides))
    assert bad.reason == str(exc.value)
    assert bad.reason_field == "cluster.scale_across.latency_ms"


def test_sensitivity_reuses_the_base_for_a_tier_the_scenario_never_crosses(monkeypatch):
    import importlib
    sens = importlib.import_module("explorer.design.sensitivity")
    seen = []
    real = sens.score_exact

    def counting(variants, *a, **k):
        seen.append(len(variants))
        return real(variants, *a, **k)

    monkeypatch.setattr(sens, "score_exact", counting)
    got = sensitivity(open_base("teaching-8gpu"))
    rows = {r.change: r for r in got.rows}
    for name in ("2x scale-across bandwidth", "1/2 scale-across latency", "1/2 scale-out latency"):
        assert rows[name].speedup == 1.0
        assert rows[name].iteration_time_s == got.base_time_s
    # The base plus only the changes it reads: compute, HBM, scale-up bandwidth and latency, and 2x
    # scale-out, which doubles the GPU's PCIe link too (simulated; one node does not read it: 1.0).
    assert seen == [1 + 5]
    assert rows["2x scale-up bandwidth"].speedup > 1.0


def test_the_heatmap_takes_twenty_values_per_axis():
    assert MAX_VALUES == 20
    twenty = ",".join(str(100 + 10 * i) for i in range(20))
    assert len(parse_values("cluster.scale_out.nic_Gbps", twenty)) == 20
    with pytest.raises(ScenarioError, match="at most 20"):
        parse_values("cluster.scale_out.nic_Gbps", ",".join(str(100 + 10 * i) for i in range(21)))


def test_estimate_overrides_scatters_equivalent_rows_and_their_reasons():
    from explorer.estimate import estimate_overrides
    base = open_base("llama3-405b-16k")
    ovs = [{"cluster.scale_across.latency_ms": v, "cluster.scale_out.nic_Gbps": n}
           for n in (200, 400) for v in (1, 2, -3)]
    est, why = estimate_overrides(base.raw, ovs)
    assert [w is None for w in why] == [True, True, False] * 2
    t = est.iteration_time_s
    assert t[0] == t[1] and t[3] == t[4] and t[0] > t[3]
    assert np.isnan(t[2]) and np.isnan(t[5]) and not est.fits[2]


@pytest.mark.parametrize("name", ["two-datacenters", "megatron-gpt3-175b", "dlrm-dcnv2"])
def test_tornado_and_scaling_reuse_the_estimator_and_equal_the_full_engine(name, monkeypatch):
    """The sensitivity tornado and the scaling curve score their variants with the estimator
    (scores.score_exact), not one simulation each; every bar and point still equals the full
    simulation of its own scenario to 1e-9 (before, both simulated every variant: deepseek-v3's
    tornado 0.40 s, 0.08 s now)."""
    import importlib
    calls = []
    sim = importlib.import_module("explorer.simulate").simulate
    for mod in ("explorer.simulate", "explorer.estimate.many"):     # scores.py imports it when called
        monkeypatch.setattr(importlib.import_module(mod), "simulate",
                            lambda sc, _s=sim: calls.append(sc) or _s(sc))
    base = open_base(name, keep_dp=True)
    sens = sensitivity(base)
    pts = [p for p in scaling(open_base(name), mode="weak") if p.valid]
    # Every variant priced by the estimator, but for a workload the estimator leaves to the
    # simulation (a DLRM: variants/registry.needs_simulation), whose variants are all simulated.
    assert all(map(needs_simulation, calls))
    assert bool(calls) == needs_simulation(base.scenario())
    assert len(sens.rows) >= 5 and len(pts) >= 2
    for r in sens.rows:
        full = simulate(base.scenario(r.overrides))
        assert r.iteration_time_s == pytest.approx(full.iteration_time_s, rel=1e-9)
    for p in pts:
        full = simulate(open_base(name).scenario(p.overrides))
        assert p.figures["iteration_time_s"] == pytest.approx(full.iteration_time_s, rel=1e-9)
        assert p.figures["memory_GB_total"] == pytest.approx(full.memory.total / 1e9, rel=1e-9)
        assert p.figures["fits"] == (not full.memory_over_capacity)


def test_parameter_servers_read_the_fabric_in_one_nvlink_domain():
    """Parameter servers are reached through the fabric's NICs whatever the replicas' NVLink domain:
    a one-node parameter-server sweep over the NIC rate gives each row its own time (it gave every row
    the first row's 119.75 s), and the tornado's 2x scale-out row its real speedup (1.98x, not 1.0)."""
    base = open_base("parameter-server", {"cluster.nodes": 1})
    assert not unread_fields(base.scenario()) & set(NETWORK_FIELDS[2:6])
    res = sweep(base, {"cluster.scale_out.nic_Gbps": [1, 100, 400]}, links=False)
    got = [p.figures["iteration_time_s"] for p in res.points]
    want = [simulate(base.scenario({"cluster.scale_out.nic_Gbps": v})).iteration_time_s
            for v in (1, 100, 400)]
    assert got == pytest.approx(want, rel=1e-9) and got[0] > 20 * got[1] > 20 * got[2]
    # Overriding dp_kind keeps the fabric's fields: an all-reduce base in one domain, varied into
    # parameter servers, must not drop the NIC rate.
    plain = open_base("teaching-8gpu")
    ps = {"parallelism.dp_kind": "parameter-server"}
    rows = sweep(plain, {"parallelism.dp_kind": ["parameter-server"],
                         "cluster.scale_out.nic_Gbps": [10, 400]}, links=False).points
    assert rows[0].figures["iteration_time_s"] > rows[1].figures["iteration_time_s"]
    assert rows[1].figures["iteration_time_s"] == pytest.approx(
        simulate(plain.scenario({**ps, "cluster.scale_out.nic_Gbps": 400})).iteration_time_s, rel=1e-9)
    sens = {r.change: r for r in sensitivity(open_base("parameter-server", {"hardware.gpu": "gb200"})).rows}
    assert sens["2x scale-out bandwidth"].speedup == pytest.approx(1.983, abs=0.001)
