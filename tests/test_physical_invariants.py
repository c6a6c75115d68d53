"""Property test (issue 32, DESIGN.md "Modelling principles"): over random valid scenarios every
utilisation of ``run --json`` (tiers and WAN links) and every fraction (MFU, bubble, breakdown
shares, a parameter server's NIC) lies in [0, 1], and with the ideal pipeline's free communication
every utilisation is 0.

The scenarios are tests/test_random_scenarios.random_raw's (every schedule, ZeRO stage, algorithm,
MoE, MLA, one or two datacenters), seeded by Hypothesis, with some of the options that replace the
scheduled iteration (gossip and parameter servers, windows of inner steps, stragglers) and the
ideal pipeline drawn on top.  Derandomized with a modest number of examples so CI is deterministic
and takes seconds.
"""
from __future__ import annotations

import json
import random

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from test_random_scenarios import random_raw

from explorer.scenario import ScenarioError, from_dict
from explorer.simulate import simulate

CI = settings(max_examples=250, derandomize=True, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
EPS = 1e-12

# What may replace the scheduled iteration (each option's own validation rejects what it cannot run).
REPLACING = st.sampled_from([
    {},
    {},
    {"parallelism": {"dp_kind": "gossip-ring", "zero": 0}},
    {"parallelism": {"dp_kind": "gossip-exponential", "zero": 0}},
    {"parallelism": {"dp_kind": "parameter-server", "zero": 0}},
    {"training": {"sync": {"kind": "diloco", "inner_steps": 8}}},
    {"training": {"sync": {"kind": "independent"}}},
    {"cluster": {"stragglers": {"count": 1, "slowdown": 1.5}}},
])


# Slow links, where a link rather than the schedule sets the pace (every reproduction of issue 32
# had one): scale-up GB/s, NIC Gb/s, WAN Gb/s; None keeps the generator's.
LINKS = st.tuples(st.sampled_from([None, None, 1.0, 0.01]), st.sampled_from([None, None, 1.0]),
                  st.sampled_from([None, None, 1.0]))


def _scenario(seed: int, extra: dict, ideal: bool, links: tuple = (None, None, None)):
    raw = random_raw(random.Random(seed))
    cl = raw["cluster"]
    up, nic, wan = links
    if up is not None:
        cl["scale_up"] = {"bandwidth_GBps": up}
    if nic is not None:
        cl["scale_out"]["nic_Gbps"] = nic
    if wan is not None:
        cl["scale_across"] = {"bandwidth_Gbps": wan}
    for section, fields in extra.items():
        for k, v in fields.items():
            raw[section][k] = {**raw[section].get(k, {}), **v} if isinstance(v, dict) else v
    raw["parallelism"]["ideal_pipeline"] = ideal
    try:
        return from_dict(raw)
    except ScenarioError:
        return None


def fractions(j: dict) -> dict[str, float]:
    """Every share of ``run --json`` ``j`` that is a fraction of something, by its JSON path."""
    T = j["iteration_time_s"]
    out = {"mfu": j["mfu"], "bubble_fraction": j["bubble_fraction"],
           "bubble_fraction_busiest": j["bubble_fraction_busiest"],
           **{f"breakdown_s.{k} / T": v / T for k, v in j["breakdown_s"].items()},
           **{f"utilisation.{k}": v for k, v in j["utilisation"].items()},
           **{f"tier_utilisation.{k}": v for k, v in j["tier_utilisation"].items()},
           **{f"wan_links.{w['a']}-{w['b']}": w["utilisation"] for w in j["wan_links"]}}
    if j.get("mfu_fp8_peak") is not None:
        out["mfu_fp8_peak"] = j["mfu_fp8_peak"]
    x = j.get("dp_exchange")
    if x:
        out["dp_exchange.server_nic_utilisation"] = x["server_nic_utilisation"]
    return out


@CI
@given(seed=st.integers(0, 2**32 - 1), extra=REPLACING, ideal=st.booleans(), links=LINKS)
@pytest.mark.slow
def test_every_utilisation_and_fraction_lies_in_zero_one(seed, extra, ideal, links):
    sc = _scenario(seed, extra, ideal, links)
    assume(sc is not None)
    try:
        r = simulate(sc)
    except ScenarioError:
        # A layout one group or replica alone cannot run is refused (one line) when simulated.
        assume(False)
    j = json.loads(json.dumps(r.to_json_dict()))                # what run --json prints
    bad = {k: v for k, v in fractions(j).items() if not -EPS <= v <= 1.0 + EPS}
    assert bad == {}, (seed, extra, ideal, links)
    # No time is negative either (a fraction's numerator).
    assert min(j["breakdown_s"].values()) >= 0.0 and j["iteration_time_s"] > 0
    if ideal:
        # The ideal pipeline's communication is free: it loads no link.
        loads = [v for k, v in fractions(j).items() if "utilisation" in k or k.startswith("wan_links")]
        assert all(v == 0.0 for v in loads), (seed, extra, links)
