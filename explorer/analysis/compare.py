"""The difference of two simulated iterations, A and B, category by category.

``delta_s[category] = b.breakdown_s[category] - a.breakdown_s[category]`` for every breakdown
category (compute, recompute, exposed tp/cp/ep/pp/dp, bubble, optimizer).  Each side's breakdown
is its own busiest stage's (``Result.breakdown_s``), which sums to its iteration time, so the
deltas sum to ``b.iteration_time_s - a.iteration_time_s``.  Whatever the categories do not
explain beyond float rounding (relative :data:`RESIDUAL_TOLERANCE`) is reported as its own
category, :data:`RESIDUAL`, never folded into another one; the shipped scenarios have none.

Beside it: the metric cards of both sides with their differences (iteration time, tokens/s, MFU,
TFLOP/s per GPU, bubble, memory) and per-GPU memory by kind side by side.

Both sides are read as ``run --json`` objects (:meth:`Result.to_json_dict`), so the CLI (which has
Results) and the app (which caches the JSON) compare the same way.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..vocabulary import CATEGORIES

RESIDUAL = "residual"
# A gap between the categories' sum and the iteration time larger than this share of the longer
# iteration is a residual, not float rounding (breakdowns sum to their time within ~1e-15).
RESIDUAL_TOLERANCE = 1e-9
# The metric cards, in the app's order: (JSON key, card label).  Memory is the fullest stage's total.
METRICS: tuple[tuple[str, str], ...] = (
    ("iteration_time_s", "Iteration time"),
    ("tokens_per_s", "Tokens/s"),
    ("mfu", "MFU"),
    ("tflops_per_gpu", "TFLOP/s per GPU"),
    ("bubble_fraction", "Bubble"),
    ("memory_GB_total", "Memory per GPU"),
)
MEMORY_KINDS = ("params", "grads", "optimizer", "activations", "reserved", "total")


@dataclass(frozen=True)
class Delta:
    """One figure on both sides: ``a``, ``b`` and what B changes."""

    key: str
    label: str
    a: float
    b: float

    @property
    def delta(self) -> float:
        return self.b - self.a

    @property
    def relative(self) -> float | None:
        """``(b - a) / a``; None when ``a`` is 0 (no meaningful ratio)."""
        return self.delta / self.a if self.a else None

    def to_json_dict(self) -> dict[str, float]:
        return {"a": self.a, "b": self.b, "delta": self.delta}


@dataclass(frozen=True)
class Comparison:
    """A against B: both run JSON objects, the iteration-time difference by category, the cards'
    and memory's differences.  Treat the mappings as read-only."""

    a: Mapping[str, Any]
    b: Mapping[str, Any]
    delta_s: Mapping[str, float]
    metrics: tuple[Delta, ...]
    memory_GB: tuple[Delta, ...]

    @property
    def difference_s(self) -> float:
        """``b.iteration_time_s - a.iteration_time_s`` (what ``delta_s`` sums to)."""
        return self.b["iteration_time_s"] - self.a["iteration_time_s"]

    def to_json_dict(self) -> dict[str, Any]:
        """The ``diff --json`` object: ``a`` and ``b`` exactly as ``run --json`` prints them,
        ``delta_s``, and (added keys) ``metrics`` and ``memory_GB``, each ``{a, b, delta}``."""
        return {"a": dict(self.a), "b": dict(self.b), "delta_s": dict(self.delta_s),
                "metrics": {d.key: d.to_json_dict() for d in self.metrics},
                "memory_GB": {d.key: d.to_json_dict() for d in self.memory_GB}}


def run_json(result: Any) -> Mapping[str, Any]:
    """A Result's ``run --json`` object, or the object itself when it already is one."""
    return result if isinstance(result, Mapping) else result.to_json_dict()


def delta_by_category(a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, float]:
    """Seconds B spends more (negative: less) than A in each breakdown category, in the order of
    :data:`~explorer.vocabulary.CATEGORIES`; a :data:`RESIDUAL` entry is added when the categories
    leave more than float rounding of the iteration-time difference unexplained."""
    bd_a, bd_b = a["breakdown_s"], b["breakdown_s"]
    keys = list(CATEGORIES) + [k for k in {**bd_a, **bd_b} if k not in CATEGORIES]
    out = {k: float(bd_b.get(k, 0.0)) - float(bd_a.get(k, 0.0)) for k in keys}
    difference = b["iteration_time_s"] - a["iteration_time_s"]
    residual = difference - math.fsum(out.values())
    scale = max(abs(a["iteration_time_s"]), abs(b["iteration_time_s"]), 1e-300)
    if abs(residual) > RESIDUAL_TOLERANCE * scale:
        out[RESIDUAL] = residual
    return out


@dataclass(frozen=True)
class Step:
    """One bar of the waterfall: A's time (``absolute``), a category's delta (``relative``) or
    B's time (``total``)."""

    label: str
    measure: str
    value_s: float


def waterfall_steps(cmp: Comparison) -> tuple[Step, ...]:
    """A's iteration time, then each category whose delta is more than float rounding, then B's
    time; the relative steps sum to ``cmp.difference_s`` (the categories left out are below
    :data:`RESIDUAL_TOLERANCE` of the iteration each)."""
    ta, tb = cmp.a["iteration_time_s"], cmp.b["iteration_time_s"]
    scale = max(abs(ta), abs(tb), 1e-300)
    steps = [Step("A", "absolute", ta)]
    steps += [Step(k, "relative", v) for k, v in cmp.delta_s.items() if abs(v) > RESIDUAL_TOLERANCE * scale]
    steps.append(Step("B", "total", tb))
    return tuple(steps)


def _metric(j: Mapping[str, Any], key: str) -> float:
    return float(j["memory_GB"]["total"]) if key == "memory_GB_total" else float(j[key])


def step_seconds(figures: Mapping[str, Any]) -> float:
    """The time per step of run --json figures (or a sweep, search or advise row's): the amortised
    step of replicas that synchronise every few steps (training.sync), else the iteration."""
    return figures.get("time_per_step_s", figures["iteration_time_s"])


def per_step(figures: Mapping[str, Any]) -> bool:
    """Whether run --json figures (or a sweep row's) have a time per step apart from the iteration:
    replicas that synchronise every few steps (training.sync), compared on that amortised step."""
    return step_seconds(figures) != figures["iteration_time_s"]


def compare(a: Any, b: Any) -> Comparison:
    """Compare two simulated iterations (each a :class:`~explorer.simulate.Result` or its
    ``run --json`` object): B minus A, category by category and card by card."""
    ja, jb = run_json(a), run_json(b)
    shown = METRICS
    if per_step(ja) or per_step(jb):
        # Replicas synchronising apart: the step card is the amortised step, as the page's own card
        # (a hunt found diff read "Iteration time +0.0%" beside "Tokens/s -66.5%").
        shown = (("time_per_step_s", "Time per step"), *METRICS[1:])
    # The throughput card counts what the family counts (images/s for a CNN), as the page's card.
    units = {j.get("throughput_unit", "tokens") for j in (ja, jb)}
    rate = f"{units.pop().capitalize()}/s" if len(units) == 1 else "Throughput/s"
    shown = tuple((key, rate if key == "tokens_per_s" else label) for key, label in shown)
    metrics = tuple(Delta(key, label, _metric(ja, key), _metric(jb, key)) for key, label in shown)
    memory = tuple(Delta(k, k, float(ja["memory_GB"].get(k, 0.0)), float(jb["memory_GB"].get(k, 0.0)))
                   for k in MEMORY_KINDS)
    return Comparison(ja, jb, delta_by_category(ja, jb), metrics, memory)
