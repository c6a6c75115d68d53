"""A serving scenario's :class:`Result`: its timeline (one prefill and a steady-state window of decode
steps per GPU class, scheduled by the engine so the Gantt draws them like a training iteration),
its headline figures under ``inference`` and the bottleneck sentence.

The training keys keep a meaning: ``iteration_time_s`` is one decode step (a serving engine's
iteration), ``tokens_per_s`` the output tokens per second of the whole deployment, TFLOP/s and MFU
those of the decode step, ``breakdown_s`` the busiest decode stage's step by category, ``memory_GB``
a decode GPU's weights (params) and KV cache plus workspace (activations).
"""
from __future__ import annotations

import math

from ..analysis.breakdown import CATEGORIES, COMM_DIMS, MemoryBreakdown
from ..analysis.report import pcie_notice
from ..config import Scenario
from ..engine.records import PassInfo, TransferInfo
from ..engine.scheduler import Task, TaskGraph, run
from ..network.groups import Network
from ..network.topology import BOUNDARY_NAMES
from ..result.record import GPUClass, Result
from ..vocabulary import PCIE_LIMIT
from . import mix
from .curve import batch_curve
from .deploy import Serving, kv_rate_GBps
from .load import serve
from .memory import kv_bytes_per_token_gpu
from .step import StageCost, compute_dtype, wide_head_warning
from .targets import at_target

WINDOW_STEPS = 4          # decode steps drawn after the prefill: enough to see the steady state repeat


def step_components(sv: Serving) -> dict[str, float]:
    """The decode step of the busiest decode GPU by component (gemm, attention, small_kernels, tp, ep,
    pp): with pp stages it runs one pass per micro-batch in flight, pp per step (serving/deploy.py),
    and ``pp`` is the rest of the step — the sends, and the waits of a pipeline whose stages differ."""
    busiest = max(sv.decode, key=lambda st: st.duration)
    n = len(sv.decode)
    out = {k: n * v for k, v in busiest.components.items()}
    out["pp"] = max(sv.step_s - n * busiest.duration, 0.0)
    return out


def _task(cls: int, st: StageCost, what: str, deps: list[tuple[int, float]]) -> Task:
    """The compute task of one stage's pass: its parts by category in the order a layer runs them."""
    parts: dict[str, float] = {}
    for k, v in st.layer_parts:
        parts[k] = parts.get(k, 0.0) + v * st.layers
    parts["compute"] = parts.get("compute", 0.0) + st.edge_s
    info = PassInfo(0, 0, st.layers, st.comm, st.layer_parts, st.flops, op=what)
    return Task(cls, "compute", "forward", st.duration, deps=deps,
                parts=tuple((k, v) for k, v in parts.items() if v > 0), info=info)


def _by_tier(out: dict[str, float], call: dict, n: float) -> None:
    """Add ``n`` calls' bytes per GPU to each tier they cross (step._call's ``per_gpu``, as training
    counts a call's traffic: a 16-GPU all-reduce over two nodes loads NVLink and the NICs, not only
    the one that limits it); a call of one GPU adds nothing."""
    for b, v in enumerate(call.get("per_gpu", ())):
        if v > 0:
            out[BOUNDARY_NAMES[b]] += n * v


def _send(cls: int, call: dict, what: str, dep: int, stage: int) -> Task:
    info = TransferInfo(0, 0, call["bytes"], call["group"], call["algorithm"], call["tier"],
                        call["busbw_GBps"], what, stage)
    return Task(cls, "pp", "pp", call["time_s"], deps=[(dep, 1.0)], parts=(("pp", call["time_s"]),),
                info=info, tier=call.get("boundary", call["tier"]))


def _chain(g: TaskGraph, classes: list[int], stages: list[StageCost], what: str,
           after: list[int | None]) -> list[int]:
    """One pass through the pipeline on ``classes``: each stage after its previous stage's send and
    after ``after[s]`` (the same class's previous pass); returns each stage's last task."""
    last: list[int] = []
    prev_send: int | None = None
    for s, st in enumerate(stages):
        deps = [(d, 1.0) for d in (prev_send, after[s]) if d is not None]
        t = g.add(_task(classes[s], st, what, deps))
        last.append(t)
        prev_send = g.add(_send(classes[s], st.send, what, t, s)) if st.send else None
    return last


