"""Scenario -> timeline -> figures: the one entry point the CLI and the app call.

Data flows one way (DESIGN.md): workload, topology and placement give the task graph of one
iteration (taskgraph/builder.py), the engine schedules it, and this module turns the scheduled
tasks into a :class:`Result` — headline figures, breakdown, memory, traffic and the timeline.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from .analysis import CATEGORIES, COMM_DIMS, MemoryBreakdown, class_breakdown, group_by_class
from .engine import Task, run
from .network import Network
from .scenario import Scenario
from .taskgraph.builder import IDEAL_ASPECTS, IterationBuilder
from .taskgraph.techniques.optimizer import GRAD_BYTES, OPTIMIZER_STATE_BYTES, PARAM_BYTES
from .schedules.base import BubbleInputs
from .schedules.registry import Window
from .timeline import Timeline, build_timeline
from .utilisation import tier_utilisation, traffic_by_tier

TIER_WORDS = {"scale-up": "the scale-up links (NVLink/NVSwitch)", "scale-out": "the node NICs (scale-out fabric)",
              "spine": "the leaf-to-spine uplinks", "scale-across": "the WAN between datacenters", "none": "no link"}


@dataclass(frozen=True)
class GPUClass:
    """A set of provably identical GPUs simulated once."""

    index: int
    label: str
    stage: int
    gpus: int                 # multiplicity: how many GPUs behave like this one
    layers: tuple[int, ...]   # layers of each of its chunks
    datacenter: int


@dataclass(frozen=True)
class Result:
    """Everything one simulation produces (see analysis.py for the conventions)."""

    scenario: Scenario
    iteration_time_s: float
    tokens_per_s: float
    tflops_per_gpu: float
    mfu: float
    bubble_fraction: float                     # idle share of the pipeline, averaged over its stages
    bubble_fraction_busiest: float             # the busiest stage's (the breakdown's) idle share
    bubble_formula: float                      # the schedule's closed form for this p, m, v, F, B, W
    bubble_formula_text: str
    bubble_explanation: str                    # the card next to the formula (explain_bubble() decomposes)
    breakdown_s: dict[str, float]
    breakdown_class: int
    memory: MemoryBreakdown
    memory_by_class: tuple[MemoryBreakdown, ...]
    comm_bytes_per_gpu: dict[str, float]
    comm_bytes_by_tier: dict[str, dict[str, float]]   # dim -> tier -> bytes one GPU sends across it
    bottleneck: str
    warnings: tuple[str, ...]
    warning_kinds: tuple[str, ...]             # parallel to ``warnings``: memory | algorithm | wan
    classes: tuple[GPUClass, ...]
    stage_layers: tuple[int, ...]
    links: dict[str, dict]                     # per dimension: algorithm, tier, busbw of its main call
    utilisation: dict[str, float]              # average busy fraction of each tier boundary
    tasks: list[Task] = field(repr=False)

    @property
    def memory_over_capacity(self) -> bool:
        """Whether some GPU class needs more memory than its GPU has (the ``memory`` warning)."""
        return "memory" in self.warning_kinds

    @property
    def timeline(self) -> Timeline:
        return build_timeline(self.tasks, tuple(c.label for c in self.classes))

    def to_json_dict(self) -> dict:
        sc = self.scenario
        return {
            "name": sc.name,
            "gpus": sc.gpus,
            "iteration_time_s": self.iteration_time_s,
            "tokens_per_s": self.tokens_per_s,
            "tflops_per_gpu": self.tflops_per_gpu,
            "mfu": self.mfu,
            "bubble_fraction": self.bubble_fraction,
            "bubble_fraction_busiest": self.bubble_fraction_busiest,
            "bubble_formula": self.bubble_formula,
            "bubble_formula_text": self.bubble_formula_text,
            "bubble_explanation": self.bubble_explanation,
            "breakdown_s": self.breakdown_s,
            "breakdown_class": self.classes[self.breakdown_class].label,
            "memory_GB": self.memory.as_GB(),
            "memory_capacity_GB": sc.hardware.gpu.memory_GB,
            "comm_bytes_per_gpu": self.comm_bytes_per_gpu,
            "comm_bytes_by_tier": self.comm_bytes_by_tier,
            "bottleneck": self.bottleneck,
            "warnings": list(self.warnings),
            "warning_kinds": list(self.warning_kinds),
            "memory_over_capacity": self.memory_over_capacity,
            "micro_batches": sc.micro_batches,
            "stage_layers": list(self.stage_layers),
            "links": self.links,
            "dp_priority": sc.communication.dp_priority,
            # Tier name -> average busy fraction over the iteration (what the topology view draws);
            # "tier_utilisation" is the same mapping under its first name, kept for compatibility.
            "utilisation": self.utilisation,
            "tier_utilisation": self.utilisation,
            "parallelism": {"tp": sc.parallelism.tp, "pp": sc.parallelism.pp, "dp": sc.dp, "cp": sc.parallelism.cp,
                            "ep": sc.parallelism.ep, "vpp": sc.parallelism.vpp, "schedule": sc.parallelism.schedule,
                            "zero": sc.parallelism.zero},
        }


@dataclass(frozen=True)
class _Run:
    """One scheduled task graph and its iteration window (internal to simulate())."""

    builder: IterationBuilder
    net: Network
    tasks: list[Task]
    by_class: list[list[Task]]       # tasks grouped by GPU class once (no classes x tasks loops)
    T: float                         # iteration time
    window: list[float]              # per class: where its iteration starts
    enders: list[Task]               # the tasks that end last, in task order

    def breakdown(self, s: int) -> dict[str, float]:
        return class_breakdown(self.tasks, s, self.T, self.window[s], self.by_class[s], self.enders)


def _schedule(sc: Scenario, ideal: frozenset[str] | None = None) -> _Run:
    """Build and run the task graph of ``sc`` (with the given ideal-pipeline aspects; the
    scenario's own ``ideal_pipeline`` when None) and find its iteration window."""
    if ideal is None:
        ideal = IDEAL_ASPECTS if sc.parallelism.ideal_pipeline else frozenset()
    net = Network(sc, free="comm" in ideal)
    builder = IterationBuilder(sc, net, ideal)
    graph = builder.build()
    makespan = run(graph)
    tasks = graph.tasks
    p, m = builder.p, builder.m
    by_class = group_by_class(tasks, p)
    # Schedules whose consecutive iterations overlap (ZB-H2 with the optimizer's global sync
    # bypassed, Qi et al. ICLR 2024 Sec. 4) repeat every max-over-stages *span*; the others flush,
    # so an iteration is the whole makespan.
    first = [min((t.start for t in mine if t.stream == "compute"), default=0.0) for mine in by_class]
    window_kind = builder.schedule.window
    if window_kind is Window.ASYNC:
        # Steady state (Narayanan et al., PipeDream, SOSP 2019) of two back-to-back iterations:
        # on stage s, one period spans m backwards, ending at B_k and B_(k+m) with
        # k = m-1-(p-1-s), the last backward of the first iteration's steady phase, so that
        # neither end lies in a warm-up or in the final drain (which a third iteration would fill).
        ends = [{t.info["micro_batch"]: t.end for t in mine if t.kind == "backward"} for mine in by_class]
        ks = [m - 1 - (p - 1 - s) for s in range(p)]
        if min(ks) >= 0:
            first = [ends[s][ks[s]] for s in range(p)]
            T = max(ends[s][ks[s] + m] - first[s] for s in range(p))
            return _Run(builder, net, tasks, by_class, T, first, [t for t in tasks if t.end == makespan])
        # Fewer micro-batches than stages: no steady phase; from the first iteration's last backward.
        first = [ends[s][m - 1] for s in range(p)]
    if sc.communication.dp_priority:
        T, window = _next_iteration_period(builder, by_class)
    elif window_kind is not Window.FLUSH:
        last = [max(t.end for t in mine) for mine in by_class]
        T = max(last[s] - first[s] for s in range(p))
        window = first
    else:
        T, window = makespan, [0.0] * p
    enders = [t for t in tasks if t.end == makespan]
    return _Run(builder, net, tasks, by_class, T, window, enders)


def simulate(sc: Scenario) -> Result:
    """Simulate one training iteration of ``sc`` (deterministic: same scenario, same result)."""
    r = _schedule(sc)
    builder, net, tasks, T, window = r.builder, r.net, r.tasks, r.T, r.window
    p, v, m = builder.p, builder.v, builder.m
    par = sc.parallelism
    per_stage = par.tp * par.cp * sc.dp

    # GPU classes: one per pipeline stage.
    gpus_per_dc = sc.gpus // sc.cluster.datacenters
    classes = []
    for s in range(p):
        dc = net.placement.gpu(pp=s) // gpus_per_dc
        label = f"stage {s}" + (f" · DC {dc}" if sc.cluster.datacenters > 1 else "") + f" (×{per_stage} GPUs)"
        classes.append(GPUClass(s, label, s, per_stage, tuple(builder.layer_counts[c * p + s] for c in range(v)), dc))

    # Slowest class: the one with the most compute-stream work — the stage that bounds throughput
    # (ties: the one that finishes last, then the lowest index).
    end = [0.0] * p
    busy = [0.0] * p
    for t in tasks:
        end[t.cls] = max(end[t.cls], t.end)
        if t.stream == "compute":
            busy[t.cls] += t.duration
    slow = max(range(p), key=lambda s: (round(busy[s], 12), round(end[s], 12), -s))
    breakdowns = [r.breakdown(s) for s in range(p)]
    breakdown = breakdowns[slow]
    # The Bubble card: the pipeline's idle share averaged over its stages (each stage's bubble
    # seconds from its own breakdown); the busiest stage's is reported beside it.
    bubble_mean = sum(b["bubble"] for b in breakdowns) / p / T
    formula, formula_text = bubble_formula(sc, builder)
    story = _bubble_summary(sc, bubble_mean, breakdown["bubble"] / T, formula_text, p)

    # Throughput and FLOPs: every GPU of a stage does that stage's per-GPU work.
    hw = sum(builder.chunks[c * p + s].hw_flops for s in range(p) for c in range(v)) * m / p
    model = sum(builder.chunks[c * p + s].model_flops for s in range(p) for c in range(v)) * m / p
    tokens = sc.training.global_batch * sc.model.seq_len
    peak = sc.hardware.gpu.peak_tflops * 1e12

    memory_by_class = tuple(_memory(builder, net, s) for s in range(p))
    memory = max(memory_by_class, key=lambda mb: mb.total)
    comm = _comm_bytes(builder, r.by_class, m)
    links = _links(builder, net, tasks)
    res_breakdown = {k: breakdown[k] for k in CATEGORIES}
    notices = _warnings(sc, memory, links, net, res_breakdown, T)
    result = Result(
        scenario=sc, iteration_time_s=T, tokens_per_s=tokens / T, tflops_per_gpu=hw / T / 1e12,
        mfu=model / T / peak, bubble_fraction=bubble_mean, bubble_fraction_busiest=breakdown["bubble"] / T,
        bubble_formula=formula, bubble_formula_text=formula_text,
        bubble_explanation=story, breakdown_s=res_breakdown,
        breakdown_class=slow, memory=memory, memory_by_class=memory_by_class, comm_bytes_per_gpu=comm,
        comm_bytes_by_tier=traffic_by_tier(builder, r.by_class),
        bottleneck=_bottleneck(sc, res_breakdown, links, T, m), warnings=tuple(n.message for n in notices),
        warning_kinds=tuple(n.kind for n in notices), classes=tuple(classes),
        stage_layers=builder.layer_counts, links=links, utilisation=tier_utilisation(builder, net, r.by_class, T),
        tasks=tasks)
    _check_finite(result)
    return result


class SimulationError(RuntimeError):
    """A simulated figure came out non-finite or non-positive: an internal error of the model (the
    scenario passed validation), reported as such rather than as Infinity or NaN in JSON."""


def _check_finite(r: "Result") -> None:
    """Raise SimulationError unless every figure that leaves simulate() is finite, the iteration
    and throughputs positive and the shares non-negative."""
    positive = {"iteration_time_s": r.iteration_time_s, "tokens_per_s": r.tokens_per_s,
                "tflops_per_gpu": r.tflops_per_gpu, "mfu": r.mfu}
    finite = {"bubble_fraction": r.bubble_fraction, "bubble_fraction_busiest": r.bubble_fraction_busiest,
              "bubble_formula": r.bubble_formula, "memory total": r.memory.total,
              **{f"breakdown_s.{k}": v for k, v in r.breakdown_s.items()},
              **{f"comm_bytes_per_gpu.{k}": v for k, v in r.comm_bytes_per_gpu.items()},
              **{f"comm_bytes_by_tier.{d}.{k}": v for d, t in r.comm_bytes_by_tier.items() for k, v in t.items()},
              **{f"tier_utilisation.{k}": v for k, v in r.utilisation.items()}}
    for name, x in positive.items():
        if not (math.isfinite(x) and x > 0):
            raise SimulationError(f"internal error: {name} = {x!r} for scenario {r.scenario.name!r} "
                                  f"(expected a finite positive number)")
    for name, x in finite.items():
        if not (math.isfinite(x) and x >= -1e-9 * max(1.0, abs(r.iteration_time_s))):
            raise SimulationError(f"internal error: {name} = {x!r} for scenario {r.scenario.name!r} "
                                  f"(expected a finite non-negative number)")


def _next_iteration_period(b: IterationBuilder, by_class: list[list[Task]]) -> tuple[float, list[float]]:
    """Steady-state iteration time with P3-style bucket priorities (Jayarajan et al., "Priority-based
    Parameter Propagation", SysML 2019; ByteScheduler, SOSP 2019): the next iteration's first
    forward on a stage may start as soon as the layers it reaches first are updated, while later
    buckets are still in flight.  Its forward over the chunk's G bucket groups runs contiguously
    from S', group g (first layers = 0) at S' + g*F/G, so S' = max_g(ready_g - g*F/G), where
    ready_g is when group g's gradients are reduced, its slice of the optimizer step is done and —
    for ZeRO 1-2 — its parameters are gathered back.  Each stage repeats every S' - S, S its first
    forward; the iteration is the slowest stage's period."""
    sc, p = b.sc, b.p
    period, window = 0.0, [0.0] * p
    for s in range(p):
        mine = by_class[s]
        # The optimizer step and (ZeRO 1-2) the parameter gathers as the tasks charged them.
        opt = next(t.duration for t in mine if t.kind == "optimizer")
        gathers = {(t.info["dim"], t.info["layer_rank"]): t.duration for t in mine
                   if t.kind == "dp" and t.info.get("chunk") == 0 and t.info.get("op") == "all-gather"
                   and t.info.get("buckets")}
        first_f = min((t for t in mine if t.kind == "forward"), key=lambda t: t.start)
        start = first_f.start
        ready: dict[int, float] = {}
        groups = 1
        for t in mine:
            if t.kind == "dp" and t.info.get("chunk") == 0 and t.info.get("buckets") and t.info["op"] != "all-gather":
                g, groups = t.info["layer_rank"], t.info["groups"]
                extra = opt * t.info["share"]
                if sc.parallelism.zero in (1, 2):
                    # The gather of the same bucket group (same buckets: parameters and gradients
                    # are both bf16, techniques/optimizer.py).
                    extra += gathers[(t.info["dim"], g)]
                ready[g] = max(ready.get(g, 0.0), t.end + extra)
        compute_end = max(t.end for t in mine if t.stream == "compute" and t.kind != "optimizer")
        slice_f = first_f.duration / groups
        restart = max([compute_end] + [r - g * slice_f for g, r in ready.items()])
        window[s] = start
        period = max(period, restart - start)
    return period, window


def _memory(b: IterationBuilder, net: Network, s: int) -> MemoryBreakdown:
    sc = b.sc
    zero = sc.parallelism.zero
    held = b.rank_chunks(s)
    chunks = [ch for ch, _ in held]
    dense = sum(c.params for c in chunks)
    expert = sum(c.expert_params for c in chunks)
    nd = net.group_size("dp", s)
    ne = net.group_size("edp", s) if expert else 1

    def shard(x_dense: float, x_expert: float, sharded: bool) -> float:
        return x_dense / nd + x_expert / ne if sharded else x_dense + x_expert

    # ZeRO (Rajbhandari et al. SC20, Fig. 1): stage 1 shards optimizer state, 2 also gradients,
    # 3 also parameters, each over the data-parallel group.
    params = PARAM_BYTES * shard(dense, expert, zero >= 3)
    # Weight stashing (PipeDream): one version per micro-batch in flight; 1 for the other schedules.
    params *= b.schedule.weight_versions(s, b.p)
    grads = GRAD_BYTES * shard(dense, expert, zero >= 2)
    if zero >= 3:
        # FSDP working set: the gathered layer plus ``prefetch_layers`` gathered ahead, and one
        # layer's full gradients before their reduce-scatter.
        layer = max(c.fsdp_layer_bytes for c in chunks)
        params += layer * (1 + sc.communication.prefetch_layers)
        grads += layer / PARAM_BYTES * GRAD_BYTES
    opt = OPTIMIZER_STATE_BYTES[sc.training.optimizer] * shard(dense, expert, zero >= 1)
    # Activations at the schedule's peak, replaying the program order (exact for every schedule).
    peak = b.schedule.peak_activations(b.orders[s], [c.act_bytes for c in chunks])
    return MemoryBreakdown(params, grads, opt, peak)


def _comm_bytes(b: IterationBuilder, by_class: list[list[Task]], m: int) -> dict[str, float]:
    """Bytes each GPU sends per iteration, per dimension (bus bytes, nccl-tests convention);
    the largest over GPU classes."""
    out = dict.fromkeys(COMM_DIMS, 0.0)
    for s, mine in enumerate(by_class):
        held = b.rank_chunks(s)
        per = {"tp": sum(n * c.tp_bytes for c, n in held), "cp": sum(n * c.cp_bytes for c, n in held),
               "ep": sum(n * c.ep_bytes for c, n in held), "pp": 0.0, "dp": sum(n * c.fsdp_bytes for c, n in held)}
        for t in mine:
            if t.kind == "pp":
                per["pp"] += t.info["bytes"] * m / b.m_sim     # per iteration when two are simulated
            elif t.kind == "dp":
                per["dp"] += t.info["bus_bytes"]
        for k in out:
            out[k] = max(out[k], per[k])
    return out


def _links(b: IterationBuilder, net: Network, tasks: list[Task]) -> dict[str, dict]:
    """The main call of each dimension, with the boundary that limits it."""
    sc = b.sc
    out: dict[str, dict] = {}
    calls = {"tp": b.dense.tp_fwd[:1], "ep": (b.moe.ep_fwd[:1] if b.moe else ())}
    for dim, cs in calls.items():
        for c in cs:
            cc = net.cost(c.op, c.size_bytes, dim, 0)
            out[dim] = {"op": c.op, "bytes": c.size_bytes, "group": cc.n, "algorithm": cc.algorithm,
                        "tier": cc.boundary, "busbw_GBps": cc.busbw_GBps, "time_s": cc.time_s}
    if b.dense.cp_kv_bytes:
        cc = net.cost("send-recv", b.dense.cp_kv_bytes, "cp", 0)
        out["cp"] = {"op": "send-recv", "bytes": b.dense.cp_kv_bytes, "group": sc.parallelism.cp,
                     "algorithm": "ring", "tier": cc.boundary, "busbw_GBps": cc.busbw_GBps, "time_s": cc.time_s}
    for dim in ("pp", "dp"):
        # Real calls only (the overlapped-FSDP drawing tasks carry no call of their own).
        mine = [t for t in tasks if t.kind == dim and (dim == "pp" or t.info.get("buckets"))]
        if mine:
            t = max(mine, key=lambda t: (t.duration, -t.cls))   # the slowest call of the dimension
            i = t.info
            out[dim] = {"op": i.get("op", "send-recv"), "bytes": i["bytes"], "group": i["group"],
                        "algorithm": i["algorithm"], "tier": i["tier"], "busbw_GBps": i["busbw_GBps"],
                        "time_s": t.duration}
    if sc.parallelism.zero == 3 and "dp" not in out and net.group_size("dp", 0) > 1:
        size = max(c.fsdp_layer_bytes for c in b.chunks)
        cc = net.cost("all-gather", size, "dp", 0)
        out["dp"] = {"op": "all-gather", "bytes": size, "group": cc.n, "algorithm": cc.algorithm,
                     "tier": cc.boundary, "busbw_GBps": cc.busbw_GBps, "time_s": cc.time_s}
    return out


def _bottleneck(sc: Scenario, bd: dict[str, float], links: dict[str, dict], T: float, m: int) -> str:
    """The largest non-compute category of the busiest stage in one sentence, with the call and
    link behind it."""
    cats = {k: v for k, v in bd.items() if k not in ("compute", "recompute")}
    worst = max(cats, key=lambda k: (cats[k], k))
    share = cats[worst] / T if T > 0 else 0.0
    if cats[worst] <= 1e-3 * T:
        return "Compute-bound: communication and bubbles together take under 0.1% of the iteration."
    head = f"{worst.upper() if worst in COMM_DIMS else worst.capitalize()} takes {share:.1%} of the iteration"
    if worst in links:
        li = links[worst]
        return (f"{head} (exposed {worst} communication): its {li['op']} over {li['group']} GPUs is limited by "
                f"{TIER_WORDS[li['tier']]} at {li['busbw_GBps']:.0f} GB/s bus bandwidth ({li['algorithm']}).")
    if worst == "bubble":
        p = sc.parallelism
        return (f"{head} on the busiest stage (pipeline bubble): {p.pp} stages and {m} micro-batches with "
                f"{p.schedule}. More micro-batches, interleaving or fewer stages shrink it.")
    if worst == "optimizer":
        return f"{head} (optimizer step): it streams the optimizer state through HBM; ZeRO sharding shrinks it."
    return f"{head}."


# Exposed communication of one dimension at or above this share of the iteration, limited by the
# WAN, is worth a warning: the simulated outcome, not a placement rule of thumb, decides.
WAN_EXPOSED_WARNING_SHARE = 0.05


@dataclass(frozen=True)
class Notice:
    """One warning: a machine-readable ``kind`` and the sentence shown to the user.

    Kinds: ``memory`` (a stage exceeds the GPU's memory), ``algorithm`` (the requested collective
    algorithm could not run for some calls), ``wan`` (exposed communication limited by the WAN)."""

    kind: str
    message: str


def _warnings(sc: Scenario, memory: MemoryBreakdown, links: dict[str, dict], net: Network,
              breakdown: dict[str, float], T: float) -> tuple[Notice, ...]:
    """Warnings that follow from the simulated numbers (each quotes the number it rests on)."""
    out: list[Notice] = []
    cap = sc.hardware.gpu.memory_GB * 1e9
    if memory.total > cap:
        out.append(Notice("memory", f"memory: {memory.total / 1e9:.1f} GB per GPU exceeds the "
                          f"{sc.hardware.gpu.memory_GB:g} GB of {sc.hardware.gpu.name}; raise tp/pp, use ZeRO or "
                          f"activation recomputation"))
    if net.fallbacks:
        # One sentence per reason, naming each operation with the dimensions that issued it.
        by_why: dict[str, dict[str, list[str]]] = {}
        for (op, dim), why in sorted(net.fallbacks.items()):
            by_why.setdefault(why, {}).setdefault(op, []).append(dim)
        parts = ["; ".join(", ".join(f"{op} ({', '.join(dims)})" for op, dims in ops.items()) + f": {why}"
                 for why, ops in by_why.items())]
        out.append(Notice("algorithm", f"algorithm: communication.algorithm {sc.communication.algorithm} cannot "
                          f"run for every call — {'; '.join(parts)}"))
    for dim in COMM_DIMS:
        li = links.get(dim)
        share = breakdown.get(dim, 0.0) / T if T > 0 else 0.0
        if li and li["tier"] == "scale-across" and share >= WAN_EXPOSED_WARNING_SHARE:
            out.append(Notice("wan", f"{dim}: exposed {dim} communication takes {share:.1%} of the iteration "
                              f"({breakdown[dim]:.3g} s); its {li['op']} over {li['group']} GPUs is limited by "
                              f"{TIER_WORDS['scale-across']} at {li['busbw_GBps']:.1f} GB/s bus bandwidth"))
    return tuple(out)


def stage_passes(b: IterationBuilder) -> tuple[float, float, float]:
    """F, B, W of one micro-batch on one stage of the ideal pipeline (the average chunk, no
    embedding/logits, no communication): forward, input-gradient backward (recompute included)
    and weight-gradient seconds."""
    ideal = IterationBuilder(b.sc, Network(b.sc, free=True), IDEAL_ASPECTS) if b.ideal != IDEAL_ASPECTS else b
    ch = ideal.chunks[0]
    F = sum(x for _, x in ch.fwd_parts)
    W = sum(x for _, x in ch.split(ch.bwd_parts, True))
    B = sum(x for _, x in ch.split(ch.bwd_parts, False))
    return F, B, W


def bubble_formula(sc: Scenario, b: IterationBuilder) -> tuple[float, str]:
    """The schedule's own closed-form bubble fraction for this p, m, v (and F, B, W where the
    formula needs them), and the formula as text.  Under ``parallelism.ideal_pipeline`` the Bubble
    card equals it exactly (tests/test_bubble.py)."""
    par = sc.parallelism
    p, v, m = b.p, b.v, b.m
    unit = "micro-batches" if par.token_slices == 1 else f"units (micro-batches x {par.token_slices} token slices)"
    if p == 1:
        return 0.0, "no pipeline (pp = 1): no bubble"
    return b.schedule.bubble(BubbleInputs(p, v, m, unit, lambda: stage_passes(b)))


# Beyond this many engine tasks the card-versus-formula decomposition (four more simulations of
# the same graph) is skipped and the sentence gives the ingredients without their shares.
WATERFALL_MAX_TASKS = 200_000


def _mean_bubble(sc: Scenario, ideal: frozenset[str]) -> float:
    """The Bubble card of ``sc`` simulated with the given ideal-pipeline aspects."""
    r = _schedule(sc, ideal)
    return sum(r.breakdown(s)["bubble"] for s in range(r.builder.p)) / r.builder.p / r.T


def _bubble_summary(sc: Scenario, card: float, busiest: float, formula_text: str, p: int) -> str:
    """The Bubble card next to the schedule's formula, in one sentence (no extra simulation)."""
    if p == 1:
        return ""
    out = (f"Bubble card {card:.1%} (idle share averaged over the {p} stages; busiest stage {busiest:.1%}); "
           f"the schedule's formula: {formula_text}.")
    if sc.parallelism.ideal_pipeline:
        out += " Ideal pipeline: equal stages, no embedding/logits, no optimizer, free communication."
    return out


def explain_bubble(r: Result) -> str:
    """How the Bubble card (mean idle share over stages) relates to the schedule's formula, with
    every difference quantified.

    Starting from the ideal pipeline (whose card is the formula exactly) the real scenario is
    restored one aspect at a time — the layer split, the embedding/logits work, the optimizer
    step, communication — and each step's change of the card is quoted, so the differences add
    up exactly to card - formula.  This costs three more simulations of the same graph, so it is
    computed on demand (the CLI's summary, the app's explanation), never inside :func:`simulate`."""
    sc = r.scenario
    p, v = sc.parallelism.pp, sc.parallelism.vpp
    out = r.bubble_explanation
    if p == 1 or sc.parallelism.ideal_pipeline:
        return out
    split = list(r.stage_layers)
    last = p * v - 1
    where = (f"the embedding on stage 0 and the logits on stage {last % p}" if v == 1 else
             f"the embedding on stage 0 (chunk 0) and the logits on stage {last % p} (its last chunk)")
    labels = [f"the layer split {split}", where, "the optimizer step", "exposed communication"]
    if len(r.tasks) > WATERFALL_MAX_TASKS:
        return out + (" It differs through " + ", ".join(labels) + " (not decomposed: "
                      f"{len(r.tasks):,} tasks).")
    steps = [IDEAL_ASPECTS - {"balance"}, frozenset({"optimizer", "comm"}), frozenset({"comm"})]
    values = [r.bubble_formula] + [_mean_bubble(sc, st) for st in steps] + [r.bubble_fraction]
    deltas = [values[i + 1] - values[i] for i in range(len(labels))]
    shown = [f"{lab} {d * 100:+.1f} points" for lab, d in zip(labels, deltas)]
    return out + " From formula to card: " + ", ".join(shown) + "."
