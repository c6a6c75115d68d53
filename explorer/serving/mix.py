"""A request-length mix (``inference.mix``): kinds of requests, each with its prompt and output
lengths and its share of the arrivals; without a mix, one kind of ``prompt_tokens`` and
``output_tokens``.

Under continuous batching a request occupies a decode slot for as many steps as it generates, so
the running batch holds kind i in proportion to share_i x output_i (Little's law per kind: the
number in the system is the arrival rate times the time spent there), each uniformly through its
life.  The decode step therefore reads the KV cache of a mean context that weights each kind's own
mean (prompt + output / 2, serving/step.py) by share x output, and the memory a running sequence
reserves is the same weighting of its full context (prompt + output, serving/memory.py).  A
request's cost is per kind — its prefill and its output — and the deployment's rates take the
share-weighted means (E[output] tokens per request, E[prefill] per prompt); the prefill queue sees
service times that differ by kind, an M/G/1 queue (serving/load.py).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..config.inference import Inference


@dataclass(frozen=True)
class Kind:
    """One kind of request: its lengths and its share of the arrivals (the shares sum to 1)."""

    prompt: int
    output: int
    share: float


def kinds(inf: Inference) -> tuple[Kind, ...]:
    """The mix's kinds with normalised shares, or the one kind of prompt_tokens / output_tokens."""
    if not inf.mix:
        return (Kind(inf.prompt_tokens, inf.output_tokens, 1.0),)
    total = sum(k.share for k in inf.mix)
    return tuple(Kind(k.prompt_tokens, k.output_tokens, k.share / total) for k in inf.mix)


def mean_output(inf: Inference) -> float:
    """Output tokens per request, averaged over the arrivals."""
    return sum(k.share * k.output for k in kinds(inf))


def mean_prompt(inf: Inference) -> float:
    """Prompt tokens per request, averaged over the arrivals."""
    return sum(k.share * k.prompt for k in kinds(inf))


def in_batch(inf: Inference) -> tuple[float, ...]:
    """Each kind's share of the running batch: share x output, normalised (module docstring)."""
    ks = kinds(inf)
    total = sum(k.share * k.output for k in ks)
    return tuple(k.share * k.output / total for k in ks)


def batch_mean(inf: Inference, per_kind) -> float:
    """``per_kind(prompt, output)`` averaged over the running batch."""
    return sum(w * per_kind(k.prompt, k.output) for w, k in zip(in_batch(inf), kinds(inf), strict=True))


def moments(values: list[float], inf: Inference) -> tuple[float, float]:
    """(mean, mean square) of per-kind ``values`` over the arrivals."""
    ks = kinds(inf)
    return (sum(k.share * v for k, v in zip(ks, values, strict=True)),
            sum(k.share * v * v for k, v in zip(ks, values, strict=True)))
