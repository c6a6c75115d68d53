"""Failures, checkpoints and restarts: the checkpoint interval and the expected goodput.

The job stops whenever any of its GPUs fails, so its mean time between failures is the per-GPU
figure divided by the GPUs: M = mtbf_gpu_hours x 3600 / GPUs (failures independent and
exponentially distributed; Daly 2006, Sec. 2).  With a checkpoint costing delta seconds of training
every tau seconds and a restart costing R seconds, the share of wall-clock time that advances
training is, to first order (Young, "A first order approximation to the optimum checkpoint interval",
CACM 17(9), 1974; Daly, "A higher order estimate of the optimum checkpoint interval for restart
dumps", Future Generation Computer Systems 22(3), 2006, Eq. 1-3):

    goodput = 1 - delta / tau - (tau / 2 + R) / M

(the checkpoint's own cost, half an interval of work lost on average per failure, and the restart),
minimised at Young's interval tau_opt = sqrt(2 delta M).  With asynchronous checkpointing delta is
only the snapshot to host memory; the write to storage runs in the background, so a checkpoint
becomes usable w = write seconds after its snapshot: a failure then loses tau / 2 + w on average,
and checkpoints cannot come more often than one write each (tau >= w).

When a failed node is not replaced at once (``reliability.repair_h`` = W seconds until it is back),
other nodes keep failing while it is repaired, and each failed node has its own repair: the nodes
down form an M/G/infinity queue (failures a Poisson process of rate 1/M, each out for W), whose
number K at a random instant is Poisson with mean W / M whatever the repair-time distribution
(Takacs, "Introduction to the Theory of Queues", 1962, Ch. 3; Kleinrock, "Queueing Systems" vol. 1,
1975, Sec. 4.6 -- M/G/infinity).  So:

- a job that waits trains only while K = 0, a share P(K = 0) = exp(-W / M) of the time: goodput
  = G x exp(-W / M), G being the goodput with spares at hand (above).  To first order this is
  G - W / M (a repair lost per failure), but it stays above 0 however long the repairs: a job whose
  failures come faster than its repairs waits most of the time instead of never training;
- an elastic one keeps training on the survivors.  With k nodes down it keeps r_k = max(0, 1 - k (1 - r))
  of its throughput, r being the share it keeps without one node (simulated: the data-parallel
  replicas on the failed node dropped, variants/faults.py): one node takes one replica of D, so r =
  1 - 1/D and k nodes leave (D - k) / D, none from k = D on — nor once the failed nodes hold every
  replica (a node may hold several: variants/faults.max_failed_nodes).  It restarts once more per failure to
  rejoin the node, R / M: goodput = (G - R / M) x E[r_K].  To first order E[r_K] = 1 - (1 - r) W / M,
  i.e. (1 - r) W + R lost per failure.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

from ..config.sections import Scenario
from ..variants.faults import max_failed_nodes, surviving_scenario
from . import checkpoint


@dataclass(frozen=True)
class Goodput:
    """The expected cost of failures and checkpoints of one phase, as shares of wall-clock time."""

    interval_s: float           # seconds of training between checkpoints (inf: no failures modelled)
    job_mtbf_s: float           # the whole job's mean time between failures (inf: not modelled)
    stall_s: float              # training time one checkpoint costs (write, or snapshot when async)
    restart_s: float            # fixed restart time + reading the checkpoint back
    lost_s: float               # work lost per failure on average (tau / 2, + the write when async)
    checkpoint_share: float     # delta / tau
    lost_work_share: float      # lost / M
    restart_share: float        # R / M
    repair_share: float = 0.0   # lost to failed nodes under repair: waiting, or running on the survivors
    nodes_down: float = 0.0     # mean nodes under repair at a random instant, W / M (M/G/infinity)
    # The goodput's repair factor and an elastic job's extra restart per failure (module docstring):
    # G x exp(-W / M) waiting, (G - R / M) x E[r_K] elastic.
    whole_share: float = 1.0
    rejoin_share: float = 0.0

    @property
    def goodput(self) -> float:
        """Share of wall-clock time that advances training (0 when failures outpace progress).
        Multiplied, not subtracted: at W / M = 32 the difference 1 - (... + G (1 - e^(-W/M))) is
        all rounding (a hunt read 1e-16 for 1.3e-14, and 7e15 days)."""
        base = 1.0 - self.checkpoint_share - self.lost_work_share - self.restart_share - self.rejoin_share
        return max(base, 0.0) * self.whole_share


def young_daly_interval(delta_s: float, mtbf_s: float) -> float:
    """Young's first-order optimum interval sqrt(2 delta M) (Young 1974; Daly 2006, Eq. 2)."""
    return math.sqrt(2.0 * delta_s * mtbf_s)


