"""Scenario: the frozen description of one training setup, loaded strictly from YAML or JSON.

A scenario file is a mapping with the sections ``model``, ``training``, ``hardware``, ``cluster``,
``parallelism`` and ``communication`` (see README, "Scenario format").  Every number carries its
unit in its key; GB = 1e9 bytes and Gbps = 1e9 bit/s, as nccl-tests reports them.  Loading
resolves presets (``model.preset``, ``hardware.gpu``), fills derived defaults (``kv_heads``,
``ffn_hidden``, ``dp``, scale-up bandwidth from the GPU) and checks every cross-field rule, so a
:class:`Scenario` that exists is always simulable.
"""
from __future__ import annotations

import copy
import json
import math
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path
from typing import Any, Mapping

import yaml

from .inputs import MAX_BYTES, parse_document, parse_value
from .schema import ScenarioError, build, dump, excerpt, field_paths, unknown_key_error, user_keys

DATA_DIR = Path(__file__).parent / "data"
MAX_GPUS = 10_000_000          # "sizes beyond sane limits" (issue 2): more GPUs than any cluster

# Physical bounds shared by several fields (issue 8): every number lies in a range a real (or
# deliberately idealised) system can have, so a subnormal 5e-324 bandwidth or efficiency cannot
# reach the engine, where it would overflow to inf or divide by zero.
TFLOPS = {"min": 0.1, "max": 1e5, "why": "a B200 reaches 2,250 dense bf16 TFLOP/s; 0.1 to 100,000"}
SCALE_UP_GBPS = {"min": 0.01, "max": 1e6,
                 "why": "from a PCIe x1 lane (0.25 GB/s) to NVLink 5 (900 GB/s), up to 1e6 for an ideal link"}
LATENCY_US = {"min": 0, "max": 1e6, "why": "0 (idealised) to 1 s"}


# --------------------------------------------------------------------------------------------
# Sections.  Each field: one-line doc, unit in the name, bounds in metadata.
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class MoE:
    experts: int = field(default=0, metadata={"min": 0, "max": 65536, "doc": "routed experts per MoE layer (0 = dense)"})
    top_k: int = field(default=0, metadata={"min": 0, "max": 1024, "doc": "experts each token is routed to"})
    expert_ffn_hidden: int = field(default=0, metadata={"min": 0, "max": 1_048_576, "doc": "FFN width of one expert"})
    shared_experts: int = field(default=0, metadata={"min": 0, "max": 64, "doc": "always-active experts per MoE layer"})
    dense_layers: int = field(default=0, metadata={"min": 0, "max": 100_000, "doc": "leading layers that stay dense"})
    max_nodes: int = field(default=0, metadata={"min": 0, "max": 1_000_000,
                                                "doc": "0: no node limit and plain all-to-all dispatch (every top_k copy crosses the fabric); M > 0: node-aware dispatch (one fabric copy per destination node, then NVLink; DeepSeek-V3) with at most M nodes per token"})
    imbalance: float = field(default=1.0, metadata={"min": 1.0, "max": 64.0,
                                                    "doc": "busiest expert rank's load / mean load"})


