"""Loading: text -> raw mapping -> :class:`Scenario` (presets, defaults, rules), and back.

``from_dict`` is the one way a scenario comes to exist: it resolves presets, builds the frozen
sections strictly (explorer/config/schema.py), fills the *derived defaults* and runs every rule
(explorer/config/rules.py).  Derived defaults are resolved once, here, so no consumer ever reads
``None`` for them:

==============================  =========================================================
field                           filled with
==============================  =========================================================
model.kv_heads                  model.heads (multi-head attention)
model.ffn_hidden                4 * model.hidden (GPT-2/3's FFN width)
hardware.gpu.fp8_tflops         hardware.gpu.peak_tflops (no fp8 speed-up unless stated)
cluster.scale_up.bandwidth_GBps hardware.gpu.scale_up_GBps, else FALLBACK_SCALE_UP_GBPS; on a PCIe
                                scale-up the GPU's pcie_GBps, else FALLBACK_PCIE_GBPS
cluster.scale_up.domain_gpus    gpus_per_node, or the GPU preset's rack (explorer/config/domains.py)
cluster.scale_out.nic_Gbps      the fabric preset's (explorer/data/fabrics.yaml)
cluster.scale_out.latency_us    the fabric preset's
cluster.scale_out.efficiency    the fabric preset's (fitted fraction of line rate)
hardware.gpu.sms                DEFAULT_SMS
communication.comm_sms          the MoE dispatcher's SMs (moe_dispatch.py), else NCCL's channels for
                                frameworks whose DP collectives overlap compute (nccl_channels.py),
                                else DEFAULT_COMM_SMS
communication.bucket_MB         training.framework's gradient bucket (explorer/config/frameworks.py)
parallelism.dp                  GPUs / (tp * pp * cp); 1 with stage_replicas
==============================  =========================================================
"""
from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import yaml

from .datacenters import resolve_scale_across
from .dlrm import DLRM_DERIVED
from .dlrm import derive as derive_dlrm
from .domains import apply_rack_defaults, default_domain
from .frameworks import profile
from .frozen import evolve
from .gnn import GNN_DERIVED, fill_partitions
from .gnn import derive as derive_gnn
from .inference import given_global_batch, refuse_global_batch, refuse_training_fields, strip_training_fields
from .inputs import MAX_BYTES, parse_document
from .model_parts import MODEL_KINDS, MODELLED_KINDS, Conv, one_family
from .moe_dispatch import dispatcher_sms
from .nccl_channels import nccl_channels
from .overrides import apply_overrides
from .presets import DEFAULT_GPU, gpu_presets, preset, resolved_scale_out
from .replica_rules import auto_replicas
from .rnn import RNN_DERIVED
from .rnn import derive as derive_rnn
from .rules import validate
from .schema import ScenarioError, build, dump, reject_derived
from .sections import GPU, Communication, Parallelism, Scenario, Training
from .shipped import resolve_scenario_path

# Scale-up bandwidth of a custom GPU mapping that gives no scale_up_GBps: 300 GB/s per direction,
# third-generation NVLink of the A100 SXM (12 links x 25 GB/s; NVIDIA A100 datasheet: 600 GB/s
# bidirectional), the a100-80gb preset's value: a GPU of unknown interconnect gets the oldest
# NVLink generation among the NVSwitch presets rather than a newer one's speed.
FALLBACK_SCALE_UP_GBPS = 300.0
# A PCIe scale-up of a GPU whose PCIe rate is not given: a PCIe 5.0 x16 link as measured on H100
# (nvbandwidth device_to_host_memcpy_sm, 52.77 GB/s: NVIDIA/nvbandwidth issue #24), the fastest
# measured PCIe link of the presets — never the GPU's NVLink figure (a hunt found a B200 "on PCIe"
# at its 900 GB/s NVLink rate, faster than on its NVSwitch).
FALLBACK_PCIE_GBPS = 52.8
# SMs of a GPU that states none: the H100 SXM's 132 (NVIDIA H100 Tensor Core GPU Architecture
# whitepaper, 2022), the default GPU's.
DEFAULT_SMS = 132
# SMs that communication kernels hold while they overlap compute, when the scenario gives none.
DEFAULT_COMM_SMS = 0
# The transformer fields a convolutional network (model.conv) derives, and what they become: a
# sample is one image or clip (seq_len 1), layers are its residual blocks, hidden the channels of
# its last feature map (the classifier's input), vocab its classes; no dropout, nothing tied.
CONV_DERIVED = ("layers", "hidden", "heads", "kv_heads", "ffn_hidden", "seq_len", "vocab", "dropout",
                "tied_embeddings")


