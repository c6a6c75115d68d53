"""The task graph of one training iteration, one GPU class per pipeline stage.

Every GPU of a pipeline stage runs the same work at the same time (its TP, CP and DP peers are
provably identical by symmetry), so a stage is simulated once; the cost grows with
stages x virtual stages x micro-batches, never with the GPU count (DESIGN.md, "Symmetry").

Per stage, the builder emits:
- compute-stream tasks in the pipeline schedule's program order (forward ``F`` and backward ``B``
  of each chunk and micro-batch).  Collectives that block the GEMMs around them (Megatron TP,
  ring-attention CP, MoE all-to-all) are part of these tasks: their exposed time is a ``part``
  (tp/cp/ep) of the task and is drawn on its own lane by the timeline;
- ``pp`` transfers of activations (forward) and activation gradients (backward) between stages;
- ``dp`` gradient buckets: all-reduce (ZeRO 0) or reduce-scatter (ZeRO >= 1), released as the last
  micro-batch's backward produces them when ``dp_overlap`` (PyTorch DDP, Li et al. VLDB 2020), or
  after the stage's last backward otherwise; parameter all-gathers for ZeRO >= 1;
- the optimizer step, memory bound.
"""
from __future__ import annotations

import math
from bisect import bisect_right
from dataclasses import dataclass, replace
from functools import lru_cache
from itertools import accumulate

from ..collectives import bus_factor, scale_up_factor
from ..engine import Task, TaskGraph
from ..hardware import BYTES_PER_ELEMENT, ComputeModel
from ..network import Network
from ..scenario import Scenario
from ..taskgraph.records import LinkCall
from ..workload import ZERO_WORK, Collective, EdgeCost, LayerCost, embedding_cost, layer_cost, logits_cost
from .registry import get as get_schedule

MAX_BUCKET_TASKS = 8            # gradient buckets per chunk kept as separate tasks (more are merged)
TP_OVERLAP_CHUNKS = 4           # chunked collective matmul: the first chunk's transfer stays exposed
GRAD_BYTES = 2                  # gradients reduced in bf16 (PyTorch DDP / Megatron-Core default)
PARAM_BYTES = 2                 # bf16 working copy of the weights
OPTIMIZER_STATE_BYTES = {"adam": 12, "sgd": 8}   # fp32 master + moments (ZeRO paper, K = 12 for Adam)
# HBM traffic of one optimizer step per parameter: Adam reads master, m, v (fp32) and the bf16
# gradient and writes master, m, v and the bf16 weight: 14 + 14 bytes; SGD with momentum 10 + 10.
OPTIMIZER_TRAFFIC_BYTES = {"adam": 28, "sgd": 20}


@dataclass(frozen=True)
class ChunkWork:
    """One pipeline chunk (a contiguous run of layers on one stage) for one micro-batch."""

    index: int                       # global chunk index c*pp + stage
    layers: int
    moe_layers: int
    fwd_parts: tuple[tuple[str, float], ...]
    bwd_parts: tuple[tuple[str, float], ...]
    fwd_layer: tuple[tuple[str, float], ...]     # one (average) layer's forward parts, for drawing
    bwd_layer: tuple[tuple[str, float], ...]
    hw_flops: float                  # FLOPs executed per micro-batch (fwd + bwd + recompute)
    model_flops: float               # FLOPs without recompute (MFU numerator, PaLM App. B)
    params: float                    # dense parameters held
    expert_params: float
    act_bytes: float                 # activations kept per micro-batch
    tp_bytes: float                  # bytes sent per micro-batch, per dimension (bus bytes)
    cp_bytes: float
    ep_bytes: float
    comm: dict                       # per dimension (tp, cp, ep): its per-layer call, for the hover
    fsdp_hidden: tuple[float, float] = (0.0, 0.0)   # ZeRO-3 gather/reduce time hidden behind F, B
    fsdp_bytes: float = 0.0          # ZeRO-3 bus bytes per micro-batch (gathers + reduce-scatter)
    fsdp_layer_bytes: float = 0.0    # bf16 bytes of the largest layer this chunk gathers
    hidden_f: tuple[tuple[str, float], ...] = ()    # communication hidden under the forward, per dim
    hidden_b: tuple[tuple[str, float], ...] = ()    # ... under the backward (TP overlap, ring attention)
    flops_f: float = 0.0             # FLOPs of the forward, backward (input grads + recompute), W pass
    flops_b: float = 0.0
    flops_w: float = 0.0
    link_calls: tuple[LinkCall, ...] = ()           # TP/EP/CP/ZeRO-3 calls per pipeline unit, as priced

    def split(self, parts: tuple[tuple[str, float], ...], weight: bool) -> tuple[tuple[str, float], ...]:
        """The weight-gradient part (W pass) or everything else (B pass) of backward ``parts``."""
        return tuple((k, v) for k, v in parts if (k == "weight-grad") == weight)


def _sum_parts(*parts: tuple[str, float]) -> tuple[tuple[str, float], ...]:
    acc: dict[str, float] = {}
    for k, v in parts:
        if v > 0:
            acc[k] = acc.get(k, 0.0) + v
    return tuple(acc.items())