@dataclass(frozen=True)
class Model:
    preset: str | None = field(default=None, metadata={"doc": "start from a named model (explorer/data/models.yaml)"})
    layers: int = field(default=0, metadata={"required": True, "hint": "or give model.preset", "min": 1, "max": 100_000, "doc": "transformer layers"})
    hidden: int = field(default=0, metadata={"required": True, "hint": "or give model.preset", "min": 1, "max": 1_048_576, "doc": "hidden size h"})
    heads: int = field(default=0, metadata={"required": True, "hint": "or give model.preset", "min": 1, "max": 65536, "doc": "attention heads a"})
    kv_heads: int | None = field(default=None, metadata={"min": 1, "max": 65536, "doc": "key/value heads (GQA when < heads); default heads"})
    ffn_hidden: int | None = field(default=None, metadata={"min": 1, "max": 4_194_304, "doc": "FFN width; default 4 * hidden"})
    ffn_kind: str = field(default="gelu", metadata={"choices": ("gelu", "swiglu"), "doc": "gelu: 2 matrices; swiglu: 3 matrices"})
    vocab: int = field(default=51200, metadata={"min": 1, "max": 10_000_000, "doc": "vocabulary size V"})
    seq_len: int = field(default=2048, metadata={"min": 1, "max": 10_000_000, "doc": "sequence length s in tokens"})
    tied_embeddings: bool = field(default=False, metadata={"doc": "output layer shares the input embedding matrix: where one GPU holds both (pp 1, DualPipe's edge ranks) its V*h/tp parameters are held, reduced and updated once; on different stages each keeps a copy (Megatron-LM), the embedding-group gradient all-reduce between them is not modelled"})
    moe: MoE | None = field(default=None, metadata={"doc": "mixture of experts; absent = dense"})

    @property
    def is_moe(self) -> bool:
        return self.moe is not None and self.moe.experts > 0 and self.moe.top_k > 0

    @property
    def moe_layers(self) -> int:
        return max(self.layers - self.moe.dense_layers, 0) if self.is_moe else 0


@dataclass(frozen=True)
class Training:
    global_batch: int = field(default=0, metadata={"required": True, "min": 1, "max": 100_000_000, "doc": "sequences per iteration"})
    micro_batch: int = field(default=1, metadata={"min": 1, "max": 1_000_000, "doc": "sequences per micro-batch"})
    dtype: str = field(default="bf16", metadata={"choices": ("bf16", "fp16", "fp8", "fp32"), "doc": "compute and activation precision"})
    recompute: str = field(default="none", metadata={"choices": ("none", "selective", "full"), "doc": "activation recomputation (Korthikanti et al. 2022)"})
    optimizer: str = field(default="adam", metadata={"choices": ("adam", "sgd"), "doc": "optimizer (sets state bytes per parameter)"})
    flash_attention: bool = field(default=True, metadata={"doc": "fused attention: no s x s score tensor in HBM (Dao et al. 2022)"})


@dataclass(frozen=True)
class GPU:
    name: str = field(default="", metadata={"doc": "display name"})
    peak_tflops: float = field(default=0.0, metadata={"required": True, **TFLOPS, "doc": "dense bf16/fp16 peak, TFLOP/s"})
    fp8_tflops: float | None = field(default=None, metadata={**TFLOPS, "doc": "dense fp8 peak, TFLOP/s; default peak_tflops"})
    memory_GB: float = field(default=0.0, metadata={"required": True, "min": 0.1, "max": 1e5, "doc": "HBM capacity, GB",
                                                    "why": "a B200 holds 192 GB; 0.1 GB to 100 TB per GPU"})
    hbm_GBps: float = field(default=0.0, metadata={"required": True, "min": 1, "max": 1e7, "doc": "HBM bandwidth, GB/s",
                                                   "why": "a B200 streams 8,000 GB/s; up to 1e7 for an idealised GPU"})
    scale_up_GBps: float | None = field(default=None, metadata={**SCALE_UP_GBPS, "doc": "default scale-up bandwidth per direction, GB/s"})
    measured_matmul_tflops: float | None = field(default=None, metadata={**TFLOPS, "doc": "largest-GEMM throughput measured, TFLOP/s"})
    nvlink_sharp: bool = field(default=False, metadata={"doc": "NVSwitch can reduce in the switch (NVLS all-reduce)"})
    preset: str | None = field(default=None, metadata={"derived": True})


@dataclass(frozen=True)
class Hardware:
    gpu: GPU = field(default_factory=GPU, metadata={"doc": "preset name or mapping {name, peak_tflops, memory_GB, hbm_GBps}"})
    compute_efficiency: float | None = field(default=None, metadata={
        "min": 0.01, "max": 1, "why": "a fraction of the peak: 1% to 100%",
        "doc": "fraction of peak reached by large GEMMs; default fitted (hardware.py)"})


