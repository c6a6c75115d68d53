"""Decentralised data parallelism (``parallelism.dp_kind``): gossip and the parameter server.

Each data-parallel replica (tp x cp x pp GPUs) computes its step alone — the *replica step*, the
scenario with dp = 1 and 1/dp of the batch, simulated once — and then, instead of the gradient
all-reduce, the replicas agree by:

- **gossip** (D-PSGD: Lian et al., "Can Decentralized Algorithms Outperform Centralized
  Algorithms?", NeurIPS 2017): every GPU sends its parameter shard to each neighbour of its replica
  on a graph and averages what it receives.  Neighbours of replica r among n: ring r+-1; 2-D torus
  (rows x cols, rows the largest divisor of n not above sqrt(n)) r+-1 in its row and r+-cols;
  exponential graph r + 2^i mod n, i < ceil(log2 n) (Assran et al., SGP, ICML 2019; Ying et al.,
  "Exponential Graph is Provably Efficient for Decentralized Deep Training", NeurIPS 2021), or
  one of them per step (one-peer exponential, ``gossip_peers: 1``).  One step moves one model per
  peer.  D-PSGD overlaps the exchange with the gradient computation (Lian et al. 2017, Sec. 3), so
  only what exceeds the replica step is exposed, plus the averaging (k+2 shards through HBM).
- **asynchronous gossip** (``gossip-async``; AD-PSGD: Lian et al., "Asynchronous Decentralized
  Parallel Stochastic Gradient Descent", ICML 2018, Alg. 1): a worker computes gradients on its
  local model without pause while a communication thread averages the model with ONE randomly
  chosen neighbour (an atomic pairwise average), with no barrier between neighbours.  The graph is
  the ring — bipartite for an even number of replicas, as the paper's deadlock-free implementation
  with active and passive workers requires — and the neighbour r+1 or r-1 at random: one model
  each way per step, the expected time and bytes those of the two pairs' mean.  The exchange
  overlaps the worker's compute, so a cycle is max(step, exchange) plus the averaging (3 shards
  through HBM): communication-bound workers run at the exchange's rate.
- **parameter server** (Li et al., "Scaling Distributed Machine Learning with the Parameter
  Server", OSDI 2014): every GPU pushes its gradient shard, split over ``ps_servers`` server nodes,
  and pulls the updated parameters (bulk-synchronous: after the backward, before the next
  forward).  A server's NIC carries replicas x model bytes / S each way per step (the bottleneck
  BytePS analyses: Jiang et al., OSDI 2020, Sec. 3); a server has one NIC of the fabric's speed.

Each exchange is priced by the network model on the pair it joins (a point-to-point transfer),
one neighbour offset at a time with every GPU sending at once: a domain's egress is shared by the
GPUs whose neighbour lies outside it, and the slowest GPU sets each turn
(:func:`explorer.variants.lowcomm.gossip_graph.phase`); the slowest stage sets the step.

Stragglers (``cluster.stragglers``): the kinds of replica of :func:`explorer.variants.replicas.variants` (the
straggler replica and the replicas at speed) are each simulated once, alone.  A replica's own cycle
is its step plus what its exchange exposes, its averaging slowed like its other kernels.

- Synchronous gossip: a D-PSGD replica needs its neighbours' models of the previous step, so in
  steady state the barrier propagates through the graph and every replica runs at the slowest
  one's cycle (Lian et al. 2017, Alg. 1; the weakness AD-PSGD removes, Lian et al. 2018, Sec. 1);
  a bulk-synchronous parameter server waits for the last push.
- Asynchronous gossip: each replica progresses at its own rate, so the replicas together process
  sum over kinds of n_k x (B/dp) / cycle_k sequences per second (B the global batch; Lian et al.
  2018, Sec. 1: no worker waits for another).  The time per step reported is the equivalent
  global batch time, B over that rate: dp / sum(n_k / cycle_k), the replicas' harmonic mean
  cycle; its breakdown is each kind's cycle weighted by the share of the samples that kind
  processes, w_k = (n_k/dp) x T / cycle_k (the weights sum to 1, so the breakdown sums to T).

Not modelled: the servers' own update time; under gossip-async, the extra averagings a slow
replica's NIC and HBM serve for its faster neighbours (which pick it more often than it picks them),
and convergence per step (staleness: the quality note).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from ...analysis.link_bound import link_bound
from ...analysis.report import Notice
from ...config.loading import from_dict, to_dict
from ...config.schema import ScenarioError
from ...network.collectives import cost
from ...network.groups import Network
from ...network.topology import BOUNDARY_NAMES, LineRates
from ...physics.hardware import streaming_bytes_per_s
from ...result.windows import Exchange
from ...taskgraph.make import iteration_builder
from ...workloads.registry import compression_plan
from ..kinds import Variant
from ..replicas import variants
from .amortise import amortised_utilisation, step_busy
from .exchange_tasks import exchange_tasks, with_exchange
from .gossip_graph import peer_offsets, phase
from .window import sent_per_boundary

if TYPE_CHECKING:
    from ...config import Scenario
    from ...result.record import Result

QUALITY = {
    "gossip": ("D-PSGD (Lian et al., NeurIPS 2017) proves the convergence rate of centralised SGD once the "
               "steps outnumber what the graph's spectral gap demands; exponential graphs keep that gap "
               "at order 1/log2(n) (Ying et al., NeurIPS 2021) — not simulated here"),
    "gossip-async": ("AD-PSGD (Lian et al., ICML 2018, abstract) converges at SGD's O(1/sqrt(K)) rate with a "
                     "linear speedup in the workers, and on ImageNet with up to 128 GPUs matched "
                     "AllReduce-SGD's convergence per epoch with epochs up to 4-8x faster; the price of no "
                     "barrier is staleness — a gradient is computed on a model that averaging has changed "
                     "since, and the analysis bounds how many updates it may lag — not simulated here"),
    "parameter-server": ("a synchronous parameter server computes the same SGD step as an all-reduce: only "
                         "where the sum happens differs (Li et al., OSDI 2014) — not simulated here"),
}


@dataclass(frozen=True)
class ReplicaKind:
    """A kind of data-parallel replica (:class:`explorer.variants.replicas.Variant`): how many replicas are of
    this kind and the step one of them takes alone."""

    tag: str                                  # "" at speed; "straggler replica", ...
    replicas: int
    step_s: float                             # its step alone (compute, TP/PP, bubble, optimizer)
    stage_slowdown: tuple[float, ...] = ()    # its stages' kernel factors (empty: every stage at speed)

    def factor(self, stage: int) -> float:
        """The factor on pipeline stage ``stage``'s kernels (cluster.stragglers.slowdown or 1)."""
        return self.stage_slowdown[stage] if self.stage_slowdown else 1.0


