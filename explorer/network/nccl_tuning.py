"""NCCL's own tuning model: per-call latency of each (algorithm, protocol) and the bandwidth each
protocol keeps of the links, so that ``auto`` picks what NCCL picks.

Every constant below is read from NVIDIA/nccl ``src/graph/tuning.cc`` of the v2.23-v2.25 series
(the release that added PAT and Blackwell rows; called "NCCL 2.25" below) unless the comment says
otherwise.  Facts only: the model NCCL evaluates is, per collective, algorithm and protocol,

    time = latency + nBytes / algBw,    algBw = busBw(link, protocol refinements) * ratio

with ``latency = baseLat + (hops inside a node) x intra-node hwLat + (hops between nodes) x network
hwLat``.  :mod:`explorer.network.collectives` supplies the link-limited part (each algorithm's
registry entry, :mod:`explorer.collective_algorithms`) from the topology's boundary shares (so
contention, oversubscription and the WAN still set the bandwidth); this module turns it into
NCCL's per-protocol bandwidth and adds NCCL's latency.  Its tables are NCCL's, indexed by NCCL's own
algorithm rows (ring, tree, collnet-direct, collnet-chain, nvls, nvls-tree, pat); a registry entry
names the row its algorithm uses.

The two latency fields of a scenario play the role of NCCL's per-hop hardware latencies
(``hwLat``): ``cluster.scale_up.latency_us`` is the NVLink hop of the LL protocol (NCCL 2.25:
0.6 us) and ``cluster.scale_out.latency_us`` the network hop of the LL ring (NCCL 2.25: 2.7 us,
InfiniBand).  A scenario that sets them differently shifts every protocol's hop by the same
difference, the way NCCL adds a network plugin's reported latency (``graphs[a]->latencyInter``)
to its network hops, and twice to Simple's (its flush) — NCCL 2.25 tuning.cc.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np

from ..collective_algorithms.base import lesser
from ..config.generations import architecture_of_name, family

# The channels across nodes (network/net_channels.py), re-exported: nccl_tuning is where callers look.
from .net_channels import (  # noqa: F401
    DUP_CHANNEL_GBPS,
    DUP_CHANNEL_LINE_GBPS,
    MAX_CHANNELS,
    RUN_CHANNEL_FACTOR,
    duplicates_channels,
    net_channels,
    run_channels,
)

PROTOCOLS = ("LL", "LL128", "Simple")
# The GPU generations NCCL's tables distinguish (compCapIndex: Volta, Ampere, Hopper, Blackwell).
ARCHS = ("volta", "ampere", "hopper", "blackwell")

# baseLat [us] per algorithm and protocol (LL, LL128, Simple).  NVLS, NVLS-tree and CollNet have
# no base latency in NCCL 2.25; PAT's is a fixed 8 us (set in its own latency formula).
BASE_LAT_US = {
    "tree": (6.8, 14.0, 8.4), "ring": (6.6, 14.0, 8.4),
    "collnet-direct": (0.0, 0.0, 0.0), "collnet-chain": (0.0, 0.0, 0.0),
    "nvls": (0.0, 0.0, 0.0), "nvls-tree": (0.0, 0.0, 0.0), "pat": (8.0, 8.0, 8.0),
}
# hwLat [us] per hop: NVLink, PCI and network tables (NCCL 2.25).  0 where NCCL has no entry
# (those protocols are not offered for that algorithm).
HW_LAT_US = {
    "nvlink": {"tree": (0.6, 1.25, 4.0), "ring": (0.6, 1.9, 3.4), "collnet-direct": (0.0, 0.0, 3.7),
               "collnet-chain": (0.0, 0.0, 2.8), "nvls": (0.0, 0.0, 25.0), "nvls-tree": (0.0, 0.0, 25.0),
               "pat": (0.0, 0.0, 4.0)},
    "pci": {"tree": (1.0, 1.9, 4.0), "ring": (1.0, 2.5, 5.7), "collnet-direct": (0.0, 0.0, 3.7),
            "collnet-chain": (0.0, 0.0, 2.8), "nvls": (0.0, 0.0, 0.0), "nvls-tree": (0.0, 0.0, 0.0),
            "pat": (0.0, 0.0, 4.0)},
    "net": {"tree": (5.0, 8.5, 14.0), "ring": (2.7, 4.0, 14.0), "collnet-direct": (0.0, 0.0, 31.0),
            "collnet-chain": (0.0, 0.0, 30.0), "nvls": (0.0, 0.0, 18.0), "nvls-tree": (0.0, 0.0, 14.0),
            "pat": (0.0, 0.0, 14.0)},
}
# Point-to-point calls across nodes (send/recv, and the grouped sends of an all-to-all; NCCL's tuning model
# has no entry for them) go through both proxy threads, and a send waits for the receiver's credit
# (clear-to-send) before its RDMA write, which a collective's pipelined steps do not pay per call: they
# take P2P_NET_US besides the topology's hop latency.  Fitted to the one calibration row that shows it
# (togethercomputer/together-nccl-tests, B200 sendrecv_perf on 2 x 8 GPUs over NDR, NCCL 2.29: 35.0 us at
# 1 KiB = 2.7 us of network hop + 32.3 us); validation: the same sweep at 1-64 MiB and the 4-node run
# (reference/nccl_multinode.csv, nccl_latency.csv).  One cluster only: an older release or another fabric
# may hand off faster.  Inside a node the scenario's NVLink latency stays the whole of it, so that a
# scenario with cluster.scale_up.latency_us 0 keeps free transfers (the closed forms of the schedules).
P2P_NET_US = 32.3
# The defaults of the two scenario latency fields equal these NCCL hops (module docstring).
NVLINK_HOP_US = HW_LAT_US["nvlink"]["ring"][0]     # 0.6 us
NET_HOP_US = HW_LAT_US["net"]["ring"][0]           # 2.7 us
# Inter-node rings pay at least the CPU's network post overhead per step, x3 for Simple
# (getNetOverhead: 1 us on Intel x86, 2 us on AMD; Intel taken).
NET_OVERHEAD_US = 1.0
# Multi-node ring/Simple all-reduce latency x1.4 on Ampere and later ("plateau effect of ring",
# ncclTopoGetAlgoTime; 1.9 before Ampere) once each rank's share of a channel is >= 64 bytes.
RING_PLATEAU = {"volta": 1.9, "ampere": 1.4, "hopper": 1.4, "blackwell": 1.4}

# Bus-bandwidth caps [GB/s].  index2 = 0, 1, 2 for 1, 2, >= 3 nodes.  llMaxBws rows: on one node
# the GPU generation; across nodes the CPU vendor (Intel row = the Volta row), as NCCL does.
LL_MAX_BW = {"volta": (39.0, 39.0, 20.4), "ampere": (87.7, 22.5, 19.0),
             "hopper": (141.0, 45.0, 35.0), "blackwell": (282.0, 90.0, 70.0)}
PER_CH_RING_LL128 = {"volta": 20.0, "ampere": 20.0, "hopper": 36.7, "blackwell": 73.4}
PER_CH_TREE_LL128 = {"volta": (20.0, 20.0, 20.0), "ampere": (20.0, 20.0, 20.0),
                     "hopper": (36.7, 36.7, 29.0), "blackwell": (73.4, 73.4, 58.0)}
PER_CH_TREE = {"volta": (26.5, 18.5, 10.0), "ampere": (24.0, 23.6, 17.8),
               "hopper": (38.7, 41.4, 36.0), "blackwell": (77.4, 82.8, 72.0)}
# Channels: NCCL runs its collectives on 16 SMs by default (S. Jeaugey, NVIDIA/nccl issue #1649,
# 2025: "the default number of SMs is 16"), one channel per SM.  Only the per-channel caps use it.
DEFAULT_CHANNELS = 16

# Pipeline fill across the network.  NCCL moves each channel's share through the network in chunks of
# one protocol step: Simple's step is NCCL_BUFFSIZE / NCCL_STEPS = 4 MiB / 8 = 512 KiB (NCCL defaults;
# aws-ofi-nccl also sets 512 KiB NVLS/NVLS-tree chunks on p5, src/platform-aws.cpp), and a call whose data
# crosses nodes cannot finish before its first chunk has gone through every stage and its last has drained.
# NCCL's own model (time = latency + bytes / bandwidth) omits this; measured 1-64 MiB all-reduces across
# nodes show it (reference/nccl_multinode.csv).  The fill is PIPELINE_FILL_CHUNKS chunk-times of one network
# channel, chunks shrinking to size/channels for calls under one chunk per channel.  PIPELINE_FILL_CHUNKS = 2
# (one fill and one drain) fitted to the calibration rows of that table: 1-64 MiB calibration mean |error|
# 26 % -> 10 %; the plateau rows (>= 128 MiB) move by under 1 %.
NET_CHUNK_BYTES = 512 * 1024
PIPELINE_FILL_CHUNKS = 2.0


def pipeline_fill_s(size_bytes: float, channels: int, group_net_Bps: float,
                    node_fraction: float = 1.0, step_bytes: float = NET_CHUNK_BYTES) -> float:
    """Seconds a call of ``size_bytes`` spends filling and draining NCCL's chunk pipeline across nodes:
    PIPELINE_FILL_CHUNKS chunks of min(step_bytes, size / the group's channels), each at one network
    channel's bandwidth.  ``step_bytes``: the protocol's step (NET_CHUNK_BYTES, NCCL's default; a platform
    that sets NCCL_BUFFSIZE has BUFFSIZE / 8 for Simple, as aws-ofi-nccl's 8 MiB on EFA: fabrics.yaml).
    ``channels``: the node's network channels (net_channels); ``group_net_Bps``: the
    group's share of its node's network egress (bytes/s); ``node_fraction``: the share of the node's GPUs
    (and so of its NICs and channels) the group holds -- a channel's bandwidth is the node's over its
    channels whatever the group.  0 without a network bandwidth.

    >>> round(pipeline_fill_s(64 * 2**20, 16, 240e9) * 1e6, 1)   # 16 channels: 2 x 512 KiB at 15 GB/s
    69.9
    >>> round(pipeline_fill_s(64 * 2**20, 8, 24e9, 1 / 8) * 1e6, 1)   # 1 GPU of 8, 8 x HDR: 24 GB/s
    43.7
    """
    if isinstance(group_net_Bps, np.ndarray):     # many networks at once (network/points.py)
        return _pipeline_fill_many(size_bytes, np.asarray(channels), group_net_Bps, node_fraction, step_bytes)
    if group_net_Bps <= 0 or group_net_Bps == float("inf") or node_fraction <= 0:
        return 0.0
    node_channels = max(int(channels), 1)
    channel_Bps = group_net_Bps / node_fraction / node_channels
    group_channels = max(node_channels * node_fraction, 1.0)
    return PIPELINE_FILL_CHUNKS * min(step_bytes, size_bytes / group_channels) / channel_Bps


# Pipeline fill inside one node.  The same chunked pipeline runs over NVLink: a call's data moves through
# its DEFAULT_CHANNELS channels in protocol steps, and the first step has to go round before the steady
# rate holds.  NCCL's model (time = latency + bytes / bandwidth) omits this too, and one-node nccl-tests
# curves show it: at 4-64 MiB all_reduce reaches 20-45 % less bus bandwidth than that model gives on A100
# (ring) and H100 (NVLS), while it agrees within 2 % from 1 GiB (reference/nccl_multinode.csv, nodes 1).
# The fill is NVLINK_FILL_CHUNKS step-times of one channel at the call's bus bandwidth, with steps of
# min(STEP_BYTES[protocol], size / channels).  A step's payload per channel (NCCL defaults,
# src/include/device.h; NCCL_STEPS = 8 steps per buffer): Simple NCCL_BUFFSIZE 4 MiB / 8 = 512 KiB; LL
# 8 lines x 512 threads x 16 B per step = 64 KiB of lines, half of it flags; LL128 120 x 640 x 8 B =
# 600 KiB of lines, 120/128 of it data.  NVLINK_FILL_CHUNKS is part of the single global refit (with
# hardware.GEMM_FRACTION_OF_MEASURED) over every calibration row of bench/calibrate.py: on the one-node rows
# alone (Azure/AI-benchmarking-guide ND H100 v5 and ND A100 v4, 1 MiB-8 GiB) minimax gives 1.8 (max |error|
# 17.7 %); 1.2 (max 25.8 % there) also keeps Megatron SC21 Table 1, whose TP all-reduces of 12-50 MiB on A100
# it slows, within 5 % and NeMo's rows within 21 %.  The fill counts passes: an all-reduce (NCCL's ring and
# NVLS kernels alike) is a reduce-scatter pass then an all-gather pass, each filling its pipeline, and the
# fitted 1.2 is the all-reduce's two; all-gather, reduce-scatter, broadcast, reduce and the point-to-point
# all-to-all make one pass and pay half (fill_hops).  Not fitted to them: on the one-node all-gather and
# reduce-scatter curves of together-nccl-tests and xxrjun/nccl-tests-cluster (NCCL 2.26-2.29, validation)
# this takes 16 MiB from -32 % to -20 % and 64 MiB from -9 % to -3 %, and all-to-all at 64 MiB from +24 %
# to +15 %.
def _pipeline_fill_many(size_bytes: float, channels: np.ndarray, group_net_Bps: np.ndarray,
                        node_fraction: float, step_bytes: float) -> np.ndarray:
    """:func:`pipeline_fill_s` elementwise over network points (the same operations in the same order)."""
    out = np.zeros(group_net_Bps.shape)
    ok = (group_net_Bps > 0) & (group_net_Bps != float("inf"))
    if node_fraction <= 0 or not ok.any():
        return out
    node_channels = np.maximum(channels.astype(np.int64), 1)
    channel_Bps = group_net_Bps[ok] / node_fraction / node_channels[ok]
    group_channels = np.maximum(node_channels[ok] * node_fraction, 1.0)
    out[ok] = PIPELINE_FILL_CHUNKS * np.minimum(step_bytes, size_bytes / group_channels) / channel_Bps
    return out


STEP_BYTES = {"LL": 32 * 1024, "LL128": 576_000, "Simple": NET_CHUNK_BYTES}
NVLINK_FILL_CHUNKS = 1.2
# The calibration rows are 8-GPU nodes; a shorter ring has fewer hops to fill (fill_hops).
FILL_RING_GPUS = 8


def node_fill_s(size_bytes: float, bus_GBps: float, protocol: str = "Simple", hops: float = 1.0,
                channels: int = DEFAULT_CHANNELS) -> float:
    """Seconds a call of ``size_bytes`` inside one node spends filling and draining its chunk pipeline:
    NVLINK_FILL_CHUNKS steps of min(STEP_BYTES[protocol], size / channels), each at one channel's share of
    the call's bus bandwidth ``bus_GBps`` (GB/s), times ``hops``: the call's pipeline depth relative to the
    calibration's (1 for NVLS and for a ring of FILL_RING_GPUS; a ring of n GPUs fills through n - 1 hops,
    so (n - 1) / (FILL_RING_GPUS - 1)).  0 without a bandwidth.

    >>> round(node_fill_s(64 * 2**20, 480.0) * 1e6, 1)   # 1.2 x 512 KiB at 30 GB/s per channel
    21.0
    """
    if isinstance(bus_GBps, np.ndarray):          # many networks at once (network/points.py)
        out = np.zeros(bus_GBps.shape)
        ok = (bus_GBps > 0) & (bus_GBps < float("inf"))
        ch = np.broadcast_to(np.maximum(np.asarray(channels).astype(np.int64), 1), bus_GBps.shape)[ok]
        step_many = np.minimum(STEP_BYTES.get(protocol, NET_CHUNK_BYTES), size_bytes / ch)
        out[ok] = NVLINK_FILL_CHUNKS * hops * step_many / (bus_GBps[ok] * 1e9 / ch)
        return out
    if not 0 < bus_GBps < float("inf"):
        return 0.0
    channels = max(int(channels), 1)
    step = min(STEP_BYTES.get(protocol, NET_CHUNK_BYTES), size_bytes / channels)
    return NVLINK_FILL_CHUNKS * hops * step / (bus_GBps * 1e9 / channels)


def fill_hops(ring_pipeline: bool, n: int, op: str = "all-reduce") -> float:
    """The pipeline depth of an algorithm on ``n`` GPUs for ``op`` relative to the calibration's 8-GPU
    all-reduce: a ring's n - 1 hops over an 8-GPU ring's, (n - 1) / (FILL_RING_GPUS - 1), when the
    algorithm's chunks run around a ring (``ring_pipeline``, its registry entry's), 1 for the other
    algorithms (NVLS); times the passes of the operation over the calibration's two (an all-reduce is a
    reduce-scatter pass then an all-gather pass, in NCCL's ring and NVLS kernels alike; the other
    operations make one pass).

    >>> fill_hops(True, 8), fill_hops(True, 2) * 7, fill_hops(False, 8), fill_hops(True, 8, "reduce")
    (1.0, 1.0, 1.0, 0.5)
    """
    passes = 2 if op == "all-reduce" else 1
    return (max(n - 1, 0) / (FILL_RING_GPUS - 1) if ring_pipeline else 1.0) * passes / 2


# Protocol refinements of the link bandwidth (NCCL 2.25): ring LL keeps 1/2, ring LL128 0.92
# (120/128 of each 128-byte line carries data), tree 0.92 then LL 1/3.8 and LL128 7/9 on one node
# or 120/128 across nodes, PAT 0.75; CollNet Direct 0.85 on Hopper and later.
RING_LL, RING_LL128, TREE_FRACTION, TREE_LL, PAT_FRACTION = 0.5, 0.92, 0.92, 1 / 3.8, 0.75
TREE_LL128_ONE_NODE, TREE_LL128_NODES = 7 / 9, 120 / 128
# One GPU per node (ppn < 2) sends and receives its node's network traffic through its own NIC and PCIe link
# (tuning.cc: "if ppn < 2, then we are sending/receiving at the same GPU through the NIC, apply some bw
# discount"): ring LL128 keeps 0.7 instead of 0.92, and the tree graph's search falls back to the TREE pattern
# ("All NIC traffic going to/from the same GPU": search.cc, ``if (ngpus == 1) ... pattern = TREE``), which
# ncclTopoTuneModel rates x0.85 (NCCL 2.19-2.29).  NCCL measured these discounts; they price the run too.
RING_LL128_ONE_PPN, TREE_PATTERN_ONE_GPU = 0.7, 0.85
COLLNET_HOPPER = 0.85
# treeCorrectionFactor[protocol][log2(nBytes/64)], 64 B to 256 MiB (NCCL 2.25): trees fall short
# of their model at medium sizes.
TREE_CORRECTION = {
    "LL": (1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9,
           1.0, 1.0, 1.0, 1.0),
    "LL128": (1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9,
              .9, .9, 1.0, 1.0),
    "Simple": (.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7,
               .7, .8, .9, .9),
}


def gpu_arch(name: str, peak_tflops: float = 0.0, fp8_tflops: float | None = None) -> str:
    """NCCL's tuning generation (tuning.cc, by compute capability: Turing in Volta's, Ada in
    Ampere's) of the model number in a GPU's name (config/generations.py); an unknown name is
    hopper when it has an FP8 rate above its BF16 peak, ampere otherwise.

    >>> gpu_arch("A100 80GB SXM"), gpu_arch("NVIDIA B200"), gpu_arch("T4"), gpu_arch("L40S", 362, 733)
    ('ampere', 'blackwell', 'volta', 'ampere')
    """
    arch = architecture_of_name(name)
    if arch is not None:
        return family(arch)
    return "hopper" if fp8_tflops is not None and fp8_tflops > peak_tflops > 0 else "ampere"


def node_index(nodes: int) -> int:
    """NCCL's index2 into the cap tables: 0, 1, 2 for 1, 2, >= 3 nodes."""
    return 0 if nodes <= 1 else 1 if nodes == 2 else 2