@dataclass(frozen=True)
class ScaleUp:
    kind: str = field(default="nvswitch", metadata={"choices": ("nvswitch", "nvlink-ring", "pcie"), "doc": "intra-node interconnect: nvswitch = non-blocking crossbar (+NVLS); nvlink-ring = neighbours only, all-to-all ~n/4 hops; pcie = 2 GPUs per switch uplink, no NVLS (topology.py)"})
    bandwidth_GBps: float | None = field(default=None, metadata={**SCALE_UP_GBPS, "doc": "per GPU, per direction; default from the GPU preset"})
    latency_us: float = field(default=2.0, metadata={**LATENCY_US, "doc": "per-message latency"})


@dataclass(frozen=True)
class ScaleOut:
    kind: str = field(default="rail-optimized", metadata={"choices": ("fat-tree", "rail-optimized"), "doc": "inter-node fabric wiring"})
    nic_Gbps: float = field(default=400.0, metadata={"min": 1, "max": 1e5, "doc": "per NIC, per direction",
                                                     "why": "from 1 GbE to 100 Tb/s; NICs ship at 400-800 Gb/s"})
    nics_per_node: int = field(default=8, metadata={"min": 1, "max": 1024, "doc": "NICs per node"})
    latency_us: float = field(default=5.0, metadata={**LATENCY_US, "doc": "per-message latency across the fabric"})
    oversubscription: float = field(default=1.0, metadata={"min": 1, "max": 1024, "doc": "leaf downlink:uplink ratio (1 = non-blocking)"})
    switch_radix: int = field(default=64, metadata={"min": 4, "max": 4096, "doc": "ports per leaf switch; half face the nodes"})


@dataclass(frozen=True)
class ScaleAcross:
    bandwidth_Gbps: float = field(default=400.0, metadata={
        "min": 0.001, "max": 1e6, "why": "from 1 Mb/s to 1 Pb/s (a fibre pair carries about 50 Tb/s)",
        "doc": "between two datacenters, per direction"})
    latency_ms: float = field(default=5.0, metadata={"min": 0, "max": 1e4, "doc": "one-way WAN latency",
                                                     "why": "0 (idealised) to 10 s; a geostationary hop is 0.27 s"})


@dataclass(frozen=True)
class Cluster:
    gpus_per_node: int = field(default=8, metadata={"min": 1, "max": 1024, "doc": "GPUs sharing the scale-up domain"})
    nodes: int = field(default=1, metadata={"min": 1, "max": MAX_GPUS, "doc": "nodes in the cluster"})
    datacenters: int = field(default=1, metadata={"min": 1, "max": 1024, "doc": "buildings/datacenters; nodes split evenly"})
    scale_up: ScaleUp = field(default_factory=ScaleUp)
    scale_out: ScaleOut = field(default_factory=ScaleOut)
    scale_across: ScaleAcross = field(default_factory=ScaleAcross)

    @property
    def gpus(self) -> int:
        return self.gpus_per_node * self.nodes


ORDER_DIMS = ("tp", "cp", "dp", "pp")


@dataclass(frozen=True)
class Parallelism:
    tp: int = field(default=1, metadata={"min": 1, "max": MAX_GPUS, "doc": "tensor parallel degree"})
    pp: int = field(default=1, metadata={"min": 1, "max": MAX_GPUS, "doc": "pipeline stages"})
    dp: int | None = field(default=None, metadata={"min": 1, "max": MAX_GPUS, "doc": "data parallel degree; default GPUs/(tp*pp*cp)"})
    cp: int = field(default=1, metadata={"min": 1, "max": MAX_GPUS, "doc": "context parallel degree"})
    ep: int = field(default=1, metadata={"min": 1, "max": MAX_GPUS, "doc": "expert parallel degree, carved out of dp*cp"})
    vpp: int = field(default=1, metadata={"min": 1, "max": 1024, "doc": "virtual stages per GPU (interleaved schedule)"})
    schedule: str = field(default="1f1b", metadata={"choices": ("gpipe", "1f1b", "interleaved", "zb-h1", "zb-h2",
                                                                "dualpipe", "pipedream-async"),
                                                    "doc": "pipeline schedule"})
    zero: int = field(default=1, metadata={"min": 0, "max": 3, "doc": "ZeRO stage; 3 = fully sharded (FSDP)"})
    sequence_parallel: bool = field(default=False, metadata={"doc": "Megatron sequence parallelism (RS/AG instead of AR)"})
    order: str = field(default="tp-cp-ep-dp-pp", metadata={"doc": "rank placement, innermost first"})
    token_slices: int = field(default=1, metadata={"min": 1, "max": 1024,
                                                   "doc": "TeraPipe: token slices per sequence that pipeline separately"})
    stage_layers: tuple[int, ...] | None = field(default=None, metadata={"min": 0, "max": 100_000, "max_items": 1_048_576,
                                                                     "doc": "layers per pipeline stage; default balances compute"})
    ideal_pipeline: bool = field(default=False, metadata={
        "doc": "teaching: equal stages, no embedding/logits, no optimizer, free communication, so the "
               "bubble equals the schedule's closed form"})


