"""Explain this bar (issue 14.3): the derivation of one Gantt bar with the scenario's numbers.

A compute bar: its model FLOPs over its duration is the rate achieved; against the GPU's dense
peak in the training dtype that is the efficiency the kernel model gave its GEMM shapes
(explorer/physics/kernels.py: time = FLOPs / (peak x efficiency) for the matrix work, element-wise work at
HBM bandwidth).  A collective: its bytes times the nccl-tests bus factor (doc/PERFORMANCE.md:
2(n-1)/n for an all-reduce, (n-1)/n for all-gather, reduce-scatter and all-to-all, 1 for a
point-to-point transfer) over the bus bandwidth it achieved is one call's time, NCCL's latency and
the chunk pipeline's fill included (explorer/network/nccl_tuning.py); a blocking TP/CP/EP bar holds every call
of its pass, so its duration is about that many calls.
Each explanation ends with what would make the bar shorter: for a collective, the options of its
own dimension (a data-parallel bar is never told to overlap tensor parallelism) and then what
would speed up the link that limits it.
"""
from __future__ import annotations

from .. import dimensions
from ..analysis.gantt_bar import NONE_TEXT, GanttBar
from ..config import GPU
from ..network.collectives import bus_factor
from ..physics.kernels import dtype_peak_tflops
from ..vocabulary import LATENCY_SUFFIX, tier_label

OP_OF_DETAIL = ("all-reduce", "reduce-scatter", "all-gather", "all-to-all")
COMPUTE_SHORTER = ("a larger tensor- or pipeline-parallel split (fewer FLOPs per GPU), FP8 GEMMs, or a "
                   "faster GPU; skinny GEMMs (small hidden, many TP ranks, few tokens per expert) run "
                   "further below peak")
# What shortens a collective of each dimension, whatever link it crosses (the Gantt's kind): its
# registry entry's remedy (explorer/dimensions.py).
BY_DIMENSION = {d.name: d.remedy for d in dimensions.DIMENSIONS.values() if "explain" in d.views}
# What speeds up the link that limits a call (the tier it crosses).
BY_TIER = {
    "scale-up": "a faster scale-up link (NVLink bandwidth), or NVLS where the switch reduces",
    "scale-out": "faster NICs or more of them per node, or a hierarchical algorithm that crosses nodes once",
    "spine": "less oversubscription in the leaf-spine fabric, or keeping the group inside one leaf block",
    "scale-across": "more WAN bandwidth, a hierarchical reduction that crosses the WAN once, or putting PP "
                    "instead of DP across",
    "pcie": "a wider PCIe link per GPU (hardware.gpu.pcie_GBps): faster or more NICs buy nothing while the "
            "links carry less than the NICs' share",
}
# A call whose latency is at least half its time (CollectiveCost.limited_by's "... latency").
LATENCY_SHORTER = ("fewer, larger calls (bigger buckets or messages), fewer steps (a tree, NVLS or a "
                   "hierarchical algorithm) or a shorter path; more bandwidth does not shorten it")


def shorter(kind: str, tier: str | None) -> str:
    """What would make a bar of ``kind`` (a dimension, or a compute kind) limited by ``tier``
    shorter: its dimension's own options first, then its link's."""
    if kind not in BY_DIMENSION:
        return COMPUTE_SHORTER
    if tier and tier.endswith(LATENCY_SUFFIX):
        return f"{BY_DIMENSION[kind]}; on the link: {LATENCY_SHORTER}"
    link = BY_TIER.get(tier or "", BY_TIER["scale-out"])
    return f"{BY_DIMENSION[kind]}; on the link: {link}"


def _op(detail: str) -> str:
    return next((op for op in OP_OF_DETAIL if op in detail), "send-recv")


def bar_peak(gpu: GPU, dtype: str) -> tuple[float, str]:
    """(peak TFLOP/s, its precision's name) a compute bar of a ``dtype`` run is measured against:
    the kernel model's own (physics/kernels.dtype_peak_tflops: fp8's, fp32's — TF32 or the GPU's
    ``fp32_tflops`` — else the bf16/fp16 dense peak).

    >>> bar_peak(GPU(name="V100", peak_tflops=112, fp32_tflops=14), "fp32")
    (14, 'fp32')
    """
    name = dtype if dtype in ("fp8", "fp32") else "bf16"
    return dtype_peak_tflops(gpu, name), name


