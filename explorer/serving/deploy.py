"""A serving deployment in the steady state: the layouts of its prefill and decode phases, their
passes, and the figures users read (TTFT, TPOT, tokens/s, requests/s, KV cache, max batch).

Co-located (one layout, the scenario's parallelism): every replica decodes ``batch`` sequences and
stops to prefill each newcomer.  A replica then finishes R requests per second with
R x (output x step / batch + prefill cost) = 1 (each request costs its share of decode steps and the
time its prefill takes the GPUs from decoding), so the mean time between a sequence's tokens is
TPOT = step + batch x prefill cost / output — the prefill interference DistServe (Zhong et al.,
OSDI 2024, Sec. 2.2) removes by disaggregation.  With chunked prefill (Agrawal et al.,
"Sarathi-Serve", OSDI 2024) a prompt rides along decode steps in chunks of the token budget: each
mixed step costs its pass, the prefill cost is what the mixed steps add over plain decode steps,
and TTFT is the sum of the mixed steps.

Disaggregated: prefill replicas prefill one request after another, decode replicas only decode,
and each request's KV cache (prompt x KV bytes per token) goes from its prefill GPUs to its decode
GPUs, each GPU sending its share over its own NIC, overlapped with the next prefill (DistServe
Sec. 4.3; DeepSeek-V3 Sec. 3.4).  Requests/s is the least of the two pools' rates and the
transfer's.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..config import Scenario, ScenarioError
from ..config.frozen import evolve
from ..config.rules import validate as validate_config
from . import mix
from .memory import ServingMemory, kv_bytes_per_token, kv_bytes_per_token_gpu, serving_memory
from .step import Group, PassModel, StageCost, chunks, decode_context, latency

# Chunked prefill's chunks priced one by one; beyond, EXACT_CHUNKS + 1 of them, evenly spaced (_prefill).
EXACT_CHUNKS = 512


def layouts(sc: Scenario) -> tuple[Scenario, Scenario]:
    """(prefill layout, decode layout): the scenario itself twice when co-located; for
    disaggregated serving a scenario per pool, its cluster cut to the pool's GPUs (whole nodes, or
    one node of fewer GPUs), each checked by the configuration's rules under the pool's name."""
    inf = sc.inference
    assert inf is not None
    if inf.disaggregated is None:
        return sc, sc
    out = []
    gpn = sc.cluster.gpus_per_node
    for name in ("prefill", "decode"):
        pool = getattr(inf.disaggregated, name)
        where = f"inference.disaggregated.{name}"
        g = pool.gpus
        if g > gpn and g % gpn:
            raise ScenarioError(where, f"tp x pp x replicas = {g} GPUs do not fill whole nodes of {gpn}; "
                                f"use a multiple of {gpn}")
        cluster = evolve(sc.cluster, nodes=max(g // gpn, 1), gpus_per_node=min(g, gpn), datacenters=1)
        if g < gpn:
            cluster = evolve(cluster, scale_up=evolve(cluster.scale_up, domain_gpus=g))
        par = evolve(sc.parallelism, tp=pool.tp, pp=pool.pp, ep=pool.ep, dp=pool.replicas)
        layout = evolve(sc, cluster=cluster, parallelism=par,
                        training=evolve(sc.training, global_batch=pool.replicas))
        try:
            validate_config(layout)
        except ScenarioError as exc:
            raise ScenarioError(where, str(exc)) from None
        out.append(layout)
    total = out[0].gpus + out[1].gpus
    if total > sc.gpus:
        raise ScenarioError("inference.disaggregated", f"the pools need {total} GPUs, the cluster has "
                            f"{sc.gpus} (nodes x gpus_per_node); add nodes or shrink the pools")
    return out[0], out[1]


@dataclass(frozen=True)
class Serving:
    """What one serving scenario comes to (see the module docstring for the formulas)."""

    prefill: list[StageCost]          # one request's prompt (each chunk's step with chunking: the first)
    decode: list[StageCost]           # one decode step of the batch at the mean context
    prefill_layout: Scenario
    decode_layout: Scenario
    ttft_s: float
    step_s: float                     # one decode step, alone
    tpot_s: float                     # mean time between a sequence's tokens, interference included
    requests_per_s: float
    output_tokens_per_s_per_gpu: float
    output_tokens_per_s_per_replica: float
    memory: ServingMemory             # one decode GPU
    kv_transfer_bytes: float          # per request, the whole replica (0 when co-located)
    kv_transfer_s: float              # per request, each prefill GPU sending its share
    bound: str                        # what limits requests/s: decode, prefill or kv transfer
    gpus: int
    # Under an arrival rate (serving/load.py): the rate served, the mean wait for a prefill before
    # the first token (in ttft_s), and the rate over the capacity at the largest batch allowed.
    batch: int = 0                    # sequences decoding together per decode replica
    arrival_rate: float | None = None
    queue_wait_s: float = 0.0
    load: float | None = None
    # A request-length mix (serving/mix.py): each kind's prefill time (ttft_s is their mean over the
    # arrivals) and the mean square, which the M/G/1 prefill queue reads.
    ttft_by_kind: tuple[float, ...] = ()
    ttft_sq_s2: float = 0.0
    # Co-located: the time one request's prefill takes its replica from decoding (mean over a mix).
    prefill_cost_s: float = 0.0
    # Disaggregated: what one prefill GPU holds (weights, the pass's workspace and the longest
    # prompt's KV cache before it leaves), bytes; 0 when co-located (the decode GPU's memory covers it).
    prefill_need_bytes: float = 0.0

    @property
    def prefill_servers(self) -> int:
        """Replicas that prefill prompts one after another: the decode replicas when co-located (a
        prefill takes the GPUs from decoding), else the prefill pool's (serving/load.py's queue)."""
        same = self.prefill_layout is self.decode_layout
        return self.decode_layout.dp if same else self.prefill_layout.dp

    @property
    def kv_cache_GB(self) -> float:
        """KV cache of the configured batch on one decode GPU at full context, GB (1e9 B)."""
        return self.memory.kv_batch / 1e9


def _step_time(stages: list[StageCost], pp: int) -> float:
    """Seconds between two tokens of one sequence: a full trip through the pipeline, or pp times
    its busiest stage when the micro-batches in flight queue there."""
    return max(latency(stages), pp * max(s.duration for s in stages))


def kv_transfer(sc: Scenario, pre: Scenario, prompt: float | None = None) -> tuple[float, float]:
    """(bytes of one request's KV cache, seconds for its prefill GPUs to send it): each of the
    replica's tp x pp GPUs sends its own share at the per-GPU bandwidth (the node's NICs shared by
    its GPUs at the fabric's achievable fraction, or disaggregated.kv_transfer_GBps) after one
    fabric latency.  ``prompt``: the request's prompt tokens (default inference.prompt_tokens)."""
    inf = sc.inference
    assert inf is not None and inf.disaggregated is not None
    p = pre.parallelism
    tokens = inf.prompt_tokens if prompt is None else prompt
    total = tokens * kv_bytes_per_token(sc.model, inf.kv_dtype)
    share = tokens * kv_bytes_per_token_gpu(sc.model, inf.kv_dtype, p.tp, p.pp)
    rate, _ = kv_rate_GBps(sc)
    return total, (sc.cluster.scale_out.latency_us or 0.0) * 1e-6 + share / (rate * 1e9)


def kv_rate_GBps(sc: Scenario) -> tuple[float, bool]:
    """GB/s each prefill GPU sends its KV share at, and whether its PCIe link to the NICs sets it:
    the node's NICs shared by its GPUs at the fabric's achievable fraction (or
    disaggregated.kv_transfer_GBps), no faster than the GPU's PCIe link (network/pcie_link.py; a
    verdict hunt found 1 GB/s links ignored here)."""
    inf = sc.inference
    assert inf is not None and inf.disaggregated is not None
    out = sc.cluster.scale_out
    nic_share = min(out.nics_per_node / sc.cluster.gpus_per_node, 1.0)
    nic = (inf.disaggregated.kv_transfer_GBps
           or (out.nic_Gbps or 0.0) / 8 * (out.efficiency or 1.0) * nic_share)
    pcie = sc.hardware.gpu.pcie_GBps or float("inf")
    return min(nic, pcie), pcie < nic


def _prefill(pf_model: PassModel, P: int, budget: int, micro: float, ctx: float, step: float,
             pp_d: int) -> tuple[list[StageCost], float, float]:
    """(the first pass drawn, TTFT, the time taken from decoding) of one prompt of ``P`` tokens:
    one pass, or with chunked prefill the mixed steps that carry its chunks (module docstring)."""
    n = chunks(P, budget)
    # With chunking on, a prompt within the budget still rides one mixed step with the decodes
    # (Sarathi-Serve): only without chunking is it a pass of its own (a hunt found budgets from the
    # prompt's length up priced as no chunking at all).
    if budget <= 0:
        prefill = pf_model.pipeline((Group(1, P, P / 2),), 1)
        ttft = latency(prefill)
        # Each stage stops decoding only for its own share of the prompt while the others go on
        # with their micro-batches, so a prefill lengthens a pipeline's round by its busiest stage
        # (the whole pass on one stage; a hunt found a PP 2 replica charged the full latency, twice
        # its cost).
        return prefill, ttft, max(st.duration for st in prefill)
    c = P / n

    def chunk(j: int) -> tuple[list[StageCost], float]:      # chunk j attends to j chunks + half its own
        mixed = pf_model.pipeline((Group(1, c, j * c + c / 2), Group(micro, 1, ctx)), micro + 1)
        return mixed, _step_time(mixed, pp_d)

    if n <= EXACT_CHUNKS:
        ttft = cost = 0.0
        first: list[StageCost] = []
        for j in range(n):
            mixed, t = chunk(j)
            ttft += t
            cost += max(t - step, 0.0)
            first = first or mixed
        return first, ttft, cost
    # More chunks than that (a one-token budget on a long prompt ran for minutes, one pass per
    # chunk): a chunk's step grows smoothly with its context (its attention's share, linearly), so
    # the sums are read off EXACT_CHUNKS + 1 evenly spaced chunks, linear in between.
    at = np.unique(np.linspace(0, n - 1, EXACT_CHUNKS + 1).round().astype(np.int64))
    priced = [chunk(int(j)) for j in at]
    seconds = np.array([s for _, s in priced])
    return priced[0][0], _integer_sum(at, seconds), _integer_sum(at, np.maximum(seconds - step, 0.0))


def _integer_sum(at: np.ndarray, values: np.ndarray) -> float:
    """The sum over every integer j from at[0] to at[-1] of the piecewise-linear function through
    (at, values): each segment [a, b) adds (b - a) f(a) + (f(b) - f(a)) (b - a - 1) / 2, the last
    point once."""
    a, b = at[:-1], at[1:]
    fa, fb = values[:-1], values[1:]
    width = (b - a).astype(float)
    return float((width * fa + (fb - fa) * (width - 1) / 2).sum() + values[-1])


def saturated(sc: Scenario) -> Serving:
    """``sc``'s deployment with ``batch`` sequences always decoding on each (decode) replica; with a
    request-length mix (serving/mix.py) at the running batch's mean context and each kind's own
    prefill, the rates from the means over the arrivals."""
    inf = sc.inference
    assert inf is not None
    pre, dec = layouts(sc)
    B = inf.batch
    ks = mix.kinds(inf)
    n_out = mix.mean_output(inf)
    dp_model = PassModel(sc, dec)
    pp_d = dec.parallelism.pp
    micro = B / pp_d                                         # sequences per micro-batch in flight
    ctx = mix.batch_mean(inf, decode_context)
    decode = dp_model.pipeline((Group(micro, 1, ctx),), micro)
    step = _step_time(decode, pp_d)
    pf_model = dp_model if pre is dec else PassModel(sc, pre)
    budget = inf.chunked_prefill_tokens if inf.disaggregated is None else 0
    runs = [_prefill(pf_model, k.prompt, budget, micro, ctx, step, pp_d) for k in ks]
    ttfts = [r[1] for r in runs]
    ttft, ttft_sq = mix.moments(ttfts, inf)
    cost = mix.moments([r[2] for r in runs], inf)[0]
    first = runs[max(range(len(ks)), key=lambda i: ks[i].share)][0]     # the commonest kind's, drawn
    longest = max(k.prompt for k in ks)
    # The decode GPUs' largest pass: a prompt (or its chunk) beside the batch's tokens when they
    # prefill too; a disaggregated decode pool only decodes (a hunt found chunked_prefill_tokens,
    # which it never reads, moving its max batch).
    prompt_pass = (0.0 if inf.disaggregated is not None
                   else float(min(longest, inf.chunked_prefill_tokens or longest)))
    mem = serving_memory(sc, dec.parallelism.tp, pp_d, dec.parallelism.ep, prompt_pass + B)
    replicas_d = dec.dp
    if inf.disaggregated is None:
        per_replica = 1.0 / (n_out * step / B + cost)
        rate = per_replica * replicas_d
        tpot = step + B * cost / n_out
        # A request takes its share of decode steps and its prefill's time from a replica: the larger
        # share bounds requests/s (a hunt found 16-token answers "bound by decode" at 97 % prefill).
        bound = "prefill" if cost > n_out * step / B else "decode"
        kv_bytes, kv_s, gpus = 0.0, 0.0, sc.gpus
    else:
        transfers = [kv_transfer(sc, pre, k.prompt) for k in ks]
        kv_bytes = mix.moments([t[0] for t in transfers], inf)[0]
        kv_s = mix.moments([t[1] for t in transfers], inf)[0]
        rates = {"decode": replicas_d * B / (n_out * step), "prefill": pre.dp / ttft,
                 "kv transfer": pre.dp / kv_s}
        bound = min(rates, key=lambda k: rates[k])
        rate = rates[bound]
        # The KV cache reaches the decode pool before its first step: the transfer lengthens the gap
        # between a request's first token (the prefill pool's) and its second, amortised over its
        # tokens as a co-located prefill's interruptions are (DistServe's TPOT; a hunt found a
        # 1.44 s transfer in no latency).
        tpot = step + kv_s / n_out
        gpus = pre.gpus + dec.gpus
        # The prefill pool's GPUs hold their own shard of the weights (a hunt found an EP-1 prefill
        # pool needing 671 GB per 80 GB GPU reported as fitting and picked by a sweep).
        pm = serving_memory(sc, pre.parallelism.tp, pre.parallelism.pp, pre.parallelism.ep, float(longest))
        prefill_need = pm.weights + pm.workspace + pm.kv_per_token * longest
    return Serving(first, decode, pre, dec, ttft, step, tpot, rate, rate * n_out / gpus,
                   rate * n_out / replicas_d, mem, kv_bytes, kv_s, bound, gpus, batch=B,
                   ttft_by_kind=tuple(ttfts) if inf.mix else (), ttft_sq_s2=ttft_sq,
                   prefill_cost_s=cost if inf.disaggregated is None else 0.0,
                   prefill_need_bytes=0.0 if inf.disaggregated is None else prefill_need)
