"""NCCL's channels across nodes: how many its graph search gives a node's NICs (``net_channels``) and
how many a multi-node call then runs on (``run_channels``) — what the tuning model's per-channel caps
and the pipeline fill multiply or divide by (network/nccl_tuning.py re-exports these names)."""
from __future__ import annotations

# NCCL runs its collectives on 16 SMs by default, one channel per SM (nccl_tuning.DEFAULT_CHANNELS).
_SM_CHANNELS = 16

# Across nodes the tuning model multiplies the per-channel caps by the channels of the searched
# graph (graphs[a]->nChannels), not by the SMs: the search gives each channel one NIC, and
# ncclTopoCompute (src/graph/search.cc, NCCL 2.12-2.25) duplicates the channels, halving their
# bandwidth, only when a channel's bandwidth is >= 25 GB/s.  The searched bandwidth is the NIC's
# line rate rounded down to the search's speed ladder (speedArrayInter: ..., 30, 28, 24, ...), so
# HDR's 25 GB/s becomes 24: 200 Gb/s and 100 Gb/s NICs keep one channel per NIC, 400 Gb/s get two.
DUP_CHANNEL_GBPS = 25.0
# The NIC line rate from which the search's speed is at least DUP_CHANNEL_GBPS: the ladder's first step
# above 24 is 28, so a NIC between 25 and 28 GB/s is searched at 24 and keeps one channel.  (Compared
# with the line rate itself, 201 Gb/s doubled the channels and, at the same bandwidth, the pipeline
# fill of every call: an 11.6 MB all-gather 0.196 -> 0.237 ms for 1 % more NIC.)  At 28 GB/s itself the
# step remains, as NCCL takes it: two channels per NIC keep twice the chunks in flight through it, so a
# call of a few MB whose time is mostly the pipeline's fill is a little slower just above it (GraphSAGE's
# 1.1 MB gradient ring on 8 nodes 0.43 -> 0.46 ms at 200 -> 250 Gb/s; a few tenths of a percent of an
# iteration), and faster again as the NIC grows.
DUP_CHANNEL_LINE_GBPS = 28.0


def duplicates_channels(nic_GBps: float) -> bool:
    """Whether NCCL's graph search duplicates the channels of a NIC of ``nic_GBps`` line rate
    (DUP_CHANNEL_LINE_GBPS).

    >>> duplicates_channels(25.0), duplicates_channels(27.5), duplicates_channels(50.0)
    (False, False, True)
    """
    return nic_GBps >= DUP_CHANNEL_LINE_GBPS


# The channels a call really runs on across nodes are not the searched graph's: once the rings and trees are
# connected, ncclTopoPostset doubles them ("Duplication should be complete now": comm->nChannels =
# min(MAXCHANNELS, 2 x nChannels), src/graph/connect.cc, NCCL 2.12-2.29), each copy with the same NIC.  The
# tuning model keeps rating with the graph's channels (graphs[a]->nChannels x the per-channel caps above,
# tuning.cc), so NCCL chooses by those, while the per-channel caps of the kernels that run (a channel is one
# CTA; perChMaxTreeBw, perChMaxRingLL128Bw are per CTA) bind on twice as many.  MAXCHANNELS = 32 (MAXCHANNELS
# in src/include/device.h, NCCL 2.12+).
RUN_CHANNEL_FACTOR = 2
MAX_CHANNELS = 32


def run_channels(graph_channels: int) -> int:
    """Channels a multi-node call runs on for a searched graph of ``graph_channels`` channels
    (RUN_CHANNEL_FACTOR, at most MAX_CHANNELS).

    >>> run_channels(4), run_channels(16), run_channels(32)
    (8, 32, 32)
    """
    return min(RUN_CHANNEL_FACTOR * max(int(graph_channels), 1), MAX_CHANNELS)


def net_channels(nics_per_node: int, nic_GBps: float) -> int:
    """Channels of NCCL's multi-node graph for ``nics_per_node`` NICs of ``nic_GBps`` each
    (DUP_CHANNEL_GBPS), capped at the 16 SMs (nccl_tuning.DEFAULT_CHANNELS).

    >>> net_channels(4, 25.0), net_channels(4, 12.5), net_channels(8, 50.0)
    (4, 4, 16)
    """
    n = max(int(nics_per_node), 1)
    # A line rate below 28 GB/s is searched at 24 GB/s (comment above).
    return min(2 * n if duplicates_channels(nic_GBps) else n, _SM_CHANNELS)