def explain_bar(bar: GanttBar | None, peak_tflops: float, gpu: str, dtype: str) -> str:
    """Markdown derivation of the Gantt bar ``bar`` (the clicked bar's hover record,
    explorer/analysis/gantt_bar.py; None for a bar of the aggregated chart)."""
    if bar is None:
        return ("This is an aggregated bar (the timeline is too large to draw every operation): zoom in "
                "with fewer micro-batches or layers, or download the trace, to explain one operation.")
    kind, detail, dur_ms = bar.kind, bar.detail, bar.duration_ms
    flops, nbytes, group, busbw, tier, algorithm = (bar.flops, bar.bytes, bar.group, bar.busbw_GBps, bar.tier,
                                                    bar.algorithm)
    mb, chunk = (NONE_TEXT if x is None else x for x in (bar.micro_batch, bar.chunk))
    head = f"**{kind}** · {bar.where} · micro-batch {mb} · chunk {chunk} · **{dur_ms:.3f} ms**"
    dur = dur_ms / 1e3
    if flops:
        rate = flops / dur / 1e12 if dur > 0 else 0.0
        eff = rate / peak_tflops if peak_tflops else 0.0
        return (f"{head}\n\n"
                f"- model FLOPs: **{flops / 1e12:.3f} TFLOP** (this GPU's share of the pass)\n"
                f"- achieved: {flops / 1e12:.3f} TFLOP / {dur_ms:.3f} ms = **{rate:,.0f} TFLOP/s**, "
                f"**{eff:.0%}** of the {gpu}'s {dtype} dense peak ({peak_tflops:,.0f} TFLOP/s)\n"
                f"- time = FLOPs / (peak x efficiency) for the GEMMs, plus element-wise work at HBM "
                f"bandwidth (explorer/physics/kernels.py)\n\n"
                f"Shorter with: {COMPUTE_SHORTER}.")
    if kind == "offload":
        # Activation offloading's host copies (explorer/result/timeline.offload_rows).
        return (f"{head}\n\n- {detail}\n"
                "- time = one layer's kept activation bytes / the host link's bandwidth "
                "(PCIe, or NVLink-C2C on Grace-Blackwell; hardware.gpu.pcie_GBps), on the copy "
                "engine: it takes no SMs\n\n"
                "Shorter with: fewer offloaded layers (training.offload_activations_layers) or a "
                "faster host link; only what outlasts the compute beside it stalls the pass.")
    if detail.startswith("exchange: "):
        # Gossip or parameter servers (explorer/variants/lowcomm/exchange_tasks.py): priced apart.
        return (f"{head}\n\n- the replicas' {detail.removeprefix('exchange: ')}: "
                f"**{(nbytes or 0.0) / 1e6:,.1f} MB** sent per GPU per step, priced apart from the replica's "
                f"own step (explorer/variants/lowcomm/decentral.py)\n"
                f"- the bar lasts the exchange and ends with the iteration: what outlasts the step is "
                f"exposed, the rest runs under it\n\n"
                f"Shorter with: a faster NIC (cluster.scale_out.nic_Gbps), compressed payloads, more "
                f"server nodes or fewer gossip peers.")
    if not nbytes:
        return f"{head}\n\nMemory-bound work (norms, activations, optimizer): HBM bytes / HBM bandwidth."
    op = _op(detail)
    factor = bus_factor(op, group) if group else 1.0
    # The achieved bus bandwidth is bus bytes over the whole call (NCCL's latency and the chunk
    # pipeline's fill included), so bus bytes / it is one call's time; a blocking-collective bar
    # holds every call of its pass (its layers' TP, CP or EP calls), one typical call described.
    call_s = nbytes * factor / (busbw * 1e9) if busbw else 0.0
    calls = dur / call_s if call_s > 0 else 0.0
    tier_name = tier_label(tier) if tier else "—"
    wait = max(dur - call_s, 0.0)
    if calls >= 1.5:
        count = (f"- the bar repeats this call about **{calls:,.0f} times** (its pass's layers): "
                 f"{calls:,.0f} x {call_s * 1e3:.3f} ms = {dur_ms:.3f} ms\n")
    elif wait > 1e-3 * dur:
        count = f"- the other {wait * 1e3:.3f} ms of the bar wait for a link or a peer\n"
    else:
        count = ""
    return (f"{head}\n\n"
            f"- {op} of **{nbytes / 1e6:,.2f} MB** over **{group} GPUs** ({algorithm or 'point-to-point'})\n"
            f"- bus bytes = bytes x bus factor = {nbytes / 1e6:,.2f} MB x {factor:.3f} = "
            f"{nbytes * factor / 1e6:,.2f} MB (nccl-tests convention)\n"
            f"- at the **{busbw:,.1f} GB/s** bus bandwidth it achieved: {call_s * 1e3:.3f} ms for these "
            f"bytes (NCCL's per-call latency and the chunk pipeline's fill included)\n"
            f"{count}"
            f"- limited by: **{tier_name}**\n\n"
            f"Shorter with: {shorter(kind, tier)}.")