def split_layers(costs: list[float], chunks: int, first_extra: float, last_extra: float,
                 stages: int | None = None) -> tuple[int, ...]:
    """Contiguous split of layers into ``chunks`` chunks (>= 1 layer each).

    The first chunk also carries ``first_extra`` (embedding), the last ``last_extra`` (output layer
    and loss).  With one chunk per stage (``stages`` None or equal to ``chunks``) the split
    minimises the largest chunk cost; among optimal splits the one closest to evenly spaced
    cumulative cost is kept, so slack goes to the chunks with the edge work (Llama 3 405B puts 126
    layers on 16 stages as 7, 8 x 14, 7 for this reason).

    Interleaved schedules (``stages`` < ``chunks``; chunk k runs on stage k mod stages, Narayanan et
    al. SC21 Sec. 2.2) are paced round by round (virtual stage r = chunks r*p .. r*p+p-1) and by
    the busiest *stage*, the sum of its chunks, so a split that only balances chunks can leave
    both unbalanced (24 layers in 12 chunks as 3 x 6, 1 x 6 puts 7 layers on stage 0 and 3-layer
    chunks in the first rounds).  Candidates are then compared by the sum over rounds of the
    round's largest chunk, then the largest stage total, then the largest chunk, then their order
    (a candidate whose largest chunk exceeds the first one's is not taken):
    the min-max-chunk split above, Megatron-LM's uniform split (the same number of layers per
    virtual stage) with the remainder spread where it costs least, and the uniform split with one
    layer less on a chunk whose embedding or output-layer work is heavy (>= half a layer).

    Costs: prefix sums and bisection, O(chunks log n) per probe of the 60-step bisection on the cap.

    >>> split_layers([1.0] * 24, 12, 0.0, 0.5, stages=4)
    (2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2)
    """
    n = len(costs)
    extras = [0.0] * chunks
    extras[0] += first_extra
    extras[-1] += last_extra
    prefix = [0.0, *accumulate(costs)]

    def greedy(cap: float) -> list[int] | None:
        # Each chunk takes as many layers as fit under ``cap`` (at least one, leaving one for every
        # later chunk); feasible when the last chunk, which takes the rest, fits too.
        out: list[int] = []
        i, tol = 0, cap * (1 + 1e-9)
        for j in range(chunks - 1):
            end = bisect_right(prefix, prefix[i] + tol - extras[j], lo=i) - 1
            # Settle the rounding of the bisection target on the chunk's own sum.
            while end < n and prefix[end + 1] - prefix[i] + extras[j] <= tol:
                end += 1
            while end > i and prefix[end] - prefix[i] + extras[j] > tol:
                end -= 1
            end = max(min(end, n - (chunks - j - 1)), i + 1)
            out.append(end - i)
            i = end
        out.append(n - i)
        return out if prefix[n] - prefix[i] + extras[-1] <= tol else None

    def chunk_costs(counts: list[int] | tuple[int, ...]) -> list[float]:
        ends = list(accumulate(counts))
        return [extras[k] + prefix[e] - prefix[e - c] for k, (c, e) in enumerate(zip(counts, ends))]

    lo, hi = max(max(costs), max(extras)), (prefix[n] + sum(extras)) * (1 + 1e-6)
    for _ in range(60):
        mid = (lo + hi) / 2
        if greedy(mid) is None:
            lo = mid
        else:
            hi = mid
    # hi is the optimal cap up to rounding noise; one more tolerance step makes every chunk whose
    # cost equals the optimum fit for certain, so the greedy packs the front chunks full.
    best = greedy(hi * (1 + 1e-9))
    assert best is not None
    # Evenly spaced alternative: assign each layer by the midpoint of its cumulative cost.
    total = prefix[n] + sum(extras)
    counts = [0] * chunks
    acc = extras[0]                      # summed layer by layer: exact ties decide as before
    for c in costs:
        counts[min(int((acc + c / 2) / (total / chunks)), chunks - 1)] += 1
        acc += c
    if min(counts) >= 1 and max(chunk_costs(counts)) <= max(chunk_costs(best)) * (1 + 1e-9):
        best = counts
    if stages is None or stages >= chunks:
        return tuple(best)

    def score(counts: list[int] | tuple[int, ...]) -> tuple[float, float, float]:
        # (sum over virtual-stage rounds of the round's slowest chunk, largest stage total,
        # largest chunk).  Interleaved 1F1B passes every micro-batch through the rounds in order,
        # each at the pace of its slowest chunk, so the rounds' maxima add up (SC21 Sec. 2.2.2:
        # the bubble is (p-1) chunk times); the stage totals pace the steady state.
        cc = chunk_costs(counts)
        per = [0.0] * stages
        for k, c in enumerate(cc):
            per[k % stages] += c
        rounds = sum(max(cc[r:r + stages]) for r in range(0, chunks, stages))
        return rounds, max(per), max(cc)

    def better(a: tuple[float, ...], b: tuple[float, ...]) -> bool:
        # Lexicographic with a relative tolerance: summation-order noise never decides.
        for x, y in zip(a, b):
            if x < y * (1 - 1e-9):
                return True
            if x > y * (1 + 1e-9):
                return False
        return False

    def spread(base: list[int], spare: int) -> list[int] | None:
        # Hand out ``spare`` layers one at a time to the chunk where they cost least (score; ties:
        # the lower index), each chunk at most one.
        if min(base) < 1 or spare > chunks:
            return None
        out = list(base)
        free = list(range(chunks))
        for _ in range(spare):
            pick = None
            for k in free:
                trial = out[:k] + [out[k] + 1] + out[k + 1:]
                if pick is None or better(score(trial), pick[0]):
                    pick = (score(trial), k)
            out[pick[1]] += 1
            free.remove(pick[1])
        return out

    base, rem = divmod(n, chunks)
    candidates = [list(best), spread([base] * chunks, rem)]
    mean = prefix[n] / n
    if base > 1 and max(first_extra, last_extra) >= mean / 2:
        # One layer less on the chunk(s) whose edge work is heavy (at least half a layer).
        lighter = [base] * chunks
        spare = rem
        for k, e in ((0, first_extra), (chunks - 1, last_extra)):
            if e >= mean / 2:
                lighter[k] -= 1
                spare += 1
        candidates.append(spread(lighter, spare))
    # A candidate may not enlarge the largest chunk: it sets the warm-up and cool-down, (p-1) chunk
    # times (SC21 Sec. 2.2.2), which the round sum only approximates.
    keep = candidates[0]
    cap = max(chunk_costs(keep)) * (1 + 1e-9)
    for cand in candidates[1:]:
        if cand is not None and max(chunk_costs(cand)) <= cap and better(score(cand), score(keep)):
            keep = cand
    return tuple(keep)


@lru_cache(maxsize=None)
def expected_distinct_nodes(nodes: int, k: int, limit: int) -> float:
    """E[min(D, limit)], D the number of distinct nodes among ``k`` experts each on a uniformly
    random one of ``nodes`` nodes (balanced routing; drawn with replacement).  The distribution of
    D is the classical occupancy problem (Feller, An Introduction to Probability Theory, vol. 1,
    ch. II.11), computed draw by draw: a draw hits a new node with probability (nodes - j)/nodes.

    >>> round(expected_distinct_nodes(8, 8, 8), 3), expected_distinct_nodes(8, 8, 1)
    (5.251, 1.0)
    """
    top = min(k, nodes)
    prob = [1.0] + [0.0] * top          # prob[j]: j distinct nodes so far
    for _ in range(k):
        nxt = [0.0] * (top + 1)
        for j, pj in enumerate(prob):
            if pj:
                nxt[j] += pj * j / nodes
                if j < top:
                    nxt[j + 1] += pj * (nodes - j) / nodes
        prob = nxt
    return sum(min(j, limit) * pj for j, pj in enumerate(prob))


