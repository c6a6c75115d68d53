"""PipeDream's hybrid of pipeline and data parallelism: each stage with its own replica count
(``parallelism.stage_replicas``; Narayanan et al., "PipeDream: Generalized Pipeline Parallelism
for DNN Training", SOSP 2019, Sec. 3.1-3.2).

The replicas of a stage run the same work shifted by one micro-batch, so a stage stays one GPU
class (DESIGN.md, "Symmetry") whose replicas are streams: replica k computes on ``compute~k`` and
sends on ``pp~k`` (replica 0 on the class's own ``compute`` and ``pp``, the GPU the breakdown and
the timeline show).  The cost grows with stages x micro-batches, as without replicas.

- 1F1B-RR (Sec. 3.2): micro-batch j runs on replica j mod r_s of stage s, its forward and its
  backward on the same replica; each replica runs one-forward-one-backward over its own
  micro-batches after admitting NOAM = ceil(sum of r over stages s.. / r_s) of them (the paper's
  "number of optimal active minibatches" for the input stage, the same count for every later
  stage over the workers from it on; with one replica per stage it is 1F1B's p - s).
- A transfer of micro-batch j goes from replica j mod r_s to replica j mod r_(s+1), priced on the
  link between those two GPUs (explorer/network/replica_groups.py).
- Each stage's gradients are all-reduced among its r_s replicas (the builder's dp buckets over the
  stage's group), none when r_s = 1 (PipeDream's VGG-16 "15-1": the fully connected layers are
  never synchronised).
"""
from __future__ import annotations

import math

from ..config import Scenario
from ..engine.records import BucketInfo, LinkCall, TransferInfo, priced_link
from ..engine.scheduler import Task, TaskGraph
from ..network.groups import Network
from ..network.replica_groups import pair_code
from . import replica_split
from .builder import IterationBuilder, _Compute
from .chunks import ChunkWork
from .layout import Pass
from .split import SplitChoice, given_split
from .techniques.link_sharing import flow


class ReplicaBuilder(IterationBuilder):
    """The builder of a scenario with ``parallelism.stage_replicas`` (make.iteration_builder
    makes one): the replicas' passes, transfers and the optimizer after every replica's last
    pass; the rest (chunks, gradient buckets over the stage's group, the optimizer) is the
    builder's own."""

    def __init__(self, sc: Scenario, net: Network | None = None, ideal: frozenset[str] | None = None,
                 split: tuple[int, ...] | None = None, balanced_split: tuple[int, ...] | None = None) -> None:
        super().__init__(sc, net, ideal, split, balanced_split)
        r = sc.parallelism.stage_replicas
        assert r and min(r) > 0                    # auto is resolved before (replica_split.resolved)
        self.replicas: tuple[int, ...] = r
        self.m_sim = units_simulated(r, self.m, self.schedule.iterations_simulated)
        self._ends: dict[int, list[int]] = {}

    def _split(self) -> SplitChoice:
        """The given layers, else PipeDream's partitioner's for the given replicas (no memory step
        moves them: the partitioner weighs memory itself)."""
        given = given_split(self.sc.parallelism)
        if given is not None:
            return SplitChoice(tuple(given), tuple(given))
        r = self.sc.parallelism.stage_replicas
        assert r
        layers = replica_split.plan(self.sc, r).layers
        return SplitChoice(layers, layers)

    def _compute_tasks(self, g: TaskGraph, ag_start: dict[tuple[int, int], int]) -> _Compute:
        ids, last, done, self._ends = compute_tasks(self, g)
        return _Compute(ids, last, done)

    def _data_dependencies(self, g: TaskGraph, comp: _Compute) -> None:
        data_dependencies(self, g, comp.ids)

    def rank_chunks(self, s: int) -> list[tuple[ChunkWork, int]]:
        """Stage ``s``'s chunk and the units its busiest replica (replica 0) runs an iteration,
        ceil(m / r_s): what one GPU of the class computes and sends (analysis/measures.py)."""
        return [(self.chunk_of(s, 0), math.ceil(self.m / self.replicas[s]))]

    def _iteration_end(self, g: TaskGraph, comp: _Compute, ends: dict[int, list[int]]) -> None:
        """The builder's ending; each stage's optimizer step also waits for every replica's last
        pass (the step follows the replicas' gradient all-reduce)."""
        start = len(g.tasks)
        super()._iteration_end(g, comp, ends)
        for t in g.tasks[start:]:
            if t.kind == "optimizer":
                t.deps += [(e, 1.0) for e in self._ends[t.cls]]


