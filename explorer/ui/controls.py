"""The sidebar's controls: which scenario field each widget sets, its label and its kind.

Pure data (no Streamlit): the sidebar, the state helpers and the tests read the same table, so a
control exists in exactly one place.  Kinds: ``int``, ``float``, ``choice`` (the field's
``choices``), ``bool``, ``order`` (placement strings), ``dp`` (derived, shown as text),
``gpu`` / ``model`` (preset names), ``source`` (a choice whose change re-derives the widgets of
:data:`DERIVED_WIDGETS`, e.g. a fabric preset's NIC speed and latency), ``list`` (a list of whole
numbers typed as ``15,10,5``: explorer/ui/field_text.py), ``optional`` (a number that may be unset:
a toggle, and the number while it is on).
"""
from __future__ import annotations

from typing import NamedTuple

from .. import dimensions
from ..config.inference import TRAINING_ONLY
from ..config.sections import Scenario
from ..workloads.family import Workload
from ..workloads.registry import WORKLOADS


class Control(NamedTuple):
    key: str      # dotted scenario field
    label: str
    kind: str


SECTIONS: list[tuple[str, list[Control]]] = [
    # A serving scenario's own fields (explorer/config/inference.py), hidden on a training one; the
    # pools' layouts only where the preset disaggregates prefill and decode.
    ("Serving", [
        Control("inference.prompt_tokens", "Prompt tokens per request", "int"),
        Control("inference.output_tokens", "Output tokens per request", "int"),
        Control("inference.batch", "Sequences decoding together per replica (the cap under a rate)", "int"),
        Control("inference.arrival_rate", "Arrival rate, requests/s (off: always full)", "optional"),
        Control("inference.chunked_prefill_tokens", "Chunked prefill: tokens per step (0 = whole prompt)",
                "int"),
        Control("inference.weight_dtype", "Weight precision", "choice"),
        Control("inference.activation_dtype", "Activation precision", "choice"),
        Control("inference.kv_dtype", "KV-cache precision", "choice"),
        Control("inference.memory_utilization", "Share of GPU memory the server may use", "float"),
        Control("inference.tpot_target_ms", "TPOT target, ms (requests/s that meet it)", "optional"),
        Control("inference.ttft_target_ms", "Mean TTFT target, ms (prefill + queue)", "optional"),
        *(Control(f"inference.disaggregated.{pool}.{k}", f"{pool.capitalize()} pool: {label}", "int")
          for pool in ("prefill", "decode")
          for k, label in (("tp", "tensor parallel (tp)"), ("pp", "pipeline stages (pp)"),
                           ("ep", "expert parallel (ep)"), ("replicas", "replicas"))),
        Control("inference.disaggregated.kv_transfer_GBps", "KV transfer per GPU, GB/s (off: its NIC)",
                "optional"),
    ]),
    ("Parallelism", [
        Control("parallelism.tp", dimensions.degree_label("tp"), "int"),
        Control("parallelism.pp", dimensions.degree_label("pp"), "int"),
        Control("parallelism.dp", dimensions.degree_label("dp"), "dp"),
        Control("parallelism.cp", dimensions.degree_label("cp"), "int"),
        Control("parallelism.ep", dimensions.degree_label("ep"), "int"),
        Control("parallelism.vpp", "Virtual stages (vpp)", "int"),
        Control("parallelism.schedule", "Pipeline schedule", "choice"),
        # PipeDream's per-stage replicas (shown with pp > 1 and a schedule that runs them).
        Control("parallelism.stage_replicas", "GPUs per stage (PipeDream, e.g. 15,1 or auto)", "list"),
        # Layers per pipeline chunk (shown with pp > 1, and while set so that it can be cleared).
        Control("parallelism.stage_layers", "Layers per pipeline chunk (e.g. 13,3; empty: balanced)", "list"),
        Control("parallelism.ideal_pipeline", "Ideal pipeline (teaching)", "bool"),
        Control("parallelism.zero", "ZeRO stage", "int"),
        Control("parallelism.sequence_parallel", "Sequence parallel", "bool"),
        Control("parallelism.token_slices", "Token slices per sequence (TeraPipe)", "int"),
        Control("parallelism.order", "Placement order (innermost first)", "order"),
    ]),
    ("Scale-up (NVLink)", [
        Control("cluster.scale_up.kind", "Kind (PCIe sets the GPU's PCIe rate)", "source"),
        Control("cluster.scale_up.bandwidth_GBps", "Bandwidth per GPU (GB/s)", "float"),
        Control("cluster.scale_up.latency_us", "Latency (µs)", "float"),
        Control("cluster.scale_up.domain_gpus", "NVLink domain (GPUs; 72 = NVL72)", "int"),
    ]),
    ("Scale-out (fabric)", [
        Control("cluster.scale_out.kind", "Wiring", "choice"),
        Control("cluster.scale_out.fabric", "Fabric (sets NIC speed, latency, efficiency)", "source"),
        Control("cluster.scale_out.nic_Gbps", "NIC speed (Gb/s)", "float"),
        Control("cluster.scale_out.nics_per_node", "NICs per node", "int"),
        Control("cluster.scale_out.latency_us", "Latency (µs)", "float"),
        Control("cluster.scale_out.oversubscription", "Oversubscription (x:1)", "float"),
        Control("cluster.scale_out.switch_radix", "Leaf switch ports", "int"),
    ]),
    ("Scale-across (WAN)", [
        Control("cluster.scale_across.preset", "WAN technology (sets bandwidth and latency)", "source"),
        Control("cluster.scale_across.bandwidth_Gbps", "WAN bandwidth (Gb/s)", "float"),
        Control("cluster.scale_across.latency_ms", "WAN latency (ms)", "float"),
        Control("cluster.scale_across.topology", "WAN topology", "choice"),
    ]),
    ("GPUs & cluster", [
        Control("hardware.gpu", "GPU", "gpu"),
        Control("hardware.power_cap_W", "GPU power limit (W)", "float"),
        Control("cluster.nodes", "Nodes", "int"),
        Control("cluster.gpus_per_node", "GPUs per node", "int"),
        Control("cluster.datacenters", "Datacenters", "int"),
        Control("parallelism.batch_split", "Batch split over GPU types", "choice"),
    ]),
    ("Model", [
        Control("model.preset", "Model preset", "model"),
        # Each workload family's own fields (explorer/workloads/registry.py), in registry order.
        *(Control(key, label, kind) for w in WORKLOADS.values() for key, label, kind in w.controls),
    ]),
    ("Batch & precision", [
        Control("training.global_batch", "Global batch (sequences)", "int"),
        Control("training.micro_batch", "Micro-batch", "int"),
        Control("training.dtype", "Precision", "choice"),
        Control("training.fp8_recipe", "FP8 scaling recipe (fp8 only)", "choice"),
        Control("training.recompute", "Activation recompute", "choice"),
        Control("training.recompute_layers", "Recompute only N layers per stage (0 = as above)", "int"),
        Control("training.frozen_layers", "Frozen layers: the first N train no more (forward only)", "int"),
        Control("training.lora_rank", "LoRA rank: adapters train, base frozen (0 = full training)", "int"),
        Control("training.lora_targets", "LoRA adapters on (lora rank > 0)", "choice"),
        Control("training.offload_activations_layers", "Offload activations (layers per stage)", "int"),
        Control("training.flash_attention", "Fused attention (FlashAttention)", "bool"),
        Control("training.attention_kernel", "Attention kernel", "choice"),
        Control("training.optimizer", "Optimizer", "choice"),
        Control("training.framework", "Framework", "source"),
    ]),
    ("Synchronisation (low-communication)", [
        Control("training.sync.kind", "Replicas synchronise", "choice"),
        Control("training.sync.inner_steps", "Inner steps between syncs (H)", "int"),
        Control("training.sync.fragments", "Fragments (streaming)", "int"),
        Control("training.sync.overlap_steps", "Overlap steps (streaming)", "int"),
        Control("training.sync.replica_nodes", "Nodes per replica group (0 = a datacenter)", "int"),
        Control("training.sync.outer_dtype", "Outer gradient / exchange precision", "choice"),
        Control("parallelism.dp_kind", "Replicas agree by", "choice"),
        Control("parallelism.gossip_peers", "Gossip peers per step (0 = all)", "int"),
        Control("parallelism.ps_servers", "Parameter servers", "int"),
    ]),
    ("Communication", [
        Control("communication.library", "Collective library", "choice"),
        Control("communication.algorithm", "Collective algorithm", "choice"),
        Control("communication.protocol", "NCCL protocol", "choice"),
        Control("communication.moe_dispatcher", "MoE dispatcher (EP all-to-all)", "source"),
        Control("communication.comm_sms", "SMs held by communication kernels", "int"),
        Control("communication.dp_overlap", "Overlap DP with backward", "bool"),
        Control("communication.grad_reduce_dtype", "Gradient reduce / buffer dtype", "choice"),
        Control("communication.bucket_MB", "Gradient bucket (MB)", "float"),
        Control("communication.dp_priority", "Prioritise first layers' buckets (P3)", "bool"),
        Control("communication.tp_overlap", "Overlap TP with GEMMs", "bool"),
        Control("communication.prefetch_layers", "ZeRO-3 prefetch (layers)", "int"),
        Control("communication.contention", "PP sends and DP buckets share a link", "bool"),
        Control("communication.compression.kind", "Gradient compression", "choice"),
        Control("communication.compression.ratio", "Top-k share kept", "float"),
        Control("communication.compression.rank", "PowerSGD rank", "int"),
    ]),
]
CONTROLS: list[Control] = [c for _, items in SECTIONS for c in items]
# Widgets whose value another control sets: choosing a fabric fills in its NIC speed and latency,
# choosing a framework its gradient bucket (the loader's derived defaults, explorer/config), choosing
# a GPU or a cluster shape its NVLink domain.
DERIVED_WIDGETS: dict[str, tuple[str, ...]] = {
    "cluster.scale_out.fabric": ("cluster.scale_out.nic_Gbps", "cluster.scale_out.latency_us"),
    "training.framework": ("communication.bucket_MB", "communication.comm_sms"),   # NCCL's SMs under FSDP
    # NVLink or PCIe: the link's rate and the SMs NCCL opens for it (config/nccl_channels.py).
    "cluster.scale_up.kind": ("cluster.scale_up.bandwidth_GBps", "communication.comm_sms"),
    "cluster.scale_across.preset": ("cluster.scale_across.bandwidth_Gbps", "cluster.scale_across.latency_ms"),
    # The NVLink domain follows the GPU (a GB200 is an NVL72 rack) and the node size and count
    # (explorer/config/domains.py): a domain kept from the old shape could straddle the new one.
    # ... the FP8 recipe (MXFP8 on Blackwell, delayed elsewhere: explorer/config/fp8_recipes.py) and
    # the power limit (a B200 limit kept for an H100 would exceed its board).
    "hardware.gpu": ("cluster.scale_up.domain_gpus", "training.fp8_recipe", "hardware.power_cap_W",
                     *("cluster.scale_out.nics_per_node", "cluster.scale_up.bandwidth_GBps",
                       "communication.comm_sms")),
    # DeepEP and Hybrid-EP hold SMs of their own (explorer/config/moe_dispatch.py).
    "communication.moe_dispatcher": ("communication.comm_sms",),
    "cluster.gpus_per_node": ("cluster.scale_up.domain_gpus",),
    "cluster.nodes": ("cluster.scale_up.domain_gpus",),
    "cluster.datacenters": ("cluster.scale_up.domain_gpus",),
    # A layer split or per-stage replicas written for one pipeline shape do not fit another: a new
    # depth, chunk count or layer count takes the balanced split (and every stage dp replicas).
    "parallelism.pp": ("parallelism.stage_layers", "parallelism.stage_replicas"),
    "parallelism.vpp": ("parallelism.stage_layers",),
    "model.layers": ("parallelism.stage_layers",),
    # The attention width follows hidden / heads unless the model decouples it.
    "model.hidden": ("model.head_dim",),
    "model.heads": ("model.head_dim",),
}
# ... and where the scenario leaves them to the loader, the GPU's own NVLink bandwidth, the SMs NCCL
# holds of it and its rack's NICs per node (a GB200 tray has 4: config/domains.py).  A scenario that
# sets one keeps it whatever the GPU (a PCIe box's 25 GB/s link is the box's): a hunt found the
# sidebar showing an H100's 8 NICs beside a GB200 run on 4, and the typed-back 8 ignored.
KEPT_WHERE_SET: dict[str, frozenset[str]] = {
    "hardware.gpu": frozenset({"cluster.scale_out.nics_per_node", "cluster.scale_up.bandwidth_GBps",
                               "communication.comm_sms"})}
