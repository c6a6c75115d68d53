"""PipeDream's partitioner over layers *and* replicas (Narayanan et al., "PipeDream: Generalized
Pipeline Parallelism for DNN Training", SOSP 2019, Sec. 3.1): which contiguous layers each of the
pp stages holds and on how many replicas, minimising the slowest stage.

The paper's dynamic programme A(j, m) = min over i, m' of max(A(i, m - m'), 2 C_i, T(i+1 -> j, m'))
with T(i -> j, m) = (1/m) max(sum of compute, sum of weight-sync time of m replicas), per
minibatch.  Here the same recurrence is written per iteration of ``m`` units (micro-batches) as the
engine runs them (taskgraph/replicas.py), for a fixed stage count pp:

- a stage of layers [i, j) on r replicas: each replica computes its share of the m units, and its
  gradients are all-reduced once per iteration among the r replicas on their own stream:
  T = max(units(r) x compute(i, j), sync(i, j, r)); r = 1 syncs nothing.  units(r) = m / r, the
  paper's 1/m, where iterations overlap (pipedream-async never flushes: in its steady state every
  replica takes every r-th unit of an endless round-robin); ceil(m / r) where each iteration
  flushes (1f1b: the busiest replica's units, replicas.steady_seconds);
- a boundary after layer i between a stage of r_a replicas and the next of r_b: unit u goes from
  replica u mod r_a to replica u mod r_b (its gradient back), each transfer priced on the link
  between those two GPUs; the boundary costs its busiest sending replica's seconds (the paper's
  2 C_i, split by the replica that sends it), counted over the same units as the compute;
- replicas sit on consecutive GPUs, stage after stage (network/replica_groups.py), so a stage's
  sync and transfers are priced on the GPUs it would get.

Exact for this cost model (checked against every split and replica count in
tests/test_stage_replicas.py); the stage memory limit is not applied (cut_split.Memory weighs it
for uniform stages).  The state is (stages, layers, replicas used, last stage's replicas): the
search is refused at validation beyond config/replica_rules.MAX_STATES_WORK transitions.

This cost model leaves out what the simulation shows of uneven replica counts (a replica's sends
to both neighbours share its one pp stream; a replica admits only NOAM micro-batches, so a slow
round trip through the later stages starves it): ``auto`` therefore takes this plan as one
candidate among others and keeps the one the simulation runs fastest (fold/replica_choice.py).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from ..config import Scenario
from ..errors import InternalError
from ..network.collectives import cost
from ..network.groups import Network
from ..physics.hardware import ComputeModel
from ..schedules.registry import get as get_schedule
from ..workloads.registry import workload_spec
from .layer import pp_message_bytes
from .split_cost import split_costs
from .techniques.optimizer import grad_reduce_bytes


@dataclass(frozen=True)
class ReplicaPlan:
    """The chosen layers and replicas per stage and the slowest stage's seconds per iteration."""

    layers: tuple[int, ...]
    replicas: tuple[int, ...]
    seconds: float


