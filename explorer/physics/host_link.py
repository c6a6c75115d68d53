"""The link between a GPU and its host's memory (activation offload's copies, CPU optimizer
states): bytes per second per direction, by GPU preset unless the scenario gives it."""
from __future__ import annotations

from ..config import Scenario

# Host link per direction when hardware.gpu.pcie_GBps is not given, GB/s.
# PCIe Gen5 x16 pinned copies reach ~53 GB/s of the 64 GB/s per direction (the figure
# hardware.gpu.pcie_GBps documents; NVIDIA H100/B200 datasheets: PCIe Gen5, 128 GB/s both ways);
# A100: PCIe Gen4 x16, ~25 GB/s (same field's doc).  Grace-based GPUs reach the CPU's memory over
# NVLink-C2C, 900 GB/s both ways = 450 GB/s per direction (NVIDIA GB200 NVL72 / GH200 datasheets).
HOST_LINK_GBPS = {"a100-80gb": 25.0, "gh200": 450.0, "gb200": 450.0, "gb300": 450.0}
PCIE5_GBPS = 53.0


def host_link_Bps(sc: Scenario) -> float:
    """Bytes/s one GPU moves to or from host memory: hardware.gpu.pcie_GBps when set, else the
    preset's host link (NVLink-C2C on Grace-Blackwell, PCIe otherwise)."""
    gpu = sc.hardware.gpu
    own = getattr(gpu, "host_link_GBps", None) or gpu.pcie_GBps
    return 1e9 * (own or HOST_LINK_GBPS.get(gpu.origin or "", PCIE5_GBPS))