def _graph(sv: Serving, co_located: bool, kv_call: dict | None) -> tuple[TaskGraph, list[str]]:
    """The prefill and the decode window as tasks; the labels of the classes."""
    g = TaskGraph()
    pp_p, pp_d = len(sv.prefill), len(sv.decode)
    pre_gpus = sv.prefill_layout.gpus // pp_p
    dec_gpus = sv.decode_layout.gpus // pp_d
    if co_located:
        labels = [f"stage {s} (×{dec_gpus} GPUs)" for s in range(pp_d)]
        pre_cls = dec_cls = list(range(pp_d))
    else:
        labels = [f"prefill stage {s} (×{pre_gpus} GPUs)" for s in range(pp_p)]
        labels += [f"decode stage {s} (×{dec_gpus} GPUs)" for s in range(pp_d)]
        pre_cls, dec_cls = list(range(pp_p)), list(range(pp_p, pp_p + pp_d))
    last = _chain(g, pre_cls, sv.prefill, "prefill", [None] * pp_p)
    if kv_call is not None:
        for s in range(pp_p):       # every prefill GPU sends its share of the KV cache
            g.add(_send(pre_cls[s], kv_call, "KV cache prefill → decode", last[s], s))
    after: list[int | None] = list(last) if co_located else [None] * pp_d
    for k in range(WINDOW_STEPS):
        after = list(_chain(g, dec_cls, sv.decode, f"decode step {k + 1}", after))
    return g, labels


def _bottleneck(sc: Scenario, sv: Serving) -> str:
    """The decode step's two largest shares in one sentence (e.g. "decode step 14.2 ms: 54 % reading
    weights in the GEMMs, 38 % in TP all-reduce latency within one node"); when co-located prefills
    take most of a replica's time, that first (each request's prefill against its share of decode
    steps), then the decode step's shares."""
    said = _decode_shares(sv)
    inf = sc.inference
    if sv.bound != "prefill" or inf is None or inf.disaggregated is not None:
        return said
    decode = mix.mean_output(inf) * sv.step_s / sv.batch     # a request's share of decode steps
    prefill = sv.prefill_cost_s
    return (f"prefill: each request's prompt takes the replica {prefill * 1e3:,.1f} ms from decoding, "
            f"{prefill / (prefill + decode):.0%} of its time against {decode * 1e3:,.1f} ms of decode steps "
            "(chunked prefill or disaggregated prefill would free it); "
            f"{said}").replace("%", " %", 1)


def _decode_shares(sv: Serving) -> str:
    """The decode step's two largest shares (:func:`_bottleneck`)."""
    busiest = max(sv.decode, key=lambda st: st.duration)
    lay = sv.decode_layout
    gpn = lay.cluster.gpus_per_node
    c = step_components(sv)
    step = sv.step_s

    def comm(dim: str, label: str, ranks: int) -> str:
        call = busiest.comm.get(dim, {})
        bound = "latency" if call.get("latency_s", 0.0) >= 0.5 * call.get("time_s", 1.0) else "bandwidth"
        nodes = math.ceil(ranks / gpn)
        where = "within one node" if nodes <= 1 else f"across {nodes} nodes"
        # What sets it, from the call's own price (a hunt read "latency across 16 nodes" where the
        # latency is NVLink's per-peer issue, and "bandwidth" where the LL protocol, not the links,
        # capped a 1 MB all-reduce at 56 of 450 GB/s): a latency-bound call's tier, a bandwidth-bound
        # one's algorithm and bus bandwidth, and the GPUs' PCIe links where they set it, as a
        # training run names them.
        tier = str(call.get("tier", ""))
        if bound == "latency":           # (within one node there is only the scale-up's)
            what = f"mostly {tier}" if tier.endswith("latency") and nodes > 1 else ""
        else:
            pcie = "the GPUs' PCIe links, " if tier == PCIE_LIMIT else ""
            busbw = call.get("busbw_GBps", 0.0)
            what = f"{pcie}{call.get('algorithm', '')} at {busbw:,.0f} GB/s bus bandwidth"
        return f"{label} {bound} {where}" + (f" ({what})" if what else "")

    p = lay.parallelism
    shares = {"the GEMMs": c["gemm"],
              "attention over the KV cache": c["attention"],
              "small kernels (norms, rotary, KV writes, activations, quantisation)": c["small_kernels"],
              comm("tp", "TP all-reduce", p.tp): c["tp"],
              comm("ep", "EP all-to-all", p.ep * p.tp): c["ep"],
              "pipeline sends and waits": c["pp"]}
    top = sorted(((v, k) for k, v in shares.items() if v > 0), reverse=True)[:2]
    said = ", ".join(f"{v / step:.0%} in {k}".replace("%", " %", 1) for v, k in top)
    return f"decode step {step * 1e3:.1f} ms: {said}"