def replica_scenario(sc: Scenario) -> Scenario:
    """One data-parallel replica alone: dp = 1, 1/dp of the batch, on as many GPUs as it spans.  A
    straggler replica's scenario (explorer/variants/replicas.py) keeps its stages' kernel factors."""
    p, c, dp = sc.parallelism, sc.cluster, sc.dp
    gpus = p.tp * p.cp * p.pp
    raw = to_dict(sc)
    raw.pop("description", None)
    cl = raw["cluster"]
    cl.pop("stragglers", None)
    cl.update(datacenters=1, **({"nodes": gpus // c.gpus_per_node} if gpus >= c.gpus_per_node
                                else {"nodes": 1, "gpus_per_node": gpus}))
    # Degraded nodes are the cluster's last (cluster.faults): the last replica holds the most of
    # them, and it is the one the step waits for (its expert-parallel groups through them are
    # slowed; the exchange between replicas prices them itself, gossip_graph.phase).
    if c.faults.degraded_nodes:
        cl["faults"]["degraded_nodes"] = min(c.faults.degraded_nodes, cl["nodes"])
    raw["training"]["global_batch"] = sc.training.global_batch // dp
    raw["parallelism"].update(dp=1, dp_kind="allreduce", span="auto")
    try:
        rep = from_dict(raw)
    except ScenarioError as e:
        raise ScenarioError("parallelism.dp_kind", f"{p.dp_kind}: one replica alone cannot run this "
                            f"layout: {e}") from None
    slow = c.stragglers.stage_slowdown
    if not slow:
        return rep
    return replace(rep, cluster=replace(rep.cluster, stragglers=replace(rep.cluster.stragglers,
                                                                          stage_slowdown=slow)))


def equivalent_step_s(replicas: Sequence[int], cycles: Sequence[float]) -> float:
    """AD-PSGD's time per global batch: ``replicas[k]`` replicas each stepping every ``cycles[k]``
    seconds on their own (Lian et al. 2018, Sec. 1: no worker waits) process sum(n_k / cycle_k)
    replica batches per second, so one global batch (dp replica batches) takes their harmonic mean
    dp / sum(n_k / cycle_k).  Equal cycles give that cycle exactly.

    >>> equivalent_step_s([7, 1], [1.0, 2.0])      # 8 / (7 + 1/2)
    1.0666666666666667
    """
    if len(set(cycles)) == 1:
        return cycles[0]
    return sum(replicas) / sum(n / c for n, c in zip(replicas, cycles, strict=True))


def exchange(sc: Scenario, kinds: Sequence[ReplicaKind]) -> tuple[Exchange, tuple[float, ...]]:
    """The per-step exchange of ``sc``'s dp_kind between replicas of ``kinds`` (one kind when every
    replica is alike), and each kind's own cycle: its step plus what the exchange exposes to it."""
    p, dp = sc.parallelism, sc.dp
    comp = sc.communication.compression
    pl_comp = compression_plan(comp, sc.model, p.tp, dp)
    # What crosses: the model (gossip; compressed like CHOCO-SGD's model differences, Koloskova et
    # al., ICML 2019) or the gradient (parameter server), at the compressor's wire bytes if any.
    payload = pl_comp.wire if comp.active else sc.training.sync.payload_bytes
    net = Network(sc)
    b = iteration_builder(sc, net, ideal=frozenset())      # parameter counts only: the real chunks
    pl = net.placement
    hbm = streaming_bytes_per_s(sc.hardware.gpu)
    worst, sent_max, sent_mean = 0.0, [0.0] * len(BOUNDARY_NAMES), [0.0] * len(BOUNDARY_NAMES)
    total = 0.0     # the busiest stage's bytes per GPU, each message once: on NVLink or out of the node
    avg: list[float] = []                   # per stage: averaging the received models through HBM
    model = 0.0
    offsets = [] if p.dp_kind == "parameter-server" else peer_offsets(p.dp_kind, dp, p.gossip_peers)
    asynchronous = p.dp_kind == "gossip-async"
    far = sc.cluster.gpus_per_node          # a GPU on another node: where a server's traffic goes
    for s in range(p.pp):
        params = sum(ch.params + ch.expert_params for ch, _ in b.rank_chunks(s))
        nbytes = params * payload
        model += nbytes * p.tp * p.cp
        g0 = int(pl.gpu(pp=s))
        t, sent = 0.0, [0.0] * len(BOUNDARY_NAMES)
        if offsets and asynchronous:        # one of the candidates at random: their mean
            for o in offsets:
                dt, ds = phase(net, sc, s, o, nbytes)
                t += dt / len(offsets)
                sent = [x + y / len(offsets) for x, y in zip(sent, ds, strict=True)]
            coding = pl_comp.seconds(params, hbm) if comp.active else 0.0
            avg.append(3 * nbytes / hbm + coding)        # k+2 shards with k = 1 peer
        elif offsets:
            for o in offsets:               # one model per peer, the NIC sending them in turn
                dt, ds = phase(net, sc, s, o, nbytes)
                t += dt
                sent = [x + y for x, y in zip(sent, ds, strict=True)]
            coding = pl_comp.seconds(params, hbm) * len(offsets) if comp.active else 0.0
            avg.append((len(offsets) + 2) * nbytes / hbm + coding)
        else:                               # to a server: every GPU's node NIC is busy pushing
            shape = net.fabric.shape(np.array([g0, (g0 + far) % sc.cluster.gpus], dtype=np.int64))
            if sc.cluster.faults.degraded and shape.spans(1):
                # Bulk-synchronous: the servers wait for the last push, from a degraded node's
                # NICs at nic_factor of their rate (cluster.faults).
                f = sc.cluster.faults.nic_factor
                shape = replace(shape, shares=(shape.shares[0], shape.shares[1] * f, *shape.shares[2:]))
            cc = cost("send-recv", nbytes, shape, net.algorithm, net.nvls, net.options)
            t, sent = cc.time_s, sent_per_boundary(cc, shape)
        # The ideal pipeline's communication is free (Network(free=True)): the exchange too.
        worst = 0.0 if p.ideal_pipeline else max(worst, t)
        sent_max = [max(x, y) for x, y in zip(sent_max, sent, strict=True)]
        total = max(total, sent[0] + sent[1])
        # Every stage has as many GPUs: the mean over all of them is the mean of the stages' means.
        sent_mean = [x + y / p.pp for x, y in zip(sent_mean, sent, strict=True)]
    tiers = dict(zip(BOUNDARY_NAMES, sent_max, strict=True))
    mean = dict(zip(BOUNDARY_NAMES, sent_mean, strict=True))
    batch = sc.training.global_batch
    if offsets:
        # D-PSGD overlaps the exchange with the step (Lian et al. 2017, Sec. 3): a replica's cycle is
        # its step plus the exchange's excess over it plus its averaging, a kernel that a
        # straggler's stage runs ``slowdown`` times longer (explorer/config/stragglers.py).
        exposed = [max(0.0, worst - k.step_s) + max(k.factor(s) * a for s, a in enumerate(avg))
                   for k in kinds]
        cycles = tuple(k.step_s + e for k, e in zip(kinds, exposed, strict=True))
        if asynchronous:                    # no barrier: the fastest kind is the reference
            pace = min(range(len(kinds)), key=lambda i: cycles[i])
            T = equivalent_step_s([k.replicas for k in kinds], cycles)
        else:                               # every replica waits for the slowest
            pace = max(range(len(kinds)), key=lambda i: cycles[i])
            T = cycles[pace]
        peers, note = (1, QUALITY["gossip-async"]) if asynchronous else (len(offsets), QUALITY["gossip"])
        return (Exchange(p.dp_kind, dp, peers, sc.training.sync.outer_dtype, kinds[pace].step_s, worst,
                         exposed[pace], tiers, 0.0, 0.0, note, min(cycles), max(cycles), batch / T, batch,
                         mean, total),
                cycles)
    so = sc.cluster.scale_out
    # The fabric's achievable share of one server NIC's line rate.
    server_Bps = LineRates.for_cluster(sc.cluster).nic_Bps * (so.efficiency or 1.0)
    server_bytes = dp * model / p.ps_servers             # each way, per server NIC
    # Push (or pull): the slower end.
    one_way = 0.0 if p.ideal_pipeline else max(worst, server_bytes / server_Bps)
    exposed_ps = 2 * one_way
    nic_s = 0.0 if p.ideal_pipeline else server_bytes / server_Bps         # a free NIC is never busy
    # Bulk-synchronous (Li et al., OSDI 2014): the servers update once every replica has pushed.
    cycles = tuple(k.step_s + exposed_ps for k in kinds)
    pace = max(range(len(kinds)), key=lambda i: cycles[i])
    T = cycles[pace]
    return (Exchange(p.dp_kind, dp, p.ps_servers, sc.training.sync.outer_dtype, kinds[pace].step_s,
                     exposed_ps, exposed_ps, tiers, server_bytes, nic_s / T,
                     QUALITY["parameter-server"], min(cycles), T, batch / T, batch, mean, total),
            cycles)


def simulate_exchange(sc: Scenario, simulate_replica: Callable[[Scenario], Result]) -> Result:
    """The Result of ``sc`` with dp_kind gossip or parameter-server: the replica step's timeline
    and breakdown with the exposed exchange added as ``dp``, the iteration that long.  With
    stragglers each kind of replica (explorer/variants/replicas.py) is simulated once; synchronous kinds run
    every replica at the slowest kind's cycle, gossip-async each at its own, the iteration then the
    equivalent global-batch time (module docstring); ``replicas`` lists each kind's own cycle and
    wait."""
    # One simulation per kind of replica: the straggler replica and the replicas at speed.
    vs = variants(sc) if sc.cluster.stragglers.active else [Variant("", sc, sc.dp)]
    reps = [simulate_replica(replica_scenario(v.sc)) for v in vs]
    kinds = [ReplicaKind(v.tag, v.replicas, r.iteration_time_s, v.sc.cluster.stragglers.stage_slowdown)
             for v, r in zip(vs, reps, strict=True)]
    x, cycles = exchange(sc, kinds)
    if x.asynchronous:
        pace = cycles.index(min(cycles))       # the reference: the fastest kind, no one waits
        T = equivalent_step_s([k.replicas for k in kinds], cycles)
    else:
        pace = cycles.index(max(cycles))       # every replica waits for the slowest
        T = reps[pace].iteration_time_s + x.exposed_s
    rep = reps[pace]
    slow = rep.iteration_time_s / T
    breakdown = dict(rep.breakdown_s)
    breakdown["dp"] = breakdown.get("dp", 0.0) + x.exposed_s
    bubble, busiest = rep.bubble_fraction * slow, rep.bubble_fraction_busiest * slow
    if x.asynchronous:
        # Each kind's cycle (its step's categories, its exposed exchange as dp) weighted by the share
        # of the samples it processes, (n_k / dp) x T / cycle_k (they sum to 1); its idle pipeline
        # share likewise (module docstring).
        breakdown = dict.fromkeys(breakdown, 0.0)
        bubble = busiest = 0.0
        for k, r, c in zip(kinds, reps, cycles, strict=True):
            w = k.replicas / sc.dp * T / c
            for cat, v in r.breakdown_s.items():
                breakdown[cat] += w * v
            breakdown["dp"] += w * (c - r.iteration_time_s)
            bubble += w * r.bubble_fraction * r.iteration_time_s / c
            busiest += w * r.bubble_fraction_busiest * r.iteration_time_s / c
    by_tier = {d: dict(t) for d, t in rep.comm_bytes_by_tier.items()}
    by_tier["dp"] = {t: by_tier["dp"].get(t, 0.0) + x.bytes_per_gpu.get(t, 0.0) for t in BOUNDARY_NAMES}
    # Each link's busy seconds: the replica step's own and the exchange's (its mean over all GPUs,
    # not its busiest stage's: a ring's seam GPUs send out of their node, the others do not).  The
    # exchange overlaps the step (D-PSGD), so together they may need longer than the cycle: then
    # the link sets it (analysis/link_bound.py), all replicas waiting as for the exchange.
    busy = step_busy(sc, rep, x.mean_bytes_per_gpu)
    bound = link_bound(T, busy, (breakdown,), ({d: tuple(v.values()) for d, v in by_tier.items()},))
    if bound.T > T:
        f, extra = T / bound.T, bound.T - T
        slow, bubble, busiest, breakdown = slow * f, bubble * f, busiest * f, bound.breakdowns[0]
        x = replace(x, exposed_s=x.exposed_s + (0.0 if x.asynchronous else extra),
                    samples_per_s=x.samples_per_s * f,
                    slowest_replica_step_s=x.slowest_replica_step_s + extra,
                    fastest_replica_step_s=x.fastest_replica_step_s + extra)
        cycles = tuple(c + extra for c in cycles)
        T = bound.T
    comm = dict(rep.comm_bytes_per_gpu)
    comm["dp"] = comm.get("dp", 0.0) + x.sent
    story = rep.bottleneck
    others = [v for k, v in rep.breakdown_s.items() if k not in ("compute", "recompute", "dp")]
    if x.exposed_s > max(others, default=0.0):
        what = ("pushing gradients to and pulling weights from the parameter servers"
                if x.kind == "parameter-server" else f"the {x.kind} exchange with {x.peers} neighbour(s)")
        story = (f"DP takes {breakdown['dp'] / T:.1%} of the iteration: {what} adds {x.exposed_s:.3g} s "
                 f"to the replica's {x.step_s:.3g} s step.")
    rows: tuple[dict, ...] = ()
    notices = list(rep.notices) + ([bound.notice] if bound.notice else [])
    if len(kinds) > 1:
        rows = tuple({"name": k.tag or "at speed", "replicas": k.replicas, "iteration_time_s": c,
                      "wait_s": 0.0 if x.asynchronous else T - c} for k, c in zip(kinds, cycles, strict=True))
        fast = [row for row in rows if row["wait_s"] > 0]
        if fast:
            why = ("the servers update once every replica has pushed" if x.kind == "parameter-server"
                   else f"{x.kind} is synchronous, each step waits for the neighbours' models of the last "
                        "(gossip-async does not)")
            notices.append(Notice("straggler", (
                f"stragglers: {sum(row['replicas'] for row in fast):,} replicas would step in "
                f"{min(row['iteration_time_s'] for row in fast):.4g} s but wait for the "
                f"{kinds[pace].tag or 'slowest replica'} ({T:.4g} s per step): {why}")))
    tasks = with_exchange(rep.tasks, exchange_tasks(len(rep.classes), x, T))
    return rep.combined(sc, notices, pace=slow, groups=sc.dp, iteration_time_s=T, bottleneck=story,
                        tasks=tasks,
                        utilisation=amortised_utilisation(sc, busy, T),
                        bubble_fraction=bubble, bubble_fraction_busiest=busiest, breakdown_s=breakdown,
                        comm_bytes_per_gpu=comm, comm_bytes_by_tier=by_tier, exchange=x, replicas=rows)
