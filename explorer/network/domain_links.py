"""How much of a large NVLink domain's NICs one NCCL collective drives.

NCCL's inter-node graph gives each channel one NIC (its search is rail-aligned, "GPUi <-> NICi"), and
a channel that crosses the network leaves a node through that NIC only; the channels of a collective
are at most the graph's (explorer/network/nccl_tuning.net_channels: two per NIC at 400 Gb/s and above,
at most DEFAULT_CHANNELS).  On an 8-GPU server with 8 NICs every NIC carries channels.  A GB200 NVL72
rack is one NCCL node of 72 GPUs and 72 NICs (MNNVL, explorer/config/domains.py): the same 16 channels
reach only 8 of its NICs, so a ring, tree or NVLS-tree between racks leaves each rack through 8 NICs,
not 72 — the inter-rack step that an NVLink-only pricing skipped (issue 34, item 5).  Point-to-point
traffic (all-to-all, send/recv) goes from every GPU through its own NIC and is not capped.  Several
NICs of one GPU count as one NCCL NIC of their summed rate (the aws-ofi-nccl plugin bonds a p5's 32
EFA devices into one NIC per GPU), so a node with a NIC or more per GPU and at most 8 GPUs drives all
its NICs, as before; the cap binds only where a node or domain has more GPUs (and NICs) than the
channels reach, whether it is written as 72-GPU nodes or as 4-GPU trays in a 72-GPU domain.
"""
from __future__ import annotations

from dataclasses import replace

from ..units import gbps_to_Bps, gbps_to_GBps
from .nccl_tuning import duplicates_channels
from .topology import GroupShape


def channel_nics(nics: int, channels: int, nic_Gbps: float) -> int:
    """NICs of one NCCL node that ``channels`` channels use: one per channel, two channels per NIC
    when NCCL duplicates them (nccl_tuning.duplicates_channels), at most ``nics``.

    >>> channel_nics(8, 16, 400), channel_nics(72, 16, 400), channel_nics(72, 16, 200)
    (8, 8, 16)
    """
    per_nic = 2 if duplicates_channels(gbps_to_GBps(nic_Gbps)) else 1
    return min(nics, max(channels // per_nic, 1))


def channel_nics_Bps(gpus: int, nics: int, channels: int, nic_Gbps: float, efficiency: float) -> float:
    """Achievable bytes/s out of one NCCL node (an NVLink domain of ``gpus`` GPUs and ``nics`` NICs)
    for one collective: the NCCL NICs its channels drive (:func:`channel_nics`; NICs beyond one per
    GPU are bonded into it) at the fabric's efficiency; infinite when they are all of the node's NICs
    (no cap beyond the fabric's own).

    >>> channel_nics_Bps(8, 32, 16, 100, 1.0), channel_nics_Bps(72, 72, 16, 400, 1.0) / 1e9
    (inf, 400.0)
    """
    nccl_nics = min(nics, gpus)
    rate = nic_Gbps * nics / nccl_nics
    # Two channels share a NIC when the graph was searched over NICs fast enough to duplicate them:
    # the raw NICs net_channels counted, not the bonded rate (9 x 200 Gb/s NICs on 8 GPUs: 9
    # channels over 25 GB/s NICs, not two each on 28.1 GB/s bonds, which drove 4 of 8 and cut a
    # reduce-scatter from 188 to 106 GB/s).
    used = channel_nics(nccl_nics, channels, nic_Gbps)
    return float("inf") if used >= nccl_nics else used * gbps_to_Bps(rate) * efficiency


def capped_shape(sh: GroupShape, cap_Bps: float) -> GroupShape:
    """``sh`` with the egress of each domain above scale-up that it spans cut to ``cap_Bps`` per NVLink
    domain it holds (a leaf block of k domains: k times the cap), for one NCCL collective's channels."""
    shares = [sh.shares[0]]
    for b in range(1, len(sh.shares)):
        domains = sh.per_domain[b] / sh.per_domain[1]
        shares.append(min(sh.shares[b], cap_Bps * domains) if sh.spans(b) else sh.shares[b])
    return replace(sh, shares=tuple(shares))