class _Costs:
    """What the search prices: per-layer compute of one unit, per-layer parameters, boundary
    bytes, and calls on groups of replica slots (memoised)."""

    def __init__(self, sc: Scenario) -> None:
        par = sc.parallelism
        # The layers' seconds do not depend on the replicas (zero 0, one chunk per stage): priced
        # on the scenario without them (one pipeline of pp stages).
        plain = replace(sc, parallelism=replace(par, stage_replicas=None, stage_layers=None,
                                                pipeline_layout=None, dp=1))
        self.net = Network(plain)
        spec = workload_spec(plain)
        costs = split_costs(plain, self.net, ComputeModel.for_scenario(plain), spec, False)
        per, first, last = costs.unit_seconds()
        n = spec.layers
        self.n, self.pp, self.m = n, par.pp, sc.micro_batches
        self.block = par.tp * par.cp
        self.slots = sc.cluster.gpus // self.block
        self.compute = np.concatenate(([0.0], np.cumsum(per)))
        self.first, self.last = first, last
        params = [spec.segments(i, 1)[0][0].params for i in range(n)]
        self.params = np.concatenate(([0.0], np.cumsum(params)))
        self.edge_params = (spec.first.params, spec.last.params)
        self.grad_bytes = grad_reduce_bytes(sc)
        # A CNN's boundaries differ; a transformer sends the same micro-batch x s x h everywhere.
        uniform = pp_message_bytes(plain)
        self.out_bytes = [spec.boundary_bytes(i) or uniform for i in range(n - 1)]
        # Overlapping iterations (pipedream-async) average a replica's units; a flush counts them.
        self.overlap = get_schedule(par.schedule).overlapping
        self._calls: dict[tuple, float] = {}
        self._per: dict[tuple[int, ...], tuple[int, ...]] = {}
        self._sync: dict[tuple, float] = {}
        self._cut: dict[tuple, float] = {}
        self._pairs: dict[tuple[int, int], dict[tuple[int, int], float]] = {}

    def call(self, op: str, size: float, slots: tuple[int, ...]) -> float:
        """Seconds of ``op`` on ``size`` bytes among the GPUs of replica ``slots``."""
        fabric = self.net.fabric
        per = self._per.get(slots)
        if per is None:        # where the group sits depends on its slots only, not on the bytes
            per = self._per[slots] = fabric.per_domain(np.array([k * self.block for k in slots],
                                                                dtype=np.int64))
        key = (op, size, per)
        got = self._calls.get(key)
        if got is None:
            members = np.array([k * self.block for k in slots], dtype=np.int64)
            got = self._calls[key] = cost(op, size, fabric.shape(members, per), self.net.algorithm,
                                          self.net.nvls, self.net.options).time_s
        return got

    def units(self, r: int) -> float:
        """Units a replica of a stage on ``r`` replicas computes per iteration (module docstring)."""
        return self.m / r if self.overlap else float(math.ceil(self.m / r))

    def pairs(self, ra: int, rb: int) -> dict[tuple[int, int], float]:
        """Units per iteration that go from replica a of a stage on ``ra`` replicas to replica b of
        the next on ``rb``, by (a, b): unit u from u mod ra to u mod rb (1F1B-RR), over the m units
        of a flushed iteration, or averaged over the round-robin's period lcm(ra, rb) where
        iterations overlap (as ``units``)."""
        key = (ra, rb)
        got = self._pairs.get(key)
        if got is None:
            span = math.lcm(ra, rb) if self.overlap else self.m
            got = {}
            for u in range(span):
                got[(u % ra, u % rb)] = got.get((u % ra, u % rb), 0.0) + 1.0
            scale = self.m / span
            got = self._pairs[key] = {k: v * scale for k, v in got.items()}
        return got

    def compute_of(self, i: int, j: int) -> float:
        """Seconds of one unit's forward and backward over layers [i, j) (the embeddings on the
        first stage, the head on the last)."""
        return float(self.compute[j] - self.compute[i] + (self.first if i == 0 else 0.0) +
                     (self.last if j == self.n else 0.0))

    def stage(self, i: int, j: int, offset: int, r: int) -> float:
        """Per-iteration seconds of a stage of layers [i, j) on ``r`` replicas from slot ``offset``."""
        busy = self.units(r) * self.compute_of(i, j)
        if r <= 1:
            return busy
        key = (i, j, offset, r)
        sync = self._sync.get(key)
        if sync is None:
            params = self.params[j] - self.params[i] + (self.edge_params[0] if i == 0 else 0.0) + \
                (self.edge_params[1] if j == self.n else 0.0)
            sync = self._sync[key] = self.call("all-reduce", params * self.grad_bytes,
                                               tuple(range(offset, offset + r)))
        return max(busy, sync)

    def boundary(self, i: int, offset: int, ra: int, rb: int) -> float:
        """Per-iteration seconds of the busiest replica's sends across the boundary after layer
        ``i - 1`` between ``ra`` replicas from slot ``offset`` and the next stage's ``rb``."""
        size = self.out_bytes[i - 1]
        key = (size, offset, ra, rb)              # cuts that send as many bytes cost alike
        got = self._cut.get(key)
        if got is None:
            busy_a, busy_b = [0.0] * ra, [0.0] * rb
            for (a, b), units in self.pairs(ra, rb).items():
                t = units * self.call("send-recv", size, (offset + a, offset + ra + b)) if size > 0 else 0.0
                busy_a[a] += t              # the activations, sent by stage A's replica
                busy_b[b] += t              # their gradient, sent back by stage B's replica
            got = self._cut[key] = max(max(busy_a), max(busy_b))
        return got