# Every widget some other one derives (a value the user may also type).
DERIVED_KEYS = frozenset(k for keys in DERIVED_WIDGETS.values() for k in keys)
# Derived widgets whose derived value is "unset" (the balanced split, dp replicas per stage, the
# attention width hidden / heads): cleared even while the new choice leaves the scenario invalid.
UNSET_WHEN_DERIVED = frozenset({"parallelism.stage_layers", "parallelism.stage_replicas", "model.head_dim"})
# Widgets that hold a scenario value (dp is derived from the others and only displayed).
WIDGET_KEYS: list[str] = [c.key for c in CONTROLS if c.kind != "dp"]
MODEL_KEYS: list[str] = [k for k in WIDGET_KEYS if k.startswith("model.") and k != "model.preset"]
# Widgets whose None is a value to pass on (the field unset: its default), not "no change".
NULLABLE_KEYS: frozenset[str] = frozenset(c.key for c in CONTROLS if c.kind in ("list", "optional"))


def hidden_model_keys(w: Workload) -> frozenset[str]:
    """The model controls of the other workload families, which the sidebar hides while it
    describes a model of family ``w`` (a ResNet derives the transformer's fields; a transformer
    has no ResNet depth): explorer/ui/state.sidebar_workload."""
    return frozenset(MODEL_KEYS) - w.control_keys


