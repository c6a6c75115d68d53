"""The collective rows of the fidelity report: every sourced nccl-tests row next to what
``collective`` predicts for the same cluster (``bench/calibrate.py`` prints them).

Tables (explorer/data/reference/): ``nccl_busbw.csv`` (one node, the scale-up calibration),
``nccl_multinode.csv`` (one to four nodes, per fabric: plateau bus bandwidths at 128 MiB-16 GiB and
mid-size rows at 1-64 MiB, printed as their own groups, one node and multi-node) and
``nccl_latency.csv`` (the latency floor at the smallest sizes).  Each row says whether a constant was
fitted to it (``calibration``) or not (``validation``); the source column cites it.  A row's ``protocol``
column (auto, or a protocol NCCL_PROTO forced on that system) and its ``algorithm`` column (auto, or
NCCL_ALGO) are applied to the scenario, as the run that produced the row had them.
"""
from __future__ import annotations

from functools import cache
from typing import Any

from ..config.sections import Scenario
from ..network.nccl_table import collective_rows
from ..scenario import from_dict
from .calibration import read_csv
from .report import ReferenceRow

ONE_NODE_SOURCE = "public benchmark notes (ml-engineering network chapter)"
# Rows below this size form the "mid-size" groups (the 1-64 MiB regime), one node and multi-node.
MID_SIZE_LIMIT = 128 * 2**20


def scenario_for(row: dict[str, Any]) -> Scenario:
    """A scenario with the row's cluster: GPU preset, GPUs per node, nodes and (if given) the
    fabric preset, NIC speed and count.  The model is irrelevant to a collective's cost."""
    nodes = int(row.get("nodes", 1) or 1)
    gpn = int(row.get("gpus_per_node", row.get("gpus", 8)))
    out: dict[str, Any] = {}
    if row.get("fabric"):
        out = {"fabric": row["fabric"], "nic_Gbps": float(row["nic_Gbps"]),
               "nics_per_node": int(row["nics_per_node"])}
    doc: dict[str, Any] = {"model": {"preset": "llama3-8b"}, "training": {"global_batch": gpn * nodes},
                           "hardware": {"gpu": row["gpu"]},
                           "cluster": {"gpus_per_node": gpn, "nodes": nodes, "scale_out": out}}
    proto = row.get("protocol") or "auto"
    if proto != "auto":
        # The measured run had NCCL_PROTO forced (e.g. aws-ofi-nccl on p4d/p4de): price it the same way.
        doc["communication"] = {"protocol": proto}
    return from_dict(doc)


def predict(row: dict[str, Any]) -> dict[str, Any]:
    """The ``collective --json`` row for the setup of a reference row (all GPUs of the cluster)."""
    sc = scenario_for(row)
    size = 8 * 2**30 if row["size_bytes"] == "large" else int(row["size_bytes"])
    # nccl-tests names (all_reduce_perf, alltoall_perf) -> the CLI's operation names.
    op = {"alltoall": "all-to-all", "sendrecv": "send-recv"}.get(row["collective"],
                                                                row["collective"].replace("_", "-"))
    # nccl-tests -g: rows run with one thread per node's GPUs launch each call G times over.
    return collective_rows(sc, op, sc.gpus, [size], row["algorithm"], int(row.get("gpus_per_thread") or 1))[0]


def _label(row: dict[str, Any], size: int) -> str:
    nodes = int(row.get("nodes", 1) or 1)
    gpn = int(row.get("gpus_per_node", row.get("gpus", 8)))
    fab = f" {row['fabric']}" if row.get("fabric") and nodes > 1 else ""
    forced = [x for x in (row["algorithm"], row.get("protocol") or "auto") if x != "auto"]
    alg = f" ({'/'.join(forced)})" if forced else ""
    unit = f"{size / 2**20:g} MiB" if size >= 2**20 else f"{size} B"
    return f"{row['gpu']} {nodes}x{gpn}{fab} {row['collective']} {unit}{alg}"


@cache
def collective_reference_rows() -> list[ReferenceRow]:
    """Every sourced collective row with its prediction: bus bandwidth rows (GB/s busbw) and
    latency-floor rows (us per call)."""
    out: list[ReferenceRow] = []
    for row in read_csv("nccl_busbw.csv"):
        size = 8 * 2**30 if row["size_bytes"] == "large" else int(row["size_bytes"])
        out.append(ReferenceRow("nccl-tests one node", _label(row, size), float(row["busbw_GBps"]),
                                predict(row)["busbw_GBps"], "GB/s busbw", "calibration",
                                f"nccl_busbw.csv: {row['source']}"))
    for row in read_csv("nccl_multinode.csv"):
        where = "one node" if int(row["nodes"]) == 1 else "multi-node"
        mid = " 1-64 MiB" if int(row["size_bytes"]) < MID_SIZE_LIMIT else ""
        group = f"nccl-tests {where}{mid}"
        out.append(ReferenceRow(group, _label(row, int(row["size_bytes"])), float(row["busbw_GBps"]),
                                predict(row)["busbw_GBps"], "GB/s busbw", row["role"], row["source"]))
    for row in read_csv("nccl_latency.csv"):
        out.append(ReferenceRow("nccl-tests latency floor", _label(row, int(row["size_bytes"])),
                                float(row["time_us"]), predict(row)["time_s"] * 1e6, "us per call",
                                row["role"], row["source"]))
    return out
