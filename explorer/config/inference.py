"""The ``inference:`` section: a serving scenario instead of a training one.

A scenario with this section is a *serving* scenario (issue 37): the model answers requests of
``prompt_tokens`` input and ``output_tokens`` output tokens, ``batch`` of them decoding together on
each model replica (continuous batching, Yu et al., "Orca", OSDI 2022; Kwon et al., "vLLM /
PagedAttention", SOSP 2023).  The replica's layout is the scenario's ``parallelism`` (tp, pp, ep;
dp = replicas) on its cluster, co-located prefill and decode; with ``disaggregated`` the prefill and
decode phases run on separate pools of GPUs with their own layouts and every request's KV cache
crosses the fabric between them (Zhong et al., "DistServe", OSDI 2024; Patel et al., "Splitwise",
ISCA 2024).  How it is simulated: :mod:`explorer.serving`.

The training section is not read by a serving scenario; the loader fills a placeholder (one
sequence per replica) so the rest of the configuration validates, and refuses the training-only
fields named in :data:`TRAINING_ONLY` when a serving file sets them (config/loading.py).
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .schema import ScenarioError

DTYPES = ("bf16", "fp16", "fp8")

# Fields a serving scenario must not set: they describe a training step (section.key or a whole
# section), and a serving scenario would silently ignore them.
TRAINING_ONLY = ("training", "parallelism.cp", "parallelism.vpp", "parallelism.schedule", "parallelism.zero",
                 "parallelism.pipeline_layout", "parallelism.stage_layers", "parallelism.token_slices",
                 "parallelism.dp_kind", "parallelism.sequence_parallel", "communication.dp_overlap",
                 "communication.bucket_MB", "communication.compression",
                 # Read by training steps only: a serving run gave the same figures with any value.
                 "parallelism.max_in_flight", "parallelism.gossip_peers", "parallelism.ps_servers",
                 "parallelism.batch_split", "parallelism.ideal_pipeline", "parallelism.stage_replicas",
                 "communication.contention", "communication.tp_overlap", "communication.comm_sms",
                 "communication.prefetch_layers",
                 # DeepEP's per-node deduplication is not modelled for serving (serving/step.py).
                 "communication.moe_dispatcher")

# Why a serving scenario refuses a field it could be expected to read (the others: a training field).
SERVING_REFUSALS = {
    "communication.moe_dispatcher": "serving sends each token's expert copies as NCCL's all-to-all does "
                                    "(DeepEP's per-node deduplication is not modelled for serving, "
                                    "serving/step.py): remove it"}

# The Scenario field's metadata (config/sections.py).
INFERENCE_FIELD = {"doc": "serve requests instead of training: a serving scenario (config/inference.py)"}


@dataclass(frozen=True)
class Pool:
    """One pool of a disaggregated deployment: its replicas and the layout of each."""

    tp: int = field(default=1, metadata={"min": 1, "max": 4096, "doc": "tensor-parallel degree of a replica"})
    pp: int = field(default=1, metadata={"min": 1, "max": 4096, "doc": "pipeline stages of a replica"})
    ep: int = field(default=1, metadata={
        "min": 1, "max": 1_000_000,
        "doc": "expert-parallel degree over the pool's tp x replicas GPUs (MoE; DeepSeek-V3 decode: 320)"})
    replicas: int = field(default=1, metadata={
        "min": 1, "max": 1_000_000,
        "doc": "model replicas (data-parallel attention when ep spans them)"})

    @property
    def gpus(self) -> int:
        """GPUs of the pool: tp x pp x replicas."""
        return self.tp * self.pp * self.replicas


@dataclass(frozen=True)
class Disaggregated:
    """Prefill and decode on separate pools; each request's KV cache crosses the fabric once."""

    prefill: Pool = field(default_factory=Pool, metadata={"doc": "the pool that runs prompts"})
    decode: Pool = field(default_factory=Pool, metadata={"doc": "the pool that generates tokens"})
    kv_transfer_GBps: float | None = field(default=None, metadata={
        "min": 0.1, "max": 1e5, "why": "0.1 GB/s up to 100 TB/s",
        "doc": "bandwidth of one prefill GPU's KV send to its decode GPU; default the cluster's "
               "scale-out path (its NIC at the fabric's efficiency)"})


@dataclass(frozen=True)
class RequestClass:
    """One kind of request of a length mix: its lengths and its share of the arrivals."""

    prompt_tokens: int = field(default=1, metadata={
        "required": True, "min": 1, "max": 10_000_000, "doc": "input tokens of this kind of request"})
    output_tokens: int = field(default=1, metadata={
        "required": True, "min": 1, "max": 10_000_000, "doc": "tokens this kind of request generates"})
    share: float = field(default=1.0, metadata={
        "min": 1e-9, "max": 1e9, "why": "a relative frequency (the shares are normalised)",
        "doc": "relative frequency among the arrivals; default 1"})


