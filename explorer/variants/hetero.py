"""Datacenters that differ: different sizes and different GPU types (issue 12, point 4).

``cluster.datacenters`` as a list may give each datacenter its own ``nodes`` and its own ``gpu``
preset (explorer/config/datacenters.py).  Such a cluster is simulated with the replica machinery
of explorer/variants/replicas.py — one simulation per *kind*, never per GPU — in one of two ways, chosen by
what crosses datacenters (explorer/config/hetero_rules.py refuses every other placement):

**DP across** (``span: dp``; every datacenter holds whole pipeline replicas).  The datacenters
with the same GPU and size form one kind of replica (a :class:`~explorer.variants.kinds.Variant`).  Each
kind is simulated on its own GPU — peak FLOP/s, GEMM efficiency, HBM bandwidth, memory capacity
and its preset's scale-up (NVLink) bandwidth — as if every datacenter were like its own: same
count, its size.  The replicas join at the data-parallel gradient reduction, which waits for its
last member (synchronous SGD), so the fast replicas wait there and the iteration is the slowest
kind's: in synchronous data parallelism over GPUs of different speeds the slowest worker sets
the pace (HetPipe, Park et al., USENIX ATC'20; Whale, Jia et al., USENIX ATC'22, whose
hardware-aware load balancing is the remedy below).  Memory is checked per kind against its GPU's capacity.

- *Unequal sizes* (e.g. 512 and 256 nodes): datacenter ``d`` holds ``r_d`` = its GPUs / (tp*cp*pp)
  replicas; the global batch splits evenly over all replicas (``parallelism.batch_split: even``).
  The hierarchical DP all-reduce reduces inside each datacenter over its ``r_d`` replicas, then
  across datacenters, then broadcasts back.  Per WAN link a ring over the datacenters carries
  2(D-1)/D x the gradient bytes S whatever the sizes (each datacenter holds the whole reduced
  vector after its inner phase, S split into its ``r_d`` shards); per GPU, the smaller datacenter's
  GPUs each carry S/r_d, more than the larger one's.  Simulating each kind as D datacenters of its
  own size gives exactly those per-GPU shares for that kind and the same bytes per WAN link.
- *Load-balanced split* (``parallelism.batch_split: speed``): micro-batches per replica in
  proportion to its GPU's speed (one layer's training seconds on it), in whole micro-batches, the
  total exactly the global batch (:func:`split_micro_batches`) — the balancing of HetPipe/Whale
  and of "Cephalo" (Guo et al., 2024) for DP over GPU generations.

**PP across** (``span: pp``; equal sizes; every datacenter holds whole stages).  Each stage runs
at its datacenter's GPU: its kernels take ``stage_factor`` = one layer's training seconds on that
GPU over that on ``hardware.gpu`` (:func:`stage_factors`; the straggler hook of the builder), and
its memory is checked against that GPU's capacity.  With ``batch_split: speed`` (and no explicit
``stage_layers``, vpp 1) the layers are split so the slowest stage finishes first: a slower GPU's
stages get fewer layers (:func:`speed_layers`; HetPipe, and Metis, Um et al., USENIX ATC'24,
partition layers by device speed).

Headline figures of a heterogeneous run: tokens/s = global batch x sequence / iteration; TFLOP/s
per GPU averaged over all GPUs; MFU = model FLOPs / (iteration x the sum of every GPU's bf16 peak).

Not modelled: a stage's kernels in PP-across scaled by one per-stage factor, not kernel by kernel
(a GPU with a different FLOP/byte balance speeds GEMMs and memory-bound kernels differently), and
its TP collectives at hardware.gpu's scale-up bandwidth; the layer split by speed counts every
layer as dense and is not offered for interleaved stages (vpp > 1); ZeRO shards with unequal sizes
(each kind is sharded as over its own D x r_d replicas); the joint DP collective runs at the
slowest kind's cost for everyone; stragglers in such a cluster, and two-direction schedules with PP
across (DualPipe runs each stage on two ranks, here of two GPU types) - both refused.
"""
from __future__ import annotations

from dataclasses import replace
from functools import cache
from itertools import product

from ..config import Scenario
from ..config.hetero_rules import dp_across
from ..config.loading import DEFAULT_SMS
from ..config.presets import gpu_presets
from ..config.schema import ScenarioError, build
from ..config.sections import GPU
from ..physics.hardware import ComputeModel
from ..workloads.registry import workload_spec
from .kinds import Variant


