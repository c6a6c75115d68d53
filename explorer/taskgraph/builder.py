"""The task graph of one training iteration, one GPU class per pipeline stage.

Every GPU of a pipeline stage runs the same work at the same time (its TP, CP and DP peers are
provably identical by symmetry), so a stage is simulated once; the cost grows with stages x
virtual stages x micro-batches, never with the GPU count (DESIGN.md, "Symmetry").  One builder
consumes the program order of any registered schedule (DualPipe's fused F&B op included); PipeDream's
per-stage replicas are its subclass in replicas.py (make.iteration_builder picks).  Per stage it emits:
- compute tasks in program order (forward, backward — full or input gradients only — and weight
  gradients of each chunk and micro-batch; fused F&B).  Collectives that block the GEMMs around
  them (Megatron TP, ring-attention CP, MoE all-to-all, a workload's blocking edges) are parts;
- ``pp`` transfers of activations and their gradients; a workload's overlapped edges (edges.py);
- ``dp`` gradient buckets (techniques/dp_buckets.py), parameter all-gathers for ZeRO 1-2;
- the optimizer step, memory bound (techniques/optimizer.py).
"""
from __future__ import annotations

import copy
from dataclasses import dataclass
from itertools import accumulate

from ..config import Scenario
from ..config.frameworks import profile as framework_profile
from ..engine.records import OverlapInfo, PassInfo, StepInfo, TransferInfo, priced_link
from ..engine.scheduler import Task, TaskGraph
from ..network.groups import Network
from ..physics.hardware import ComputeModel
from ..schedules.base import Timing
from ..schedules.registry import get as get_schedule
from ..vocabulary import TIERS
from ..workloads.registry import workload_spec
from .chunks import ChunkContext, ChunkWork, balanced, chunk_work, slowed
from .edges import edge_tasks
from .fused import fused_task
from .layer import pair_message_bytes, pp_message_bytes
from .layout import Fused, Layout, Pass, layout_for
from .order_memo import program_orders, steps
from .split import SplitChoice, given_split, split_choice, split_live
from .split_cost import split_costs
from .techniques.dp_buckets import dp_tasks, reduce_op
from .techniques.dp_contention import sm_factor
from .techniques.fsdp import comm_zero, grad_reduce_overlaps
from .techniques.link_sharing import flow
from .techniques.optimizer import optimizer_time

WAN = TIERS.index("scale-across")          # a call's egress entry that leaves the datacenter
IDEAL_ASPECTS = frozenset({"balance", "edges", "optimizer", "comm"})
TASK_KIND = {"F": "forward", "B": "backward", "Bi": "backward", "W": "weight-grad"}


@dataclass(frozen=True)
class _Compute:
    """What the compute pass of the graph hands the dependency and ending passes."""

    # (F|B|W, rank, lane, mb, local) -> task, in creation order
    ids: dict[tuple[str, int, int, int, int], int]
    last: list[int]                                     # last compute task of each rank
    grads_done: dict[tuple[int, int], int]              # (rank, local chunk) -> its last gradient pass