class IterationBuilder:
    """Builds the task graph of one iteration for a scenario (see module docstring)."""

    def __init__(self, sc: Scenario, net: Network | None = None, ideal: frozenset[str] | None = None) -> None:
        """``ideal``: the aspects of the ideal pipeline to apply (IDEAL_ASPECTS; all of them when
        ``parallelism.ideal_pipeline`` is set): ``balance`` gives every chunk the average chunk's
        work, ``edges`` drops the embedding and logits work, ``optimizer`` drops the optimizer
        step, ``comm`` makes every call free (``net`` must then be a ``Network(sc, free=True)``)."""
        self.sc = sc
        if ideal is None:
            ideal = IDEAL_ASPECTS if sc.parallelism.ideal_pipeline else frozenset()
        self.ideal = frozenset(ideal)
        self.net = net or Network(sc, free="comm" in self.ideal)
        if ("comm" in self.ideal) != self.net.free:
            raise ValueError("IterationBuilder: free communication needs a Network(sc, free=True) and only then")
        self.cm = ComputeModel.for_scenario(sc)
        p = sc.parallelism
        # The pipeline's unit of work: a micro-batch, or a token slice of one (TeraPipe, Li et al.
        # ICML 2021: slices of a sequence flow through the stages one after another).
        self.p, self.v, self.m = p.pp, p.vpp, sc.micro_batches * p.token_slices
        # PipeDream's asynchronous 1F1B never flushes: simulate two iterations back to back and
        # measure the second (simulate.py), whose warm-up is the first one's tail.
        self.schedule = get_schedule(p.schedule)
        self.m_sim = self.m * self.schedule.iterations_simulated
        self.dense = layer_cost(sc, moe_layer=False)
        self.moe = layer_cost(sc, moe_layer=True) if sc.model.is_moe else None
        self.emb = embedding_cost(sc)
        self.logits = logits_cost(sc)
        # Tied input/output embeddings (model.tied_embeddings): when one GPU holds both the
        # embedding chunk and the output-layer chunk (pp 1, or DualPipe whose edge ranks hold
        # both ends) the shared matrix exists once on it.  On different stages each keeps a copy
        # (Megatron-LM); their gradient all-reduce in the embedding group is not modelled.
        self.tied_same_gpu = sc.model.tied_embeddings and (self.p == 1 or self.schedule.two_directions)
        self.layer_counts = self._split()
        self.chunks = [self._chunk(gc) for gc in range(self.p * self.v)]
        if "balance" in self.ideal:
            self.chunks = _balanced(self.chunks)

    # -- layer split ---------------------------------------------------------------------------
    def _layer_is_moe(self, i: int) -> bool:
        m = self.sc.model
        return m.is_moe and i >= m.moe.dense_layers

    def _train_time(self, lc: LayerCost | EdgeCost) -> float:
        t = self.cm.time
        return sum(t(w.gemm_flops, w.gemm_bytes, w.stream_bytes) for w in (lc.fwd, lc.bwd_input, lc.bwd_weight))

    def _split(self) -> tuple[int, ...]:
        given = self.sc.parallelism.stage_layers
        if given is not None:
            return tuple(given)
        dense_t = self._train_time(self.dense)
        moe_t = self._train_time(self.moe) if self.moe else dense_t
        costs = [moe_t if self._layer_is_moe(i) else dense_t for i in range(self.sc.model.layers)]
        stages = None if self.schedule.two_directions else self.p
        return split_layers(costs, self.p * self.v, self._train_time(self.emb), self._train_time(self.logits),
                            stages=stages)

    # -- per-chunk work --------------------------------------------------------------------------
    def _coll_time(self, calls, dim: str, stage: int) -> tuple[float, float]:
        """Seconds and bus bytes of a sequence of collectives on ``dim``'s group of ``stage``."""
        secs = bus = 0.0
        for c in calls:
            cc = self.net.cost(c.op, c.size_bytes, dim, stage)
            secs += cc.time_s
            bus += c.size_bytes * bus_factor(c.op, cc.n)
        return secs, bus

    def _layer_parts(self, lc: LayerCost, stage: int) -> tuple[tuple, tuple, float, float, float]:
        """Forward and backward parts of one layer: compute, recompute and exposed tp/cp/ep."""
        t = self.cm.time
        sc = self.sc
        f_comp = t(lc.fwd.gemm_flops, lc.fwd.gemm_bytes, lc.fwd.stream_bytes)
        b_comp = t(lc.bwd_input.gemm_flops, lc.bwd_input.gemm_bytes, lc.bwd_input.stream_bytes)
        w_comp = t(lc.bwd_weight.gemm_flops, lc.bwd_weight.gemm_bytes, lc.bwd_weight.stream_bytes)
        r_comp = t(lc.recompute.gemm_flops, lc.recompute.gemm_bytes, lc.recompute.stream_bytes) \
            if lc.recompute != ZERO_WORK else 0.0
        tp_f, tp_f_bytes = self._coll_time(lc.tp_fwd, "tp", stage)
        tp_b, tp_b_bytes = self._coll_time(lc.tp_bwd + lc.tp_recompute, "tp", stage)
        tp_f_all, tp_b_all = tp_f, tp_b
        if sc.communication.tp_overlap and lc.tp_fwd:
            # Chunked collective matmul (Wang et al., ASPLOS 2023): each collective hides behind
            # the GEMM it feeds or follows, except the first of TP_OVERLAP_CHUNKS chunks.
            gemm_f = (lc.fwd.gemm_flops - lc.attn_core_fwd.gemm_flops) / self.cm.gemm_flops_per_s
            per = gemm_f / len(lc.tp_fwd)
            tp_f = sum(max(c - per, c / TP_OVERLAP_CHUNKS) for c in _split_even(tp_f, len(lc.tp_fwd)))
            tp_b = sum(max(c - 2 * per, c / TP_OVERLAP_CHUNKS)
                       for c in _split_even(tp_b, len(lc.tp_bwd) + len(lc.tp_recompute)))
        cp_f = cp_b = cp_bytes = cp_hid_f = cp_hid_b = 0.0
        if lc.cp_kv_bytes > 0:
            # Ring attention (Liu et al. 2023): cp-1 KV hand-offs, each overlapped with the
            # attention block of the previous step; backward sends KV and dKV against twice the work.
            cpn = sc.parallelism.cp
            step = self.net.cost("send-recv", lc.cp_kv_bytes, "cp", stage).time_s
            step_b = self.net.cost("send-recv", 2 * lc.cp_kv_bytes, "cp", stage).time_s
            attn_step = t(lc.attn_core_fwd.gemm_flops, 0, lc.attn_core_fwd.stream_bytes) / cpn
            cp_f = (cpn - 1) * max(0.0, step - attn_step)
            cp_b = (cpn - 1) * max(0.0, step_b - 2 * attn_step)
            cp_hid_f, cp_hid_b = (cpn - 1) * step - cp_f, (cpn - 1) * step_b - cp_b
            cp_bytes = (cpn - 1) * lc.cp_kv_bytes * 3
        ep_f, ep_f_bytes = self._ep_time(lc.ep_fwd, stage)
        ep_b, ep_b_bytes = self._ep_time(lc.ep_bwd, stage)
        if lc.expert_fwd.gemm_flops and sc.model.moe.imbalance > 1:
            # The busiest expert rank sets the pace (GShard's capacity factor, DeepSeek's balance
            # loss exist to bound this): its routed-expert GEMMs take imbalance x the mean.
            extra = (sc.model.moe.imbalance - 1) * lc.expert_fwd.gemm_flops / self.cm.gemm_flops_per_s
            f_comp += extra
            b_comp += extra
            w_comp += extra
        dp_f, dp_b, hid_f, hid_b, fsdp_bytes = self._fsdp(lc, stage, f_comp, b_comp + w_comp + r_comp)
        fwd = (("compute", f_comp), ("tp", tp_f), ("cp", cp_f), ("ep", ep_f), ("dp", dp_f))
        bwd = (("recompute", r_comp), ("compute", b_comp), ("weight-grad", w_comp), ("tp", tp_b), ("cp", cp_b),
               ("ep", ep_b), ("dp", dp_b))
        self._fsdp_layer = (hid_f, hid_b, fsdp_bytes)
        # What runs on the tp/cp links under the GEMMs (drawn as overlapped bars, blocking nothing).
        self._hidden_layer = ((("tp", tp_f_all - tp_f), ("cp", cp_hid_f)), (("tp", tp_b_all - tp_b), ("cp", cp_hid_b)))
        return fwd, bwd, tp_f_bytes + tp_b_bytes, cp_bytes, ep_f_bytes + ep_b_bytes

    def _ep_time(self, calls, stage: int) -> tuple[float, float]:
        """Seconds and bus bytes of the MoE dispatch/combine all-to-alls of one layer pass.

        ``moe.max_nodes`` = 0: no node limit and no node-aware dispatch — a plain pairwise
        all-to-all of tokens x top_k x hidden (GShard; Megatron-Core's default ``alltoall`` token
        dispatcher), every one of a token's top_k copies crosses the fabric on its own.
        ``moe.max_nodes`` = M > 0: node-limited routing with node-aware dispatch (DeepSeek-V3
        report Sec. 2.1.2 and 3.2.2): each token crosses the fabric once per destination node — the
        distinct nodes among its top_k experts, at most M — and is then forwarded to its experts
        over the scale-up links; the two hops are pipelined, so the pass takes the slower of the
        two.  A limit M >= the nodes the EP group spans cannot bind and equals any larger M.
        ``moe.imbalance`` stretches the pass for the busiest rank.
        """
        moe = self.sc.model.moe
        if not calls:
            return 0.0, 0.0
        if self.net.free:
            return 0.0, self._coll_time(calls, "ep", stage)[1]
        secs, bus = self._coll_time(calls, "ep", stage)
        sh = self.net.shape("ep", stage)
        if moe.max_nodes > 0 and sh.spans(1):
            g1 = sh.per_domain[1]
            nodes = sh.n // g1
            k = moe.top_k
            # Expected fabric copies of one token: E[min(D, M)], D the distinct nodes among k experts.
            distinct = expected_distinct_nodes(nodes, k, moe.max_nodes)
            # The NVLink forward is an all-to-all among the g1 GPUs of a node (wiring factor).
            up = scale_up_factor(replace(sh, n=g1), "all-to-all")
            secs = bus = 0.0
            for c in calls:
                per_token_copy = c.size_bytes / k            # this GPU's tokens, one copy each
                inter = per_token_copy * distinct * (nodes - 1) / nodes
                t_inter = max(sh.per_domain[b] * inter * (sh.n - sh.per_domain[b]) / (sh.n - g1) / sh.shares[b]
                              for b in range(1, len(sh.shares)) if sh.spans(b))
                t_intra = c.size_bytes * (g1 - 1) / g1 / sh.shares[0] * up
                # Concurrent sends, as for the plain all-to-all (collectives._pairwise).
                lat = sh.latencies[sh.outer] + max(nodes - 2 + g1 - 1, 0) * sh.latencies[0]
                secs += max(t_inter, t_intra) + lat
                bus += inter + c.size_bytes * (g1 - 1) / g1
        return secs * moe.imbalance, bus

    def _fsdp(self, lc: LayerCost, stage: int, f_comp: float, b_comp: float) -> tuple[float, ...]:
        """ZeRO-3 / FSDP (Rajbhandari et al. SC20 Sec. 5.3; Zhao et al. VLDB 2023): each layer's
        parameters are all-gathered before its forward and again before its backward, and its
        gradients reduce-scattered after — 3 x the layer's bytes per micro-batch instead of the
        2 x per iteration of ZeRO 1-2.  With ``prefetch_layers`` >= 1 the gather of the next layer
        runs during this layer's compute, so only the excess of communication over compute is
        exposed; with 0 every gather waits in front of its layer.
        Returns (exposed F, exposed B, hidden F, hidden B, bus bytes)."""
        sc = self.sc
        if sc.parallelism.zero != 3:
            return 0.0, 0.0, 0.0, 0.0, 0.0
        f_comm = b_gather = b_reduce = bus = 0.0
        for dim, params in (("dp", lc.params), ("edp", lc.expert_params)):
            if params <= 0 or self.net.group_size(dim, stage) <= 1:
                continue
            ag = self.net.cost("all-gather", params * PARAM_BYTES, dim, stage)
            rs = self.net.cost("reduce-scatter", params * GRAD_BYTES, dim, stage)
            f_comm += ag.time_s
            b_gather += ag.time_s
            b_reduce += rs.time_s
            bus += (2 * params * PARAM_BYTES + params * GRAD_BYTES) * bus_factor("all-gather", ag.n)
        if sc.communication.prefetch_layers == 0:
            return f_comm, b_gather + b_reduce, 0.0, 0.0, bus
        exp_f = max(0.0, f_comm - f_comp)
        if sc.communication.dp_overlap:
            # Layer-wise reduce-scatter overlapped with the backward of the layers before it.
            exp_b = max(0.0, b_gather + b_reduce - b_comp)
        else:
            # dp_overlap off: only the prefetched gathers hide; each layer's gradient
            # reduce-scatter runs after its backward with nothing to hide behind.
            exp_b = max(0.0, b_gather - b_comp) + b_reduce
        return exp_f, exp_b, f_comm - exp_f, b_gather + b_reduce - exp_b, bus

    def _chunk(self, gc: int) -> ChunkWork:
        stage = gc % self.p
        start = sum(self.layer_counts[:gc])
        n = self.layer_counts[gc]
        n_moe = sum(1 for i in range(start, start + n) if self._layer_is_moe(i))
        kinds = [(self.dense, n - n_moe)] + ([(self.moe, n_moe)] if n_moe else [])
        fwd: list[tuple[str, float]] = []
        bwd: list[tuple[str, float]] = []
        hw = model = params = eparams = act = tpb = cpb = epb = 0.0
        hid_f = hid_b = fsdp_bytes = layer_bytes = 0.0
        fl_f = fl_b = fl_w = 0.0
        over_f: list[tuple[str, float]] = []
        over_b: list[tuple[str, float]] = []
        lf = lb = ()
        links: list[LinkCall] = []
        for lc, count in kinds:
            if count == 0:
                continue
            links += [c.scaled(count) for c in self._layer_link_calls(lc, stage)]
            f, b, tb, cb, eb = self._layer_parts(lc, stage)
            lf, lb = f, b
            fwd += [(k, v * count) for k, v in f]
            bwd += [(k, v * count) for k, v in b]
            flops = lc.fwd.gemm_flops + lc.bwd_input.gemm_flops + lc.bwd_weight.gemm_flops
            hw += count * (flops + lc.recompute.gemm_flops)
            model += count * flops
            params += count * lc.params
            eparams += count * lc.expert_params
            act += count * lc.act_bytes
            tpb += count * tb
            cpb += count * cb
            epb += count * eb
            hf, hb, fb = self._fsdp_layer
            over_f += [(k, v * count) for k, v in self._hidden_layer[0]]
            over_b += [(k, v * count) for k, v in self._hidden_layer[1]]
            fl_f += count * lc.fwd.gemm_flops
            fl_b += count * (lc.bwd_input.gemm_flops + lc.recompute.gemm_flops)
            fl_w += count * lc.bwd_weight.gemm_flops
            hid_f += count * hf
            hid_b += count * hb
            fsdp_bytes += count * fb
            layer_bytes = max(layer_bytes, (lc.params + lc.expert_params) * PARAM_BYTES)
        t = self.cm.time
        last = gc == self.p * self.v - 1
        for edge, here in ((self.emb, gc == 0), (self.logits, last)):
            if not here or "edges" in self.ideal:
                continue
            if edge is self.logits and self.tied_same_gpu:
                # Tied embeddings on the GPU that also holds the embedding: one V x h/tp matrix,
                # held, reduced and updated once (counted with the embedding on chunk 0).
                edge = replace(edge, params=0.0)
            ef = t(edge.fwd.gemm_flops, edge.fwd.gemm_bytes, edge.fwd.stream_bytes)
            eb = t(edge.bwd_input.gemm_flops, edge.bwd_input.gemm_bytes, edge.bwd_input.stream_bytes)
            ew = t(edge.bwd_weight.gemm_flops, edge.bwd_weight.gemm_bytes, edge.bwd_weight.stream_bytes)
            fwd.append(("compute", ef))
            bwd.append(("compute", eb))
            bwd.append(("weight-grad", ew))
            if self.sc.parallelism.zero == 3 and edge.params > 0:
                # FSDP shards the embedding and output layer too: gathered before their forward
                # and backward, gradients reduce-scattered after, like any layer.
                dp_f, dp_b, hf, hb, fb = self._fsdp(_Params(edge.params), stage, ef, eb + ew)
                links += self._fsdp_link_calls(_Params(edge.params), stage)
                fwd.append(("dp", dp_f))
                bwd.append(("dp", dp_b))
                hid_f += hf
                hid_b += hb
                fsdp_bytes += fb
                layer_bytes = max(layer_bytes, edge.params * PARAM_BYTES)
            flops = edge.fwd.gemm_flops + edge.bwd_input.gemm_flops + edge.bwd_weight.gemm_flops
            fl_f += edge.fwd.gemm_flops
            fl_b += edge.bwd_input.gemm_flops
            fl_w += edge.bwd_weight.gemm_flops
            hw += flops
            model += flops
            params += edge.params
            act += edge.act_bytes
        return ChunkWork(gc, n, n_moe, _sum_parts(*fwd), _sum_parts(*bwd), lf, lb, hw, model, params, eparams,
                         act, tpb, cpb, epb, self._comm_info(stage), (hid_f, hid_b), fsdp_bytes, layer_bytes,
                         _sum_parts(*over_f), _sum_parts(*over_b), fl_f, fl_b, fl_w, tuple(links))

    def _link(self, dim: str, op: str, size: float, stage: int, count: float,
              pairwise: bool = False) -> list[LinkCall]:
        """``count`` calls of ``op`` on ``size`` bytes over ``dim``'s group of ``stage``, with the
        egress the collective model charged them (none when the group is a single GPU)."""
        if count <= 0 or size <= 0:
            return []
        sh = self.net.shape(dim, stage)
        if sh.n <= 1:
            return []
        cc = self.net.cost(op, size, dim, stage)
        return [LinkCall(dim, op, cc.egress, sh.n, sh.per_domain, count, pairwise)]

    def _layer_link_calls(self, lc: LayerCost, stage: int) -> list[LinkCall]:
        """The network calls one layer makes per pipeline unit, as its parts were priced: TP
        collectives, MoE dispatch/combine (node-limited when ``moe.max_nodes`` > 0), ring
        attention's K/V hand-offs and ZeRO-3's gathers and reduce-scatters."""
        out: list[LinkCall] = []
        for call in lc.tp_fwd + lc.tp_bwd + lc.tp_recompute:
            out += self._link("tp", call.op, call.size_bytes, stage, 1)
        for call in lc.ep_fwd + lc.ep_bwd:
            out += self._ep_link(call, stage)
        if lc.cp_kv_bytes:
            # Ring attention (Liu et al. 2023): cp-1 K/V hand-offs forward, K/V and dK/dV backward.
            cpn = self.sc.parallelism.cp
            out += self._link("cp", "send-recv", lc.cp_kv_bytes, stage, cpn - 1)
            out += self._link("cp", "send-recv", 2 * lc.cp_kv_bytes, stage, cpn - 1)
        return out + self._fsdp_link_calls(lc, stage)

    def _fsdp_link_calls(self, lc: LayerCost | _Params, stage: int) -> list[LinkCall]:
        """ZeRO-3 (Rajbhandari et al. SC20 Sec. 5.3): two gathers and one reduce-scatter of the
        layer per micro-batch, over dp (dense) and edp (expert) parameters."""
        if self.sc.parallelism.zero != 3:
            return []
        out: list[LinkCall] = []
        for dim, params in (("dp", lc.params), ("edp", lc.expert_params)):
            out += self._link(dim, "all-gather", params * PARAM_BYTES, stage, 2)
            out += self._link(dim, "reduce-scatter", params * GRAD_BYTES, stage, 1)
        return out

    def _ep_link(self, call: Collective, stage: int) -> list[LinkCall]:
        """One MoE all-to-all as ``_ep_time`` prices it: the plain pairwise all-to-all, or with
        node-limited routing (``moe.max_nodes`` > 0) the node-aware dispatch — E[min(D, M)] fabric
        copies per token leave the node (``inter`` bytes per GPU, spread over the outer domains as
        ``_ep_time``'s t_inter charges them), and the NVLink forward moves size*(g1-1)/g1."""
        moe = self.sc.model.moe
        sh = self.net.shape("ep", stage)
        if not (moe.max_nodes > 0 and sh.spans(1)):
            return self._link("ep", call.op, call.size_bytes, stage, 1)
        g1 = sh.per_domain[1]
        nodes = sh.n // g1
        distinct = expected_distinct_nodes(nodes, moe.top_k, moe.max_nodes)
        inter = call.size_bytes / moe.top_k * distinct * (nodes - 1) / nodes
        egress = [call.size_bytes * (g1 - 1) / g1]
        for b in range(1, len(sh.shares)):
            egress.append(sh.per_domain[b] * inter * (sh.n - sh.per_domain[b]) / (sh.n - g1) if sh.spans(b) else 0.0)
        return [LinkCall("ep", call.op, tuple(egress), sh.n, sh.per_domain, 1)]

    def _comm_info(self, stage: int) -> dict:
        """The per-layer call of each blocking dimension on ``stage`` (what a hover shows)."""
        out = {}
        lc = self.moe or self.dense
        calls = {"tp": self.dense.tp_fwd[:1], "ep": lc.ep_fwd[:1]}
        if self.dense.cp_kv_bytes:
            calls["cp"] = (Collective("send-recv", self.dense.cp_kv_bytes),)
        for dim, cs in calls.items():
            for c in cs:
                cc = self.net.cost(c.op, c.size_bytes, dim, stage)
                out[dim] = {"op": c.op, "bytes": c.size_bytes, "group": cc.n, "algorithm": cc.algorithm,
                            "tier": cc.boundary, "busbw_GBps": cc.busbw_GBps}
        return out

    # -- the graph -------------------------------------------------------------------------------
    def build(self) -> TaskGraph:
        if self.schedule.two_directions:
            return self._build_dualpipe()
        sc, p, v = self.sc, self.p, self.v
        g = TaskGraph()
        comm = sc.communication
        zero = sc.parallelism.zero
        split_w = self.schedule.split_backward
        orders = self._orders()
        self.orders = orders
        ids: dict[tuple[str, int, int, int], int] = {}      # (pass, stage, mb, chunk) -> task id
        last_compute: list[int] = [-1] * p
        ag_start: dict[tuple[int, int], int] = {}
        self.pp_msg_bytes = self._pp_bytes()

        # Parameter all-gather of ZeRO 1-2 at the start (steady state: issued after the previous
        # optimizer step and overlapped with this forward when dp_overlap, Megatron overlap_param_gather).
        if zero in (1, 2) and comm.dp_overlap:
            for s in range(p):
                for c in range(v):
                    gathers = self._dp_tasks(g, s, c, "all-gather", [], None)
                    if gathers:                      # none when the data-parallel group is 1 GPU
                        ag_start[(s, c)] = gathers[-1]

        # Compute tasks in program order; their data dependencies are added in a second pass,
        # once every task id exists.
        for s in range(p):
            prev = -1
            for kind, mb, c in orders[s]:
                ch = self.chunks[c * p + s]
                if kind == "F":
                    parts, layer_parts = ch.fwd_parts, ch.fwd_layer
                elif not split_w:
                    parts, layer_parts = ch.bwd_parts, ch.bwd_layer
                else:
                    parts, layer_parts = ch.split(ch.bwd_parts, kind == "W"), ch.split(ch.bwd_layer, kind == "W")
                dur = sum(v_ for _, v_ in parts)
                deps = [(prev, 1.0)] if prev >= 0 else []
                if kind == "F" and mb == 0 and (s, c) in ag_start:
                    deps.append((ag_start[(s, c)], 1.0))
                info = {"micro_batch": mb, "chunk": c, "layers": ch.layers, "comm": ch.comm,
                        "layer_parts": layer_parts, **_pass_extras(ch, kind, split_w)}
                task_kind = {"F": "forward", "B": "backward", "W": "weight-grad"}[kind]
                tid = g.add(Task(s, "compute", task_kind, dur, deps, parts=parts, info=info))
                ids[(kind, s, mb, c)] = tid
                prev = tid
                hidden = ch.fsdp_hidden[0 if kind == "F" else 1] if kind != "W" else 0.0
                if hidden > 0:
                    # The part of the layer-wise gathers/reductions that runs under this pass's
                    # compute: drawn on the dp stream, blocking nothing (its exposed rest is a part).
                    g.add(Task(s, "dp", "dp", hidden, [(tid, 0.0)], priority=1, parts=(("dp", hidden),),
                               info={"micro_batch": mb, "chunk": c, "op": "FSDP gather/reduce (overlapped)",
                                     "bytes": ch.fsdp_bytes, "bus_bytes": 0.0, "buckets": 0, "bucket_bytes": 0.0,
                                     "group": self.net.group_size("dp", s), "algorithm": "", "tier": "",
                                     "busbw_GBps": None, "dim": "dp"}))
            last_compute[s] = prev

        # Pipeline transfers: F(chunk k) -> F(chunk k+1), B(chunk k+1) -> B(chunk k).
        total_chunks = p * v
        for (kind, s, mb, c), tid in list(ids.items()):
            gc = c * p + s
            if kind == "W":
                g.tasks[tid].deps.append((ids[("B", s, mb, c)], 1.0))
                continue
            if kind == "F" and gc + 1 < total_chunks:
                nxt = ids[("F", (gc + 1) % p, mb, (gc + 1) // p)]
                self._transfer(g, s, tid, nxt, mb, c, "forward")
            if kind == "B" and gc > 0:
                nxt = ids[("B", (gc - 1) % p, mb, (gc - 1) // p)]
                self._transfer(g, s, tid, nxt, mb, c, "backward")
            if kind == "B":
                g.tasks[tid].deps.append((ids[("F", s, mb, c)], 1.0))
            if kind == "W":
                g.tasks[tid].deps.append((ids[("B", s, mb, c)], 1.0))

        # Gradient reduction, optimizer, parameter all-gather.
        for s in range(p):
            dp_ids: list[int] = []
            if zero != 3:
                for c in range(v):
                    # Gradients are complete after the last micro-batch's weight-gradient pass.
                    last_b = max(ids[("W" if split_w else "B", s, mb, c)] for mb in range(self.m_sim))
                    op = "all-reduce" if zero == 0 else "reduce-scatter"
                    if comm.dp_overlap:
                        # Buckets leave as the last backward produces them (PyTorch DDP).
                        dp_ids += self._dp_tasks(g, s, c, op, [], last_b)
                    else:
                        # No overlap: every bucket waits for the stage's whole backward.
                        dp_ids += self._dp_tasks(g, s, c, op, [(last_compute[s], 1.0)], None)
            opt = g.add(Task(s, "compute", "optimizer", self._optimizer_time(s),
                             [(last_compute[s], 1.0)] + [(d, 1.0) for d in dp_ids], parts=(("optimizer", self._optimizer_time(s)),),
                             info={}))
            if zero in (1, 2) and not comm.dp_overlap:
                for c in range(v):
                    self._dp_tasks(g, s, c, "all-gather", [(opt, 1.0)], None)
        return g

    def _build_dualpipe(self) -> TaskGraph:
        """The task graph of DualPipe (schedules/dualpipe.py): two directions, fused F&B ops."""
        sc, p = self.sc, self.p
        g = TaskGraph()
        self.orders = self._orders()
        self.pp_msg_bytes = self._pp_bytes()
        f_done: dict[tuple[int, int, int], int] = {}     # (direction, micro-batch, rank) -> task
        b_done: dict[tuple[int, int, int], int] = {}
        grads_done: dict[tuple[int, int], int] = {}      # (rank, direction) -> last gradient task
        needs: list[tuple[int, str, int, int, int]] = []  # (task, pass, direction, micro-batch, rank)
        last_compute = [-1] * p

        def secs(parts) -> float:
            return sum(x for _, x in parts)

        for r in range(p):
            prev = -1
            for op in self.orders[r]:
                deps = [(prev, 1.0)] if prev >= 0 else []
                if op[0] == "FB":
                    (df, i_f), (db, i_b) = op[1], op[2]
                    chf, chb = self._chunk_of(r, df), self._chunk_of(r, db)
                    parts = _fuse(chf.fwd_parts, chb.bwd_parts)
                    exposed = dict(parts)
                    # Communication of the pair that ran under the other's compute (DeepSeek-V3 Fig. 4).
                    comm_all = _sum_parts(*((k, v) for k, v in chf.fwd_parts + chb.bwd_parts if k not in COMPUTE_PARTS),
                                          *chf.hidden_f, *chb.hidden_b)
                    hidden = tuple((k, v - exposed.get(k, 0.0)) for k, v in comm_all if v - exposed.get(k, 0.0) > 0)
                    info = {"micro_batch": i_f, "chunk": df, "layers": 0, "comm": chf.comm,
                            "op": f"F mb {i_f} dir {df} + B mb {i_b} dir {db}", "hidden": hidden,
                            "flops": chf.flops_f + chb.flops_b + chb.flops_w}
                    tid = g.add(Task(r, "compute", "F&B", secs(parts), deps, parts=parts, info=info))
                    f_done[(df, i_f, r)] = tid
                    b_done[(db, i_b, r)] = tid
                    grads_done[(r, db)] = tid
                    needs += [(tid, "F", df, i_f, r), (tid, "B", db, i_b, r)]
                else:
                    kind, d, i = op
                    ch = self._chunk_of(r, d)
                    if kind == "F":
                        parts, layer_parts, task_kind = ch.fwd_parts, ch.fwd_layer, "forward"
                    elif kind == "B":
                        parts, layer_parts, task_kind = ch.bwd_parts, ch.bwd_layer, "backward"
                    elif kind == "Bz":
                        parts, layer_parts, task_kind = ch.split(ch.bwd_parts, False), ch.split(ch.bwd_layer, False), "backward"
                    else:
                        parts, layer_parts, task_kind = ch.split(ch.bwd_parts, True), ch.split(ch.bwd_layer, True), "weight-grad"
                    info = {"micro_batch": i, "chunk": d, "layers": ch.layers, "comm": ch.comm, "layer_parts": layer_parts,
                            **_pass_extras(ch, {"Bz": "B"}.get(kind, kind), kind in ("Bz", "W"))}
                    tid = g.add(Task(r, "compute", task_kind, secs(parts), deps, parts=parts, info=info))
                    if kind == "F":
                        f_done[(d, i, r)] = tid
                        needs.append((tid, "F", d, i, r))
                    elif kind in ("B", "Bz"):
                        b_done[(d, i, r)] = tid
                        needs.append((tid, "B", d, i, r))
                        if kind == "B":
                            grads_done[(r, d)] = tid
                    else:
                        g.tasks[tid].deps.append((b_done[(d, i, r)], 1.0))
                        grads_done[(r, d)] = tid
                prev = tid
            last_compute[r] = prev

        # Data dependencies: forward from the upstream rank of its direction, backward from the
        # downstream rank (or from its own forward on the direction's last stage).
        for tid, kind, d, i, r in needs:
            step = 1 if d == 0 else -1
            if kind == "F":
                up = r - step
                if 0 <= up < p:
                    self._transfer(g, up, f_done[(d, i, up)], tid, i, d, "forward", pair_stage=min(up, r))
            else:
                down = r + step
                if 0 <= down < p:
                    self._transfer(g, down, b_done[(d, i, down)], tid, i, d, "backward", pair_stage=min(down, r))
                else:
                    g.tasks[tid].deps.append((f_done[(d, i, r)], 1.0))

        comm = sc.communication
        for r in range(p):
            dp_ids: list[int] = []
            if sc.parallelism.zero != 3:
                op = "all-reduce" if sc.parallelism.zero == 0 else "reduce-scatter"
                for d in (0, 1):
                    if comm.dp_overlap:
                        dp_ids += self._dp_tasks(g, r, d, op, [], grads_done[(r, d)])
                    else:      # every bucket after the rank's whole backward
                        dp_ids += self._dp_tasks(g, r, d, op, [(last_compute[r], 1.0)], None)
            t_opt = self._optimizer_time(r)
            opt = g.add(Task(r, "compute", "optimizer", t_opt, [(last_compute[r], 1.0)] + [(x, 1.0) for x in dp_ids],
                             parts=(("optimizer", t_opt),), info={}))
            if sc.parallelism.zero in (1, 2):
                for d in (0, 1):
                    self._dp_tasks(g, r, d, "all-gather", [(opt, 1.0)], None)
        return g

    def _orders(self) -> list[list]:
        """Program order of every stage over the units simulated (the registry's order function)."""
        return [self.schedule.order(s, self.p, self.m_sim, self.v) for s in range(self.p)]

    def _pp_bytes(self) -> float:
        sc = self.sc
        e = BYTES_PER_ELEMENT["bf16" if sc.training.dtype == "fp8" else sc.training.dtype]
        # Scatter/gather optimisation (Narayanan SC21 Sec. 4.1): each TP rank sends 1/tp of the tensor.
        return (sc.training.micro_batch * sc.model.seq_len / sc.parallelism.cp / sc.parallelism.token_slices
                * sc.model.hidden * e / sc.parallelism.tp)

    def _transfer(self, g: TaskGraph, s: int, src: int, dst: int, mb: int, c: int, direction: str,
                  pair_stage: int | None = None) -> None:
        # Backward transfers go from stage s to s-1: the pair (s-1, s) is the same link pair.
        if pair_stage is None:
            pair_stage = s if direction == "forward" else (s - 1) % self.p
        cc = self.net.cost("send-recv", self.pp_msg_bytes, "pp", pair_stage)
        info = {"micro_batch": mb, "chunk": c, "bytes": self.pp_msg_bytes, "group": 2, "algorithm": "p2p",
                "tier": cc.boundary, "busbw_GBps": cc.busbw_GBps, "direction": direction, "pair": pair_stage}
        # Two iterations simulated back to back count as one (m of m_sim units per iteration).
        links = tuple(self._link("pp", "send-recv", self.pp_msg_bytes, pair_stage, self.m / self.m_sim, True))
        tid = g.add(Task(s, "pp", "pp", cc.time_s, [(src, 1.0)], parts=(("pp", cc.time_s),), info=info,
                         links=links))
        g.tasks[dst].deps.append((tid, 1.0))

    def rank_chunks(self, s: int) -> list[tuple[ChunkWork, int]]:
        """The chunks GPU class ``s`` holds and how many pipeline units each processes."""
        if self.schedule.two_directions:
            return [(self.chunks[s], self.m // 2), (self.chunks[self.p - 1 - s], self.m // 2)]
        return [(self.chunks[c * self.p + s], self.m) for c in range(self.v)]

    def _chunk_of(self, s: int, c: int) -> ChunkWork:
        """Chunk ``c`` of class ``s``: the virtual stage, or DualPipe's direction."""
        if self.schedule.two_directions:
            return self.chunks[s if c == 0 else self.p - 1 - s]
        return self.chunks[c * self.p + s]

    def _dp_tasks(self, g: TaskGraph, s: int, c: int, op: str, deps: list, ready_task: int | None) -> list[int]:
        """Bucketed DP collectives of chunk ``c`` on stage ``s``; dense and expert gradients.

        When ``ready_task`` is given, bucket j of M becomes ready after (j+1)/M of that task (the
        backward produces gradients progressively); otherwise every bucket depends on ``deps``.
        """
        ch = self._chunk_of(s, c)
        sc = self.sc
        out: list[int] = []
        nbytes = GRAD_BYTES if op != "all-gather" else PARAM_BYTES
        for dim, params in (("dp", ch.params), ("edp", ch.expert_params)):
            total = params * nbytes
            if total <= 0 or self.net.group_size(dim, s) <= 1:
                continue
            if sc.parallelism.zero == 3:
                buckets = 1                    # FSDP gathers/reduces one unit (here: the chunk) at a time
            else:
                buckets = max(1, math.ceil(total / (sc.communication.bucket_MB * 1e6)))
            size = total / buckets
            cc = self.net.cost(op, size, dim, s)
            tasks = min(buckets, MAX_BUCKET_TASKS)
            for j in range(tasks):
                k = buckets // tasks + (1 if j < buckets % tasks else 0)   # buckets merged into this task
                d = list(deps)
                if ready_task is not None:
                    done = sum(buckets // tasks + (1 if i < buckets % tasks else 0) for i in range(j + 1))
                    d.append((ready_task, done / buckets))
                info = {"chunk": c, "bytes": size * k, "bus_bytes": size * k * bus_factor(op, cc.n), "buckets": k,
                        "bucket_bytes": size, "group": cc.n, "algorithm": cc.algorithm, "tier": cc.boundary,
                        "busbw_GBps": cc.busbw_GBps, "op": op, "dim": dim,
                        # Layer order of the group: 0 holds the chunk's first layers (produced last).
                        "layer_rank": tasks - 1 - j, "groups": tasks,
                        "share": k / buckets * params / max(ch.params + ch.expert_params, 1.0)}
                priority = 1
                if sc.communication.dp_priority and ready_task is not None:
                    # P3 / ByteScheduler: the first layers' gradients, produced last by the
                    # backward, are reduced first, so the next forward can start on them early.
                    priority = 1 + (c * self.p + s) * MAX_BUCKET_TASKS + (tasks - 1 - j)
                links = tuple(self._link(dim, op, size, s, k))
                out.append(g.add(Task(s, "dp", "dp", k * cc.time_s, d, priority=priority,
                                      parts=(("dp", k * cc.time_s),), info=info, links=links)))
        return out

    def _optimizer_time(self, s: int) -> float:
        sc = self.sc
        if "optimizer" in self.ideal:
            return 0.0
        dense = sum(ch.params for ch, _ in self.rank_chunks(s))
        expert = sum(ch.expert_params for ch, _ in self.rank_chunks(s))
        if sc.parallelism.zero >= 1:
            dense /= self.net.group_size("dp", s)
            expert /= max(self.net.group_size("edp", s), 1)
        return (dense + expert) * OPTIMIZER_TRAFFIC_BYTES[sc.training.optimizer] / self.cm.hbm_bytes_per_s


COMPUTE_PARTS = ("compute", "weight-grad", "recompute")


@dataclass(frozen=True)
class _Params:
    """The parameters of an embedding or output layer, as ZeRO-3 gathers them (no experts)."""

    params: float
    expert_params: float = 0.0
IDEAL_ASPECTS = frozenset({"balance", "edges", "optimizer", "comm"})


def _balanced(chunks: list[ChunkWork]) -> list[ChunkWork]:
    """Every chunk given the average chunk's work (the ideal pipeline's equal stages): times,
    FLOPs and bytes averaged, layer count and parameters kept (memory stays that of the split).
    The per-layer drawing template is rescaled so the chunk's layers fill its pass exactly."""
    n = len(chunks)

    def avg(get) -> tuple[tuple[str, float], ...]:
        return _sum_parts(*((k, v / n) for ch in chunks for k, v in get(ch)))

    fwd, bwd = avg(lambda ch: ch.fwd_parts), avg(lambda ch: ch.bwd_parts)
    hw = sum(ch.hw_flops for ch in chunks) / n
    model = sum(ch.model_flops for ch in chunks) / n
    tpb, cpb, epb = (sum(getattr(ch, a) for ch in chunks) / n for a in ("tp_bytes", "cp_bytes", "ep_bytes"))
    fsdp_b = sum(ch.fsdp_bytes for ch in chunks) / n
    hid = (sum(ch.fsdp_hidden[0] for ch in chunks) / n, sum(ch.fsdp_hidden[1] for ch in chunks) / n)
    out = []
    for ch in chunks:
        k = max(ch.layers, 1)
        out.append(replace(ch, fwd_parts=fwd, bwd_parts=bwd, fwd_layer=tuple((a, v / k) for a, v in fwd),
                           bwd_layer=tuple((a, v / k) for a, v in bwd), hw_flops=hw, model_flops=model,
                           tp_bytes=tpb, cp_bytes=cpb, ep_bytes=epb, fsdp_bytes=fsdp_b, fsdp_hidden=hid))
    return out


def _fuse(fwd: tuple[tuple[str, float], ...], bwd: tuple[tuple[str, float], ...]) -> tuple[tuple[str, float], ...]:
    """DualPipe's F&B: the forward of one micro-batch and the backward of another run together so
    that each one's communication (all-to-all, TP, ...) hides behind the other's computation
    (DeepSeek-V3 report Fig. 4).  The pair takes its compute time, or its communication time if
    that is longer; only the excess is exposed, split over the dimensions in proportion."""
    compute = [(k, v) for k, v in fwd + bwd if k in COMPUTE_PARTS]
    comm = [(k, v) for k, v in fwd + bwd if k not in COMPUTE_PARTS]
    t_comp = sum(v for _, v in compute)
    t_comm = sum(v for _, v in comm)
    excess = max(0.0, t_comm - t_comp)
    exposed = [(k, excess * v / t_comm) for k, v in comm] if excess > 0 else []
    return _sum_parts(*compute, *exposed)


def _pass_extras(ch: ChunkWork, kind: str, split_w: bool) -> dict:
    """FLOPs of one pass of ``ch`` and the communication hidden under it (timeline fields)."""
    if kind == "F":
        return {"flops": ch.flops_f, "hidden": ch.hidden_f}
    if kind == "W":
        return {"flops": ch.flops_w, "hidden": ()}
    return {"flops": ch.flops_b + (0.0 if split_w else ch.flops_w), "hidden": ch.hidden_b}


def _split_even(total: float, k: int) -> list[float]:
    return [total / k] * k if k else []