def running(sc: Scenario) -> Scenario:
    """The scenario whose GPUs run the job: ``sc``, or with failed nodes (cluster.faults) the
    surviving replicas' (variants/faults.py) — the failed nodes and the idle GPUs of dropped
    replicas do not stop it when they fail (a regression hunt: a job that had lost a node read a
    higher goodput, its MTBF and its next failure's cost counted on GPUs it no longer runs on)."""
    return surviving_scenario(sc)[0] if sc.cluster.faults.failed_nodes else sc


def job_mtbf_s(sc: Scenario) -> float:
    """The whole job's MTBF in seconds: mtbf_gpu_hours / the GPUs it runs on (inf when failures
    are not modelled)."""
    m = sc.reliability.mtbf_gpu_hours
    return math.inf if m is None else m * 3600.0 / running(sc).gpus


def goodput_of(sc: Scenario, survivors_share: float | None = None, step_s: float = 0.0) -> Goodput:
    """The checkpoint interval (given, or Young/Daly's optimum) and the expected goodput of ``sc``;
    ``survivors_share`` is r, the throughput an elastic job keeps without one node (module
    docstring), needed when ``reliability.elastic`` and ``repair_h`` are set; ``step_s``: one
    training step, the shortest interval (a checkpoint is taken between steps: Llama 3 405B's
    128K phase read one every 12.09 s with 12.93 s steps)."""
    r = sc.reliability
    M = job_mtbf_s(sc)
    if math.isinf(M):
        return Goodput(math.inf, M, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
    delta = checkpoint.stall_s(sc)
    write = checkpoint.write_s(sc) if r.async_checkpoint else 0.0
    tau = r.checkpoint_interval_s or young_daly_interval(delta, M)
    tau = max(tau, write, step_s)
    restart = r.restart_s + checkpoint.read_s(sc)
    lost = tau / 2.0 + write
    W = r.repair_h * 3600.0
    spare = 1.0 - delta / tau - (lost + restart) / M          # the goodput with a spare at hand
    whole, rejoin = 1.0, 0.0
    if W > 0 and r.elastic:
        assert survivors_share is not None, "an elastic job's repair cost needs the survivors' share"
        # The job stops when no replica is left: from the failures that take the last one on (the
        # cluster's last nodes, variants/faults.max_failed_nodes; a 2-node job read 0.24 % kept with
        # 18 nodes down on average, its measured r = 0.9 extrapolated to 9 nodes it has not got).
        last = max_failed_nodes(running(sc)) + 1
        whole, rejoin = survivors_mean(survivors_share, W / M, last), restart / M
    elif W > 0:
        whole = math.exp(-W / M)
    g = Goodput(tau, M, delta, restart, lost, delta / tau, lost / M, restart / M, 0.0, W / M, whole, rejoin)
    return replace(g, repair_share=max(max(spare, 0.0) - g.goodput, 0.0))


def survivors_mean(r: float, mean_down: float, none_left: int | None = None) -> float:
    """E[max(0, 1 - K (1 - r))] for K ~ Poisson(``mean_down``): the average share of its throughput an
    elastic job keeps while nodes are under repair (module docstring); 0 from K = ``none_left`` on
    (no replica survives so many failed nodes).  Exact: the terms vanish from K = 1 / (1 - r) or
    ``none_left`` on, so the sum is finite.

    >>> round(survivors_mean(0.75, 0.1), 6)     # first order: 1 - 0.25 x 0.1 = 0.975
    0.975
    >>> survivors_mean(0.5, 0.0), survivors_mean(1.0, 3.0)
    (1.0, 1.0)
    """
    loss = 1.0 - r
    if mean_down <= 0.0:
        return 1.0
    if loss <= 0.0 and none_left is None:
        return 1.0
    total, p, k = 0.0, math.exp(-mean_down), 0
    while 1.0 - k * loss > 0.0 and (none_left is None or k < none_left):
        total += p * (1.0 - k * loss)
        k += 1
        p *= mean_down / k
    return total