def log2i(x: int) -> int:
    """floor(log2(x)) for x >= 1 (NCCL's log2i); 0 for x < 1."""
    return max(int(x).bit_length() - 1, 0)


def tree_correction(protocol: str, size_bytes: float) -> float:
    """treeCorrectionFactor of NCCL's tree all-reduce at this size (1 beyond the table)."""
    idx = log2i(int(size_bytes) >> 6)
    table = TREE_CORRECTION[protocol]
    return table[idx] if int(size_bytes) >> 6 >= 1 and idx < len(table) else 1.0


def refine_bus_bw(algo: str, proto: str, bus_bw: float, arch: str, nodes: int, ppn: int,
                  channels: int = DEFAULT_CHANNELS) -> float:
    """NCCL's per-protocol bus bandwidth [GB/s] from the link-limited one (``bus_bw``, i.e.
    Simple at 100 % of the links): the "model refinements" of ncclTopoTuneModel, NCCL 2.25.
    ``channels`` multiplies the per-channel caps: the searched graph's when NCCL rates a choice, the
    channels the call runs on (:func:`run_channels`) when it prices the run.  ``bus_bw`` and
    ``channels`` may be arrays of network points (network/points.py): the caps apply elementwise."""
    i2 = node_index(nodes)
    ll_max = LL_MAX_BW[arch if nodes == 1 else "volta"][i2]
    if algo == "ring":
        if proto == "LL":
            return lesser(ll_max, bus_bw * RING_LL)
        if proto == "LL128":
            frac = RING_LL128_ONE_PPN if ppn < 2 else RING_LL128
            return lesser(bus_bw * frac, channels * PER_CH_RING_LL128[arch])
        return bus_bw
    if algo == "tree":
        bw = lesser(bus_bw * TREE_FRACTION, channels * PER_CH_TREE[arch][i2])
        if proto == "LL":
            bw = lesser(bw * TREE_LL, ll_max)
        elif proto == "LL128":
            frac = TREE_LL128_ONE_NODE if nodes == 1 else TREE_LL128_NODES
            bw = lesser(bw * frac, channels * PER_CH_TREE_LL128[arch][i2])
        return bw * pattern_discount(algo, ppn)
    if algo == "pat":
        return bus_bw * PAT_FRACTION
    if algo == "collnet-direct" and arch in ("hopper", "blackwell"):
        return bus_bw * COLLNET_HOPPER
    return bus_bw


