"""The estimator's memo tables (explorer/estimate) never change a result.

The estimator prices each piece once per key of what it reads (pricing/keys.py, chunk_basis.basis_key,
profile.py): rows of a sweep share chunk pieces, layouts, buckets and optimizer steps.  A key that
missed a field the price reads would hand one row another's price.  So: every row priced together
with many neighbours (shared, warm tables) equals the same row priced alone in emptied tables
(cold), bit for bit, on random valid scenarios and variants of each that differ in one priced field
(NIC bandwidth, dtype, ZeRO stage, micro-batch, collective algorithm); and a second pricing of the
same rows equals the first.
"""
from __future__ import annotations

import random

import numpy as np
import pytest
from test_random_scenarios import random_raw

from explorer.estimate import Estimates, estimate_many
from explorer.pricing.keys import clear
from explorer.scenario import ScenarioError, apply_overrides, from_dict
from explorer.simulate import simulate
from explorer.vocabulary import CATEGORIES

# One priced field changed at a time: each must reach the price it feeds.
CHANGES = [{"cluster.scale_out.nic_Gbps": 100}, {"cluster.scale_out.nic_Gbps": 800},
           {"training.dtype": "fp8"}, {"training.dtype": "bf16"}, {"parallelism.zero": 1},
           {"parallelism.zero": 2}, {"parallelism.zero": 3}, {"training.micro_batch": 2},
           {"communication.algorithm": "ring"}, {"parallelism.zero": 3, "communication.prefetch_layers": 0},
           {"parallelism.zero": 3, "communication.dp_overlap": False}, {"communication.tp_overlap": True}]


def _rows(seed: int, bases: int) -> list:
    rng = random.Random(seed)
    out = []
    while len(out) < bases * 3:
        raw = random_raw(rng)
        try:
            out.append(from_dict(raw))
        except ScenarioError:
            continue
        for ov in rng.sample(CHANGES, 3):
            try:
                out.append(from_dict(apply_overrides(raw, ov)))
            except ScenarioError:
                pass
    return out


def _fields(est: Estimates, i: int) -> list[float]:
    return [est.iteration_time_s[i], est.memory_GB_total[i], float(est.fits[i]), est.mfu[i],
            est.tokens_per_s[i], est.tflops_per_gpu[i], *(est.breakdown_s[k][i] for k in CATEGORIES)]


def _same(a: list[float], b: list[float]) -> bool:
    return bool(np.array_equal(np.array(a), np.array(b), equal_nan=True))


def test_shared_pricing_equals_cold_pricing_row_by_row():
    rows = _rows(7, 14)
    clear()
    shared = estimate_many(rows)
    again = estimate_many(rows)
    for i, sc in enumerate(rows):
        assert _same(_fields(shared, i), _fields(again, i)), sc.name
        clear()
        cold = estimate_many([sc])
        assert _same(_fields(shared, i), _fields(cold, 0)), (i, sc.name)


def test_fast_mode_shared_equals_cold():
    rows = _rows(11, 12)
    clear()
    shared = estimate_many(rows, exact=False)
    for i, sc in enumerate(rows):
        clear()
        assert _same(_fields(shared, i), _fields(estimate_many([sc], exact=False), 0)), (i, sc.name)


def test_a_priced_field_is_not_reused_across_scenarios():
    """Variants differing in the NIC bandwidth (data-parallel buckets cross nodes; TP groups inside a
    node share their pieces) or the dtype (every layer's time), priced right after their base, each
    equal the full simulation of their own scenario."""
    rng = random.Random(3)
    checked = 0
    while checked < 4:
        raw = random_raw(rng)
        raw["cluster"].update(nodes=2, datacenters=1)
        try:
            base = from_dict(raw)
            dtype = "fp8" if base.training.dtype == "bf16" else "bf16"
            rows = [base, from_dict(apply_overrides(raw, {"cluster.scale_out.nic_Gbps": 25})),
                    from_dict(apply_overrides(raw, {"training.dtype": dtype}))]
        except ScenarioError:
            continue
        clear()
        est = estimate_many(rows)
        for i, sc in enumerate(rows):
            assert est.iteration_time_s[i] == pytest.approx(simulate(sc).iteration_time_s, rel=1e-9), i
        checked += 1