def one_gpu(b: IterationBuilder, by_class: list[list[Task]]) -> list[list[Task]]:
    """Each class's tasks of one GPU: replica 0's (the streams without ``~k``), which with
    ``rank_chunks`` make the per-GPU figures; every task without replicas."""
    if not isinstance(b, ReplicaBuilder):
        return by_class
    return [[t for t in mine if "~" not in t.stream] for mine in by_class]


def all_gpus_calls(b: IterationBuilder, s: int, mine: list[Task]) -> list[LinkCall] | None:
    """Every call all GPUs of class ``s`` make in an iteration, per tp x cp block (what the tiers'
    load multiplies by tp x cp x dp, dp being 1): the chunk's per-unit calls for all ``m`` units,
    every replica's transfers as priced between its two GPUs, and the gradient buckets (priced
    once, on replica 0's stream) r_s times.  None without replicas (the per-GPU calls x dp)."""
    if not isinstance(b, ReplicaBuilder):
        return None
    r = b.replicas[s]
    calls = [c.scaled(b.m) for c in b.chunk_of(s, 0).link_calls]
    shared: dict[int, list] = {}
    for t in mine:
        if t.links:
            entry = shared.setdefault(id(t.links), [t.links, 0])
            entry[1] += r if isinstance(t.info, BucketInfo) else 1
    return calls + [c.scaled(n) for links, n in shared.values() for c in links]


def stream(base: str, k: int) -> str:
    """The stream of replica ``k``: the class's own for replica 0, ``base~k`` otherwise."""
    return base if k == 0 else f"{base}~{k}"


def base_stream(name: str) -> str:
    """The stream a replica's stream stands for (``compute~3`` -> ``compute``)."""
    return name.split("~", 1)[0]


def warm_up(replicas: tuple[int, ...], s: int) -> int:
    """Micro-batches replica of stage ``s`` admits before its first backward (PipeDream's NOAM,
    Sec. 3.2: ceil(workers / workers of the input stage), counted from stage ``s`` on)."""
    return math.ceil(sum(replicas[s:]) / replicas[s])


def replica_order(replicas: tuple[int, ...], s: int, k: int, units: int) -> list[Pass]:
    """Program order of replica ``k`` of stage ``s`` over ``units`` micro-batches (1F1B-RR):
    its micro-batches k, k + r_s, ...; ``warm_up`` forwards, then a backward and a forward in turn,
    then the remaining backwards."""
    mbs = list(range(k, units, replicas[s]))
    w = min(warm_up(replicas, s), len(mbs))
    order = [Pass("F", 0, j, 0) for j in mbs[:w]]
    for i in range(w, len(mbs)):
        order += [Pass("B", 0, mbs[i - w], 0), Pass("F", 0, mbs[i], 0)]
    return order + [Pass("B", 0, j, 0) for j in mbs[len(mbs) - w:]]


def units_simulated(replicas: tuple[int, ...], m: int, iterations: int) -> int:
    """Micro-batches simulated back to back: the schedule's ``iterations`` of ``m``; a schedule
    that never flushes (iterations > 1) runs more whole iterations until every replica passes
    its warm-up and drain with a steady phase of two micro-batches between them, so that the
    steady-state window (analysis/steady_state.py, from the first iteration's to the second's
    backwards) lies in the steady phase of every replica."""
    if iterations <= 1:
        return m * iterations
    need = max(r * (2 * warm_up(replicas, s) + 2) for s, r in enumerate(replicas))
    return m * max(iterations, math.ceil(need / m))