# What a serving scenario (issue 37) does not read, beyond the training-only fields its loader refuses
# (config/inference.TRAINING_ONLY): the sidebar hides them there.  Checked both ways by
# tests/test_app_serving_controls.py (each hidden control leaves the serving figures alone or is
# refused; each shown one moves them on some serving preset).
SERVING_UNREAD = frozenset({
    "parallelism.ideal_pipeline", "parallelism.stage_replicas", "parallelism.stage_layers",
    "parallelism.gossip_peers",
    "parallelism.ps_servers", "parallelism.batch_split", "model.seq_len", "model.dropout", "model.mtp_depth",
    "communication.moe_dispatcher", "communication.comm_sms", "communication.dp_priority",
    "communication.tp_overlap", "communication.prefetch_layers", "communication.contention",
    # Routing's node limit prices training's deduplicated dispatch only (serving/step.py sends each
    # token's copies on their own); imbalance and skew pace serving's busiest expert rank too.
    "model.moe.max_nodes",
})
SERVING_KEYS = frozenset(k for k in WIDGET_KEYS if k.startswith("inference."))
COMPRESSION_KEYS = frozenset(k for k in WIDGET_KEYS if k.startswith("communication.compression."))
# What only a transformer's layers read (the other families refuse or ignore them).
TRANSFORMER_LAYER_KEYS = frozenset({
    "training.flash_attention", "training.attention_kernel", "training.fp8_recipe", "training.recompute",
    "training.recompute_layers", "training.offload_activations_layers", "training.lora_rank",
    "training.lora_targets"})