def pattern_discount(algo: str, ppn: int) -> float:
    """NCCL's discount of its tree when one GPU per node (``ppn`` < 2) carries all of the node's network
    traffic both ways (TREE_PATTERN_ONE_GPU); 1 otherwise.

    >>> pattern_discount("tree", 1), pattern_discount("tree", 8), pattern_discount("ring", 1)
    (0.85, 1.0, 1.0)
    """
    return TREE_PATTERN_ONE_GPU if algo == "tree" and ppn < 2 else 1.0


def protocols_for(row: str, op: str, ll128: bool) -> tuple[str, ...]:
    """Protocols NCCL 2.25 offers for its algorithm ``row``: NVLS, NVLS-tree, CollNet and PAT run
    Simple only; LL128 only where NCCL enables it (NVLink inside the node; ``ll128`` False otherwise)."""
    if row in ("nvls", "nvls-tree", "collnet", "collnet-direct", "collnet-chain", "pat"):
        return ("Simple",)
    return PROTOCOLS if ll128 else ("LL", "Simple")


def forced_protocols(row: str, protocol: str, offered: tuple[str, ...]) -> tuple[str, ...]:
    """What NCCL runs ``row`` with when NCCL_PROTO forces ``protocol``: the ring and the tree take it
    even where NCCL would not enable it by default; the other algorithms only among ``offered``."""
    return (protocol,) if (protocol in offered or row in ("ring", "tree")) else ()