@dataclass(frozen=True)
class Communication:
    algorithm: str = field(default="auto", metadata={"choices": ("auto", "ring", "tree", "halving-doubling", "hierarchical", "nvls"),
                                                     "doc": "collective algorithm; auto picks the fastest per call"})
    dp_overlap: bool = field(default=True, metadata={"doc": "overlap gradient reduction with backward"})
    bucket_MB: float = field(default=25.0, metadata={"min": 0.001, "max": 1e5, "doc": "gradient bucket size",
                                                     "why": "1 KB to 100 GB; PyTorch DDP uses 25 MB"})
    dp_priority: bool = field(default=False, metadata={"doc": "P3/ByteScheduler: reduce the first layers' buckets "
                                                              "first; the next iteration starts on them"})
    tp_overlap: bool = field(default=False, metadata={"doc": "overlap TP collectives with the GEMMs beside them"})
    prefetch_layers: int = field(default=1, metadata={"min": 0, "max": 64,
                                                      "doc": "ZeRO-3/FSDP: layers whose parameters are gathered ahead"})


@dataclass(frozen=True)
class Scenario:
    name: str = field(default="unnamed scenario", metadata={"max_len": 200, "doc": "title"})
    description: str = field(default="", metadata={"max_len": 20000, "doc": "Markdown shown to readers"})
    model: Model = field(default_factory=Model)
    training: Training = field(default_factory=Training)
    hardware: Hardware = field(default_factory=Hardware)
    cluster: Cluster = field(default_factory=Cluster)
    parallelism: Parallelism = field(default_factory=Parallelism)
    communication: Communication = field(default_factory=Communication)

    @property
    def gpus(self) -> int:
        return self.cluster.gpus

    @property
    def dp(self) -> int:
        assert self.parallelism.dp is not None  # filled by validate()
        return self.parallelism.dp

    @property
    def micro_batches(self) -> int:
        """Micro-batches per pipeline per iteration (gradient accumulation steps)."""
        return self.training.global_batch // (self.training.micro_batch * self.dp)


# --------------------------------------------------------------------------------------------
# Presets
# --------------------------------------------------------------------------------------------
@cache
def _presets(kind: str) -> dict[str, dict[str, Any]]:
    with open(DATA_DIR / f"{kind}.yaml", encoding="utf-8") as fh:
        return yaml.safe_load(fh)


def gpu_presets() -> dict[str, dict[str, Any]]:
    return _presets("gpus")


def model_presets() -> dict[str, dict[str, Any]]:
    return _presets("models")


def _preset(kind: str, name: Any, path: str) -> dict[str, Any]:
    table = _presets(kind)
    if not isinstance(name, str) or name not in table:
        raise ScenarioError(path, f"unknown preset {excerpt(name)} (valid: {', '.join(table)})")
    return copy.deepcopy(table[name])


# --------------------------------------------------------------------------------------------
# Raw-mapping helpers: overrides as dotted keys (CLI --set, share links)
# --------------------------------------------------------------------------------------------
SETTABLE = field_paths(Scenario)
# The GPU may be given as a preset name in place of the mapping; the model preset likewise.
SETTABLE_ROOTS = {"hardware.gpu"}


