"""Settings a scenario gives that nothing reads under its other settings: an FP8 recipe in a bf16
run, sequence parallelism without tensor parallelism, a gossip degree without gossip.  Refusing
them would break switching back and forth (an app's dtype toggle, a sweep over tp that passes
through 1), so they are accepted and named: ``run --json`` (and every JSON that repeats it: diff,
report) lists them under ``dormant``, ``run`` and ``validate`` print a note per setting.  Each rule
is checked by tests/test_dormant.py to change nothing while its condition holds (a knob that moved
the result would not be dormant).

A setting is named when it differs from its field's default; fields whose default the loader
derives (``communication.bucket_MB``) cannot be told apart from a user's and are left out.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .frameworks import profile
from .generations import PRE_AMPERE, architecture, fp8_cores, runs_fp8
from .presets import gpu_presets
from .sections import Scenario


@dataclass(frozen=True)
class Dormant:
    """A field and, for a scenario, why it is not read there (None when it is)."""

    field: str
    default: Any
    unread: Callable[[Scenario], str | None]


def _no_fp8(sc: Scenario) -> str | None:
    d = sc.training.dtype
    if d != "fp8":
        return f"training.dtype is {d}; only fp8 runs read it"
    return _fp8_in_bf16(sc)


def _fp8_in_bf16(sc: Scenario) -> str | None:
    """An fp8 run on a GPU without FP8 tensor cores (an A100) is priced in bf16
    (generations.runs_fp8: Transformer Engine needs compute capability 8.9+); a hunt found it
    silent, with an MFU line quoting an "FP8 peak"."""
    if sc.training.dtype != "fp8" or runs_fp8(sc):
        return None
    # Datacenters of other GPUs (cluster.datacenters' gpu list): one with FP8 tensor cores runs fp8
    # (a re-check found H100 and B200 datacenters named "priced in bf16" under an A100 hardware.gpu).
    table = gpu_presets()
    if any(fp8_cores(table[n].get("fp8_tflops"), table[n]["peak_tflops"])
           for n in sc.cluster.datacenter_gpus or () if n in table):
        return None
    return (f"hardware.gpu {sc.hardware.gpu.name} has no FP8 tensor cores (compute capability 8.9+): "
            "the run is priced in bf16")


def _no_lora(sc: Scenario) -> str | None:
    return "training.lora_rank is 0; every weight trains" if not sc.training.lora_rank else None


def _no_tp(sc: Scenario) -> str | None:
    return "parallelism.tp is 1; it acts on tensor-parallel activations" if sc.parallelism.tp == 1 else None


def _no_dp(sc: Scenario) -> str | None:
    """Unread when no gradient is reduced: one data-parallel rank, no context-parallel ranks (the
    gradients are reduced over dp x cp, a hunt found dp_overlap read at dp 1 with cp 2), no stage
    replicas and no experts (their data-parallel group is laid out on its own)."""
    p = sc.parallelism
    if sc.dp > 1 or p.cp > 1 or p.stage_replicas or sc.model.is_moe:
        return None
    return "parallelism.dp and cp are 1: no gradient is reduced across ranks"


def _no_reduction_dtype(sc: Scenario) -> str | None:
    """``communication.grad_reduce_dtype`` is unread where no gradient is reduced (:func:`_no_dp`)
    and the framework keeps no gradient buffer in the reduce dtype (Megatron-Core's main_grad is
    allocated in it even on one rank)."""
    why = _no_dp(sc)
    if why is None or profile(sc.training.framework).grad_buffer_in_reduce_dtype:
        return None
    return why


def _no_overlapped_reduction(sc: Scenario) -> str | None:
    """``communication.dp_overlap`` is unread where no gradient is reduced (:func:`_no_dp`), and under
    1-bit Adam without ZeRO: it compresses inside the optimizer step, after the backward
    (network/compression.OVERLAPS_BACKWARD), and no parameter gather is left to overlap (a hunt found
    dp_overlap false on cloud-25g-dp change nothing, unnamed)."""
    why = _no_dp(sc)
    if why is not None:
        return why
    if sc.communication.compression.kind == "1bit" and sc.parallelism.zero == 0:
        return ("communication.compression.kind is 1bit: 1-bit Adam reduces its gradients in the optimizer "
                "step, after the backward")
    return None


def _dp_kind(kind: str) -> Callable[[Scenario], str | None]:
    """Unread unless parallelism.dp_kind is ``kind`` or one of its family (``gossip``: every
    gossip-* graph truncates its peers to gossip_peers, variants/lowcomm/gossip_graph.py)."""
    def unread(sc: Scenario) -> str | None:
        k = sc.parallelism.dp_kind
        return None if k.startswith(kind) else f"parallelism.dp_kind is {k}; only {kind}* kinds read it"
    return unread


def _not_full(sc: Scenario) -> str | None:
    r = sc.training.recompute
    return "training.recompute is full: every module is recomputed" if r == "full" else None


def _no_zero3(sc: Scenario) -> str | None:
    z = sc.parallelism.zero
    return None if z >= 3 else f"parallelism.zero is {z}; only ZeRO-3 / FSDP gathers parameters ahead"


def _full_graph(sc: Scenario) -> str | None:
    """Unread by full-graph GNN training, which samples nothing and fetches no features: every
    partition holds its nodes' features and exchanges a halo (workloads/gnn)."""
    g = sc.model.gnn
    if g is not None and g.mode == "fullgraph":
        return "model.gnn.mode is fullgraph: nothing is sampled, no feature is fetched"
    return None


