"""An nccl-tests-like table for one collective on a scenario's cluster (``python -m explorer
collective``, bench/calibrate.py).

Rows carry what nccl-tests' ``all_reduce_perf`` prints: size, time, algorithm bandwidth and bus
bandwidth (GB = 1e9 bytes), plus NCCL's algorithm and protocol chosen (``none`` for point-to-point
and MPI/Gloo) and the tier that limits it.

nccl-tests times a loop of back-to-back calls, so a row is the slower of the GPUs' time for one call and
the host's time to launch it.  With ``-g G`` one thread drives G GPUs and launches G kernels per call,
one after another (nccl-tests README: ``-g`` = GPUs per thread).  With the usual one process per GPU
(``-g 1``, as training runs) the floor is one launch, which only the shortest calls (a send/recv of up
to about 1 MiB inside a node) do not hide.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..collective_algorithms import registry
from ..config.domains import effective_domain
from ..config.schema import ScenarioError, excerpt
from ..config.sections import Scenario
from .collectives import OPS, bus_factor, cost
from .groups import nccl_options
from .p2p_flows import flow_shape, hop_flows
from .topology import Fabric

# Host time to launch one GPU's kernel of a collective call from a thread that drives several GPUs
# [us].  Fitted to the one calibration row where launching binds: Azure/AI-benchmarking-guide's ND H100
# v5 all_reduce_perf -g 8 at 1 MiB, 42.0 us per call (reference/nccl_multinode.csv), = 8 x 5.25 us; the
# validation curves run the same way flatten at the same floor (togethercomputer/together-nccl-tests
# all_gather/reduce_scatter -g 8: 41.3-41.8 us from 1 to 4 MiB; Azure ND H200 v5, NCCL 2.20: 34.6 us).
HOST_LAUNCH_US = 5.25


def host_floor_s(gpus_per_thread: int) -> float:
    """Seconds one thread needs to launch a call on each of its ``gpus_per_thread`` GPUs: the shortest
    time per call a back-to-back loop can show.

    >>> round(host_floor_s(8) * 1e6, 1), round(host_floor_s(1) * 1e6, 2)
    (42.0, 5.25)
    """
    return gpus_per_thread * HOST_LAUNCH_US * 1e-6


def _check(sc: Scenario, op: str, ranks: int, algorithm: str) -> None:
    """One-line ScenarioError on the CLI option that asks for something the cluster cannot do."""
    if op not in OPS:
        raise ScenarioError("--op", f"{excerpt(op)} is not one of {', '.join(OPS)}")
    if not 1 <= ranks <= sc.gpus:
        raise ScenarioError("--ranks", f"{ranks} must be between 1 and the cluster's {sc.gpus} GPUs")
    valid = (registry.AUTO,) + tuple(a.name for a in registry.for_op(op))
    if algorithm not in valid:
        raise ScenarioError("--algorithm", f"{excerpt(algorithm)} is not available for {op} "
                            f"(valid: {', '.join(valid)})")
    nvls = sc.hardware.gpu.nvlink_sharp and sc.cluster.scale_up.kind == "nvswitch"
    if algorithm == "nvls" and not nvls:
        raise ScenarioError("--algorithm", f"nvls needs NVSwitch with SHARP ({sc.hardware.gpu.name} on "
                            f"{sc.cluster.scale_up.kind} has none); valid: "
                            f"{', '.join(a for a in valid if a != 'nvls')}")
    domain = effective_domain(sc.cluster)
    if algorithm == "nvls" and ranks > domain:
        raise ScenarioError("--ranks", f"nvls reduces inside one NVSwitch domain: at most {domain} ranks "
                            "(cluster.scale_up.domain_gpus)")


def _test_bus_factor(op: str, n: int) -> float:
    """The bus factor of a row: collectives.bus_factor, but 0 on one rank, where nothing crosses a
    bus (nccl-tests' (n-1) factors are 0 there; a send-recv has no peer)."""
    return 0.0 if n <= 1 else bus_factor(op, n)


def _pair_shapes(fabric: Fabric, ranks: int, nics: int, gpus: int) -> list:
    """The distinct pairs of nccl-tests' sendrecv_perf on ``ranks`` consecutive GPUs: every rank sends
    to the next and receives from the one before (the last sends to the first), all at once, so the
    call lasts as long as its slowest pair.  Pairs inside an NVLink domain are alike; the pairs that
    cross a domain's boundary (the last GPU of a domain to the first of the next, and the wrap-around)
    are priced each, for their one flow among those that leave or enter a domain at once
    (p2p_flows.hop_flows: one a domain and a leaf block here, on the WAN those on its busiest link),
    at most one GPU's NICs (p2p_flows.flow_shape of the domain's ``nics`` and ``gpus``), not the 1/G
    share a group gets while every GPU of the domain sends (a hunt found one 200 Gb/s NIC a node giving
    3 GB/s).  The domain is the NVLink domain, not the node: on a GB200 NVL72 rack only the rack's last
    GPU sends out of it, through its tray's NIC (a hunt found 144 ranks on one NIC a tray given a
    quarter of it, 11.7 GB/s)."""
    senders = np.arange(ranks, dtype=np.int64)
    receivers = (senders + 1) % ranks
    flows = hop_flows(fabric, senders, receivers)
    domain = fabric.boundaries[1].domain_gpus if len(fabric.boundaries) > 1 else ranks
    crossing = np.flatnonzero(senders // domain != receivers // domain)
    pairs = [(0, 1)] + [(int(i), int(receivers[i])) for i in crossing]
    shapes = {fabric.shape(np.array(p, dtype=np.int64)): None for p in pairs}
    return [flow_shape(fabric, sh, flows, nics, gpus) for sh in shapes]


def collective_rows(sc: Scenario, op: str, ranks: int, sizes: Sequence[int],
                    algorithm: str = "auto", gpus_per_thread: int = 1) -> list[dict]:
    """nccl-tests-like rows for ``op`` over ``ranks`` consecutive GPUs of the scenario's cluster
    (a node fills first): size_bytes, time_s, algbw_GBps, busbw_GBps, algorithm, protocol, tier.
    The scenario's communication.library and communication.protocol apply, as NCCL_PROTO would.
    ``gpus_per_thread`` is nccl-tests' ``-g``: a call takes at least the host's launch time
    (:func:`host_floor_s`), and the tier reads ``host launch`` where that binds.  ``send-recv`` on more
    than two ranks is nccl-tests' sendrecv_perf: each rank sends to the next (:func:`_pair_shapes`)."""
    _check(sc, op, ranks, algorithm)
    if not 1 <= gpus_per_thread <= min(ranks, sc.cluster.gpus_per_node):
        most = min(ranks, sc.cluster.gpus_per_node)
        raise ScenarioError("--gpus-per-thread", f"{gpus_per_thread} must be between 1 and {most} "
                            "(the ranks of one node a thread can drive)")
    if ranks % gpus_per_thread:
        # nccl-tests runs ranks / g threads of g GPUs each: the ranks split into whole threads.
        raise ScenarioError("--gpus-per-thread", f"{gpus_per_thread} does not divide the {ranks} ranks "
                            "(nccl-tests -g: each thread drives that many of them)")
    floor = host_floor_s(gpus_per_thread)
    opts = nccl_options(sc)
    fabric = Fabric.for_cluster(sc.cluster)
    shapes = _pair_shapes(fabric, ranks, opts.nics_per_node, opts.gpus_per_node) \
        if op == "send-recv" and ranks > 2 \
        else [fabric.shape(np.arange(ranks, dtype=np.int64))]
    rows = []
    for size in sizes:
        c = max((cost(op, float(size), sh, algorithm, opts.nvls, opts) for sh in shapes),
                key=lambda x: x.time_s)
        t, tier = (c.time_s, c.limited_by) if c.time_s >= floor else (floor, "host launch")
        # nccl-tests' algbw is bytes / time whatever the call moves (one rank: the launch alone, a hunt
        # found it printed 0.00), its busbw that times the operation's bus factor (0 on one rank).
        algbw = size / t / 1e9 if t > 0 else 0.0
        rows.append({"size_bytes": size, "time_s": t, "algbw_GBps": algbw,
                     "busbw_GBps": algbw * _test_bus_factor(op, c.n), "algorithm": c.algorithm,
                     "protocol": c.protocol, "tier": tier,
                     # The algorithm asked for when it cannot run here and ring ran instead, as
                     # NCCL falls back ("" when it ran).
                     "requested": c.requested})
    return rows
