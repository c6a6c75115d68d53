"""SMs that NCCL's collective kernels hold while they run beside compute: one CTA per channel.

NCCL runs a collective as one thread block (CTA) per channel, and a channel's CTA has an SM to
itself ("NCCL CTAs won't share an SM with compute kernels", NVIDIA/nccl issue #689, quoted in
#1656).  How many channels it opens follows the links it drives:

- inside an NVLink domain, two CTAs per NVLink are needed to saturate the links for large messages
  (NVIDIA/nccl issue #1703, AddyLaddy 2025; #1429: the channel count "is directly related to" the
  GPU's NVLinks), capped at NCCL's MAXCHANNELS = 32 (#1429).  Checks against logged runs: HGX A100,
  12 NVLinks -> 24 ("Channel 23/24", NVIDIA/nccl-tests issue #100); H800, 8 NVLinks -> "16 coll
  channels" (NVIDIA/nccl issue #892); H100, 18 NVLinks -> 36, capped at 32.
- a group that crosses the scale-out fabric runs its rings through the node's NICs, two channels
  per NIC: 16 on DGX-class H100 nodes with 8 NICs ("Channel 05/16" for a 24-rank ring over 3
  nodes, NVIDIA/nccl issue #1453); 2 on a node with a single NIC ("it should just launch 2 SMs",
  sjeaugey in NVIDIA/nccl issue #689, 2 being NCCL's minimum).

An NVLink of the 3rd and 4th generation carries 25 GB/s per direction (A100: 12 x 25 = 300 GB/s;
H100: 18 x 25 = 450 GB/s; NVIDIA A100/H100 datasheets), so the link count is read off the scale-up
bandwidth.  A box whose GPUs meet over PCIe has no NVLink to count: its rings run at NCCL's minimum
of 2 channels, as through one NIC (#689), whatever the PCIe link's rate (a hunt found a larger
scale-up bandwidth on a PCIe box taking 16 SMs from compute and slowing the step).

>>> nccl_channels(300.0, crosses_domain=False), nccl_channels(450.0, False), nccl_channels(200.0, False)
(24, 32, 16)
>>> nccl_channels(450.0, crosses_domain=True, nics_per_node=8), nccl_channels(450.0, True, 1)
(16, 2)
>>> nccl_channels(450.0, False, nvlink=False), nccl_channels(32.0, True, 8, nvlink=False)
(2, 2)
"""
from __future__ import annotations

NVLINK_GBPS_PER_LINK = 25.0     # per direction, NVLink 3/4 (NVIDIA A100 and H100 datasheets)
CTAS_PER_NVLINK = 2             # NVIDIA/nccl issue #1703
NCCL_MAX_CHANNELS = 32          # MAXCHANNELS (NVIDIA/nccl issue #1429)
CHANNELS_PER_NIC = 2            # 8 NICs -> 16 (NVIDIA/nccl #1453), 1 NIC -> 2 (#689)


def nccl_channels(scale_up_GBps: float, crosses_domain: bool, nics_per_node: int = 8,
                  nvlink: bool = True) -> int:
    """Channels (= SMs) of one NCCL ring collective on a GPU whose NVLinks carry ``scale_up_GBps``
    per direction; ``crosses_domain``: the group spans more than one NVLink domain, whose node
    has ``nics_per_node`` NICs; ``nvlink`` False: the scale-up links are PCIe (module docstring)."""
    links = max(1, round(scale_up_GBps / NVLINK_GBPS_PER_LINK)) if nvlink else 1
    intra = min(NCCL_MAX_CHANNELS, CTAS_PER_NVLINK * links)
    return min(intra, CHANNELS_PER_NIC * max(1, nics_per_node)) if crosses_domain else intra