def _all_local(g: Any) -> bool:
    """Whether every sampled node's features are on its GPU's partition: the local share as
    workloads/gnn/sampling.local_share reads it (given, else 1 / partitions) is 1."""
    local = g.local_share if g.local_share is not None else 1.0 / (g.partitions or 1)
    return local >= 1.0


def _no_remote_features(sc: Scenario) -> str | None:
    """A feature cache serves remote reads: none in full-graph training, nor where every sampled
    node's features are local (SALIENT keeps the whole matrix on every machine)."""
    g = sc.model.gnn
    if g is not None and g.mode == "minibatch" and _all_local(g):
        return "every sampled node's features are local (one partition, or local_share 1)"
    return _full_graph(sc)


def _nothing_to_overlap(sc: Scenario) -> str | None:
    """The overlap hides a mini-batch's feature fetch (or full-graph training's halo exchange): there
    is no fetch where every sampled node's features are local (a hunt found overlap on SALIENT's
    scenario changing nothing, unsaid)."""
    g = sc.model.gnn
    if g is None or g.mode != "minibatch":
        return None
    if _all_local(g):
        return "every sampled node's features are local (one partition, or local_share 1): nothing to overlap"
    if g.cache_hit >= 1.0:
        return "model.gnn.cache_hit is 1: the cache serves every remote feature; nothing is fetched"
    return None


def _no_dcn(sc: Scenario) -> str | None:
    d = sc.model.dlrm
    if d is not None and d.interaction != "dcn":
        return f"model.dlrm.interaction is {d.interaction}; only the DCNv2 interaction has cross layers"
    return None


def _no_fused_attention(sc: Scenario) -> str | None:
    """A fused kernel's choice is unread where none runs (physics/attention.resolve_kernel): in fp32
    (FlashAttention and cuDNN take fp16/bf16) or on Volta and Turing (no FlashAttention-2); there
    the core runs as batched GEMMs.  ``none`` is still read: it also keeps the s x s scores."""
    if sc.training.attention_kernel == "none":
        return None
    if sc.training.dtype == "fp32":
        return "training.dtype is fp32: no fused attention kernel takes fp32"
    arch = architecture(sc.hardware.gpu)
    if arch in PRE_AMPERE:
        return f"a {arch.title()} GPU runs no fused attention kernel (FlashAttention-2 needs Ampere)"
    return None


def _no_run_plan(sc: Scenario) -> str | None:
    """The run's figures (days, energy, price, failures) exist only for a run plan."""
    t = sc.training
    if t.total_tokens is None and not t.phases:
        return ("training.total_tokens and training.phases are unset: only a run plan (run --json's "
                "run_total) reads it")
    return None


def _no_failures(sc: Scenario) -> str | None:
    """Checkpoints, restarts and repairs are priced only when failures are (run/goodput.py)."""
    why = _no_run_plan(sc)
    if why is None and sc.reliability.mtbf_gpu_hours is None:
        why = "reliability.mtbf_gpu_hours is unset: failures, checkpoints and restarts are not modelled"
    return why


def _no_repairs(sc: Scenario) -> str | None:
    """An elastic job differs from one that waits only while nodes are under repair."""
    why = _no_failures(sc)
    if why is None and sc.reliability.repair_h == 0:
        why = "reliability.repair_h is 0: no node is out for repair, so nothing runs on the survivors"
    return why