@cache
def preset_gpu(name: str) -> GPU:
    """GPU preset ``name`` with its derived defaults filled (fp8 peak, SMs), as a loaded scenario's."""
    g = build(GPU, gpu_presets()[name], "cluster.datacenters.gpu")
    return replace(g, fp8_tflops=g.fp8_tflops or g.peak_tflops, sms=g.sms or DEFAULT_SMS, preset=name)


def dc_gpu(sc: Scenario, d: int) -> GPU:
    """The GPU of datacenter ``d``: its own preset in the list form, else ``hardware.gpu``."""
    names = sc.cluster.datacenter_gpus
    if not names or names[d] == sc.hardware.gpu.preset:
        return sc.hardware.gpu
    return preset_gpu(names[d])


def on_gpu(sc: Scenario, gpu: GPU) -> Scenario:
    """``sc`` with every GPU a ``gpu``: its compute, memory and (when it is not ``hardware.gpu``)
    its preset's scale-up bandwidth — an A100 datacenter has A100 NVLink — at its own board power:
    ``hardware.power_cap_W`` limits ``hardware.gpu``, whose board it was checked against
    (config/power_rules.py), not a datacenter of other GPUs."""
    if gpu == sc.hardware.gpu:
        return sc
    up = sc.cluster.scale_up
    if gpu.scale_up_GBps is not None:
        up = replace(up, bandwidth_GBps=gpu.scale_up_GBps)
    return replace(sc, hardware=replace(sc.hardware, gpu=gpu, power_cap_W=None),
                   cluster=replace(sc.cluster, scale_up=up))


def layer_seconds(sc: Scenario) -> float:
    """Training seconds (forward + both backward halves) of the model's mean layer on ``sc``'s GPU
    (its workload's spec: explorer/workloads/registry.py): the yardstick of a GPU's speed for this
    model.  A model of one kind of layer is that layer exactly."""
    cm = ComputeModel.for_scenario(sc)
    spec = workload_spec(sc)
    per_kind = [sum(cm.time(w) for w in _passes(lc)) for lc in spec.kinds]
    used = [(k, n) for k, n in spec.runs if n]
    if len({k for k, _ in used}) == 1:
        return per_kind[used[0][0]]
    return sum(per_kind[k] * n for k, n in used) / sum(n for _, n in used)