def _check_classes(sc) -> int:
    """Every stage's group of every dimension has the shape of its class representative's."""
    from explorer.pricing.keys import network_key
    from explorer.pricing.stages import netinfo

    info = netinfo(sc, False, network_key(sc, False))
    net = info.net.net
    for dim, (cls, reps) in info.dims.items():
        for s, c in enumerate(cls.tolist()):
            assert net.fabric.shape(net.members(dim, s)) == net.fabric.shape(net.members(dim, reps[c])), \
                (sc.name, dim, s, reps[c])
    return sum(len(reps) for _, reps in info.dims.values())


def test_stage_classes_price_alike():
    """pricing/stages.py groups stages per dimension by offsets; each class's shapes are equal
    (checked against topology.Fabric.shape on every stage) on layouts whose stages straddle nodes,
    leaf blocks and datacenters."""
    from explorer.scenario import load_raw, shipped_scenarios

    raw = load_raw(shipped_scenarios()["llama3-405b-16k"])
    seen = 0
    for ov in [{"parallelism.tp": 4, "parallelism.pp": 32, "parallelism.order": "tp-pp-dp"},
               {"parallelism.tp": 2, "parallelism.pp": 16, "parallelism.cp": 2},
               {"parallelism.tp": 8, "parallelism.pp": 64, "parallelism.order": "tp-cp-dp-pp"},
               {"parallelism.tp": 1, "parallelism.pp": 8, "parallelism.order": "dp-tp-cp-pp"},
               {"parallelism.tp": 4, "parallelism.pp": 32, "cluster.scale_out.switch_radix": 8}]:
        try:
            sc = from_dict(apply_overrides(raw, {**ov, "parallelism.dp": None, "parallelism.vpp": 1,
                                                 "parallelism.schedule": "1f1b",
                                                 "parallelism.stage_layers": None}))
        except ScenarioError:
            continue
        seen += 1
        _check_classes(sc)
    assert seen >= 3
    rng = random.Random(5)
    for _ in range(60):
        try:
            sc = from_dict(random_raw(rng))
        except ScenarioError:
            continue
        _check_classes(sc)


SHAPES = [("1f1b", 8, 1, 32), ("interleaved", 4, 3, 16), ("zb-h1", 6, 1, 24), ("dualpipe", 4, 1, 8),
          ("gpipe", 5, 1, 8)]


@pytest.mark.parametrize("schedule,p,v,units", SHAPES)
def test_compacted_inputs_hold_every_input_of_every_op(schedule, p, v, units):
    """Program.order_src/widths (what the replay gathers) keep every input of every op: per op the
    same non-zero slots as src (in any order), nothing but the zero slot past its step's width, and
    each step's width is the most inputs one of its ops has (so the gather is as narrow as it can be)."""
    from explorer.pricing.program import compile_program

    prog = compile_program(schedule, p, v, units)
    src_o = prog.src[prog.order]
    assert prog.order_src.shape == src_o.shape
    for row_c, row in zip(prog.order_src.tolist(), src_o.tolist(), strict=True):
        assert sorted(x for x in row_c if x) == sorted(x for x in row if x)
    for k, w in enumerate(prog.widths):
        lo, hi = prog.bounds[k], prog.bounds[k + 1]
        block = prog.order_src[lo:hi]
        assert not block[:, w:].any()
        assert w == max(1, int((block > 0).sum(axis=1).max()))
    assert max(prog.widths) >= 2 and min(prog.widths) < 4      # a narrower gather than 4 slots happens


def test_shared_group_members_are_read_only():
    """Network._shape keeps one members array per (placement, dimension, stage, domain sizes) for
    every row of a sweep: a row that wrote into it would move another row's groups."""
    from explorer.network.groups import _PER_DOMAIN, Network

    sc = from_dict({"model": {"preset": "llama3-8b"}, "training": {"global_batch": 64},
                    "cluster": {"nodes": 4}, "parallelism": {"tp": 2, "pp": 2}})
    net = Network(sc)
    net.shape("dp", 1)
    members = [m for m, _, _ in _PER_DOMAIN.values()]
    assert members and all(not m.flags.writeable for m in members)


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b", "interleaved", "zb-h1", "zb-h2", "dualpipe",
                                      "pipedream-async", "1f1b-latency", "crosspipe"])
