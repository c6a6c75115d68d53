"""Failed nodes (``cluster.faults.failed_nodes``): training restarts on the replicas that survive.

The failed nodes are the cluster's last ones.  Every data-parallel replica (tp x cp x pp GPUs)
with a GPU on one of them is dropped; the surviving replicas carry the global batch when they can
split it evenly (and the schedule accepts the count: interleaved wants multiples of pp), else each
keeps its own micro-batches and the batch shrinks by the dropped replicas' share — and the dropped
replicas' other GPUs idle (Llama 3
report, arXiv 2407.21783, Sec. 3.3.4: jobs restart without the faulty hosts).  The survivors are
simulated as the cluster they form; the result keeps the scenario as written and says, in a
``faults`` notice, what was dropped.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from ..analysis.report import Notice
from ..config.loading import from_dict, to_dict
from ..config.schema import ScenarioError
from ..network.placement import Placement

if TYPE_CHECKING:
    from ..config import Scenario
    from ..result.record import Result


def dropped_replicas(sc: Scenario) -> int:
    """Data-parallel replicas with a GPU on one of the failed (last) nodes."""
    k = sc.cluster.faults.failed_nodes
    if k <= 0:
        return 0
    gpn, nodes = sc.cluster.gpus_per_node, sc.cluster.nodes
    ids = np.arange(max(nodes - k, 0) * gpn, nodes * gpn, dtype=np.int64)
    pl = Placement.for_scenario(sc)
    return int(np.unique((ids // pl.strides["dp"]) % sc.dp).size)


def max_failed_nodes(sc: Scenario) -> int:
    """The most failed nodes (the cluster's last ones) that leave one data-parallel replica whole.

    A replica is the GPUs whose id has one digit in the placement's dp stride: blocks of
    ``stride`` consecutive ids, the replicas in turn.  Replica r's last block is the last one of
    index = r (mod dp) before the cluster's end, so the replica whose last block comes first,
    block ``q - dp + 1`` (``q`` the block of the last GPU), survives the most failed nodes."""
    gpn, nodes = sc.cluster.gpus_per_node, sc.cluster.nodes
    stride = Placement.for_scenario(sc).strides["dp"]
    q = (nodes * gpn - 1) // stride
    last_gpu = (q - sc.dp + 2) * stride - 1          # the earliest-ending replica's last GPU
    return nodes - last_gpu // gpn - 1


def surviving_scenario(sc: Scenario) -> tuple[Scenario, int, int]:
    """(the cluster of surviving replicas, replicas dropped, micro-batches per surviving replica);
    a ScenarioError on ``cluster.faults.failed_nodes`` when nothing survives or the survivors do not
    fill whole nodes."""
    p, c, t = sc.parallelism, sc.cluster, sc.training
    dropped = dropped_replicas(sc)
    field = "cluster.faults.failed_nodes"
    left = sc.dp - dropped
    if left < 1:
        raise ScenarioError(field, f"{c.faults.failed_nodes} failed nodes hold a GPU of every one of the "
                            f"{sc.dp} data-parallel replicas; nothing survives (at most "
                            f"{max_failed_nodes(sc)} leave a replica)")
    replica = p.tp * p.cp * p.pp
    if (left * replica) % c.gpus_per_node:
        raise ScenarioError(field, f"the {left} surviving replicas of {replica} GPUs do not fill whole "
                            f"nodes of {c.gpus_per_node}; fail a number of nodes that drops whole nodes' "
                            "worth of replicas")
    raw = to_dict(sc)
    raw.pop("description", None)
    raw["cluster"].update(nodes=left * replica // c.gpus_per_node, faults={})
    raw["parallelism"]["dp"] = left
    # Carry the batch (more micro-batches each); where the schedule cannot split that (interleaved
    # wants multiples of pp), keep each replica's micro-batches and let the batch shrink.
    share, rest = divmod(t.global_batch, left * t.micro_batch)
    keep = t.global_batch // (sc.dp * t.micro_batch)
    problem: ScenarioError | None = None
    for per in dict.fromkeys(((share,) if share and not rest else ()) + (keep,)):
        raw["training"]["global_batch"] = per * left * t.micro_batch
        try:
            return from_dict(raw), dropped, per
        except ScenarioError as e:
            problem = problem or e
    raise ScenarioError(field, f"the {left} surviving replicas cannot run this layout: {problem}")


def simulate_survivors(sc: Scenario, simulate: Callable[[Scenario], Result]) -> Result:
    """The Result of ``sc`` with failed nodes: the survivors' iteration, the scenario as written."""
    surv, dropped, per = surviving_scenario(sc)
    res = simulate(surv)
    idle = dropped * sc.parallelism.tp * sc.parallelism.cp * sc.parallelism.pp \
        - sc.cluster.faults.failed_nodes * sc.cluster.gpus_per_node
    batch = surv.training.global_batch
    how = (f"carry the batch, {per} micro-batches each" if batch == sc.training.global_batch else
           f"keep their {per} micro-batches each, so the global batch shrinks to {batch}")
    note = Notice("faults", f"faults: {sc.cluster.faults.failed_nodes} failed node(s) dropped {dropped} of "
                  f"{sc.dp} data-parallel replicas ({max(idle, 0):,} surviving GPUs idle); the other "
                  f"{surv.dp} {how}")
    return res.combined(sc, (*res.notices, note))