def is_settable(key: str) -> bool:
    """Whether a dotted key names a scenario field that an override may set."""
    return key in SETTABLE or key in SETTABLE_ROOTS


def set_dotted(raw: dict[str, Any], key: str, value: Any) -> None:
    """Set ``a.b.c = value`` in a raw scenario mapping, validating that the path names a field."""
    if not isinstance(key, str) or not is_settable(key):
        _raise_unknown_path(str(key))
    parts = key.split(".")
    node = raw
    for i, part in enumerate(parts[:-1]):
        child = node.get(part)
        if isinstance(child, str) and ".".join(parts[: i + 1]) == "hardware.gpu":
            child = _preset("gpus", child, "hardware.gpu")
        if not isinstance(child, dict):
            child = {}
        node[part] = child
        node = child
    node[parts[-1]] = value


def _raise_unknown_path(key: str) -> None:
    """One-line error for a dotted key that names no field: the deepest valid prefix and what
    may follow it, or a hint when the key names a whole section."""
    if any(p.startswith(key + ".") for p in SETTABLE):
        example = next(p for p in SETTABLE if p.startswith(key + "."))
        raise ScenarioError(key, f"is a section, not a field; set its fields one by one, e.g. {example}")
    parts = key.split(".")
    depth = 0
    while depth < len(parts) - 1 and any(p.startswith(".".join(parts[: depth + 1]) + ".") for p in SETTABLE):
        depth += 1
    prefix = ".".join(parts[:depth])
    children = sorted({p[len(prefix) + 1 if prefix else 0:].split(".")[0] for p in SETTABLE
                       if not prefix or p.startswith(prefix + ".")})
    children = [c for c in children if not SETTABLE.get(f"{prefix}.{c}" if prefix else c, None)
                or not SETTABLE[f"{prefix}.{c}" if prefix else c].metadata.get("derived")]
    raise unknown_key_error(parts[depth], children, prefix)


