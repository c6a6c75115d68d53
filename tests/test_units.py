"""Units once (explorer/units.py): gigabits and gigabytes per second become bytes per second in one
function each, each tier's rate is computed in the topology (network/topology.py: LineRates and the
Boundary built from it), and every view reads those rates instead of recomputing them."""
from __future__ import annotations

import re
from types import SimpleNamespace

import pytest

from explorer import units
from explorer.analysis.report import pcie_notice
from explorer.network.groups import Network, nccl_options
from explorer.network.topology import (
    SCALE_ACROSS_EFFICIENCY,
    SCALE_UP_EFFICIENCY,
    Fabric,
    LineRates,
    build_graph,
)
from explorer.scenario import from_dict
from explorer.ui.views.collective import links_of

from conftest import ROOT

# A link rate written out by hand: Gb/s to bytes (x 1e9 / 8 in any order, or / 8 alone to GB/s) and
# the NVLink/PCIe GB/s fields to bytes.
CONVERSION = re.compile(r"Gbps\s*\*\s*1e9|Gbps\s*/\s*8|1e9\s*/\s*8|/\s*8\s*\*\s*1e9|"
                        r"(?:bandwidth|pcie)_GBps\s*\*\s*1e9")


def test_each_conversion_has_one_definition():
    offenders = {str(p.relative_to(ROOT)) for p in (ROOT / "explorer").rglob("*.py")
                 if p.name != "units.py" and CONVERSION.search(p.read_text(encoding="utf-8"))}
    assert offenders == set()


def test_the_conversions():
    assert units.gbps_to_Bps(400.0) == 50e9          # an NDR NIC: 400 Gb/s = 50 GB/s
    assert units.gbps_to_GBps(200.0) == 25.0
    assert units.GBps_to_Bps(450.0) == 450e9
    assert (units.us_to_s(2.7), units.ms_to_s(2.0)) == (2.7e-6, 2e-3)


def scenario(**cluster):
    raw = {"model": {"layers": 4, "hidden": 1024, "heads": 8, "vocab": 1000, "seq_len": 512},
           "training": {"global_batch": 16, "micro_batch": 1},
           "hardware": {"gpu": {"name": "H100 SXM", "peak_tflops": 989, "memory_GB": 80, "hbm_GBps": 3350,
                                "pcie_GBps": 52.8}},
           "cluster": {"gpus_per_node": 8, "nodes": 4, "datacenters": 2,
                       "scale_up": {"bandwidth_GBps": 450, "latency_us": 0.6},
                       "scale_out": {"fabric": "ib-ndr", "nic_Gbps": 400, "nics_per_node": 8,
                                     "efficiency": 0.94, "latency_us": 2.7},
                       "scale_across": {"bandwidth_Gbps": 800, "latency_ms": 2.0}, **cluster},
           "parallelism": {"tp": 8, "pp": 1, "zero": 0}}
    return from_dict(raw)


def test_each_tiers_rate_is_the_topologys():
    """Closed forms: NVLink 450 GB/s x 0.77; 8 NICs of 400 Gb/s = 400 GB/s per node x 0.94; the WAN's
    800 Gb/s = 100 GB/s x 0.9; the line rates without the efficiencies."""
    sc = scenario()
    fab = Fabric.for_cluster(sc.cluster)
    assert fab.rates == LineRates(450e9, 50e9, 100e9)
    up, out, spine, wan = fab.boundaries
    assert (up.line_Bps, up.capacity_Bps) == (450e9, 450e9 * SCALE_UP_EFFICIENCY)
    assert (out.line_Bps, out.capacity_Bps, out.per_gpu_Bps) == (400e9, 400e9 * 0.94, 400e9 * 0.94 / 8)
    assert spine.capacity_Bps == spine.line_Bps * 0.94
    assert (wan.line_Bps, wan.capacity_Bps) == (100e9, 100e9 * SCALE_ACROSS_EFFICIENCY)
    assert (up.latency_s, out.latency_s, wan.latency_s) == (0.6e-6, 2.7e-6, 2e-3)
    # The WAN's links (wan.py) are the scale-across boundary's, float for float.
    assert fab.wan is not None and {link.capacity_Bps for link in fab.wan.links} == {wan.capacity_Bps}


def test_the_step_through_reads_the_topologys_rates():
    sc = scenario()
    fab = Fabric.for_cluster(sc.cluster)
    links = links_of(SimpleNamespace(scenario=sc))
    assert (links.alpha_in, links.beta_in) == (fab.boundaries[0].latency_s, fab.rates.scale_up_Bps)
    assert (links.alpha_out, links.beta_out) == (fab.boundaries[1].latency_s, fab.boundaries[1].per_gpu_Bps)
    assert links.beta_out == pytest.approx(47e9, rel=1e-15)      # 400 GB/s x 0.94 over 8 GPUs


def test_the_graph_and_the_library_model_read_the_topologys_rates():
    sc = scenario(nodes=2, datacenters=1)
    fab = Fabric.for_cluster(sc.cluster)
    g = build_graph(sc.cluster)
    by_tier: dict[str, set] = {}
    for u, v, d in g.edges(data=True):
        if {u.split("/")[0], v.split("/")[0]} != {"nic", "gpu"}:     # a NIC hangs off its GPU at NIC rate
            by_tier.setdefault(d["tier"], set()).add(d["capacity_Bps"])
    assert by_tier["scale-up"] == {fab.rates.scale_up_Bps}
    assert by_tier["scale-out"] == {fab.rates.nic_Bps}
    opts = nccl_options(sc)
    assert opts.pcie_Bps == units.GBps_to_Bps(52.8)
    assert opts.net_channels == 16                  # 8 NICs of 50 GB/s: two channels each (over 25 GB/s)


def test_the_pcie_warning_compares_with_the_topologys_nic_share():
    """52.8 GB/s of PCIe per GPU against 47 GB/s of NIC share: no warning; against two such nodes
    of 800 Gb/s NICs (94 GB/s per GPU) it names both numbers."""
    sc = scenario(nodes=2, datacenters=1)
    assert pcie_notice(sc, Network(sc)) is None
    xdr = {"fabric": "ib-xdr", "nic_Gbps": 800, "nics_per_node": 8, "efficiency": 0.94, "latency_us": 2.7}
    fast = scenario(nodes=2, datacenters=1, scale_out=xdr)
    got = pcie_notice(fast, Network(fast))
    assert got is not None and "(52.8 GB/s)" in got.message and "(94 GB/s)" in got.message
