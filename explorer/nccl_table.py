"""An nccl-tests-like table for one collective on a scenario's cluster (``python -m explorer
collective``, bench/calibrate.py).

Rows carry what nccl-tests' ``all_reduce_perf`` prints: size, time, algorithm bandwidth and bus
bandwidth (GB = 1e9 bytes), plus NCCL's algorithm and protocol chosen (``none`` for point-to-point
and MPI/Gloo) and the tier that limits it.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .collectives import APPLICABLE, OPS, cost
from .config.schema import ScenarioError, excerpt
from .config.sections import Scenario
from .network import nccl_options
from .topology import Fabric


def _check(sc: Scenario, op: str, ranks: int, algorithm: str) -> None:
    """One-line ScenarioError on the CLI option that asks for something the cluster cannot do."""
    if op not in OPS:
        raise ScenarioError("--op", f"{excerpt(op)} is not one of {', '.join(OPS)}")
    if not 1 <= ranks <= sc.gpus:
        raise ScenarioError("--ranks", f"{ranks} must be between 1 and the cluster's {sc.gpus} GPUs")
    valid = ("auto",) + APPLICABLE[op]
    if algorithm not in valid:
        raise ScenarioError("--algorithm", f"{excerpt(algorithm)} is not available for {op} "
                            f"(valid: {', '.join(valid)})")
    nvls = sc.hardware.gpu.nvlink_sharp and sc.cluster.scale_up.kind == "nvswitch"
    if algorithm == "nvls" and not nvls:
        raise ScenarioError("--algorithm", f"nvls needs NVSwitch with SHARP ({sc.hardware.gpu.name} on "
                            f"{sc.cluster.scale_up.kind} has none); valid: "
                            f"{', '.join(a for a in valid if a != 'nvls')}")
    if algorithm == "nvls" and ranks > sc.cluster.gpus_per_node:
        raise ScenarioError("--ranks", f"nvls reduces inside one NVSwitch domain: at most "
                            f"{sc.cluster.gpus_per_node} ranks")


def collective_rows(sc: Scenario, op: str, ranks: int, sizes: Sequence[int],
                    algorithm: str = "auto") -> list[dict]:
    """nccl-tests-like rows for ``op`` over ``ranks`` consecutive GPUs of the scenario's cluster
    (a node fills first): size_bytes, time_s, algbw_GBps, busbw_GBps, algorithm, protocol, tier.
    The scenario's communication.library and communication.protocol apply, as NCCL_PROTO would."""
    _check(sc, op, ranks, algorithm)
    opts = nccl_options(sc)
    shape = Fabric.for_cluster(sc.cluster).shape(np.arange(ranks, dtype=np.int64))
    rows = []
    for size in sizes:
        c = cost(op, float(size), shape, algorithm, opts.nvls, opts)
        rows.append({"size_bytes": size, "time_s": c.time_s, "algbw_GBps": c.algbw_GBps,
                     "busbw_GBps": c.busbw_GBps, "algorithm": c.algorithm, "protocol": c.protocol,
                     "tier": c.boundary})
    return rows
