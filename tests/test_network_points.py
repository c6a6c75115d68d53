"""One call priced over many networks at once (explorer/network/points.py) equals collectives.cost of
each point bit for bit: NCCL's algorithm and protocol per point, its seconds, latency, limiting tier
and bytes.  Hypothesis draws the group's structure (members, members per domain, wiring, NCCL's
options) and per point the rates, latencies, NIC channels and the channels' cap; every comparison is
``==`` on the frozen CollectiveCost, floats included."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from explorer.network import collectives
from explorer.network.collectives import NcclOptions
from explorer.network.points import price_points
from explorer.network.topology import GroupShape

OPS = ("all-reduce", "all-gather", "reduce-scatter", "broadcast", "all-to-all", "send-recv")
ALGORITHMS = ("auto", "auto", "auto", "ring", "tree", "nvls", "nvls-tree", "collnet", "pat",
              "halving-doubling")


@st.composite
def _structure(draw):
    ppn = draw(st.sampled_from([1, 2, 4, 8, 72]))
    nodes = draw(st.sampled_from([1, 2, 3, 4, 16]))
    n = ppn * nodes
    per = [1, ppn]
    for _ in range(draw(st.integers(0, 2))):           # leaf blocks, datacenters: whole multiples
        per.append(per[-1] * draw(st.sampled_from([1, 2, 4])))
    per = [min(p, n) for p in per]
    return n, tuple(per), draw(st.sampled_from(["nvswitch", "nvlink-ring", "pcie"]))


@st.composite
def _case(draw):
    n, per, kind = draw(_structure())
    base = NcclOptions(library=draw(st.sampled_from(["nccl", "nccl", "nccl", "mpi"])),
                       protocol=draw(st.sampled_from(["auto", "auto", "LL", "LL128", "Simple"])),
                       arch=draw(st.sampled_from(["ampere", "hopper", "blackwell"])),
                       nvls=draw(st.booleans()), sharp=draw(st.booleans()), net_ll128=draw(st.booleans()),
                       nics_per_node=draw(st.sampled_from([0, 4, 8, 72])),
                       gpus_per_node=draw(st.sampled_from([0, per[1], 8])),
                       pcie_Bps=draw(st.sampled_from([float("inf"), 52.8e9])),
                       net_step_bytes=draw(st.sampled_from([512 * 1024.0, 8 * 2**20.0])))
    points = draw(st.integers(2, 12))
    rate = st.floats(1e8, 2e12)
    shapes, options = [], []
    for _ in range(points):
        shares = tuple(draw(rate) for _ in per)
        lats = tuple(draw(st.sampled_from([0.0, 6e-7, 3e-6, 2.7e-6, 4e-5, 5e-3])) for _ in per)
        shapes.append(GroupShape(n, per, shares, lats, kind))
        options.append(NcclOptions(**{**base.__dict__,
                                      "nic_GBps": draw(st.sampled_from([0.0, 12.5, 25.0, 50.0, 100.0])),
                                      "net_channels": draw(st.sampled_from([1, 2, 4, 8, 16])),
                                      "net_cap_Bps": draw(st.sampled_from([float("inf"), 5e10, 4e11]))}))
    size = draw(st.sampled_from([1024.0, 2.0**20, 6.4e7, 3e9]))
    return draw(st.sampled_from(OPS)), size, shapes, options, draw(st.sampled_from(ALGORITHMS))


@pytest.mark.slow          # (over 3 s: the slow tier's rule, README)
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_case())
def test_points_equal_the_scalar_cost_bit_for_bit(case):
    op, size, shapes, options, algorithm = case
    collectives.clear_costs()
    got = price_points(op, size, shapes, algorithm, False, options)
    collectives.clear_costs()
    want = [collectives.cost(op, size, sh, algorithm, False, o)
            for sh, o in zip(shapes, options, strict=True)]
    assert got == want


def test_points_are_stored_for_the_rows_that_ask_next(monkeypatch):
    """price_points fills cost's cache: asking cost afterwards prices nothing again."""
    per = (1, 8, 16)
    shapes = [GroupShape(32, per, (3e11, r, 2 * r), (6e-7, 2.7e-6, 2.7e-6))
              for r in np.linspace(1e10, 1e11, 7)]
    opts = [NcclOptions(nics_per_node=8, gpus_per_node=8, nic_GBps=50.0)] * len(shapes)
    collectives.clear_costs()
    got = price_points("all-reduce", 2.0**27, shapes, "auto", False, opts)
    calls = []
    real = collectives._price
    monkeypatch.setattr(collectives, "_price", lambda *a: calls.append(a) or real(*a))
    again = [collectives.cost("all-reduce", 2.0**27, sh, "auto", False, o)
             for sh, o in zip(shapes, opts, strict=True)]
    assert again == got and not calls
    # A faster NIC never makes the call slower, and NCCL's choice moves with it on this 4-node group.
    times = [c.time_s for c in got]
    assert times == sorted(times, reverse=True)


def test_a_network_sweep_prices_its_calls_together_and_the_same(monkeypatch):
    """estimate_overrides of rows that differ only in network fields primes their calls (prime.py)
    and gives exactly what pricing them row by row gives, on random networks of four datacenters
    (mesh, ring, hub) and of two."""
    from test_network_fast_path import _base_raw, _cold, _figures, _rows

    from explorer.estimate import estimate_overrides, prime

    real = prime.prime_networks
    for dcs, seed in ((4, 21), (2, 22)):
        raw, rows = _base_raw(dcs), _rows(seed, 40)
        _cold()
        with_points, why = estimate_overrides(raw, rows)
        assert all(w is None for w in why)
        counted: list[int] = []
        monkeypatch.setattr(prime, "prime_networks", lambda *a, _c=counted: _c.append(real(*a)) or 0)
        _cold()
        estimate_overrides(raw, rows)
        monkeypatch.setattr(prime, "prime_networks", lambda *a: 0)     # every call priced row by row
        _cold()
        one_by_one, _ = estimate_overrides(raw, rows)
        monkeypatch.setattr(prime, "prime_networks", real)
        assert counted and counted[0] > 40                            # each row's calls were primed
        assert [_figures(with_points, i) for i in range(len(rows))] == \
               [_figures(one_by_one, i) for i in range(len(rows))]