def resolve_presets(given: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``given`` with ``model.preset`` and ``hardware.gpu`` (a name) expanded to mappings;
    fields the scenario gives win over the preset's (``model.moe`` merged key by key)."""
    raw = copy.deepcopy(dict(given))
    reject_derived(Scenario, raw)          # the fields filled below, and by the loader, are not the user's
    # The datacenters list, the WAN preset and parallelism.span; first, as a list may name the GPU.
    resolve_scale_across(raw)
    model = raw.get("model")
    if isinstance(model, dict) and model.get("preset") is not None:
        base = preset("models", model["preset"], "model.preset")
        for part in ("moe", "conv", "dlrm", "gnn", "rnn"):
            mine = model.get(part)
            if isinstance(mine, dict) and isinstance(base.get(part), dict):
                model = {**model, part: {**base[part], **mine}}
        raw["model"] = {**base, **model}
    if isinstance(raw.get("model"), dict):
        raw["model"] = derive_model(raw["model"])
    hw = raw.get("hardware")
    if isinstance(hw, dict):
        gpu = hw.get("gpu")
        if isinstance(gpu, str) or gpu is None:
            name = gpu if gpu is not None else DEFAULT_GPU
            raw["hardware"] = {**hw, "gpu": {**preset("gpus", name, "hardware.gpu"), "preset": name}}
    elif hw is None:
        raw["hardware"] = {"gpu": {**preset("gpus", DEFAULT_GPU, "hardware.gpu"), "preset": DEFAULT_GPU}}
    gpu = raw["hardware"].get("gpu") if isinstance(raw.get("hardware"), dict) else None
    if isinstance(gpu, dict) and gpu.get("based_on") is not None:
        # A preset with some fields changed: the preset's for the rest (a one-line error naming the
        # valid presets when there is none of that name).
        gpu = raw["hardware"]["gpu"] = {**preset("gpus", gpu["based_on"], "hardware.gpu.based_on"), **gpu}
    if isinstance(gpu, dict):
        origin = gpu.get("preset") or gpu.get("based_on")
        apply_rack_defaults(raw, origin if isinstance(origin, str) else gpu.get("name"))
    return raw


def derive_model(model: dict[str, Any]) -> dict[str, Any]:
    """``model`` with the fields its ``conv`` section derives (CONV_DERIVED) filled in; a given one
    that disagrees is refused, naming it.  Unchanged without a conv section, or when its values are
    not yet valid (building the section then says why)."""
    kind = model.get("kind", "transformer")
    if kind in MODEL_KINDS and kind not in MODELLED_KINDS:
        raise ScenarioError("model.kind", f"{kind!r}: not modelled yet; use one of "
                                          f"{', '.join(MODELLED_KINDS)}")
    if kind == "transformer" and model.get("kind") is not None and model.get("conv") is not None:
        raise ScenarioError("model.kind", "'transformer' but model.conv is set; use cnn, or remove "
                                          "model.conv")
    # Each family's derive refuses what it reads first; a section none of them reads is refused
    # after (model_parts.one_family), e.g. model.gnn under model.kind dlrm.
    return one_family(_derived(model, kind))


def _derived(model: dict[str, Any], kind: str) -> dict[str, Any]:
    """derive_model's work, family by family."""
    if kind == "rnn" or model.get("rnn") is not None:
        return derive_rnn(model)                 # GNMT-style LSTMs: explorer/config/rnn.py
    if kind == "dlrm" or model.get("dlrm") is not None:
        return derive_dlrm(model)                # model.dlrm (config/dlrm.py)
    if kind == "gnn" or (model.get("kind") is None and model.get("gnn") is not None):
        return {**derive_gnn(model), "kind": "gnn"}     # GraphSAGE: explorer/config/gnn.py
    if kind == "cnn" and model.get("conv") is None:
        model = {**model, "conv": {}}            # model.kind cnn alone: the Conv defaults (ResNet-50)
    conv = model.get("conv")
    if not isinstance(conv, dict):
        return model
    if model.get("kind") is None:
        model = {**model, "kind": "cnn"}          # a conv section implies the cnn family
    c = build(Conv, conv, "model.conv")       # a bad conv field is reported as itself, first
    derived = dict(zip(CONV_DERIVED, (c.blocks, c.features, 1, 1, c.features, 1, c.classes, False, False),
                       strict=True))
    for k, v in derived.items():
        if model.get(k) is not None and model[k] != v:
            raise ScenarioError(f"model.{k}", f"{model[k]!r} does not match model.conv (a {c.label} "
                                              f"gives {v!r}); leave it out, it is derived from model.conv")
    return {**model, **derived}


def derived_model_fields(m: Any) -> tuple[str, ...]:
    """The fields of model section ``m`` the loader derived from another of its sections (so not
    written by :func:`to_dict`): CONV_DERIVED for a convolutional network, none otherwise."""
    if getattr(m, "dlrm", None) is not None:
        return DLRM_DERIVED
    if getattr(m, "rnn", None) is not None:
        return RNN_DERIVED
    return CONV_DERIVED if m.conv is not None else GNN_DERIVED if m.gnn is not None else ()


def _filled(obj: Any, **values: Any) -> Any:
    """``obj`` with ``values`` where they differ from its own (``obj`` itself when none does), so
    that sections a default leaves as they are stay the same objects: a sweep's rows then share
    them, and the estimator's keys find them by identity (pricing/keys.object_id)."""
    changes = {}
    for k, v in values.items():
        old = getattr(obj, k)
        # A section counts as changed unless it is the same object (comparing one by value would
        # walk all its fields); a plain value by value.
        if old is not v and (hasattr(v, "__dataclass_fields__") or old != v):
            changes[k] = v
    return evolve(obj, **changes) if changes else obj


# Sections filled once per input section (by identity; the entry holds the input, so its id is
# not reused): every row of a sweep that leaves the model, the GPU or the cluster as the base has
# them gets the same filled objects.  Bounded: emptied when full.
_FILLS: dict[tuple, tuple[tuple, Any]] = {}
_MAX_FILLS = 4096


def _once(kind: str, fill: Any, *inputs: Any) -> Any:
    key = (kind, *map(id, inputs))
    got = _FILLS.get(key)
    if got is not None and all(a is b for a, b in zip(got[0], inputs, strict=True)):
        return got[1]
    if len(_FILLS) >= _MAX_FILLS:
        _FILLS.clear()
    out = fill(*inputs)
    _FILLS[key] = (inputs, out)
    return out


def _fill_model(m: Any) -> Any:
    return _filled(m, kv_heads=m.kv_heads or m.heads, ffn_hidden=m.ffn_hidden or 4 * m.hidden)


def _fill_gpu(gpu: GPU) -> GPU:
    return _filled(gpu, fp8_tflops=gpu.fp8_tflops or gpu.peak_tflops, sms=gpu.sms or DEFAULT_SMS)


def _fill_cluster(cluster: Any, gpu: GPU) -> Any:
    up = cluster.scale_up
    if up.bandwidth_GBps is None:
        # GPUs on PCIe switches meet over their PCIe link, not the NVLinks the preset has (a hunt
        # found an H100 "on PCIe" reducing at 260 GB/s bus bandwidth).
        if up.kind == "pcie":
            up = evolve(up, bandwidth_GBps=gpu.pcie_GBps or FALLBACK_PCIE_GBPS)
        else:
            up = evolve(up, bandwidth_GBps=gpu.scale_up_GBps or FALLBACK_SCALE_UP_GBPS)
    if up.domain_gpus is None:
        up = evolve(up, domain_gpus=default_domain(cluster, gpu.origin or gpu.name))
    return _filled(cluster, scale_up=up, scale_out=resolved_scale_out(cluster.scale_out))


def _framework_comm_sms(sc: Scenario, cluster: Any) -> int:
    """NCCL's channels for the DP group when the framework's DP collectives run beside compute
    (FrameworkProfile.nccl_sms_under_compute: PyTorch FSDP), else 0.  The DP group is tp*cp*dp
    consecutive ranks (tp innermost), so it crosses the NVLink domain when that exceeds it."""
    if not profile(sc.training.framework).nccl_sms_under_compute:
        return 0
    par = sc.parallelism
    dp_span = cluster.gpus // par.pp
    return nccl_channels(cluster.scale_up.bandwidth_GBps, dp_span > cluster.scale_up.domain_gpus,
                         cluster.scale_out.nics_per_node, nvlink=cluster.scale_up.kind != "pcie")


def fill_defaults(sc: Scenario) -> Scenario:
    """``sc`` with every derived default of the module docstring's table filled."""
    model = _once("model", _fill_model, sc.model)
    gpu = _once("gpu", _fill_gpu, sc.hardware.gpu)
    cluster = _once("cluster", _fill_cluster, sc.cluster, gpu)
    comm = sc.communication
    if comm.comm_sms is None:
        # DeepEP / Hybrid-EP kernels hold SMs while they overlap compute (explorer/config/moe_dispatch.py).
        sms = (dispatcher_sms(comm.moe_dispatcher, model.moe, sc.parallelism.ep)
               or _framework_comm_sms(sc, cluster) or DEFAULT_COMM_SMS)
        comm = evolve(comm, comm_sms=sms)
    par = sc.parallelism
    if par.dp is None and par.stage_replicas:
        par = evolve(par, dp=1)             # PipeDream's replicas replace the data-parallel degree
    if par.dp is None:
        denom = par.tp * par.pp * par.cp
        if cluster.gpus % denom:
            # The sizes it comes from are named: a datacenter list replaced by a count leaves
            # cluster.nodes at its default, which a bare "8 GPUs" did not say.
            shape = f"cluster.nodes = {cluster.nodes} x gpus_per_node = {cluster.gpus_per_node}"
            raise ScenarioError("parallelism", f"tp*pp*cp = {denom} does not divide the {cluster.gpus} "
                                f"GPUs ({shape}); choose degrees whose product divides {cluster.gpus}, or "
                                "more nodes")
        par = evolve(par, dp=cluster.gpus // denom)
    dp = par.dp
    assert dp is not None                      # derived just above when absent
    if comm.bucket_MB is None:
        comm = evolve(comm, bucket_MB=profile(sc.training.framework).default_bucket_MB(dp, sc.training.dtype))
    model = fill_partitions(model, dp)              # a GNN's partitions are the dp replicas
    hardware = _once("hardware", lambda hw, g: _filled(hw, gpu=g), sc.hardware, gpu)
    return _filled(sc, model=model, hardware=hardware, cluster=cluster, parallelism=par, communication=comm)


def from_dict(raw: Mapping[str, Any]) -> Scenario:
    """Validate a raw mapping and return the resolved :class:`Scenario` (raises ScenarioError).

    >>> sc = from_dict({"model": {"preset": "llama3-8b"}, "training": {"global_batch": 8}})
    >>> sc.dp, sc.model.kv_heads, sc.cluster.scale_up.bandwidth_GBps
    (8, 8, 450.0)
    """
    if not isinstance(raw, Mapping):
        raise ScenarioError("scenario", "the file must hold a mapping of sections (model, training, ...)")
    resolved = auto_replicas(resolve_presets(raw))
    serving = resolved.get("inference") is not None
    batch = given_global_batch(resolved) if serving else None
    if serving:
        # A serving scenario (config/inference.py) reads no training section: refuse one, then fill a
        # placeholder that validates whatever the data-parallel degree turns out to be.
        resolved = {**refuse_training_fields(resolved, _differs_from_default),
                    "training": {"global_batch": MAX_GPUS_PLACEHOLDER}}
    for section in ("model", "training"):
        if section not in resolved:
            raise ScenarioError(section, "is required")
    sc = fill_defaults(build(Scenario, resolved))
    if serving:
        refuse_global_batch(batch, sc.dp)
        sc = _filled(sc, training=evolve(sc.training, global_batch=sc.dp))
    validate(sc)
    return sc


def _differs_from_default(section: str, key: str, value: Any) -> bool:
    """Whether ``section.key: value`` is other than the field's default (a serving scenario refuses
    such training fields: config/inference.py)."""
    cls = {"training": Training, "parallelism": Parallelism, "communication": Communication}[section]
    given = {"global_batch": 1, key: value} if cls is Training else {key: value}   # (a required field)
    # Built first: an unknown key or a bad value is refused there, in one line, naming the field.
    built = build(cls, given, section)
    # A field whose default is None (one the loader derives, bucket_MB, fp8_recipe; or a list,
    # pipeline_layout) differs once given: serving files and their links never write them, and a
    # hunt found ``--set parallelism.pipeline_layout=[1,2,3]`` on a serving run accepted and ignored.
    return getattr(built, key) != getattr(cls(), key)


# The placeholder batch of a serving scenario's training section before dp is known (any value the
# bounds accept; replaced by dp, one sequence per replica, once dp is derived).
MAX_GPUS_PLACEHOLDER = 1


def parse_text(text: str | bytes, source: str = "scenario") -> dict[str, Any]:
    """Parse YAML (or JSON, a YAML subset) text into a raw mapping, with a one-line error.

    This is the parser for uploads too: it bounds size, nesting, aliases and string lengths and
    rejects tags and duplicate keys (explorer/config/inputs.py)."""
    return parse_document(text, source)


def load_raw(path: str | Path) -> dict[str, Any]:
    """Read a scenario file into a raw mapping (no validation yet): a path, or the name of a shipped
    scenario as the command line takes it (``load_raw("llama3-405b-16k")``; a path that does not
    exist is refused with the closest shipped names)."""
    p = resolve_scenario_path(str(path))
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
    """Load, override (dotted keys) and validate a scenario file (a path or a shipped name: load_raw)."""
    return from_dict(apply_overrides(load_raw(path), overrides or {}))


def to_dict(sc: Scenario) -> dict[str, Any]:
    """A plain mapping that :func:`from_dict` turns back into an equal scenario (a preset GPU
    that nobody changed is written as its name)."""
    out = dump(sc)
    derived = derived_model_fields(sc.model)      # derived again at load (derive_model)
    if derived:
        out["model"] = {k: v for k, v in out["model"].items() if k not in derived}
    c = sc.cluster
    if c.datacenter_names:      # the list form, as written (its total is cluster.nodes)
        gpus = c.datacenter_gpus
        out["cluster"]["datacenters"] = [
            {"name": n, "nodes": c.nodes_of(d), **({"gpu": gpus[d]} if gpus else {})}
            for d, n in enumerate(c.datacenter_names)]
    gpu = sc.hardware.gpu
    if c.scale_up.domain_gpus == default_domain(c, gpu.origin or gpu.name):
        # Derived again at load from the nodes: a copy whose nodes are then changed (a sweep, the
        # app) gets the domain of its own nodes, not a stale one.
        out["cluster"]["scale_up"].pop("domain_gpus", None)
    if gpu.preset is not None and replace(gpu, preset=None) == _filled_gpu_preset(gpu.preset):
        out["hardware"]["gpu"] = gpu.preset
    if sc.inference is not None:
        out = strip_training_fields(out)      # a serving file names none (refused at load)
    return out


def _filled_gpu_preset(name: str) -> GPU:
    """GPU preset ``name`` as from_dict would fill it (fp8 peak derived)."""
    g = build(GPU, gpu_presets()[name], "hardware.gpu")
    return replace(g, fp8_tflops=g.fp8_tflops or g.peak_tflops, sms=g.sms or DEFAULT_SMS)


class _Dumper(yaml.SafeDumper):
    """Multi-line strings (the Markdown description) as literal blocks, as people write them."""


_Dumper.add_representer(str, lambda d, s: d.represent_scalar("tag:yaml.org,2002:str", s,
                                                              style="|" if "\n" in s else None))


def to_yaml(sc: Scenario) -> str:
    """The scenario as YAML, in field order, descriptions as literal blocks."""
    return yaml.dump(to_dict(sc), Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=100)


def to_json(sc: Scenario) -> str:
    """The scenario as indented JSON."""
    return json.dumps(to_dict(sc), indent=2)