# Options of one parallel dimension, shown only to a family that has it (workloads/family.dimensions).
DIMENSION_KEYS = {"tp": ("parallelism.sequence_parallel", "communication.tp_overlap"),
                  "ep": ("communication.moe_dispatcher",)}
POOL_KEYS = frozenset(k for k in SERVING_KEYS if k.startswith("inference.disaggregated."))
# A disaggregated deployment's layouts are its pools': the scenario's own degrees are not read.
POOLED_UNREAD = frozenset({"parallelism.tp", "parallelism.pp", "parallelism.ep", "parallelism.dp"})


def _training_only(key: str) -> bool:
    return any(key == t or key.startswith(t + ".") for t in TRAINING_ONLY)


def scenario_kind(sc: Scenario) -> str:
    """``training``, ``serving`` (co-located) or ``disaggregated``: which controls describe ``sc``
    (explorer/ui/controls.hidden_keys)."""
    if sc.inference is None:
        return "training"
    return "serving" if sc.inference.disaggregated is None else "disaggregated"


# A model with multi-head latent attention reads neither: its widths are model.mla's (config/model_rules.py
# refuses them), so no box is shown that could only be refused (a hunt found head_dim refused at every
# value and kv_heads changing nothing on DeepSeek-V3).
MLA_UNREAD = frozenset({"model.head_dim", "model.kv_heads"})