def _figures(sc: Scenario, sv: Serving, sentence: str) -> dict:
    """The ``inference`` object of run --json (issue 37's contract keys first)."""
    batch = sv.batch             # the configured one; under an arrival rate, the concurrency it leads to
    return {"ttft_s": sv.ttft_s, "tpot_s": sv.tpot_s,
            "output_tokens_per_s_per_gpu": sv.output_tokens_per_s_per_gpu,
            "requests_per_s": sv.requests_per_s, "kv_cache_GB": sv.kv_cache_GB,
            "max_batch": sv.memory.max_batch,
            "decode_step_s": sv.step_s,
            # What the decode pool could emit with its batch full, whatever the prefill supplies.
            "decode_tokens_per_s_per_gpu": sv.decode_layout.dp * batch / sv.step_s / sv.decode_layout.gpus,
            "output_tokens_per_s_per_replica": sv.output_tokens_per_s_per_replica,
            "batch": batch, "gpus": sv.gpus,
            "prefill_gpus": sv.prefill_layout.gpus if sv.prefill_layout is not sv.decode_layout else 0,
            "decode_gpus": sv.decode_layout.gpus if sv.prefill_layout is not sv.decode_layout else 0,
            "weights_GB": sv.memory.weights / 1e9, "kv_transfer_bytes": sv.kv_transfer_bytes,
            "kv_transfer_s": sv.kv_transfer_s, "bound": sv.bound,
            "decode_step_breakdown_s": step_components(sv),
            "bottleneck": sentence, **_load(sv), **_mix(sc, sv), **_curve(sc, sv)}


def _mix(sc: Scenario, sv: Serving) -> dict:
    """With a request-length mix (serving/mix.py): each kind's lengths, share of the arrivals and
    of the running batch, and TTFT (queue wait included under an arrival rate); the mean output."""
    inf = sc.inference
    if inf is None or not inf.mix:
        return {}
    ks, held = mix.kinds(inf), mix.in_batch(inf)
    return {"mix": [{"prompt_tokens": k.prompt, "output_tokens": k.output, "share": k.share,
                     "share_of_batch": w, "ttft_s": t}
                    for k, w, t in zip(ks, held, sv.ttft_by_kind, strict=True)],
            "mean_prompt_tokens": mix.mean_prompt(inf), "mean_output_tokens": mix.mean_output(inf)}


def _load(sv: Serving) -> dict:
    """Under an arrival rate (serving/load.py): the rate, the prefill queue's mean wait (in TTFT) and
    the load against the capacity at the largest batch allowed; nothing for a saturated server."""
    if sv.arrival_rate is None:
        return {}
    return {"arrival_rate": sv.arrival_rate, "queue_wait_s": sv.queue_wait_s, "load": sv.load}


def _curve(sc: Scenario, sv: Serving) -> dict:
    """The latency-throughput curve over the batch and its knee (serving/curve.py)."""
    points, knee = batch_curve(sc, sv.memory.max_batch)
    out: dict = {"batch_curve": points, "knee_batch": knee}
    inf = sc.inference
    if inf is not None and (inf.tpot_target_ms is not None or inf.ttft_target_ms is not None):
        # A saturated scenario's own batch is a candidate beside the curve's powers of two (under an
        # arrival rate its figures are the rate's, not the batch's capacity).
        here = [] if sv.arrival_rate is not None else [
            {"batch": sv.batch, "tpot_s": sv.tpot_s, "ttft_s": sv.ttft_s,
             "output_tokens_per_s_per_gpu": sv.output_tokens_per_s_per_gpu,
             "requests_per_s": sv.requests_per_s,
             **({"ttft_sq_s2": sv.ttft_sq_s2} if sv.ttft_by_kind else {})}]
        # Only a batch whose KV cache fits is an answer: the configured batch may exceed max_batch
        # (it is then warned about), and the curve draws batch 1 even when nothing fits.
        fits = [p for p in points + here if p["batch"] <= sv.memory.max_batch]
        tpot = None if inf.tpot_target_ms is None else inf.tpot_target_ms * 1e-3
        ttft = None if inf.ttft_target_ms is None else inf.ttft_target_ms * 1e-3
        servers = sv.prefill_servers
        best = at_target(fits, tpot, ttft, servers)
        if tpot is not None:
            out["tpot_target_s"] = tpot
        if ttft is not None:
            out["ttft_target_s"] = ttft
        out.update({"target_batch": None if best is None else int(best[0]["batch"]),
                    "requests_per_s_at_target": 0.0 if best is None else best[1]})
    return out