def plan(sc: Scenario, replicas: tuple[int, ...] | None = None,
         layers: tuple[int, ...] | None = None, costs: _Costs | None = None) -> ReplicaPlan:
    """The split of ``sc``'s layers over its pp stages and the replicas per stage (adding up to
    GPUs / (tp x cp)) that minimise the slowest stage (module docstring); ``replicas`` or
    ``layers`` fix theirs; ``costs``: ``sc``'s, when the caller has them."""
    c = costs if costs is not None else _Costs(sc)
    n, pp, W = c.n, c.pp, c.slots
    inf = float("inf")
    fixed = replicas

    def choices(stage: int, used: int) -> range:
        if fixed is not None:
            return range(fixed[stage], fixed[stage] + 1)
        if stage == pp - 1:
            return range(W - used, W - used + 1)
        return range(1, W - used - (pp - 1 - stage) + 1)

    cum = np.cumsum(layers) if layers is not None else None

    def ends(stage: int, i: int) -> range:
        if cum is not None:
            return range(int(cum[stage]), int(cum[stage]) + 1)
        return range(n, n + 1) if stage == pp - 1 else range(i + 1, n - (pp - 1 - stage) + 1)

    # best: (layers covered, slots used, last stage's replicas) -> (seconds, previous state)
    best: dict[tuple[int, int, int], tuple[float, tuple | None, int]] = {}
    for r in choices(0, 0):
        if r > c.m:
            continue
        for j in ends(0, 0):
            best[(j, r, r)] = (c.stage(0, j, 0, r), None, j)
    history = [best]
    for s in range(1, pp):
        nxt: dict[tuple[int, int, int], tuple[float, tuple | None, int]] = {}
        for (i, used, rl), (val, _, _) in best.items():
            for r in choices(s, used):
                if r < 1 or used + r > W or r > c.m:      # each replica needs a unit (replica_rules)
                    continue
                edge = max(val, c.boundary(i, used - rl, rl, r))
                for j in ends(s, i):
                    got = max(edge, c.stage(i, j, used, r))
                    key = (j, used + r, r)
                    if got < nxt.get(key, (inf,))[0] * (1 - 1e-12):
                        nxt[key] = (got, (i, used, rl), j - i)
        best = nxt
        history.append(best)
    final = [(v[0], k) for k, v in best.items() if k[0] == n and k[1] == W]
    if not final:
        raise ValueError(f"no split of {n} layers over {pp} stages on {W} replica slots")
    seconds, key = min(final)
    counts, reps = [], []
    for s in range(pp - 1, -1, -1):
        _, prev, count = history[s][key]
        counts.append(count)
        reps.append(key[2])
        if prev is not None:
            key = prev
    return ReplicaPlan(tuple(reversed(counts)), tuple(reversed(reps)), float(seconds))


def given_layers(sc: Scenario) -> tuple[int, ...] | None:
    """The layers per stage ``sc`` fixes (its pipeline layout or stage_layers), None to choose them."""
    par = sc.parallelism
    return par.pipeline_layout if par.pipeline_layout is not None else par.stage_layers


def with_plan(sc: Scenario, got: ReplicaPlan) -> Scenario:
    """``sc`` with ``got``'s replicas per stage and, when ``sc`` does not fix them, its layers."""
    par = sc.parallelism
    layers = par.stage_layers if given_layers(sc) is not None else got.layers
    return replace(sc, parallelism=replace(par, stage_replicas=got.replicas, stage_layers=layers))


def resolved(sc: Scenario) -> Scenario:
    """``sc`` when its replicas are counts (or absent).  ``auto`` (all entries 0) is resolved above
    the task graph, where the candidates can be simulated (fold/replica_choice.resolved, which
    simulate, fold/run and every estimator entry call before pricing a row): an ``auto`` that
    reaches this point would be priced on a plan the run never takes, and is an internal error."""
    r = sc.parallelism.stage_replicas
    if not r or min(r) > 0:
        return sc
    raise InternalError("parallelism.stage_replicas: auto reached the task graph unresolved; resolve it "
                        "with explorer.fold.replica_choice.resolved (the plan the simulation runs)")