def _disaggregated(sc: Scenario) -> str | None:
    """Disaggregated serving runs each pool on its own degrees and only decodes on the decode pool."""
    inf = sc.inference
    if inf is not None and inf.disaggregated is not None:
        return ("inference.disaggregated sets each pool's tp and pp, and its decode pool runs no "
                "prompt pass")
    return None


RULES: tuple[Dormant, ...] = (
    Dormant("training.attention_kernel", "auto", _no_fused_attention),
    Dormant("training.dtype", "bf16", _fp8_in_bf16),
    Dormant("training.fp8_recipe", None, _no_fp8),
    Dormant("training.fp8_storage", "te", _no_fp8),
    Dormant("training.lora_targets", "all", _no_lora),
    Dormant("parallelism.sequence_parallel", False, _no_tp),
    Dormant("communication.tp_overlap", False, _no_tp),
    Dormant("communication.dp_overlap", True, _no_overlapped_reduction),
    Dormant("communication.grad_reduce_dtype", "auto", _no_reduction_dtype),
    Dormant("parallelism.gossip_peers", 0, _dp_kind("gossip")),
    Dormant("parallelism.ps_servers", 1, _dp_kind("parameter-server")),
    Dormant("training.recompute_modules", ("core_attn",), _not_full),
    Dormant("communication.prefetch_layers", 1, _no_zero3),
    Dormant("model.gnn.cache_hit", 0.0, _no_remote_features),
    Dormant("model.gnn.overlap", False, _nothing_to_overlap),
    Dormant("model.gnn.local_share", None, _full_graph),
    Dormant("model.gnn.fanouts", (15, 10, 5), _full_graph),
    Dormant("model.gnn.cpu_workers", 40, _full_graph),
    Dormant("model.gnn.sampler_edges_per_core_s", 3.85e6, _full_graph),
    Dormant("model.gnn.pipelined", True, _full_graph),
    Dormant("model.dlrm.cross_layers", 3, _no_dcn),
    Dormant("model.dlrm.cross_rank", 512, _no_dcn),
    # A run plan's settings without one (a hunt found them accepted and unread, unnamed).
    Dormant("training.critical_batch_tokens", None, _no_run_plan),
    Dormant("reliability.mtbf_gpu_hours", None, _no_run_plan),
    Dormant("reliability.pue", 1.1, _no_run_plan),
    Dormant("reliability.price_per_gpu_hour", None, _no_run_plan),
    Dormant("reliability.checkpoint_write_GBps", 2000.0, _no_failures),
    Dormant("reliability.checkpoint_read_GBps", None, _no_failures),
    Dormant("reliability.restart_s", 0.0, _no_failures),
    Dormant("reliability.async_checkpoint", False, _no_failures),
    Dormant("reliability.checkpoint_interval_s", None, _no_failures),
    Dormant("reliability.repair_h", 0.0, _no_failures),
    Dormant("reliability.elastic", False, _no_repairs),
    Dormant("parallelism.tp", 1, _disaggregated),
    Dormant("parallelism.pp", 1, _disaggregated),
    Dormant("inference.chunked_prefill_tokens", 0, _disaggregated),
)

_ABSENT = object()          # a field under a section the scenario does not have (model.gnn on a DLRM)


def _value(sc: Scenario, dotted: str) -> Any:
    node: Any = sc
    for part in dotted.split("."):
        if node is None:
            return _ABSENT
        node = getattr(node, part)
    return tuple(node) if isinstance(node, list) else node


def unread(sc: Scenario, field: str) -> str | None:
    """Why ``field`` would not be read by ``sc`` whatever its value (a rule of :data:`RULES`), or
    None: what a sweep should not take as an axis (every cell would be alike)."""
    rule = next((r for r in RULES if r.field == field), None)
    return None if rule is None else rule.unread(sc)


def dormant_settings(sc: Scenario) -> list[tuple[str, str]]:
    """(field, why it is not read) for each setting of :data:`RULES` that ``sc`` gives other than
    its field's default and does not read."""
    out = []
    for rule in RULES:
        value = _value(sc, rule.field)
        if value is _ABSENT or value == rule.default:
            continue
        why = rule.unread(sc)
        if why is not None:
            out.append((rule.field, why))
    return out