class IterationBuilder:
    """Builds the task graph of one iteration for a scenario (see module docstring)."""

    def __init__(self, sc: Scenario, net: Network | None = None, ideal: frozenset[str] | None = None,
                 split: tuple[int, ...] | None = None, balanced_split: tuple[int, ...] | None = None) -> None:
        """``ideal``: the aspects of the ideal pipeline to apply (IDEAL_ASPECTS; all of them when
        ``parallelism.ideal_pipeline`` is set): ``balance`` gives every chunk the average chunk's
        work, ``edges`` drops the embedding and logits work, ``optimizer`` drops the optimizer
        step, ``comm`` makes every call free (``net`` must then be a ``Network(sc, free=True)``).
        ``split``: the layers per chunk when the caller has :meth:`_split`'s answer already (the
        estimator memoises it, pricing/chunk_basis.layer_split), and ``balanced_split`` the time-balanced
        split it was moved from to fit memory, when the caller knows it (else taken to be ``split``)."""
        self.sc = sc
        if ideal is None:
            ideal = IDEAL_ASPECTS if sc.parallelism.ideal_pipeline else frozenset()
        self.ideal = frozenset(ideal)
        self.net = net or Network(sc, free="comm" in self.ideal)
        if ("comm" in self.ideal) != self.net.free:
            raise ValueError("IterationBuilder: free communication needs a Network(sc, free=True), only then")
        self.cm = ComputeModel.for_scenario(sc)
        p = sc.parallelism
        self.schedule = get_schedule(p.schedule)
        # The pipeline's unit of work: a micro-batch, or a token slice of one (TeraPipe, Li et al.
        # ICML 2021: slices of a sequence flow through the stages one after another).
        self.p, self.v, self.m = p.pp, p.vpp, sc.micro_batches * p.token_slices
        # Schedules that never flush simulate several iterations back to back (registry).
        self.m_sim = self.m * self.schedule.iterations_simulated
        self.layout: Layout = layout_for(self.schedule, self.p, self.v)
        # What one GPU computes, keeps and communicates per unit, layer by layer (the workload's
        # family turns the scenario into it: explorer/workloads/registry.py).
        self.spec = workload_spec(sc)
        # Tied input/output embeddings (model.tied_embeddings): when one GPU holds both the
        # embedding chunk and the output-layer chunk (pp 1, or DualPipe whose edge ranks hold
        # both ends) the shared matrix exists once on it.  On different stages each keeps a copy
        # (Megatron-LM); their gradient all-reduce in the embedding group is not modelled.
        self.tied = tied = sc.model.tied_embeddings and self.layout.ends_on_one_rank
        choice = SplitChoice(split, balanced_split or split) if split is not None else self._split()
        # balanced_counts: the time-balanced split, other than layer_counts when layers were moved.
        self.layer_counts, self.balanced_counts = choice.layers, choice.balanced
        ctx = ChunkContext(sc, self.net, self.cm, self.ideal, self.spec, self.layout.length, tied)
        starts = [0, *accumulate(self.layer_counts)]
        self.chunks = [chunk_work(ctx, gc, self.layout.rank_of(gc), starts[gc], n)
                       for gc, n in enumerate(self.layer_counts)]
        if "balance" in self.ideal:
            self.chunks = balanced(self.chunks)
        slow = sc.cluster.stragglers.stage_slowdown
        # A straggler replica (explorer/variants/replicas.py): its slow ranks' kernels take longer.  One
        # direction: chunk gc lives on rank gc mod p alone, so the chunk is slowed.  DualPipe's
        # chunks are each held by two ranks (one per direction), so the slowing follows the rank
        # that runs the pass (chunk_of), never the chunk both share.
        self._rank_slow: tuple[float, ...] = slow if slow and self.schedule.two_directions else ()
        self._slowed: dict[tuple[int, int], ChunkWork] = {}
        if slow and not self._rank_slow:
            self.chunks = [slowed(ch, slow[self.layout.rank_of(gc)]) for gc, ch in enumerate(self.chunks)]
        self.pp_msg_bytes = pp_message_bytes(sc)
        # Per stage pair: what its sender's last layer outputs (a CNN's differ boundary by boundary).
        self.pp_pair_bytes = pair_message_bytes(sc, self.spec, self.layer_counts, self.layout)
        # Program order of every stage over the units simulated (the registry's order function).
        self.orders = program_orders(self.schedule, self.p, self.m_sim, self.v, self.timing)
        # Per (rank, local chunk, pass kind): parts, drawing template, timeline fields, FSDP
        # hidden seconds — the same for every micro-batch, computed once (the 1T-parameter row
        # has 65k passes).
        self._pass_cache: dict[tuple, tuple] = {}      # passes' shapes; F&B's too (fused.py)
        self._pp_links: dict[int, tuple] = {}         # pair -> the calls of one transfer on it

    def for_scenario(self, sc: Scenario) -> IterationBuilder:
        """This builder for ``sc``, a scenario that differs from its own at most in the global batch
        (the fold's reduced runs): the layer split, chunks and priced passes are shared — only
        DualPipe's split reads the unit count, and DualPipe is never folded (fold_plan.foldable) —
        while the unit counts and program orders are ``sc``'s."""
        b = copy.copy(self)
        b.sc = sc
        b.m = sc.micro_batches * sc.parallelism.token_slices
        b.m_sim = b.m * self.schedule.iterations_simulated
        b.orders = program_orders(self.schedule, self.p, b.m_sim, self.v, b.timing)
        b._pp_links = {}                 # a transfer's calls count m / m_sim of an iteration
        return b

    # -- layer split and chunks -----------------------------------------------------------------
    def _split(self) -> SplitChoice:
        """Layers per chunk (split.split_choice), weighed by each piece's seconds as the passes
        run them (split_cost.py), priced on the scenario's own network even when this run makes
        communication free: the split is the scenario's, the ideal aspects are applied to it."""
        given = given_split(self.sc.parallelism)
        if given is not None:
            return SplitChoice(tuple(given), tuple(given))
        net = Network(self.sc) if self.net.free else self.net
        costs = split_costs(self.sc, net, self.cm, self.spec, self.tied)
        lay = self.layout      # DualPipe: the pair split; a V: a plain line of 2p chunks; else p stages
        stages = None if self.schedule.pair_split else lay.length if lay.v_shape else self.p
        live = split_live(self.schedule, self.p, self.m, self.v)
        return split_choice(None, costs, lay.length, stages, self.m, lay.v_shape,
                            lay.v_shape and self.schedule.fused_pairs, live)

    def timing(self) -> Timing:
        """Per-stage forward and full backward seconds of one unit (first chunk of each stage, as
        the cross-datacenter schedules have one), each boundary's transfer seconds and whether it
        crosses datacenters, and the in-flight cap: what a timed schedule orders by (registry)."""
        fwd = tuple(sum(x for _, x in self.chunk_of(s, 0).fwd_parts) for s in range(self.p))
        bwd = tuple(sum(x for _, x in self.chunk_of(s, 0).bwd_parts) for s in range(self.p))
        costs = [self.net.cost("send-recv", self.pp_pair_bytes[s], "pp", s) for s in range(self.p - 1)]
        return Timing(fwd, bwd, tuple(c.time_s for c in costs), tuple(c.egress[WAN] > 0 for c in costs),
                      self.sc.parallelism.max_in_flight)

    def rank_chunks(self, s: int) -> list[tuple[ChunkWork, int]]:
        """The chunks GPU class ``s`` holds and how many pipeline units each processes."""
        lanes = 2 if self.schedule.two_directions else 1
        return [(self.chunk_of(s, c), self.m // lanes) for c in range(self.schedule.chunks_per_rank(self.v))]

    def chunk_of(self, s: int, c: int) -> ChunkWork:
        """Local chunk ``c`` of class ``s``: the virtual stage, or DualPipe's direction (on a
        straggler rank, as that rank runs it)."""
        ch = self.chunks[self.layout.chunk_index(s, c)]
        if not self._rank_slow or self._rank_slow[s] == 1.0:
            return ch
        got = self._slowed.get((s, c))
        if got is None:
            got = self._slowed[(s, c)] = slowed(ch, self._rank_slow[s])
        return got

    def optimizer_time(self, s: int) -> float:
        """Seconds of class ``s``'s optimizer step (0 under the ideal pipeline's ``optimizer``)."""
        if "optimizer" in self.ideal:
            return 0.0
        dense = sum(ch.params for ch, _ in self.rank_chunks(s))
        expert = sum(ch.expert_params for ch, _ in self.rank_chunks(s))
        return optimizer_time(dense, expert, self.net.group_size("dp", s), self.net.group_size("edp", s),
                              self.sc.parallelism.zero, self.sc.training.optimizer, self.cm.hbm_bytes_per_s)

    # -- the graph -------------------------------------------------------------------------------
    def build(self) -> TaskGraph:
        """The task graph: gathers, compute in program order, transfers, DP ending, optimizer."""
        g = TaskGraph()
        ag_start = self._gathers_at_start(g)
        comp = self._compute_tasks(g, ag_start)
        self._data_dependencies(g, comp)
        # Overlapped generic edges on their dimensions' streams (taskgraph/edges.py).
        ends = edge_tasks(g, comp.ids, lambda s, c: self.chunk_of(s, c).edge_calls, self.m / self.m_sim)
        self._iteration_end(g, comp, ends)
        return g

    def _dp(self, g: TaskGraph, s: int, c: int, op: str, deps: list, ready_task: int | None) -> list[int]:
        return dp_tasks(g, self.sc, self.net, self.chunk_of(s, c), s, c, self.layout.chunk_index(s, c), op,
                        deps, ready_task, sm_factor(self.sc, bool(self.ideal)))

    def _gathers_at_start(self, g: TaskGraph) -> dict[tuple[int, int], int]:
        """ZeRO 1-2 parameter all-gather at the start (steady state: issued after the previous
        optimizer step and overlapped with this forward when dp_overlap, Megatron's
        overlap_param_gather): (rank, local chunk) -> the last gather task its first forward waits for."""
        out: dict[tuple[int, int], int] = {}
        comm = self.sc.communication
        if comm_zero(self.sc) in (1, 2) and comm.dp_overlap and \
                framework_profile(self.sc.training.framework).param_gather_overlaps_forward:
            for s in range(self.p):
                for c in range(self.schedule.chunks_per_rank(self.v)):
                    gathers = self._dp(g, s, c, "all-gather", [], None)
                    if gathers:                      # none when the data-parallel group is 1 GPU
                        out[(s, c)] = gathers[-1]
        return out

    def _compute_tasks(self, g: TaskGraph, ag_start: dict[tuple[int, int], int]) -> _Compute:
        """Compute tasks in program order; their data dependencies come in a second pass, once
        every task id exists."""
        comp = _Compute({}, [-1] * self.p, {})
        ids, grads_done, schedule = comp.ids, comp.grads_done, self.schedule
        for s in range(self.p):
            prev = -1
            for step in steps(self.orders[s], schedule):
                deps = [(prev, 1.0)] if prev >= 0 else []
                first = step.f if isinstance(step, Fused) else step
                if ag_start and first.kind == "F" and first.mb == 0 and (s, first.local) in ag_start:
                    deps.append((ag_start[(s, first.local)], 1.0))
                members: tuple[Pass, ...]
                if isinstance(step, Fused):
                    tid = fused_task(self, g, s, step, deps)
                    members = (step.f, step.b)
                else:
                    tid = self._pass_task(g, s, step, deps)
                    members = (step,)
                for ps in members:
                    kind = ps.kind
                    # Input-gradient passes (Bi) take the backward's place in the pipeline.
                    ids[("B" if kind == "Bi" else kind, s, ps.lane, ps.mb, ps.local)] = tid
                    if kind == "B" or kind == "W":     # the pass that completes the chunk's gradients
                        grads_done[(s, ps.local)] = tid
                prev = tid
            comp.last[s] = prev
        return comp

    def _pass_shape(self, s: int, local: int, kind: str) -> tuple:
        """(chunk, parts, duration, layer template, timeline fields, FSDP hidden seconds) of a pass;
        parts and duration include the SM contention of the communication hidden under it."""
        key = (s, local, kind)
        if key not in self._pass_cache:
            ch = self.chunk_of(s, local)
            if kind == "F":
                parts, layer_parts = ch.fwd_parts, ch.fwd_layer
            elif kind == "B":
                parts, layer_parts = ch.bwd_parts, ch.bwd_layer
            else:
                w = kind == "W"
                parts, layer_parts = ch.split(ch.bwd_parts, w), ch.split(ch.bwd_layer, w)
            hidden = ch.fsdp_hidden[0 if kind == "F" else 1] if kind != "W" else 0.0
            dur = sum(x for _, x in parts)
            flops, hidden_comm = ch.pass_fields(kind)
            slow = self._sm_contention(sum(v for _, v in hidden_comm) + hidden)
            if slow > 0:
                parts, dur = parts + (("compute", slow),), dur + slow
            self._pass_cache[key] = (ch, parts, dur, layer_parts, (flops, hidden_comm), hidden)
        return self._pass_cache[key]

    def _pass_task(self, g: TaskGraph, s: int, ps: Pass, deps: list, stream: str = "compute") -> int:
        kind, local = ps.kind, ps.local
        shape = self._pass_cache.get((s, local, kind)) or self._pass_shape(s, local, kind)
        ch, parts, dur, layer_parts, (flops, hidden_comm), hidden = shape
        info = PassInfo(ps.mb, local, ch.layers, ch.comm, layer_parts, flops, hidden_comm,
                        offload=ch.offload_fields(kind))
        tasks = g.tasks                  # TaskGraph.add inlined: one call fewer per pass
        tasks.append(Task(s, stream, TASK_KIND[kind], dur, deps, 0, parts, info))
        tid = len(tasks) - 1
        if hidden > 0:
            self._fsdp_hidden_task(g, s, tid, ps, ch, hidden)
        return tid

    def _sm_contention(self, hidden_s: float) -> float:
        """Extra compute seconds of a pass under which ``hidden_s`` of communication runs: the
        communication kernels hold ``communication.comm_sms`` of the GPU's SMs meanwhile, so the
        pass's kernels progress at (1 - comm_sms/sms) of their speed for that long (DeepSeek-V3
        report Sec. 3.2.2: 20 of the H800's 132 SMs serve communication)."""
        return hidden_s * sm_factor(self.sc, bool(self.ideal)) if hidden_s > 0 else 0.0

    def _fsdp_hidden_task(self, g: TaskGraph, s: int, tid: int, ps: Pass, ch: ChunkWork,
                          hidden: float) -> None:
        """The part of the layer-wise gathers/reductions that runs under a pass's compute: drawn
        on the dp stream, blocking nothing (its exposed rest is a part of the pass)."""
        if hidden <= 0:
            return
        g.add(Task(s, "dp", "dp", hidden, [(tid, 0.0)], priority=1, parts=(("dp", hidden),),
                   info=OverlapInfo(ps.mb, ps.local, ch.fsdp_bytes, self.net.group_size("dp", s))))

    def _data_dependencies(self, g: TaskGraph, comp: _Compute) -> None:
        """Pipeline transfers F(position k) -> F(k+1) and B(k+1) -> B(k) along each lane; a
        backward after its own forward, a weight-gradient pass after its backward."""
        lay, ids, tasks = self.layout, comp.ids, g.tasks
        # Per (rank, lane, local chunk): the neighbours along the lane and the pair each transfer
        # uses — the same for every unit, looked up once (the 1T-parameter row has 65k passes).
        hops: dict[tuple[int, int, int], tuple] = {}
        for (kind, s, lane, mb, local), tid in list(ids.items()):
            if kind == "W":
                tasks[tid].deps.append((ids[("B", s, lane, mb, local)], 1.0))
                continue
            hop = hops.get((s, lane, local))
            if hop is None:
                pos = lay.position(s, lane, local)
                nxt = lay.at(lane, pos + 1) if pos + 1 < lay.length else None
                prv = lay.at(lane, pos - 1) if pos > 0 else None
                ts = self._transfer_shape
                hop = hops[(s, lane, local)] = (
                    nxt, nxt and nxt[0] != s and ts(lay.pair(s, nxt[0], "forward"), s, "forward"),
                    prv, prv and prv[0] != s and ts(lay.pair(s, prv[0], "backward"), s, "backward"))
            nxt, fwd, prv, bwd = hop
            if kind == "F" and nxt is not None:
                dst = ids[("F", nxt[0], lane, mb, nxt[1])]
                to = nxt[0]
            elif kind == "B":
                tasks[tid].deps.append((ids[("F", s, lane, mb, local)], 1.0))
                if prv is None:
                    continue
                dst, fwd, to = ids[("B", prv[0], lane, mb, prv[1])], bwd, prv[0]
            else:
                continue
            if to == s:                  # a V's turn: the next chunk is on this rank, no transfer
                if dst != tid:
                    tasks[dst].deps.append((tid, 1.0))
                continue
            # The transfer (see _transfer_shape), made inline: the 1T-parameter row has 65k of them.
            st, stream, priority, time_s, parts, links, tail, tier, wire = fwd
            tasks.append(Task(st, stream, "pp", time_s, [(tid, 1.0)], priority, parts,
                              TransferInfo(mb, local, *tail), links, tier, wire))
            tasks[dst].deps.append((len(tasks) - 1, 1.0))

    def _transfer_shape(self, pair: int, s: int, direction: str) -> tuple:
        """What every transfer of ``s`` on ``pair`` in ``direction`` shares: its stream, priority,
        priced cost and calls, and its payload's fields after the unit and chunk."""
        msg = self.pp_pair_bytes[pair]
        cc = self.net.cost("send-recv", msg, "pp", pair)
        links = self._pp_links.get(pair)
        if links is None:
            # Two iterations simulated back to back count as one (m of m_sim units per iteration).
            links = tuple(priced_link(self.net, "pp", "send-recv", msg, pair,
                                      self.m / self.m_sim, True))
            self._pp_links[pair] = links
        # A blocking send (DeepSpeed's PipelineEngine, explorer/config/frameworks.py) occupies the sender's
        # compute stream right after the pass that produced it (priority -1 wins the tie with the
        # next pass); otherwise it runs on the pp stream beside compute.
        blocking = framework_profile(self.sc.training.framework).blocking_p2p
        tier, wire = flow(self.sc, cc)
        return (s, "compute" if blocking else "pp", -1 if blocking else 0, cc.time_s, (("pp", cc.time_s),),
                links, (msg, 2, "p2p", cc.limited_by, cc.busbw_GBps, direction, pair), tier, wire)

    def _iteration_end(self, g: TaskGraph, comp: _Compute, ends: dict[int, list[int]]) -> None:
        """Gradient reduction (bucketed, overlapped with the last backward when dp_overlap, else
        after the stage's whole backward), the optimizer, and the ZeRO 1-2 parameter all-gather
        after it when it could not overlap the next forward."""
        zero, comm = comm_zero(self.sc), self.sc.communication
        fw = framework_profile(self.sc.training.framework)
        # DeepSpeed reduces after the backward (overlap_comm off; the pipeline engine's ReduceGrads
        # after the flush) and gathers ZeRO-1/2 parameters inside the step (explorer/config/frameworks.py);
        # so does FSDP2 under a pipeline, once per step (techniques/fsdp.py comm_zero).
        overlap_reduce = grad_reduce_overlaps(self.sc)
        overlap_gather = comm.dp_overlap and fw.param_gather_overlaps_forward
        local_chunks = range(self.schedule.chunks_per_rank(self.v))
        for s in range(self.p):
            dp_ids: list[int] = []
            op = reduce_op(self.sc)
            if op is not None:
                for c in local_chunks:
                    if overlap_reduce:
                        # Buckets leave as the last backward produces them (PyTorch DDP).
                        dp_ids += self._dp(g, s, c, op, [], comp.grads_done[(s, c)])
                    else:
                        # No overlap: every bucket waits for the stage's whole backward.
                        dp_ids += self._dp(g, s, c, op, [(comp.last[s], 1.0)], None)
            t_opt = self.optimizer_time(s)
            deps = [(comp.last[s], 1.0)] + [(d, 1.0) for d in dp_ids + ends.get(s, [])]
            opt = g.add(Task(s, "compute", "optimizer", t_opt, deps, parts=(("optimizer", t_opt),),
                             info=StepInfo()))
            if zero in (1, 2) and not overlap_gather:
                for c in local_chunks:
                    self._dp(g, s, c, "all-gather", [(opt, 1.0)], None)
