"""The scale-across tier's section: the WAN between datacenters, its topology, per-pair links and
technology presets.

Today's model (before topologies existed) gave every datacenter one WAN egress of
``bandwidth_Gbps`` and drew the datacenters as a full mesh of such links (topology.build_graph).
A ring collective over the datacenters then crosses D of the D(D-1)/2 mesh links once each, one
datacenter's egress per link, which is exactly that egress model, so ``mesh`` is the default and
keeps every earlier result.  ``ring`` joins datacenter i to i+1 (and the last to the first); ``hub``
joins the first datacenter (the hub) to each other one.  How a collective's traffic is routed on
them is :mod:`explorer.network.wan`.
"""
from __future__ import annotations

from dataclasses import dataclass, field

WAN_TOPOLOGIES = ("mesh", "ring", "hub")

# Network-technology presets of the WAN (bandwidth per direction, one-way latency).  Light in
# standard single-mode fibre (ITU-T G.652, group index about 1.468) travels 1 km in 4.9 us.
# - metro-dwdm: a campus or metro DWDM line system of 16 waves of 400ZR (OIF 400ZR implementation
#   agreement, 2020: 400 Gb/s per wave over 80-120 km of amplified DCI fibre) = 6.4 Tb/s; about
#   100 km of fibre path, 0.5 ms (the metro campus: 0.1-1 ms).
# - long-haul: 4 coherent 400G waves leased on a long-haul optical route, 1.6 Tb/s; a
#   cross-continent path of about 6,000 km of fibre is 30 ms one way (issue: 30-80 ms).
# - cloud-inter-region: a cloud provider's backbone between neighbouring regions of one
#   geography, 400 Gb/s for the job, 5 ms one way (issue: a region 2-10 ms; e.g. AWS us-east-1 to
#   us-east-2 is about 12 ms round trip).
WAN_PRESETS: dict[str, dict[str, float]] = {
    "metro-dwdm": {"bandwidth_Gbps": 6400.0, "latency_ms": 0.5},
    "long-haul": {"bandwidth_Gbps": 1600.0, "latency_ms": 30.0},
    "cloud-inter-region": {"bandwidth_Gbps": 400.0, "latency_ms": 5.0},
}
WAN_PRESET_CHOICES = ("custom", *WAN_PRESETS)

_BANDWIDTH = {"min": 0.001, "max": 1e6, "why": "from 1 Mb/s to 1 Pb/s (a fibre pair carries about 50 Tb/s)"}
_LATENCY = {"min": 0, "max": 1e4, "why": "0 (idealised) to 10 s; a geostationary hop is 0.27 s"}


@dataclass(frozen=True)
class WanLink:
    """One WAN link between two datacenters, overriding the scale-across defaults for that pair."""

    a: str = field(default="", metadata={"required": True, "max_len": 200,
                                         "doc": "one end: a datacenter name or index"})
    b: str = field(default="", metadata={"required": True, "max_len": 200,
                                         "doc": "the other end: a datacenter name or index"})
    bandwidth_Gbps: float | None = field(default=None, metadata={
        **_BANDWIDTH, "doc": "per direction; default scale_across.bandwidth_Gbps"})
    latency_ms: float | None = field(default=None, metadata={
        **_LATENCY, "doc": "one-way; default scale_across.latency_ms"})


@dataclass(frozen=True)
class ScaleAcross:
    """The WAN between datacenters."""

    bandwidth_Gbps: float = field(default=400.0, metadata={
        **_BANDWIDTH, "doc": "between two datacenters, per direction"})
    latency_ms: float = field(default=5.0, metadata={**_LATENCY, "doc": "one-way WAN latency"})
    topology: str = field(default="mesh", metadata={
        "choices": WAN_TOPOLOGIES,
        "doc": "WAN links: mesh = every pair (today's model), ring = datacenter i to i+1 and the last "
               "to the first, hub = the first datacenter to each other one; a collective is limited by "
               "the slowest link its datacenter ring crosses (explorer/network/wan.py)"})
    preset: str = field(default="custom", metadata={
        "choices": WAN_PRESET_CHOICES,
        "doc": "WAN technology: sets bandwidth_Gbps and latency_ms where the scenario leaves them out "
               "(metro-dwdm 6400 Gb/s 0.5 ms, long-haul 1600 Gb/s 30 ms, cloud-inter-region 400 Gb/s "
               "5 ms; explorer/config/wan.py)"})
    links: tuple[WanLink, ...] = field(default=(), metadata={
        "max_items": 1024, "valid": "list of {a, b, bandwidth_Gbps, latency_ms}",
        "doc": "per-pair overrides [{a, b, bandwidth_Gbps, latency_ms}] by datacenter name or index; "
               "each must be a link of the topology"})


def topology_pairs(topology: str, dcs: int) -> tuple[tuple[int, int], ...]:
    """The WAN's links as (lower, higher) datacenter index pairs.

    >>> topology_pairs("ring", 4), topology_pairs("hub", 3), len(topology_pairs("mesh", 4))
    (((0, 1), (1, 2), (2, 3), (0, 3)), ((0, 1), (0, 2)), 6)
    """
    if dcs < 2:
        return ()
    if topology == "ring":
        pairs = [(i, i + 1) for i in range(dcs - 1)]
        return tuple(pairs + ([(0, dcs - 1)] if dcs > 2 else []))
    if topology == "hub":
        return tuple((0, k) for k in range(1, dcs))
    return tuple((a, b) for a in range(dcs) for b in range(a + 1, dcs))


def datacenter_index(end: str, names: tuple[str, ...], dcs: int) -> int | None:
    """The datacenter a link end names: a name of the list form first, else an index 0..dcs-1
    (``dc<i>``, the default name, is accepted too); None when it names none."""
    if end in names:
        return names.index(end)
    text = end[2:] if not names and end.startswith("dc") else end
    if text.isascii() and text.isdigit() and int(text) < dcs:
        return int(text)
    return None