def test_live_counts_peak_is_the_registrys_replay_for_any_bytes(schedule):
    """The estimator's activation peak (memory.live_counts: the distinct live-count vectors of
    every stage, coded as integers and deduplicated for all stages at once) dotted with a row's
    bytes per chunk is the registry's own peak_activations replay of each stage's order."""
    from explorer.pricing.memory import live_counts
    from explorer.schedules.registry import get

    sched = get(schedule)
    rng = np.random.default_rng(7)
    # (Interleaved orders run a multiple of p units: validation asks for it.)
    for p, v, units in ((1, 1, 3), (2, 1, 5), (4, 1, 8), (4, 2, 8), (8, 1, 16), (4, 2, 12), (2, 4, 6)):
        if (v > 1) != (schedule == "interleaved") or (sched.two_directions and p % 2):
            continue
        live = live_counts(sched, p, units, v)
        for s in range(p):
            act = rng.uniform(1.0, 2.0, live.shape[2]).tolist()
            want = sched.peak_activations(sched.order(s, p, units, v), act)
            assert (live[s] @ np.array(act)).max() == pytest.approx(want, rel=1e-12), (p, v, units, s)


@pytest.mark.parametrize("exact", [True, False])
def test_rows_that_differ_only_in_memory_are_timed_once(monkeypatch, exact):
    """ZeRO 1 and ZeRO 2 shard different state (memory) but run the same buckets, gathers and step:
    the estimator evaluates their pipeline once (many.time_key), and each row still equals its own
    full simulation, its memory its own."""
    from explorer.estimate import many
    from explorer.scenario import load_raw, shipped_scenarios

    raw = load_raw(shipped_scenarios()["teaching-8gpu"])
    layout = {"parallelism.pp": 2, "parallelism.dp": None, "parallelism.stage_layers": None}
    rows = [from_dict(apply_overrides(raw, {**layout, "parallelism.zero": z})) for z in (1, 2, 1, 0)]
    evaluated = []
    real_run = many._run
    monkeypatch.setattr(many, "_run", lambda profs, jobs, keep: evaluated.append(len(jobs)) or
                        real_run(profs, jobs, keep))
    if not exact:
        from explorer.estimate import fast
        monkeypatch.setattr(fast, "_run", many._run)
    clear()
    est = estimate_many(rows, exact=exact)
    assert evaluated == [2]                     # ZeRO 1 (twice) and 2 share one evaluation; ZeRO 0 its own
    for i, sc in enumerate(rows):
        r = simulate(sc)
        assert est.iteration_time_s[i] == pytest.approx(r.iteration_time_s, rel=1e-9), i
        assert est.memory_GB_total[i] == pytest.approx(r.memory.as_GB()["total"], rel=1e-9), i
    assert est.memory_GB_total[1] < est.memory_GB_total[0]          # ZeRO 2 shards the gradients too
    assert est.iteration_time_s[0] == est.iteration_time_s[1] == est.iteration_time_s[2]


def test_rows_that_differ_in_link_speed_share_their_bucket_plans():
    """The cut of the gradients into buckets and tasks reads the parameters and the groups, not the
    links: rows that differ only in the NIC bandwidth make one plan (buckets._PLANS) and price its
    calls on their own network, so each still equals its own full simulation."""
    from explorer.pricing import buckets
    from explorer.scenario import load_raw, shipped_scenarios

    raw = load_raw(shipped_scenarios()["llama3-405b-16k"])
    rows = [from_dict(apply_overrides(raw, {"cluster.scale_out.nic_Gbps": g})) for g in (100, 200, 400, 800)]
    clear()
    estimate_many(rows[:1])
    plans = len(buckets._PLANS)
    assert plans > 0
    est = estimate_many(rows)
    assert len(buckets._PLANS) == plans
    times = [simulate(sc).iteration_time_s for sc in rows]
    assert est.iteration_time_s.tolist() == pytest.approx(times, rel=1e-9)
    assert times[0] > times[-1]                   # the slower NIC exposes more of the buckets