def steady_seconds(t: float, units: int, r: int) -> float:
    """Closed form: r replicas of a stage processing ``units`` micro-batches of ``t`` seconds
    each, round-robin and without communication, take ceil(units / r) x t."""
    return math.ceil(units / r) * t


def compute_tasks(b: ReplicaBuilder, g: TaskGraph) -> tuple[dict, list[int], dict, dict[int, list[int]]]:
    """Every replica's passes in its program order: (ids keyed as the builder keys them, the last
    task of each stage — the replica that ends last in micro-batch order —, the pass that completes
    each stage's gradients, every replica's last task per stage)."""
    r = b.replicas
    ids: dict[tuple[str, int, int, int, int], int] = {}
    last = [-1] * b.p
    grads_done: dict[tuple[int, int], int] = {}
    ends: dict[int, list[int]] = {}
    for s in range(b.p):
        ends[s] = []
        for k in range(r[s]):
            prev = -1
            for ps in replica_order(r, s, k, b.m_sim):
                deps = [(prev, 1.0)] if prev >= 0 else []
                prev = b._pass_task(g, s, ps, deps, stream("compute", k))
                ids[(ps.kind, s, 0, ps.mb, 0)] = prev
            ends[s].append(prev)
        last_mb = b.m_sim - 1
        last[s] = ids[("B", s, 0, last_mb, 0)]
        grads_done[(s, 0)] = last[s]
    return ids, last, grads_done, ends


def data_dependencies(b: ReplicaBuilder, g: TaskGraph, ids: dict) -> None:
    """Forward j of stage s -> its transfer -> forward j of stage s+1, and backward j of stage s+1
    -> its transfer -> backward j of stage s, each transfer on its sender replica's ``pp`` stream
    and priced between the two replicas' GPUs; a backward after its own forward."""
    r, tasks = b.replicas, g.tasks
    shapes: dict[tuple[int, int, int, str], tuple] = {}
    for (kind, s, _, mb, _), tid in list(ids.items()):
        if kind == "B":
            tasks[tid].deps.append((ids[("F", s, 0, mb, 0)], 1.0))
        to = s + 1 if kind == "F" else s - 1
        if not 0 <= to < b.p:
            continue
        direction = "forward" if kind == "F" else "backward"
        pair = min(s, to)
        src, dst = mb % r[s], mb % r[to]
        key = (pair, src, dst, direction)
        shape = shapes.get(key) or shapes.setdefault(key, _transfer_shape(b, s, pair, src, dst, direction))
        stream_name, time_s, parts, links, tail, tier, wire = shape
        tasks.append(Task(s, stream_name, "pp", time_s, [(tid, 1.0)], 0, parts,
                          TransferInfo(mb, 0, *tail), links, tier=tier, wire=wire))
        tasks[ids[(kind, to, 0, mb, 0)]].deps.append((len(tasks) - 1, 1.0))


def _transfer_shape(b: ReplicaBuilder, s: int, pair: int, src: int, dst: int, direction: str) -> tuple:
    """What every transfer from replica ``src`` of stage ``s`` to replica ``dst`` of its neighbour on
    ``pair`` shares: its stream, priced cost, calls and payload fields after the unit and chunk
    (the builder's _transfer_shape, on the pair of replicas' GPUs)."""
    msg = b.pp_pair_bytes[pair]
    # The pair's two GPUs: stage ``pair``'s replica and stage ``pair + 1``'s.
    lo, hi = (src, dst) if direction == "forward" else (dst, src)
    code = pair_code(b.sc, pair, lo, hi)
    cc = b.net.cost("send-recv", msg, "pp", code)
    # Two iterations simulated back to back count as one (m of m_sim units per iteration).
    links = tuple(priced_link(b.net, "pp", "send-recv", msg, code, b.m / b.m_sim, True))
    tier, wire = flow(b.sc, cc)
    return (stream("pp", src), cc.time_s, (("pp", cc.time_s),), links,
            (msg, 2, "p2p", cc.limited_by, cc.busbw_GBps, direction, pair), tier, wire)