def stage_factors(sc: Scenario) -> tuple[float, ...]:
    """PP across: per stage, its kernels' time factor on its datacenter's GPU vs ``hardware.gpu``."""
    c, p = sc.cluster, sc.parallelism
    per_dc = p.pp // c.datacenters
    base = layer_seconds(sc)
    return tuple(layer_seconds(on_gpu(sc, dc_gpu(sc, s // per_dc))) / base for s in range(p.pp))


def speed_layers(sc: Scenario, factors: tuple[float, ...]) -> tuple[int, ...]:
    """PP across with ``batch_split: speed``: layers per stage that minimise the slowest stage's
    time, stage s taking ``factors[s]`` x (its layers' training seconds + the embedding on the first,
    the output layer on the last), each stage at least one layer (HetPipe's and Metis' partitioning
    of layers by device speed).  Every layer counts as a dense layer (``layer_seconds``)."""
    p, L = len(factors), sc.model.layers
    cm = ComputeModel.for_scenario(sc)
    edge = [0.0] * p
    spec = workload_spec(sc)
    edge[0] += sum(cm.time(w) for w in _passes(spec.first))
    edge[-1] += sum(cm.time(w) for w in _passes(spec.last))
    unit = layer_seconds(sc)

    def fill(T: float) -> list[int] | None:
        """Most layers each stage fits in time T (at least 1), or None when they do not add up."""
        n = [max(1, int((T / f - e) / unit)) for f, e in zip(factors, edge, strict=True)]
        return n if sum(n) >= L else None

    lo, hi = 0.0, max(factors) * (L * unit + sum(edge))
    for _ in range(100):                       # bisection on the bottleneck time
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if fill(mid) else (mid, hi)
    n = fill(hi) or [1] * p
    extra = sum(n) - L
    for s in sorted(range(p), key=lambda k: (n[k] * unit + edge[k]) * factors[k], reverse=True):
        cut = min(extra, n[s] - 1)          # trim the surplus from the stages that finish last
        n[s] -= cut
        extra -= cut
    return tuple(n)


def _passes(lc):
    return (lc.fwd, lc.bwd_input, lc.bwd_weight)


def split_micro_batches(total: int, replicas: list[int], speeds: list[float]) -> list[int]:
    """Micro-batches per replica of each kind, in proportion to ``speeds``, summing exactly to
    ``total`` over all replicas (``sum(r * m)``), each at least 1, the slowest kind's finish
    (micro-batches / speed) as early as whole counts allow; a ScenarioError when no whole counts
    near the proportional ones add up to ``total``.

    >>> split_micro_batches(96, [16, 16], [2.0, 1.0])
    [4, 2]
    """
    rate = total / sum(r * s for r, s in zip(replicas, speeds, strict=True))
    ideal = [max(1, int(rate * s)) for s in speeds]
    best: tuple[float, list[int]] | None = None
    # The proportional counts rounded down, then every nearby choice of all kinds but the last (the
    # last takes what is left, if whole): the one whose slowest kind finishes first.  Two kinds
    # search far enough to meet every residue of the last kind's replicas; 3-4 kinds +-8; more, none.
    span = max(8, replicas[-1]) if len(speeds) == 2 else 8 if len(speeds) <= 4 else 0
    for shift in product(range(-span, span + 1), repeat=len(speeds) - 1):
        m = [max(1, k + d) for k, d in zip(ideal, shift, strict=False)]
        rest = total - sum(r * k for r, k in zip(replicas, m, strict=False))
        if rest < replicas[-1] or rest % replicas[-1]:
            continue
        m.append(rest // replicas[-1])
        finish = max(k / sp for k, sp in zip(m, speeds, strict=True))
        if best is None or finish < best[0] - 1e-12:
            best = (finish, m)
    if best is None:
        best = (0.0, _greedy(total, replicas, speeds, ideal))
    if not best[1]:
        raise ScenarioError("parallelism.batch_split", f"speed cannot split {total:,} micro-batches "
                            f"exactly over {' + '.join(map(str, replicas))} replicas; use even or a "
                            "global batch that the replicas' counts add up to")
    return best[1]


def _greedy(total: int, replicas: list[int], speeds: list[float], m: list[int]) -> list[int]:
    """From counts ``m``, one more micro-batch per replica at a time to the kind that would then
    finish first, while it fits; [] when ``total`` is not met exactly."""
    m = list(m)
    left = total - sum(r * k for r, k in zip(replicas, m, strict=True))
    while left > 0:
        fits = [k for k, r in enumerate(replicas) if r <= left]
        if not fits:
            return []
        k = min(fits, key=lambda i: ((m[i] + 1) / speeds[i], i))
        m[k] += 1
        left -= replicas[k]
    return m if left == 0 else []


def gpu_summary(sc: Scenario) -> str:
    """The cluster's GPUs for one line of text: ``1,024 x H100 SXM``, or by type when the datacenters
    differ: ``512 x H100 SXM + 512 x B200``."""
    c = sc.cluster
    count: dict[str, int] = {}
    for d in range(c.datacenters):
        name = dc_gpu(sc, d).name
        count[name] = count.get(name, 0) + c.nodes_of(d) * c.gpus_per_node
    return " + ".join(f"{n:,} x {name}" for name, n in count.items())


def kinds(sc: Scenario) -> list[tuple[tuple[int, ...], GPU, int]]:
    """DP across: the kinds of datacenter — (their indices, GPU, nodes each) — in first-seen order."""
    c = sc.cluster
    groups: dict[tuple[str, int], list[int]] = {}
    for d in range(c.datacenters):
        groups.setdefault((dc_gpu(sc, d).name, c.nodes_of(d)), []).append(d)
    return [(tuple(ds), dc_gpu(sc, ds[0]), c.nodes_of(ds[0])) for ds in groups.values()]


def micro_batches_per_kind(sc: Scenario) -> list[int]:
    """DP across: micro-batches of one replica of each kind (:func:`kinds` order)."""
    p = sc.parallelism
    replica = p.tp * p.cp * p.pp
    ks = kinds(sc)
    reps = [len(ds) * n * sc.cluster.gpus_per_node // replica for ds, _, n in ks]
    if p.batch_split != "speed" or len({g.name for _, g, _ in ks}) == 1:
        return [sc.micro_batches] * len(ks)
    speeds = [1.0 / layer_seconds(on_gpu(sc, g)) for _, g, _ in ks]
    return split_micro_batches(sc.training.global_batch // sc.training.micro_batch, reps, speeds)


def variants(sc: Scenario) -> list[Variant]:
    """The kinds of replica of a heterogeneous cluster (module docstring): one Variant per kind of
    datacenter with DP across; one Variant with per-stage factors with PP across."""
    c, p = sc.cluster, sc.parallelism
    alike = replace(c, datacenter_nodes=(), datacenter_gpus=())
    if not dp_across(sc):
        factors = stage_factors(sc)
        st = replace(c.stragglers, stage_slowdown=factors)
        if p.batch_split == "speed" and p.stage_layers is None and p.pipeline_layout is None and p.vpp == 1:
            p = replace(p, stage_layers=speed_layers(sc, factors))
        return [Variant("", replace(sc, cluster=replace(alike, stragglers=st), parallelism=p), sc.dp)]
    replica = p.tp * p.cp * p.pp
    out = []
    for (ds, gpu, nodes), m in zip(kinds(sc), micro_batches_per_kind(sc), strict=True):
        dp_v = nodes * c.datacenters * c.gpus_per_node // replica   # D datacenters of this size
        v = replace(sc, cluster=replace(alike, nodes=nodes * c.datacenters),
                    parallelism=replace(p, dp=dp_v),
                    training=replace(sc.training, global_batch=m * sc.training.micro_batch * dp_v))
        tag = ", ".join(c.datacenter_name(d) for d in ds)
        out.append(Variant(tag, on_gpu(v, gpu), len(ds) * nodes * c.gpus_per_node // replica,
                           datacenters=ds))
    return out


def headline(sc: Scenario, vs: list[Variant], results: list, T: float) -> dict[str, float | None]:
    """Tokens/s, TFLOP/s per GPU and MFU of the whole heterogeneous cluster over iteration ``T``
    (module docstring): every GPU's work over the sum of every GPU's peak."""
    p = sc.parallelism
    gpus, peak, fp8, hw, model, model8 = 0, 0.0, 0.0, 0.0, 0.0, 0.0
    for v, r in zip(vs, results, strict=True):
        if v.datacenters:
            sets = [(v.replicas * p.tp * p.cp * p.pp, v.sc.hardware.gpu)]
        else:                                     # PP across: each datacenter's stages on its GPU
            D = sc.cluster.datacenters
            sets = [(sc.gpus // D, dc_gpu(sc, d)) for d in range(D)]
        n = sum(k for k, _ in sets)
        # A variant's figures are over its own GPUs' mean peak; back to FLOPs per GPU.
        own_peak = v.sc.hardware.gpu.peak_tflops
        own_fp8 = v.sc.hardware.gpu.fp8_tflops or own_peak
        gpus += n
        hw += n * r.tflops_per_gpu * r.iteration_time_s
        model += n * r.mfu * r.iteration_time_s * own_peak
        if r.mfu_fp8_peak is not None:
            model8 += n * r.mfu_fp8_peak * r.iteration_time_s * own_fp8
        for k, g in sets:
            peak += k * g.peak_tflops
            fp8 += k * (g.fp8_tflops or g.peak_tflops)
    fp8_mfu = model8 / (T * fp8) if sc.training.dtype == "fp8" else None
    return {"tokens_per_s": sc.training.global_batch * sc.model.seq_len / T,
            "tflops_per_gpu": hw / (T * gpus), "mfu": model / (T * peak), "mfu_fp8_peak": fp8_mfu}


def stage_memory_notices(sc: Scenario, memory_by_class) -> list[tuple[str, str]]:
    """PP across: (kind, message) for every stage whose memory exceeds its datacenter's GPU."""
    D, p = sc.cluster.datacenters, sc.parallelism.pp
    out = []
    for s, mb in enumerate(memory_by_class[:p]):
        gpu = dc_gpu(sc, s // (p // D))
        if mb.total > gpu.capacity_bytes:
            out.append(("memory", f"memory: stage {s} needs {mb.total / 1e9:.1f} GB per GPU, over the "
                                  f"{gpu.capacity_bytes / 1e9:.1f} GB ({gpu.memory_GB:g} GiB) of its "
                                  f"{gpu.name} in {sc.cluster.datacenter_name(s // (p // D))}"))
    return out
