"""Cross-field rules: what makes a scenario whose fields are each valid simulable as a whole.

Each rule is one named function that takes a :class:`Scenario` with its derived defaults filled
and raises a one-line :class:`ScenarioError` naming the field to change, the bad value and what
would be valid.  :func:`validate` runs :data:`RULES` in order and stops at the first failure, so
the order decides which message a scenario with several problems shows (degrees before batch,
the work budget last because it needs every other rule to hold).  tests/test_validation.py has
one case per rule (``RULE_CASES``) and checks that every entry of :data:`RULES` is covered.
"""
from __future__ import annotations

import math
from collections.abc import Callable

from ..schedules import registry
from .dlrm import rule_dlrm
from .domains import DOMAIN_RULES
from .fp8_recipes import check_recipe
from .gnn import rule_gnn
from .gpu_rules import (
    rule_bf16_needs_ampere,
    rule_fp8_peak_at_least_bf16,
    rule_fp32_within_peak,
    rule_measured_within_peak,
)
from .hetero_rules import HETERO_RULES
from .kernel_rules import rule_kernel_needs_fused_attention, rule_triton_head_dim
from .model_parts import MoE, refuse_parts
from .model_rules import (
    rule_heads_divide_hidden,
    rule_layer_recipes_need_a_transformer,
    rule_moe_section_routes,
)
from .power_rules import POWER_RULES
from .replica_rules import REPLICA_RULES, rule_replicas_fill_cluster
from .rnn import rule_rnn
from .run_rules import RUN_RULES
from .schema import ScenarioError, excerpt
from .sections import MAX_GPUS, ORDER_DIMS, Scenario
from .sync_rules import SYNC_RULES
from .wan_rules import WAN_RULES

Rule = Callable[[Scenario], None]