def apply_overrides(raw: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """A deep copy of ``raw`` with each dotted-key override applied in order."""
    out = copy.deepcopy(dict(raw))
    for key, value in overrides.items():
        set_dotted(out, key, value)
    return out


def parse_assignment(text: str) -> tuple[str, Any]:
    """Parse ``dotted.key=value`` (value as YAML, through the bounded parser of inputs.py) as the
    CLI's ``--set`` gives it."""
    if "=" not in text:
        raise ScenarioError("--set", f"{excerpt(text)} is not of the form dotted.key=value")
    key, _, value = text.partition("=")
    return key.strip(), parse_value(value, key.strip())


# --------------------------------------------------------------------------------------------
# Loading and validation
# --------------------------------------------------------------------------------------------
def _resolve_presets(raw: Mapping[str, Any]) -> dict[str, Any]:
    raw = copy.deepcopy(dict(raw))
    model = raw.get("model")
    if isinstance(model, dict) and model.get("preset") is not None:
        base = _preset("models", model["preset"], "model.preset")
        moe = model.get("moe")
        if isinstance(moe, dict) and isinstance(base.get("moe"), dict):
            model = {**model, "moe": {**base["moe"], **moe}}
        raw["model"] = {**base, **model}
    hw = raw.get("hardware")
    if isinstance(hw, dict):
        gpu = hw.get("gpu")
        if isinstance(gpu, str) or gpu is None:
            name = gpu if gpu is not None else "h100-sxm"
            raw["hardware"] = {**hw, "gpu": {**_preset("gpus", name, "hardware.gpu"), "preset": name}}
        elif isinstance(gpu, dict) and "preset" in gpu:
            raise unknown_key_error("preset", user_keys(GPU), "hardware.gpu")
    elif hw is None:
        raw["hardware"] = {"gpu": {**_preset("gpus", "h100-sxm", "hardware.gpu"), "preset": "h100-sxm"}}
    return raw


def _divisors(n: int, limit: int = 12) -> str:
    ds = [d for d in range(1, int(math.isqrt(n)) + 1) if n % d == 0]
    ds = sorted(set(ds + [n // d for d in ds]))
    return ", ".join(map(str, ds[:limit])) + (", ..." if len(ds) > limit else "")


def _fill_defaults(sc: Scenario) -> Scenario:
    m = sc.model
    model = replace(m, kv_heads=m.kv_heads or m.heads, ffn_hidden=m.ffn_hidden or 4 * m.hidden)
    gpu = sc.hardware.gpu
    gpu = replace(gpu, fp8_tflops=gpu.fp8_tflops or gpu.peak_tflops)
    up = sc.cluster.scale_up
    if up.bandwidth_GBps is None:
        up = replace(up, bandwidth_GBps=gpu.scale_up_GBps or 300.0)
    cluster = replace(sc.cluster, scale_up=up)
    par = sc.parallelism
    if par.dp is None:
        denom = par.tp * par.pp * par.cp
        if cluster.gpus % denom:
            raise ScenarioError("parallelism", f"tp*pp*cp = {denom} does not divide the {cluster.gpus} GPUs "
                                f"(nodes*gpus_per_node); choose degrees whose product divides {cluster.gpus}")
        par = replace(par, dp=cluster.gpus // denom)
    return replace(sc, model=model, hardware=replace(sc.hardware, gpu=gpu), cluster=cluster, parallelism=par)


def _check(sc: Scenario) -> None:
    """Cross-field rules. Each raises a one-line ScenarioError naming the field."""
    m, t, c, p = sc.model, sc.training, sc.cluster, sc.parallelism
    dp = p.dp or 1
    if c.gpus > MAX_GPUS:
        raise ScenarioError("cluster.nodes", f"{c.nodes} nodes x {c.gpus_per_node} GPUs = {c.gpus} GPUs "
                            f"is beyond the supported {MAX_GPUS:,}")
    if p.tp * p.pp * dp * p.cp != c.gpus:
        other = p.tp * p.pp * p.cp
        fix = (f"set dp = {c.gpus // other} or change the other degrees" if c.gpus % other == 0 else
               f"tp*pp*cp = {other} must divide {c.gpus}; change tp, pp, cp or the cluster size")
        raise ScenarioError("parallelism.dp", f"tp*pp*dp*cp = {p.tp}*{p.pp}*{dp}*{p.cp} = {p.tp * p.pp * dp * p.cp} "
                            f"but the cluster has nodes*gpus_per_node = {c.gpus} GPUs; {fix}")
    if m.heads % p.tp:
        raise ScenarioError("parallelism.tp", f"{p.tp} does not divide model.heads={m.heads} (valid tp: {_divisors(m.heads)})")
    if m.kv_heads > m.heads or m.heads % m.kv_heads:
        raise ScenarioError("model.kv_heads", f"{m.kv_heads} must divide heads={m.heads} (valid: {_divisors(m.heads)})")
    if m.kv_heads % p.tp and p.tp % m.kv_heads:
        raise ScenarioError("parallelism.tp", f"{p.tp} and model.kv_heads={m.kv_heads} must divide one another "
                            f"(valid tp: {_divisors(m.kv_heads)} or multiples of {m.kv_heads} dividing {m.heads})")
    if m.layers < p.pp * p.vpp:
        raise ScenarioError("model.layers", f"{m.layers} layers cannot fill pp*vpp = {p.pp}*{p.vpp} = {p.pp * p.vpp} "
                            f"pipeline chunks; need at least {p.pp * p.vpp} layers or fewer stages")
    if sc.communication.dp_priority and (not sc.communication.dp_overlap or p.schedule in
                                         ("zb-h2", "dualpipe", "pipedream-async") or p.zero == 3):
        raise ScenarioError("communication.dp_priority", "needs dp_overlap: true, ZeRO 0-2 and a flushing schedule "
                            "(gpipe, 1f1b, interleaved, zb-h1): it reorders the buckets the backward releases")
    if p.vpp > 1 and p.schedule != "interleaved":
        raise ScenarioError("parallelism.vpp", f"{p.vpp} virtual stages need schedule: interleaved "
                            f"(got {p.schedule}); set vpp: 1 or schedule: interleaved")
    if p.schedule == "dualpipe" and (p.pp % 2 or p.pp < 2):
        raise ScenarioError("parallelism.pp", f"dualpipe needs an even number of stages >= 2 (got {p.pp})")
    if p.schedule == "interleaved" and p.pp == 1:
        raise ScenarioError("parallelism.schedule", "interleaved needs pp > 1 (got pp=1); use 1f1b or raise pp")
    if t.global_batch % (t.micro_batch * dp):
        raise ScenarioError("training.global_batch", f"{t.global_batch} is not divisible by micro_batch*dp = "
                            f"{t.micro_batch}*{dp} = {t.micro_batch * dp}; use a multiple of {t.micro_batch * dp}")
    mb = t.global_batch // (t.micro_batch * dp)
    if p.schedule == "interleaved" and mb % p.pp:
        step = t.micro_batch * dp * p.pp
        raise ScenarioError("training.global_batch", f"{t.global_batch} leaves ({mb}) micro-batches per pipeline, but "
                            f"the interleaved schedule needs a multiple of pp={p.pp} (Narayanan et al. SC21, "
                            f"Sec. 2.2.2); use a multiple of {step} (micro_batch*dp*pp)")
    units = mb * p.token_slices
    if p.schedule == "dualpipe" and (units % 2 or units < 2 * p.pp):
        raise ScenarioError("training.global_batch", f"{t.global_batch} gives {units} micro-batches per pipeline; "
                            f"dualpipe feeds half from each end and needs an even count >= 2*pp = {2 * p.pp}; "
                            f"use a multiple of {2 * t.micro_batch * dp} of at least {2 * p.pp * t.micro_batch * dp}")
    if (dp * p.cp) % p.ep:
        raise ScenarioError("parallelism.ep", f"{p.ep} does not divide dp*cp = {dp * p.cp} (valid: {_divisors(dp * p.cp)})")
    if p.ep > 1 and not m.is_moe:
        raise ScenarioError("parallelism.ep", f"{p.ep} needs a mixture-of-experts model (model.moe.experts > 0); use ep: 1")
    if m.is_moe:
        if m.moe.experts % p.ep:
            raise ScenarioError("parallelism.ep", f"{p.ep} does not divide model.moe.experts={m.moe.experts} "
                                f"(valid: {_divisors(m.moe.experts)})")
        if m.moe.top_k > m.moe.experts:
            raise ScenarioError("model.moe.top_k", f"{m.moe.top_k} exceeds experts={m.moe.experts}")
        if m.moe.expert_ffn_hidden < 1:
            raise ScenarioError("model.moe.expert_ffn_hidden", "must be at least 1 when experts > 0")
        if m.moe.dense_layers > m.layers:
            raise ScenarioError("model.moe.dense_layers", f"{m.moe.dense_layers} exceeds layers={m.layers}")
    if m.seq_len % (p.cp * p.token_slices):
        raise ScenarioError("parallelism.token_slices", f"{p.token_slices} slices of seq_len/cp = "
                            f"{m.seq_len}/{p.cp} tokens do not divide evenly; use a divisor of {m.seq_len // p.cp}")
    if p.cp > 1 and m.seq_len % (2 * p.cp):
        raise ScenarioError("parallelism.cp", f"{p.cp} needs seq_len={m.seq_len} divisible by 2*cp "
                            "(load-balanced ring attention splits each sequence into 2*cp chunks)")
    if p.sequence_parallel and p.tp > 1 and (m.seq_len // p.cp) % p.tp:
        raise ScenarioError("parallelism.sequence_parallel", f"needs seq_len/cp = {m.seq_len // p.cp} divisible by tp={p.tp}")
    order = p.order.split("-")
    if sorted(d for d in order if d != "ep") != sorted(ORDER_DIMS) or order.count("ep") > 1:
        raise ScenarioError("parallelism.order", f"{excerpt(p.order)} must list tp, cp, dp and pp once each "
                            "(ep optional), innermost first, e.g. tp-cp-ep-dp-pp")
    if c.nodes % c.datacenters:
        raise ScenarioError("cluster.datacenters", f"{c.datacenters} does not divide nodes={c.nodes} "
                            f"(valid: {_divisors(c.nodes)})")
    if p.stage_layers is not None:
        if len(p.stage_layers) != p.pp * p.vpp:
            raise ScenarioError("parallelism.stage_layers", f"has {len(p.stage_layers)} entries; need pp*vpp = {p.pp * p.vpp}")
        if sum(p.stage_layers) != m.layers:
            raise ScenarioError("parallelism.stage_layers", f"sums to {sum(p.stage_layers)}; need model.layers = {m.layers}")
        if min(p.stage_layers) < 1:
            raise ScenarioError("parallelism.stage_layers", f"{excerpt(list(p.stage_layers))} has an empty chunk; "
                                "every pipeline chunk needs at least one layer")
    # Last: the work budget needs a scenario that satisfies every rule above.
    from .budget import check_budget   # budget.py reads Scenario; imported here to avoid a cycle
    check_budget(sc)


def from_dict(raw: Mapping[str, Any]) -> Scenario:
    """Validate a raw mapping and return the resolved :class:`Scenario` (raises ScenarioError)."""
    if not isinstance(raw, Mapping):
        raise ScenarioError("scenario", "the file must hold a mapping of sections (model, training, ...)")
    resolved = _resolve_presets(raw)
    for section in ("model", "training"):
        if section not in resolved:
            raise ScenarioError(section, "is required")
    sc = build(Scenario, resolved)
    sc = _fill_defaults(sc)
    _check(sc)
    return sc


def parse_text(text: str | bytes, source: str = "scenario") -> dict[str, Any]:
    """Parse YAML (or JSON, a YAML subset) text into a raw mapping, with a one-line error.

    This is the parser for uploads too: it bounds size, nesting, aliases and string lengths and
    rejects tags and duplicate keys (explorer/inputs.py)."""
    return parse_document(text, source)


def load_raw(path: str | Path) -> dict[str, Any]:
    """Read a scenario file into a raw mapping (no validation yet)."""
    p = Path(path)
    try:
        with open(p, "rb") as fh:
            # Read one byte more than accepted: an oversized (or endless, e.g. /dev/zero) file
            # is rejected without being read whole.
            data = fh.read(MAX_BYTES + 1)
        text = data.decode("utf-8")
    except FileNotFoundError:
        raise ScenarioError(str(path), "no such scenario file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ScenarioError(str(path), f"cannot be read ({exc.__class__.__name__})") from None
    if len(data) > MAX_BYTES:
        raise ScenarioError(str(path), f"is larger than the {MAX_BYTES:,} bytes accepted")
    return parse_text(text, str(path))


def load(path: str | Path, overrides: Mapping[str, Any] | None = None) -> Scenario:
    """Load, override (dotted keys) and validate a scenario file."""
    return from_dict(apply_overrides(load_raw(path), overrides or {}))


def to_dict(sc: Scenario) -> dict[str, Any]:
    """A plain mapping that :func:`from_dict` turns back into an equal scenario."""
    out = dump(sc)
    gpu = sc.hardware.gpu
    if gpu.preset is not None:
        preset = _fill_gpu_preset(gpu.preset)
        if replace(gpu, preset=None) == preset:
            out["hardware"]["gpu"] = gpu.preset
    return out


def _fill_gpu_preset(name: str) -> GPU:
    g = build(GPU, gpu_presets()[name], "hardware.gpu")
    return replace(g, fp8_tflops=g.fp8_tflops or g.peak_tflops)


class _Dumper(yaml.SafeDumper):
    """Multi-line strings (the Markdown description) as literal blocks, as people write them."""


_Dumper.add_representer(str, lambda d, s: d.represent_scalar("tag:yaml.org,2002:str", s,
                                                              style="|" if "\n" in s else None))


def to_yaml(sc: Scenario) -> str:
    return yaml.dump(to_dict(sc), Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=100)


def to_json(sc: Scenario) -> str:
    return json.dumps(to_dict(sc), indent=2)