def _utilisation(sc: Scenario, tiers: dict[str, dict[str, float]], step_s: float) -> dict[str, float]:
    """Each tier's busy share over a decode step: the bytes every GPU sends across it in a step
    over the tier's capacity (topology.Fabric.tier_capacity_Bps), as training's utilisation is read
    from run --json (bytes by tier x GPUs = utilisation x that capacity x step)."""
    out: dict[str, float] = {}
    fabric = Network(sc).fabric
    for b, bd in enumerate(fabric.boundaries):
        sent = sum(t.get(bd.name, 0.0) for t in tiers.values()) * sc.gpus
        capacity = fabric.tier_capacity_Bps(b, sc.gpus)
        out[bd.name] = min(sent / (capacity * step_s), 1.0) if step_s > 0 else 0.0
    return out


def simulate_serving(sc: Scenario) -> Result:
    """Simulate the serving scenario ``sc`` (deterministic) into a Result with ``inference`` set."""
    sv = serve(sc)
    co_located = sc.inference is not None and sc.inference.disaggregated is None
    kv_call = None
    if not co_located:
        lay = sv.prefill_layout.parallelism
        inf_ = sc.inference
        assert inf_ is not None
        # Each prefill GPU sends what it holds: its layers' KV heads (MLA: the whole latent per TP rank).
        share = mix.mean_prompt(inf_) * kv_bytes_per_token_gpu(sc.model, inf_.kv_dtype, lay.tp, lay.pp)
        busbw = share / sv.kv_transfer_s / 1e9
        # Its GPUs' PCIe links set its rate where they are narrower than the NIC share (deploy.kv_transfer).
        tier = PCIE_LIMIT if kv_rate_GBps(sc)[1] else "scale-out"
        kv_call = {"bytes": share, "group": 2, "algorithm": "p2p", "tier": tier, "boundary": "scale-out",
                   "busbw_GBps": busbw, "time_s": sv.kv_transfer_s}
    g, labels = _graph(sv, co_located, kv_call)
    run(g)
    pp_p = 0 if co_located else len(sv.prefill)
    dec = sv.decode_layout
    per = dec.gpus // len(sv.decode)
    drawn = ([] if co_located else sv.prefill) + sv.decode                  # one per class, in order
    gpus = [sv.prefill_layout.gpus // len(sv.prefill)] * pp_p + [per] * len(sv.decode)
    classes = tuple(GPUClass(i, lab, i, gpus[i], (drawn[i].layers,), 0, lab.split(" (")[0])
                    for i, lab in enumerate(labels))
    slow = max(range(len(sv.decode)), key=lambda s: sv.decode[s].duration)
    st = sv.decode[slow]
    step = sv.step_s
    bd = dict.fromkeys(CATEGORIES, 0.0)
    comps = step_components(sv)
    bd["compute"] = comps["gemm"] + comps["attention"] + comps["small_kernels"]
    bd["tp"], bd["ep"] = comps["tp"], comps["ep"]
    bd["pp"] = min(comps["pp"], len(sv.decode) * (st.send["time_s"] if st.send else 0.0))
    bd["bubble"] = max(step - sum(bd.values()), 0.0)
    comm = dict.fromkeys(COMM_DIMS, 0.0)
    tiers = {d: dict.fromkeys(BOUNDARY_NAMES, 0.0) for d in COMM_DIMS}
    for dim, call in st.comm.items():
        # Two calls per (MoE) layer: two all-reduces, or a dispatch and a combine (whose bytes are
        # its own: 16-bit where the dispatch may be FP8), counted in dispatches.
        n = 2.0 * st.layers if dim == "tp" else st.moe_layers * (1 + call["combine_bytes"] / call["bytes"])
        comm[dim] = n * call["bytes"]
        _by_tier(tiers[dim], call, n)
    if st.send:
        comm["pp"] = st.send["bytes"]
        _by_tier(tiers["pp"], st.send, 1)
    mem = MemoryBreakdown(sv.memory.weights, 0.0, 0.0, sv.memory.kv_batch + sv.memory.workspace)
    warnings: tuple[str, ...] = ()
    kinds: tuple[str, ...] = ()
    inf = sc.inference
    assert inf is not None
    held = sv.memory.weights + sv.memory.workspace
    if held > sv.memory.usable:
        # No batch fits at all: the weights (and the pass's workspace) alone exceed what the server
        # may use, so the batch is not the field to change (it had been named).
        warnings = (f"the weights alone ({sv.memory.weights / 1e9:,.1f} GB per GPU, "
                    f"{held / 1e9:,.1f} GB with the workspace) exceed the {sv.memory.usable / 1e9:,.1f} GB "
                    "the server may use (capacity x inference.memory_utilization): no batch fits; shard "
                    "them over more GPUs (parallelism.tp, parallelism.pp) or store them in fewer bytes "
                    "(inference.weight_dtype)",)
        kinds = ("memory",)
    elif sv.memory.max_batch < sv.batch:
        tokens = mix.batch_mean(inf, lambda prompt, output: prompt + output)
        warnings = (f"the KV cache of {sv.batch} sequences of {tokens:,.0f} "
                    f"tokens does not fit beside the weights: at most {sv.memory.max_batch} per replica "
                    f"(inference.batch)",)
        kinds = ("memory",)
    if sv.prefill_need_bytes > sv.memory.usable:
        pool = sv.prefill_layout.parallelism
        warnings += (f"the prefill pool's GPUs need {sv.prefill_need_bytes / 1e9:,.1f} GB each (weights, "
                     f"workspace and the longest prompt's KV cache at tp {pool.tp} · pp {pool.pp} · ep "
                     f"{pool.ep}) of the {sv.memory.usable / 1e9:,.1f} GB the server may use: shard them "
                     "over more GPUs (inference.disaggregated.prefill.tp, .pp, .ep)",)
        kinds += ("memory",)
    wide = wide_head_warning(sc)
    if wide is not None:
        warnings, kinds = warnings + (wide,), kinds + ("kernel",)
    # The GPUs' PCIe links narrower than their share of the NICs: said as a training run says it.
    narrow = pcie_notice(sc, Network(sc))
    if narrow is not None:
        warnings, kinds = warnings + (narrow.message,), kinds + (narrow.kind,)
    sentence = _bottleneck(sc, sv)
    gpu = sc.hardware.gpu
    flops = st.flops / step
    links = {d: {k: v for k, v in c.items() if k not in ("latency_s", "boundary", "per_gpu", "combine_bytes")}
             for d, c in st.comm.items()}
    return Result(
        scenario=sc, iteration_time_s=step, tokens_per_s=sv.requests_per_s * mix.mean_output(inf),
        tflops_per_gpu=flops / 1e12, mfu=flops / (gpu.peak_tflops * 1e12),
        # FP8 weights and activations run on the fp8 tensor cores: their MFU over that peak too, as
        # a training run's (the bf16 one can then exceed 1: 1.26 with a 4M-wide FFN).
        mfu_fp8_peak=(flops / ((gpu.fp8_tflops or gpu.peak_tflops) * 1e12)
                      if compute_dtype(inf) == "fp8" else None),
        bubble_fraction=bd["bubble"] / step, bubble_fraction_busiest=bd["bubble"] / step,
        bubble_formula=0.0, bubble_formula_text="", bubble_explanation="",
        breakdown_s=bd, breakdown_class=pp_p + slow, memory=mem, memory_by_class=(mem,) * len(classes),
        comm_bytes_per_gpu=comm, comm_bytes_by_tier=tiers, bottleneck=sentence, warnings=warnings,
        warning_kinds=kinds, classes=classes, stage_layers=tuple(s.layers for s in sv.decode), links=links,
        utilisation=_utilisation(sc, tiers, step), tasks=g.tasks, inference=_figures(sc, sv, sentence))