def _hop(table: str, algo: str, proto: str, shift_us: float, simple_twice: bool = False) -> float:
    base = HW_LAT_US[table][algo][PROTOCOLS.index(proto)]
    return max(0.0, base + shift_us * (2 if simple_twice and proto == "Simple" else 1))


@lru_cache(maxsize=1 << 14)     # pure in a few scalars: a network sweep's rows ask it alike
def latency_us(algo: str, proto: str, op: str, n: int, nodes: int, intra: str, up_shift_us: float,
               net_shift_us: float, arch: str) -> float:
    """NCCL 2.25's latency [us] of one call of ``op`` by ``algo``/``proto`` on ``n`` ranks over
    ``nodes`` nodes (equal ranks per node), before the ring plateau factor.

    ``intra``: "nvlink" or "pci" (NCCL's intra-node table); ``up_shift_us``/``net_shift_us``: the
    scenario's NVLink/network hop minus NCCL's (module docstring).
    """
    p = PROTOCOLS.index(proto)
    ppn = n // max(nodes, 1)
    intra_lat = _hop(intra, algo, proto, up_shift_us)
    # With one rank per node latencies are fully exposed: NCCL then uses the tree's network hop.
    inter_lat = _hop("net", "tree" if ppn == 1 else algo, proto, net_shift_us, simple_twice=True)
    base = BASE_LAT_US[algo][p]
    if algo == "ring":
        if op in ("broadcast", "reduce"):
            # A pipelined chain: n hops of the outer hardware; NCCL charges Simple chunks the tree's hop.
            hw = "net" if nodes > 1 else intra
            hop = _hop(hw, "tree" if proto == "Simple" else "ring", proto,
                       net_shift_us if nodes > 1 else up_shift_us, simple_twice=nodes > 1)
            return base + n * hop
        steps = 2 * (n - 1) if op == "all-reduce" else n - 1
        inter_steps = 0 if nodes == 1 else (2 * (nodes - 1) if op == "all-reduce" else nodes - 1)
        if nodes > 1:
            intra_lat = max(intra_lat, NET_OVERHEAD_US * (3 if proto == "Simple" else 1))
        return base + (steps - inter_steps) * intra_lat + inter_steps * inter_lat
    if algo == "tree":
        return base + 2 * ((ppn - 1) * intra_lat + log2i(nodes) * inter_lat)
    if algo == "collnet-direct":
        # 0.4 us of arity serialisation per extra local rank (NCCL 2.25).
        return base + 2 * (min(1, ppn - 1) * intra_lat + (ppn - 1) * 0.4) + inter_lat
    if algo == "collnet-chain":
        return base + 2 * (ppn - 1) * intra_lat + inter_lat
    if algo == "nvls":
        return intra_lat + (inter_lat if nodes > 1 else 0.0)
    if algo == "nvls-tree":
        return base + intra_lat + 2 * log2i(nodes) * inter_lat
    if algo == "pat":
        # Fixed 8 us, a logarithmic network part and a linear part per rank (NCCL 2.25).
        return base + log2i(nodes) * inter_lat / 3.5 + n * 2.8
    raise ValueError(f"no NCCL latency model for {algo!r}")


def ring_plateau(op: str, proto: str, nodes: int, n: int, size_bytes: float, arch: str,
                 channels: int = DEFAULT_CHANNELS) -> float:
    """NCCL's multi-node ring/Simple all-reduce latency multiplier (ncclTopoGetAlgoTime)."""
    if op == "all-reduce" and proto == "Simple" and nodes > 1 and size_bytes / (channels * n) >= 64:
        return RING_PLATEAU[arch]
    return 1.0


def latency_factor(row: str, op: str, proto: str, nodes: int, n: int, size_bytes: float, arch: str,
                   channels: int = DEFAULT_CHANNELS) -> float:
    """NCCL's latency multiplier of its algorithm ``row``: the ring's plateau (:func:`ring_plateau`),
    1 for the others (ncclTopoGetAlgoTime applies it to NCCL_ALGO_RING only)."""
    return ring_plateau(op, proto, nodes, n, size_bytes, arch, channels) if row == "ring" else 1.0


def bandwidth_correction(row: str, proto: str, size_bytes: float) -> float:
    """NCCL's bandwidth correction of its algorithm ``row``: treeCorrectionFactor for the tree
    (:func:`tree_correction`), 1 for the others."""
    return tree_correction(proto, size_bytes) if row == "tree" else 1.0
