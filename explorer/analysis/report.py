"""What the user reads: bytes per dimension, the main call of each dimension, the bottleneck in
one sentence and the warnings (a kind and a message each)."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import cast

from ..config import Scenario
from ..config.recompute import modules_override_none
from ..engine.records import BucketInfo, OverlapInfo, TransferInfo
from ..engine.scheduler import Task
from ..network.groups import Network
from ..physics.attention import MAX_FUSED_HEAD_DIM, resolve_kernel
from ..taskgraph.builder import IterationBuilder
from ..vocabulary import LATENCY_SUFFIX, tier_of_limit
from ..workloads.registry import workload_for
from .breakdown import COMM_DIMS, MemoryBreakdown
from .utilisation import ALL_WAN_KEYS_UP_TO

TIER_WORDS = {"scale-up": "the scale-up links (NVLink/NVSwitch)",
              "scale-out": "the node NICs (scale-out fabric)",
              "spine": "the leaf-to-spine uplinks", "scale-across": "the WAN between datacenters",
              "pcie": "the GPUs' PCIe links to their NICs (hardware.gpu.pcie_GBps)", "none": "no link"}


def comm_bytes(b: IterationBuilder, by_class: list[list[Task]], m: int) -> dict[str, float]:
    """Bytes each GPU sends per iteration, per dimension (bus bytes, nccl-tests convention);
    the largest over GPU classes."""
    out = dict.fromkeys(COMM_DIMS, 0.0)
    for s, mine in enumerate(by_class):
        held = b.rank_chunks(s)
        per = {**dict.fromkeys(COMM_DIMS, 0.0),
               "tp": sum(n * c.tp_bytes for c, n in held), "cp": sum(n * c.cp_bytes for c, n in held),
               "ep": sum(n * c.ep_bytes for c, n in held), "dp": sum(n * c.fsdp_bytes for c, n in held)}
        for c, n in held:              # generic edges (taskgraph/edges.py), per unit
            for k, v in c.edge_bytes:
                per[k] += n * v
        for t in mine:
            i = t.info
            if t.kind == "pp" and isinstance(i, TransferInfo):
                per["pp"] += i.bytes * m / b.m_sim     # per iteration when two are simulated
            elif t.kind == "dp" and isinstance(i, (BucketInfo, OverlapInfo)):
                per["dp"] += i.bus_bytes
        for k in out:
            out[k] = max(out[k], per[k])
    return out


def link_summary(b: IterationBuilder, tasks: list[Task]) -> dict[str, dict]:
    """The main call of each dimension, with the boundary that limits it — read from what the
    builder priced (the chunks' calls, the tasks' payloads); nothing is priced again here."""
    # TP, EP and CP: the per-layer calls of the first chunk (stage 0), as the builder priced them.
    out: dict[str, dict] = {dim: dict(call) for dim, call in b.chunks[0].comm.items() if dim != "dp"}
    # Per dimension its slowest call as priced (``alone``: before a shared link slowed it), the
    # lower class on a tie, then the first in task order — real calls only (the overlapped-FSDP
    # drawing tasks carry no call of their own).  One pass over the tasks for both.
    slowest: dict[str, tuple[tuple[float, int], Task]] = {}
    for t in tasks:
        i = t.info
        dim = "pp" if isinstance(i, TransferInfo) else "dp" if isinstance(i, BucketInfo) else ""
        if dim:
            key = (t.alone or t.duration, -t.cls)
            got = slowest.get(dim)
            if got is None or key > got[0]:
                slowest[dim] = (key, t)
    for dim in ("pp", "dp"):
        if dim in slowest:
            t = slowest[dim][1]
            i = cast(TransferInfo | BucketInfo, t.info)
            out[dim] = {"op": "send-recv" if isinstance(i, TransferInfo) else i.op, "bytes": i.bytes,
                        "group": i.group,
                        "algorithm": i.algorithm, "tier": i.tier, "busbw_GBps": i.busbw_GBps,
                        "time_s": t.alone or t.duration}
    gathers = [c.comm["dp"] for c in b.chunks if "dp" in c.comm]
    if "dp" not in out and gathers:
        # ZeRO-3 without bucket tasks: the layer gather of the largest layer, as the builder priced it.
        out["dp"] = dict(max(gathers, key=lambda g: g["bytes"]))
    return out


def bottleneck(sc: Scenario, bd: dict[str, float], links: dict[str, dict], T: float, m: int,
               pace_margin: float = 0.0) -> str:
    """The largest non-compute category of the busiest stage in one sentence, with the call and
    link behind it; or the host, where the GPU's wait for its input (inside compute) is larger
    (``pace_margin``: the run's, steady_state.host_paced's excess of the host's time)."""
    cats = {k: v for k, v in bd.items() if k not in ("compute", "recompute")}
    worst = max(cats, key=lambda k: (cats[k], k))
    share = cats[worst] / T if T > 0 else 0.0
    # A wait for the host (a GNN's CPU sampler) is inside compute: the GPU idles on its stream.
    hook = workload_for(sc.model).host_input
    host = hook(sc) if hook is not None else None
    if host is not None and T > 0:
        if host.pipelined:       # the host's excess over the GPU's whole step (steady_state.host_paced)
            wait = max(0.0, pace_margin)
            clause = (f"{host.what} outlasts the GPU's own step of {(T - wait) / m * 1e3:.1f} ms per "
                      f"{host.unit} (its work, communication and optimizer step); {host.remedy}")
            # The host sets the iteration: nothing the GPU does (its exposed communication included,
            # however large) shortens it, so the host is named whenever it paces (a verdict hunt found
            # "DP takes 51.8 %" for a step whose 5x faster NICs left it unchanged).
            # The margin is the host's only where the iteration is its m units' time (a P3 stream
            # that sets the pace leaves its own margin, steady_state's other branches).
            paces = wait > 1e-9 * T and abs(T - m * host.per_unit_s) <= 1e-9 * T
        else:                    # before each of the m units
            wait, clause = m * host.per_unit_s, f"{host.what}; {host.remedy}"
            paces = wait > max(cats[worst], 1e-3 * T)
        if paces:
            return (f"The host paces the step: the GPU waits {wait / T:.1%} of the iteration for its input: "
                    f"{clause}.")
    if cats[worst] < COMPUTE_BOUND_SHARE * T:
        # The busiest stage's figures (the Bubble card averages every stage: a PipeDream stage with
        # fewer replicas can idle while the busiest one never does).  Under 1 % nothing else is worth
        # a remedy (a hunt found "Optimizer takes 0.3 %... ZeRO sharding shrinks it" beside 99.7 %
        # of compute); the largest other part is said, so the figure stays readable.
        rest = (f"; the largest other part, {worst}, takes {share:.1%}" if cats[worst] > 1e-3 * T else
                ": no exposed communication or bubble there takes 0.1% of the iteration")
        return f"Compute-bound on the busiest stage{rest}."
    head = f"{worst.upper() if worst in COMM_DIMS else worst.capitalize()} takes {share:.1%} of the iteration"
    if worst in links:
        li = links[worst]
        if li["tier"].endswith(LATENCY_SUFFIX):
            # At least half the call is its latency: the tier's bandwidth would not shorten it.
            return (f"{head} (exposed {worst} communication): its {li['op']} over {li['group']} GPUs "
                    f"is latency-bound across {TIER_WORDS[tier_of_limit(li['tier'])]} (only "
                    f"{_gbs(li['busbw_GBps'])} GB/s bus bandwidth, {li['algorithm']}): fewer, larger calls "
                    "shorten it more than bandwidth does.")
        return (f"{head} (exposed {worst} communication): its {li['op']} over {li['group']} GPUs "
                f"is limited by "
                f"{TIER_WORDS[li['tier']]} at {_gbs(li['busbw_GBps'])} GB/s bus bandwidth "
                f"({li['algorithm']}).")
    if worst == "bubble":
        p = sc.parallelism
        return (f"{head} on the busiest stage (pipeline bubble): {p.pp} stages and {m} micro-batches with "
                f"{p.schedule}. More micro-batches, interleaving or fewer stages shrink it.")
    if worst == "offload":
        gpu = sc.hardware.gpu
        return (f"{head} (activation offload): the host copies of the offloaded layers' activations "
                f"outlast the compute they run beside over the {gpu.name} host link; fewer offloaded "
                "layers, or a faster host link (NVLink-C2C), hide them.")
    if worst == "optimizer":
        return (f"{head} (optimizer step): it streams the optimizer state through HBM; "
                "ZeRO sharding shrinks it.")
    return f"{head}."


# Below this share of the iteration the largest non-compute part names no bottleneck: compute-bound.
COMPUTE_BOUND_SHARE = 0.01
# Exposed communication of one dimension at or above this share of the iteration, limited by the
# WAN, is worth a warning: the simulated outcome, not a placement rule of thumb, decides.
WAN_EXPOSED_WARNING_SHARE = 0.05


@dataclass(frozen=True)
class Notice:
    """One warning: a machine-readable ``kind`` and the sentence shown to the user.

    Kinds: ``memory`` (a stage exceeds the GPU's memory), ``split`` (layers were moved off the
    time-balanced split so that every stage fits: a fact about the run, not a fault), ``algorithm`` (the
    requested collective algorithm could not run for some calls), ``wan`` (exposed communication limited
    by the WAN), ``pcie`` (the GPUs' PCIe links carry less than their NICs), ``link`` (calls of several
    dimensions overlap on one link beyond the iteration, which the link then sets:
    analysis/link_bound.py), ``zero3`` (ZeRO-3 gathers the parameters again in every micro-batch and
    the exposed dp time is large: :func:`zero3_notice`), ``kernel`` (an attention kernel the GPU does
    not run, priced as the one that runs there: :func:`kernel_notice`)."""

    kind: str
    message: str


def _gbs(x: float, digits: int = 2) -> str:
    """A rate in GB/s: whole numbers from 10, ``digits`` significant digits below (0.39, 3.2; with 3,
    what tells a NIC share from a PCIe link's: 0.352)."""
    return f"{x:.0f}" if x >= 10 else f"{x:.{digits}g}"


def memory_notice(sc: Scenario, memory: MemoryBreakdown) -> Notice | None:
    """The ``memory`` warning when ``memory`` exceeds the GPU's capacity (None when it fits)."""
    gpu = sc.hardware.gpu
    cap = gpu.capacity_bytes
    if memory.total <= cap:
        return None
    return Notice("memory", f"memory: {memory.total / 1e9:.1f} GB per GPU exceeds the "
                  f"{cap / 1e9:.1f} GB ({gpu.memory_GB:g} GiB) of {gpu.name}; "
                  f"raise tp/pp, use ZeRO or activation recomputation")


def split_notice(layers: tuple[int, ...], balanced: tuple[int, ...]) -> Notice | None:
    """The ``split`` notice when the layer split was moved off the time-balanced one to fit the GPU's
    memory (taskgraph/memory_split.py), quoting both splits per chunk; None when none was moved."""
    if layers == balanced:
        return None
    def listed(x: tuple[int, ...]) -> str:
        return ", ".join(str(n) for n in x)
    return Notice("split", f"split: the time-balanced layer split ({listed(balanced)} layers per chunk) "
                  f"does not fit in GPU memory, so layers were moved off the stages that hold more "
                  f"micro-batches in flight: {listed(layers)}, the fastest split found that fits "
                  f"(parallelism.pipeline_layout fixes a split)")


def pcie_notice(sc: Scenario, net: Network) -> Notice | None:
    """The ``pcie`` warning when each GPU's PCIe link (hardware.gpu.pcie_GBps) carries less than its
    share of the node's NICs achieve (the fabric's scale-out boundary): traffic across nodes then
    runs at the link's rate and the rest of the NICs' bandwidth is idle (collectives.pcie_time).
    None on one node or without a link."""
    link = net.options.pcie_Bps
    node = net.fabric.boundaries[1]
    per_gpu = node.capacity_Bps / node.domain_gpus
    if sc.cluster.nodes <= 1 or per_gpu <= link:
        return None
    return Notice("pcie", f"pcie: each GPU's PCIe link ({link / 1e9:g} GB/s) carries less than its share "
                  f"of the node's NICs ({_gbs(per_gpu / 1e9, 3)} GB/s): traffic between nodes runs at the "
                  f"link's rate; more or faster NICs per GPU buy nothing here (hardware.gpu.pcie_GBps)")


# Exposed data-parallel time at or above this share of the iteration, under ZeRO-3 with several
# micro-batches per step, is worth naming the re-gathers behind it.
ZERO3_EXPOSED_NOTICE_SHARE = 0.10


def zero3_notice(sc: Scenario, dp_bytes: float, dp_s: float, T: float) -> Notice | None:
    """The ``zero3`` warning: under ZeRO-3 (FSDP) each micro-batch gathers every layer's parameters
    for its forward and again for its backward and reduce-scatters its gradients (Rajbhandari et
    al., SC20, Sec. 5.3; PyTorch FSDP's full sharding does the same per forward/backward call), so
    the step's dp bytes grow with the micro-batches per step.  Said when there are several and the
    exposed dp time is at least :data:`ZERO3_EXPOSED_NOTICE_SHARE` of the iteration, quoting both
    (a published layout's throughput can hinge on it: OPT-175B at 1 sequence x 8 accumulations
    moves 1.39 TB per GPU per step here, at 8 sequences x 1 an eighth of that)."""
    m = sc.micro_batches
    share = dp_s / T if T > 0 else 0.0
    if sc.parallelism.zero != 3 or m <= 1 or share < ZERO3_EXPOSED_NOTICE_SHARE:
        return None
    return Notice("zero3", f"zero3: ZeRO-3 gathers every layer's parameters in each micro-batch's forward "
                  f"and backward and reduce-scatters its gradients: {m} micro-batches per step move "
                  f"{dp_bytes / 1e9:,.0f} GB per GPU and exposed dp takes {share:.1%} of the iteration; "
                  "fewer, larger micro-batches (training.micro_batch) gather less often, and ZeRO 1-2 "
                  "(parallelism.zero) gather the parameters once per step where they fit")


def kernel_notice(sc: Scenario) -> Notice | None:
    """A fused attention kernel asked for that does not run, priced as the one that does
    (physics/attention.resolve_kernel): heads wider than the fused kernels take (a hunt found a
    512-wide head priced as FlashAttention at its 256-wide rate); FlashAttention-3 on a GPU it does
    not run on (wgmma/TMA: Hopper only; Shah et al., arXiv 2407.08608), where the flash-attn
    package runs FlashAttention-2 — said, as a re-check found it silent on B200 (FA2 prices
    attention at 425 TF/s there where cuDNN, the default, reaches 1,475 at 16K)."""
    tr, gpu = sc.training, sc.hardware.gpu
    att = workload_for(sc.model).attention
    if not tr.flash_attention or tr.attention_kernel == "none" or att is None:
        return None
    wide = max(att.head_dims(sc.model))
    if wide > MAX_FUSED_HEAD_DIM:
        return Notice("kernel", f"kernel: a head dimension of {wide:g} is wider than the "
                                f"{MAX_FUSED_HEAD_DIM} the fused attention kernels take (FlashAttention-2/3, "
                                "cuDNN's); attention runs unfused, its s x s scores kept, as with "
                                "training.flash_attention false")
    if tr.attention_kernel != "flash3" or resolve_kernel("flash3", tr.framework, gpu, tr.dtype) != "flash2":
        return None
    return Notice("kernel", f"kernel: training.attention_kernel flash3 runs on Hopper only (wgmma/TMA); on "
                            f"{gpu.name} flash-attn runs FlashAttention-2, and attention is priced so")


def warnings_for(sc: Scenario, memory: MemoryBreakdown, links: dict[str, dict], net: Network,
              breakdown: dict[str, float], T: float) -> tuple[Notice, ...]:
    """Warnings that follow from the simulated numbers (each quotes the number it rests on)."""
    out: list[Notice] = []
    over = memory_notice(sc, memory)
    if over is not None:
        out.append(over)
    if net.fallbacks:
        # One sentence per reason, naming each operation with the dimensions that issued it.
        by_why: dict[str, dict[str, list[str]]] = {}
        for (op, dim), why in sorted(net.fallbacks.items()):
            by_why.setdefault(why, {}).setdefault(op, []).append(dim)
        parts = ["; ".join(", ".join(f"{op} ({', '.join(dims)})" for op, dims in ops.items()) + f": {why}"
                 for why, ops in by_why.items())]
        out.append(Notice("algorithm", f"algorithm: communication.algorithm {sc.communication.algorithm} "
                          f"cannot "
                          f"run for every call — {'; '.join(parts)}"))
    narrow = pcie_notice(sc, net)
    if narrow is not None:
        out.append(narrow)
    if modules_override_none(sc.training):
        # A hunt: recompute none on deepseek-v3 (whose file names its modules) ran selective, unsaid.
        mods = ", ".join(sc.training.recompute_modules)
        out.append(Notice("recompute", f"recompute: training.recompute none with recompute_modules [{mods}] "
                          "recomputes those modules (selective, as NeMo's recipes name them); "
                          "recompute_modules [core_attn] with none recomputes nothing"))
    flash3 = kernel_notice(sc)
    if flash3 is not None:
        out.append(flash3)
    for dim in COMM_DIMS:
        li = links.get(dim)
        share = breakdown.get(dim, 0.0) / T if T > 0 else 0.0
        if li and tier_of_limit(li["tier"]) == "scale-across" and share >= WAN_EXPOSED_WARNING_SHARE:
            how = ("is latency-bound across" if li["tier"].endswith(LATENCY_SUFFIX) else "is limited by")
            out.append(Notice("wan", f"{dim}: exposed {dim} communication takes {share:.1%} of the iteration "
                              f"({breakdown[dim]:.3g} s); its {li['op']} over {li['group']} GPUs {how} "
                              f"{TIER_WORDS['scale-across']} at {li['busbw_GBps']:.1f} GB/s bus bandwidth"))
    return tuple(out)


# Every link is listed up to a mesh of 16 datacenters (120 links, the range); beyond, only the
# links that carry traffic: a mesh of 1,024 datacenters has 523,776 links, 86 MB of JSON if all listed.
MAX_LISTED_WAN_LINKS = ALL_WAN_KEYS_UP_TO    # the loads of more links hold only the loaded directions


def wan_report(net: Network, link_load: Mapping, T: float) -> tuple[dict, ...]:
    """The ``wan_links`` figure: per link of the WAN topology (datacenters by name), the bytes per
    iteration of its busier direction (links are full duplex at ``bandwidth_Gbps`` per direction),
    both directions' bytes, and the utilisation = bytes / (achievable capacity x iteration time),
    the convention of the tier ``utilisation`` (capacity = bandwidth x 0.9, topology.py).
    ``link_load`` holds bytes / capacity per direction under ``("wan", from, to)``
    (utilisation.tier_utilisation), already extrapolated by the fold.  Beyond
    :data:`MAX_LISTED_WAN_LINKS` links only the loaded ones are listed."""
    wan = net.fabric.wan
    if wan is None:
        return ()
    every = len(wan.links) <= MAX_LISTED_WAN_LINKS
    out = []
    for link in wan.links:
        ab = link_load.get(("wan", link.a, link.b), 0.0) * link.capacity_Bps
        ba = link_load.get(("wan", link.b, link.a), 0.0) * link.capacity_Bps
        busier = max(ab, ba)
        if not every and busier <= 0:
            continue
        out.append({"a": wan.names[link.a], "b": wan.names[link.b], "bytes_per_iteration": busier,
                    "utilisation": busier / (link.capacity_Bps * T) if T > 0 else 0.0,
                    "bytes_a_to_b": ab, "bytes_b_to_a": ba, "bandwidth_Gbps": link.bandwidth_Gbps,
                    "latency_ms": link.latency_s * 1e3})
    return tuple(out)