def hidden_keys(w: Workload, kind: str, mla: bool = False) -> frozenset[str]:
    """The controls the sidebar hides: the other workload families' model fields
    (:func:`hidden_model_keys`), gradient compression where the family has no factor for it, a
    transformer layer's recipes and a dimension's options where the family has neither, and by the
    scenario's ``kind`` — with ``mla`` (multi-head latent attention) :data:`MLA_UNREAD` —
    ``training`` hides the serving
    fields; ``serving`` (co-located) the training fields, what serving does not read and the pools;
    ``disaggregated`` those and the scenario's own degrees, which the pools replace."""
    out = hidden_model_keys(w) | (MLA_UNREAD if mla else frozenset())
    if not w.compression:
        # A family with no compression factor refuses any compressor (runnable.rule_family_models_it):
        # no control to offer one.
        out |= COMPRESSION_KEYS
    if w.attention is None:
        # No attention and no transformer layers: the attention kernel, FP8 recipes and the layer
        # recompute/offload recipes change nothing or are refused (config rules of each family).
        out |= TRANSFORMER_LAYER_KEYS
    out |= frozenset(k for dim, keys in DIMENSION_KEYS.items() if dim not in w.dimensions for k in keys)
    if kind == "training":
        return out | SERVING_KEYS
    keys = [c.key for c in CONTROLS]
    out |= frozenset(k for k in keys if _training_only(k)) | SERVING_UNREAD
    return out | (POOLED_UNREAD if kind == "disaggregated" else POOL_KEYS)


ORDERS = ["tp-cp-ep-dp-pp", "tp-cp-ep-pp-dp", "tp-cp-pp-dp", "tp-pp-cp-dp", "tp-dp-cp-pp", "cp-tp-dp-pp",
          "tp-cp-dp-pp", "dp-tp-cp-pp", "pp-tp-cp-dp"]
SECTION_OF_PREFIX = {"model": "Model", "training": "Batch & precision", "hardware": "GPUs & cluster",
                     "parallelism": "Parallelism", "communication": "Communication",
                     "cluster": "GPUs & cluster"}


def section_of(field: str) -> str:
    """The sidebar section that shows the error message for ``field``."""
    for name, items in SECTIONS:
        if any(field == c.key or field.startswith(c.key + ".") for c in items):
            return name
    return SECTION_OF_PREFIX.get(field.split(".")[0], "Model")