@dataclass(frozen=True)
class Inference:
    """Requests, batching and precision of a serving deployment."""

    prompt_tokens: int = field(default=1024, metadata={
        "min": 1, "max": 10_000_000, "doc": "input tokens of each request"})
    output_tokens: int = field(default=256, metadata={
        "min": 1, "max": 10_000_000, "doc": "tokens each request generates"})
    mix: tuple[RequestClass, ...] = field(default=(), metadata={
        "max_items": 64, "valid": "list of {prompt_tokens, output_tokens, share}",
        "doc": "request-length mix: kinds of requests with their share of arrivals; the decode batch "
               "holds them in proportion to share x output (a long answer decodes longer), each "
               "prompt has its own prefill, and the prefill queue is M/G/1 (serving/mix.py); given, it "
               "replaces prompt_tokens and output_tokens (not read then); empty = every request has "
               "prompt_tokens and output_tokens"})
    batch: int = field(default=32, metadata={
        "min": 1, "max": 1_000_000,
        "doc": "concurrent sequences decoding on each (decode) replica (continuous batching)"})
    weight_dtype: str = field(default="bf16", metadata={"choices": DTYPES, "doc": "weight precision"})
    activation_dtype: str = field(default="bf16", metadata={
        "choices": DTYPES, "doc": "activation precision (GEMM inputs and the TP/EP messages)"})
    kv_dtype: str = field(default="bf16", metadata={"choices": DTYPES, "doc": "KV-cache precision"})
    chunked_prefill_tokens: int = field(default=0, metadata={
        "min": 0, "max": 10_000_000,
        "doc": "token budget of one step with chunked prefill (vLLM max_num_batched_tokens): a prompt "
               "is prefilled in chunks of this many tokens, each step also decoding the running batch; "
               "0 = the whole prompt in one pass; co-located serving only (a prefill pool runs whole "
               "prompts)"})
    memory_utilization: float = field(default=0.9, metadata={
        "min": 0.1, "max": 1.0, "why": "a fraction of GPU memory",
        "doc": "share of GPU memory the server may use (vLLM gpu_memory_utilization, default 0.9)"})
    arrival_rate: float | None = field(default=None, metadata={
        "min": 1e-6, "max": 1e9, "why": "requests per second", "start": 1.0,
        "doc": "requests per second arriving at the whole deployment (Poisson): each replica then "
               "decodes the fewest sequences whose throughput keeps up (Little's law), at most "
               "`batch` (vLLM max_num_seqs), and TTFT adds the wait for a prefill (M/D/1; M/G/1 with "
               "a mix); unset = a saturated server, `batch` sequences always decoding (serving/load.py)"})
    tpot_target_ms: float | None = field(default=None, metadata={
        "min": 0.01, "max": 1e6, "why": "a time between tokens in milliseconds", "start": 50.0,
        "doc": "latency target on TPOT (an SLO, as DistServe sizes deployments by): run reports the "
               "requests/s of the largest batch on the batch curve, or the configured batch, that "
               "meets it; unset = no target"})
    ttft_target_ms: float | None = field(default=None, metadata={
        "min": 0.01, "max": 1e7, "why": "a time to first token in milliseconds", "start": 500.0,
        "doc": "latency target on the mean TTFT under Poisson arrivals: a prompt's prefill plus its "
               "wait in the prefill queue (M/D/1; M/G/1 with a mix); run reports the requests/s that "
               "meet it (and the TPOT target, if set) on the batch curve; unset = no target "
               "(serving/targets.py)"})
    disaggregated: Disaggregated | None = field(default=None, metadata={
        "doc": "separate prefill and decode pools (DistServe, Splitwise); absent = co-located on the "
               "scenario's parallelism"})


def refuse_training_fields(raw: Mapping[str, Any], differs: Any) -> dict[str, Any]:
    """``raw`` without its :data:`TRAINING_ONLY` fields; a one-line ScenarioError names the first one
    set to something other than its default (``differs(section, key, value)`` says whether it is),
    so that a file or the app writing the defaults back still loads.  ``training.global_batch`` is
    the placeholder the loader itself fills (dp, one sequence per replica), which the default
    comparison cannot judge before dp is known: :func:`refuse_global_batch` checks it then."""
    for key in TRAINING_ONLY:
        section, _, name = key.partition(".")
        given = raw.get(section)
        if not isinstance(given, Mapping):
            continue
        names = [k for k in given if k != "global_batch"] if not name else [name] if name in given else []
        for k in names:
            if differs(section, k, given[k]):
                why = SERVING_REFUSALS.get(f"{section}.{k}")
                raise ScenarioError(f"{section}.{k}", why or "is a training field; a serving scenario (with "
                                    "an inference: section) does not read it: remove it (layouts: "
                                    "parallelism.tp/pp/ep/dp or inference.disaggregated)")
    return strip_training_fields(raw)


def given_global_batch(raw: Mapping[str, Any]) -> Any:
    """The ``training.global_batch`` a serving ``raw`` sets (None: not set)."""
    training = raw.get("training")
    return training.get("global_batch") if isinstance(training, Mapping) else None


def refuse_global_batch(given: Any, dp: int) -> None:
    """Refuse, in one line, a serving scenario's ``training.global_batch`` other than ``dp``: no
    serving figure reads it (the batch is ``inference.batch``), and the loader sets it to dp itself,
    so only that value (written back by a copy of the loaded scenario) is accepted; a hunt found
    ``--set training.global_batch=100000000`` silently accepted."""
    if given is None or (type(given) is int and given == dp):
        return
    raise ScenarioError("training.global_batch", f"is a training field; a serving scenario (with an "
                        f"inference: section) does not read it (the loader sets it to dp = {dp}, one "
                        "sequence per replica): remove it (the decoding batch is inference.batch)")


def strip_training_fields(raw: Mapping[str, Any]) -> dict[str, Any]:
    """``raw`` without the :data:`TRAINING_ONLY` fields (what a serving scenario's file holds)."""
    out = dict(raw)
    for key in TRAINING_ONLY:
        section, _, name = key.partition(".")
        if not name:
            out.pop(section, None)
        elif isinstance(out.get(section), Mapping):
            out[section] = {k: v for k, v in out[section].items() if k != name}
    return out
