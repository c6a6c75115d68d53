"""How much of a large NVLink domain's NICs one NCCL collective drives.

NCCL's inter-node graph gives each channel one NIC (its search is rail-aligned, "GPUi <-> NICi"), and
a channel that crosses the network leaves a node through that NIC only; the channels of a collective
are at most the graph's (explorer/network/nccl_tuning.net_channels: two per NIC at 400 Gb/s and above,
at most DEFAULT_CHANNELS).  On an 8-GPU server with 8 NICs every NIC carries channels.  A GB200 NVL72
rack is one NCCL node of 72 GPUs and 72 NICs (MNNVL, explorer/config/domains.py): the same 16 channels
reach only 8 of its NICs, so a ring, tree or NVLS-tree between racks leaves each rack through 8 NICs,
not 72 — the inter-rack step that an NVLink-only pricing skipped (issue 34, item 5).  Point-to-point
traffic (all-to-all, send/recv) goes from every GPU through its own NIC and is not capped.  Inside one
node nothing changes: its NICs are the calibrated ones (a p5's 32 EFA devices are bonded by the
aws-ofi-nccl plugin into one NCCL NIC per GPU, so the channel count says nothing about them).
"""
from __future__ import annotations

from dataclasses import replace

from ..units import gbps_to_Bps
from .nccl_tuning import DUP_CHANNEL_GBPS
from .topology import GroupShape


def channel_nics(nics: int, channels: int, nic_Gbps: float) -> int:
    """NICs of one NCCL node that ``channels`` channels use: one per channel, two channels per NIC
    when NCCL duplicates them (NIC line rate above DUP_CHANNEL_GBPS GB/s), at most ``nics``.

    >>> channel_nics(8, 16, 400), channel_nics(72, 16, 400), channel_nics(72, 16, 200)
    (8, 8, 16)
    """
    per_nic = 2 if nic_Gbps / 8 > DUP_CHANNEL_GBPS else 1
    return min(nics, max(channels // per_nic, 1))


def channel_nics_Bps(nics: int, channels: int, nic_Gbps: float, efficiency: float) -> float:
    """Achievable bytes/s out of one NCCL node (an NVLink domain) for one collective: the NICs its
    channels drive (:func:`channel_nics`) at the fabric's efficiency; infinite when they are all of
    the node's NICs (no cap beyond the fabric's own)."""
    used = channel_nics(nics, channels, nic_Gbps)
    return float("inf") if used >= nics else used * gbps_to_Bps(nic_Gbps) * efficiency


def capped_shape(sh: GroupShape, cap_Bps: float) -> GroupShape:
    """``sh`` with the egress of each domain above scale-up that it spans cut to ``cap_Bps`` per NVLink
    domain it holds (a leaf block of k domains: k times the cap), for one NCCL collective's channels."""
    shares = [sh.shares[0]]
    for b in range(1, len(sh.shares)):
        domains = sh.per_domain[b] / sh.per_domain[1]
        shares.append(min(sh.shares[b], cap_Bps * domains) if sh.spans(b) else sh.shares[b])
    return replace(sh, shares=tuple(shares))
