"""Unit conversions, each defined once.

Scenario fields carry their unit in their name (DESIGN.md, "Modelling principles"): network line
rates in gigabits per second (``nic_Gbps``, ``bandwidth_Gbps``), memory, NVLink and PCIe in
gigabytes per second (``hbm_GBps``, ``bandwidth_GBps``, ``pcie_GBps``), latencies in ``_us`` and
``_ms``.  The simulator computes in bytes and seconds; every conversion between the two goes
through a function here (tests/test_units.py fails on a conversion written out elsewhere).
GB = 1e9 bytes, as nccl-tests reports (doc/PERFORMANCE.md); a byte is 8 bits.
"""
from __future__ import annotations

GB = 1e9                 # bytes per gigabyte (decimal, as nccl-tests and NIC vendors count)
BITS_PER_BYTE = 8


def gbps_to_Bps(gbps: float) -> float:
    """Gigabits per second -> bytes per second (a NIC's or a WAN link's line rate).

    >>> gbps_to_Bps(400.0)          # one NDR NIC
    50000000000.0
    """
    return gbps * GB / BITS_PER_BYTE


def gbps_to_GBps(gbps: float) -> float:
    """Gigabits per second -> gigabytes per second (NCCL's search speeds are in GB/s).

    >>> gbps_to_GBps(200.0)
    25.0
    """
    return gbps / BITS_PER_BYTE


def GBps_to_Bps(GBps: float) -> float:
    """Gigabytes per second -> bytes per second (HBM, NVLink, PCIe).

    >>> GBps_to_Bps(900.0)
    900000000000.0
    """
    return GBps * GB


def us_to_s(us: float) -> float:
    """Microseconds -> seconds."""
    return us * 1e-6


def ms_to_s(ms: float) -> float:
    """Milliseconds -> seconds."""
    return ms * 1e-3