def divisors(n: int, limit: int = 12) -> str:
    """The first ``limit`` divisors of ``n`` as text, for "valid: ..." hints.

    >>> divisors(12)
    '1, 2, 3, 4, 6, 12'
    """
    ds = [d for d in range(1, int(math.isqrt(n)) + 1) if n % d == 0]
    ds = sorted(set(ds + [n // d for d in ds]))
    return ", ".join(map(str, ds[:limit])) + (", ..." if len(ds) > limit else "")


def rule_gpu_count(sc: Scenario) -> None:
    """At most MAX_GPUS GPUs, and at most as many stragglers."""
    c = sc.cluster
    if c.gpus > MAX_GPUS:
        raise ScenarioError("cluster.nodes", f"{c.nodes} nodes x {c.gpus_per_node} GPUs = {c.gpus} GPUs "
                            f"is beyond the supported {MAX_GPUS:,}")
    # More slow GPUs than the cluster has read as all of them (a fuzz: a million on 8 GPUs ran).
    if c.stragglers.count > c.gpus:
        raise ScenarioError("cluster.stragglers.count", f"{c.stragglers.count:,} slow GPUs on a cluster of "
                            f"{c.gpus:,}: at most {c.gpus:,}")


def rule_degrees_fill_cluster(sc: Scenario) -> None:
    """tp * pp * dp * cp = the cluster's GPUs."""
    p, gpus, dp = sc.parallelism, sc.cluster.gpus, sc.dp
    if p.stage_replicas is not None:     # PipeDream's per-stage replicas count the GPUs instead
        rule_replicas_fill_cluster(sc)
        return
    if p.tp * p.pp * dp * p.cp != gpus:
        other = p.tp * p.pp * p.cp
        fix = (f"set dp = {gpus // other} or change the other degrees" if gpus % other == 0 else
               f"tp*pp*cp = {other} must divide {gpus}; change tp, pp, cp or the cluster size")
        raise ScenarioError("parallelism.dp", f"tp*pp*dp*cp = {p.tp}*{p.pp}*{dp}*{p.cp} = "
                            f"{p.tp * p.pp * dp * p.cp} but the cluster has nodes*gpus_per_node = "
                            f"{gpus} GPUs; {fix}")


def rule_conv_trains_data_parallel(sc: Scenario) -> None:
    """A convolutional network (model.conv) trains data- and pipeline-parallel (ZeRO/FSDP allowed):
    its layer table has no heads to split, no sequence to shard, no experts, no recomputation or
    FP8 recipe (explorer/workloads/convnet/); a VGG takes images, not clips."""
    m, p, tr = sc.model, sc.parallelism, sc.training
    if m.conv is None:
        return
    why = "a convolutional network (model.conv) trains data- and pipeline-parallel here"
    for dim in ("tp", "cp", "ep", "token_slices"):
        if getattr(p, dim) != 1:
            raise ScenarioError(f"parallelism.{dim}", f"{getattr(p, dim)}: {why}; set it to 1 "
                                                      "(dp, pp and ZeRO/FSDP are the levers)")
    if m.conv.vgg and m.conv.frames != 1:
        raise ScenarioError("model.conv.frames", f"{m.conv.frames}: a {m.conv.label} takes images; set it "
                                                 "to 1 (video clips run on a ResNet depth: 18-152)")
    refuse_parts(m, ("moe", "mla", "mtp_depth"), f"is a transformer part; {why} without it (remove it)")
    if tr.recompute != "none":
        raise ScenarioError("training.recompute", f"{tr.recompute!r}: recomputing convolutional blocks is "
                                                  "not modelled; use none")
    if tr.dtype == "fp8":
        raise ScenarioError("training.dtype", "'fp8': convolutional networks train in fp16/bf16 mixed "
                                              "precision or fp32 (TF32) here; use bf16, fp16 or fp32")


def rule_tp_divides_heads(sc: Scenario) -> None:
    """Tensor parallelism splits the attention heads evenly."""
    m, tp = sc.model, sc.parallelism.tp
    if m.heads % tp:
        raise ScenarioError("parallelism.tp", f"{tp} does not divide model.heads={m.heads} "
                            f"(valid tp: {divisors(m.heads)})")


def _kv_heads(sc: Scenario) -> int:
    """model.kv_heads, which the defaults always fill (heads when absent) before the rules run."""
    kv = sc.model.kv_heads
    assert kv is not None, "model.kv_heads is filled by the defaults"
    return kv


def _moe(sc: Scenario) -> MoE | None:
    """The model's MoE section when tokens are routed to experts (Model.is_moe), else None."""
    return sc.model.moe if sc.model.is_moe else None


def rule_kv_heads_divide_heads(sc: Scenario) -> None:
    """Grouped-query attention: each key/value head serves the same number of query heads."""
    m, kv = sc.model, _kv_heads(sc)
    if kv > m.heads or m.heads % kv:
        raise ScenarioError("model.kv_heads", f"{m.kv_heads} must divide heads={m.heads} "
                            f"(valid: {divisors(m.heads)})")


def rule_tp_and_kv_heads_divide(sc: Scenario) -> None:
    """KV heads are split across TP ranks, or replicated on a whole number of them."""
    m, tp, kv = sc.model, sc.parallelism.tp, _kv_heads(sc)
    if kv % tp and tp % kv:
        raise ScenarioError("parallelism.tp", f"{tp} and model.kv_heads={m.kv_heads} must divide one "
                            f"another (valid tp: {divisors(kv)} or multiples of {m.kv_heads} "
                            f"dividing {m.heads})")


def _chunks(sc: Scenario) -> tuple[int, str]:
    """The model's pipeline chunks and how to say their count: a V placement holds 2 per rank (2p
    in all, Qi et al. 2024 Sec. 3; registry ``placement``), else pp * vpp."""
    p = sc.parallelism
    if registry.get(p.schedule).placement is registry.Placement.V:
        return 2 * p.pp, f"2*pp = 2*{p.pp} (a V of 2 chunks per rank)"
    return p.pp * p.vpp, f"pp*vpp = {p.pp}*{p.vpp}"


def rule_layers_fill_chunks(sc: Scenario) -> None:
    """Every pipeline chunk (pp * vpp of them) holds at least one layer, but for an embedding-only
    and a loss-only chunk (two fewer): a pipeline layout may name them, and the default split
    of a one-direction schedule makes them when there are fewer layers than chunks."""
    layers, p = sc.model.layers, sc.parallelism
    one_way = not registry.get(p.schedule).pair_split     # split.choose_split's edge chunks
    chunks, what = _chunks(sc)
    ends = 2 if (p.pipeline_layout is not None or one_way) and chunks > 2 else 0
    if layers < chunks - ends:
        raise ScenarioError("model.layers", f"{layers} layers cannot fill {what} = "
                            f"{chunks} pipeline chunks; need at least {chunks - ends} layers "
                            + ("(an embedding-only and a loss-only chunk besides) " if ends else "")
                            + "or fewer stages")


def rule_dp_priority_needs_flushing_schedule(sc: Scenario) -> None:
    """P3 priorities reorder the buckets a flushing backward releases (ZeRO 0-2, overlapped DP)."""
    com, p = sc.communication, sc.parallelism
    if com.dp_priority and (not com.dp_overlap or not registry.get(p.schedule).bucket_priority_ok
                            or p.zero == 3):
        raise ScenarioError("communication.dp_priority", "needs dp_overlap: true, ZeRO 0-2 and a flushing "
                            f"schedule ({', '.join(registry.priority_schedules())}): it reorders the "
                            "buckets the backward releases")


def rule_batch_divides(sc: Scenario) -> None:
    """The global batch is a whole number of micro-batches on every data-parallel replica."""
    t, dp = sc.training, sc.dp
    if t.global_batch % (t.micro_batch * dp):
        raise ScenarioError("training.global_batch", f"{t.global_batch} is not divisible by micro_batch*dp = "
                            f"{t.micro_batch}*{dp} = {t.micro_batch * dp}; use a multiple of "
                            f"{t.micro_batch * dp}")


def rule_schedule(sc: Scenario) -> None:
    """The pipeline schedule's own rules, from its registry entry (explorer/schedules/registry.py):
    virtual stages only where the schedule interleaves, then e.g. interleaved's whole groups of pp
    micro-batches or DualPipe's even stages and micro-batches."""
    problem = registry.validate(sc)
    if problem is not None:
        raise ScenarioError(*problem)


def rule_ep_divides_dp_cp(sc: Scenario) -> None:
    """Expert parallelism is carved out of the dp * cp ranks."""
    p, dp = sc.parallelism, sc.dp
    if (dp * p.cp) % p.ep:
        raise ScenarioError("parallelism.ep", f"{p.ep} does not divide dp*cp = {dp * p.cp} "
                            f"(valid: {divisors(dp * p.cp)})")


def rule_ep_needs_moe(sc: Scenario) -> None:
    """Only a mixture-of-experts model has experts to spread."""
    if sc.parallelism.ep > 1 and not sc.model.is_moe:
        raise ScenarioError("parallelism.ep", f"{sc.parallelism.ep} needs a mixture-of-experts model "
                            "(model.moe.experts > 0); use ep: 1")


def rule_ep_divides_experts(sc: Scenario) -> None:
    """Each expert-parallel rank holds the same number of experts."""
    moe, ep = _moe(sc), sc.parallelism.ep
    if moe is not None and moe.experts % ep:
        raise ScenarioError("parallelism.ep", f"{ep} does not divide model.moe.experts={moe.experts} "
                            f"(valid: {divisors(moe.experts)})")


def rule_top_k_within_experts(sc: Scenario) -> None:
    """A token cannot be routed to more experts than exist."""
    moe = _moe(sc)
    if moe is not None and moe.top_k > moe.experts:
        raise ScenarioError("model.moe.top_k", f"{moe.top_k} exceeds experts={moe.experts}")


def rule_expert_ffn_hidden(sc: Scenario) -> None:
    """Experts have a width."""
    moe = _moe(sc)
    if moe is not None and moe.expert_ffn_hidden < 1:
        raise ScenarioError("model.moe.expert_ffn_hidden", "must be at least 1 when experts > 0")


def rule_dense_layers_within_layers(sc: Scenario) -> None:
    """The leading dense layers are layers of the model."""
    moe = _moe(sc)
    if moe is not None and moe.dense_layers > sc.model.layers:
        raise ScenarioError("model.moe.dense_layers", f"{moe.dense_layers} exceeds layers={sc.model.layers}")


def rule_token_slices_divide_sequence(sc: Scenario) -> None:
    """TeraPipe slices split each context-parallel shard of a sequence evenly."""
    m, p = sc.model, sc.parallelism
    if m.seq_len % (p.cp * p.token_slices):
        raise ScenarioError("parallelism.token_slices", f"{p.token_slices} slices of seq_len/cp = "
                            f"{m.seq_len}/{p.cp} tokens do not divide evenly; use a divisor of "
                            f"{m.seq_len // p.cp}")


def rule_cp_divides_sequence(sc: Scenario) -> None:
    """Load-balanced ring attention splits each sequence into 2 * cp chunks."""
    m, cp = sc.model, sc.parallelism.cp
    if cp > 1 and m.seq_len % (2 * cp):
        raise ScenarioError("parallelism.cp", f"{cp} needs seq_len={m.seq_len} divisible by 2*cp "
                            "(load-balanced ring attention splits each sequence into 2*cp chunks)")


def rule_sequence_parallel_divides(sc: Scenario) -> None:
    """Sequence parallelism splits each rank's tokens across the TP group."""
    m, p = sc.model, sc.parallelism
    if p.sequence_parallel and p.tp > 1 and (m.seq_len // p.cp) % p.tp:
        raise ScenarioError("parallelism.sequence_parallel", f"needs seq_len/cp = {m.seq_len // p.cp} "
                            f"divisible by tp={p.tp}")


def rule_order_lists_each_dim(sc: Scenario) -> None:
    """The placement order names tp, cp, dp and pp once each (ep at most once)."""
    order = sc.parallelism.order
    dims = order.split("-")
    if sorted(d for d in dims if d != "ep") != sorted(ORDER_DIMS) or dims.count("ep") > 1:
        raise ScenarioError("parallelism.order", f"{excerpt(order)} must list tp, cp, dp and pp once each "
                            "(ep optional), innermost first, e.g. tp-cp-ep-dp-pp")


def rule_datacenters_divide_nodes(sc: Scenario) -> None:
    """Datacenters of the integer form hold the same number of nodes."""
    c = sc.cluster
    if c.nodes % c.datacenters and not c.datacenter_nodes:    # a list of sizes says its own
        raise ScenarioError("cluster.datacenters", f"{c.datacenters} does not divide nodes={c.nodes} "
                            f"(valid: {divisors(c.nodes)})")


def rule_stage_layers_count(sc: Scenario) -> None:
    """An explicit layer split names every pipeline chunk."""
    p = sc.parallelism
    chunks, what = _chunks(sc)
    if p.stage_layers is not None and len(p.stage_layers) != chunks:
        raise ScenarioError("parallelism.stage_layers", f"has {len(p.stage_layers)} entries; "
                            f"need {what.split(' = ')[0]} = {chunks}")


def rule_stage_layers_sum(sc: Scenario) -> None:
    """An explicit layer split places every layer once."""
    p, layers = sc.parallelism, sc.model.layers
    if p.stage_layers is not None and sum(p.stage_layers) != layers:
        raise ScenarioError("parallelism.stage_layers", f"sums to {sum(p.stage_layers)}; "
                            f"need model.layers = {layers}")


def rule_stage_layers_not_empty(sc: Scenario) -> None:
    """An explicit layer split leaves no chunk empty."""
    p = sc.parallelism
    split = p.stage_layers
    if split is not None and min(split) < 1:
        # A split with empty end chunks is what run reports where the embedding or the loss has a chunk
        # of its own (a hunt fed it back and was refused): pipeline_layout takes it.
        ends = len(split) > 2 and min(split[1:-1]) >= 1
        raise ScenarioError("parallelism.stage_layers", f"{excerpt(list(split))} has an empty "
                            "chunk; every pipeline chunk needs at least one layer" + (
                                "; a split whose first or last chunk holds only the embedding or the loss "
                                "is given as parallelism.pipeline_layout" if ends else ""))


def rule_pipeline_layout(sc: Scenario) -> None:
    """A pipeline layout names every chunk, places every layer once and leaves no chunk empty but
    the first (embedding only) and the last (output layer and loss only), as Megatron's pipeline
    layout "E|t*n|...|L" writes them; it replaces stage_layers."""
    p, layers = sc.parallelism, sc.model.layers
    lay = p.pipeline_layout
    if lay is None:
        return
    f = "parallelism.pipeline_layout"
    if p.stage_layers is not None:
        raise ScenarioError(f, "and parallelism.stage_layers are both set; give one of them")
    chunks, what = _chunks(sc)
    if len(lay) != chunks:
        raise ScenarioError(f, f"has {len(lay)} entries; need {what.split(' (')[0]} = {chunks}")
    if sum(lay) != layers:
        raise ScenarioError(f, f"sums to {sum(lay)}; need model.layers = {layers}")
    inner = lay[1:-1]
    if inner and min(inner) < 1:
        raise ScenarioError(f, f"{excerpt(list(lay))} has an empty middle chunk; only the first "
                            "(embedding-only) and last (loss-only) entries may be 0")


def rule_recompute_layers_are_full(sc: Scenario) -> None:
    """Block recomputation of N layers is full recomputation (Megatron's recompute_num_layers
    needs recompute_granularity full); selective is a per-module policy of every layer."""
    t = sc.training
    if t.recompute_layers and t.recompute == "selective":
        raise ScenarioError("training.recompute_layers", f"{t.recompute_layers} needs training.recompute "
                            "none or full (it fully recomputes N layers per chunk), not selective")


def rule_frozen_layers(sc: Scenario) -> None:
    """Frozen layers and LoRA's frozen base weights stay whole on every GPU of their stage (workloads/
    freezing.py, transformer/lora.py): FSDP would shard them too, which is not modelled."""
    t = sc.training
    for key, n, off in (("frozen_layers", t.frozen_layers, "no frozen layers"),
                        ("lora_rank", t.lora_rank, "lora_rank 0")):
        if n and sc.parallelism.zero == 3:          # LoRA's base weights are frozen the same way
            raise ScenarioError(f"training.{key}", f"{n} with parallelism.zero 3: frozen weights sharded "
                                f"by FSDP are not modelled; use ZeRO 0-2 or {off}")


def rule_fp8_recipe_on_gpu(sc: Scenario) -> None:
    """MXFP8 needs MX (block-scaled) tensor cores: Blackwell (config/fp8_recipes.py), on the GPU
    and on every datacenter's GPU when they differ (cluster.datacenter_gpus)."""
    g = sc.hardware.gpu
    check_recipe(sc.training.fp8_recipe, g.origin, g.name)
    for preset in sc.cluster.datacenter_gpus:
        check_recipe(sc.training.fp8_recipe, preset, preset)


RULES: tuple[Rule, ...] = (
    rule_gpu_count, rule_degrees_fill_cluster, rule_conv_trains_data_parallel, rule_gnn, rule_rnn, rule_dlrm,
    rule_layer_recipes_need_a_transformer,
    rule_heads_divide_hidden, rule_tp_divides_heads, rule_kv_heads_divide_heads,
    rule_tp_and_kv_heads_divide, rule_layers_fill_chunks, rule_dp_priority_needs_flushing_schedule,
    rule_batch_divides,
    rule_schedule,                 # after the batch rule: the registry's rules count whole micro-batches
    rule_ep_divides_dp_cp, rule_moe_section_routes, rule_ep_needs_moe, rule_ep_divides_experts,
    rule_top_k_within_experts,
    rule_expert_ffn_hidden, rule_dense_layers_within_layers,
    # cp first: a cp that does not divide the sequence is cp's error, which no token_slices fixes.
    rule_cp_divides_sequence, rule_token_slices_divide_sequence, rule_sequence_parallel_divides,
    rule_order_lists_each_dim,
    rule_datacenters_divide_nodes, rule_stage_layers_count, rule_stage_layers_sum,
    rule_stage_layers_not_empty, rule_pipeline_layout, rule_recompute_layers_are_full,
    rule_fp8_recipe_on_gpu, rule_fp8_peak_at_least_bf16, rule_measured_within_peak, rule_fp32_within_peak,
    rule_bf16_needs_ampere,
    rule_triton_head_dim,
    rule_kernel_needs_fused_attention,
    rule_frozen_layers,
)


def validate(sc: Scenario) -> None:
    """Run every rule of :data:`RULES` in order, then the scale-across rules
    (:data:`explorer.config.wan_rules.WAN_RULES`), those of datacenters that differ and of
    low-communication training; the first that fails raises its ScenarioError.  The checks that
    need the simulator's model (the work budget, survivors of failed nodes, ...) run on top of
    these in explorer/runnable.py."""
    for rule in ALL_RULES:
        rule(sc)


ALL_RULES: tuple[Rule, ...] = (*RULES, *DOMAIN_RULES, *WAN_RULES, *HETERO_RULES, *SYNC_RULES,
                               *POWER_RULES, *REPLICA_RULES, *RUN_RULES)
