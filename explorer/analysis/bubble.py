"""The pipeline bubble: the schedule's closed form (its registry entry) for this p, m, v and F, B,
W, and the simulated Bubble card next to it (the difference decomposed aspect by aspect of the
ideal pipeline, on demand: explorer/teaching/bubble.py)."""
from __future__ import annotations

from ..config import Scenario
from ..network.groups import Network
from ..schedules.base import BubbleInputs
from ..taskgraph.builder import IDEAL_ASPECTS, IterationBuilder
from ..taskgraph.make import iteration_builder

# stage_passes by (scenario, split): bounded, emptied when full.
_STAGE_PASSES: dict[tuple, tuple[float, float, float]] = {}
_STAGE_PASSES_MAX = 256


def stage_passes(b: IterationBuilder) -> tuple[float, float, float]:
    """F, B, W of one micro-batch on one stage of the ideal pipeline (the average chunk, no
    embedding/logits, no communication): forward, input-gradient backward (recompute included)
    and weight-gradient seconds.  Memoised on the scenario and its split (their function alone:
    the ideal builder reads nothing else), which an app or a sweep re-simulates."""
    if b.ideal == IDEAL_ASPECTS:
        return _passes(b)
    key = (b.sc, tuple(b.layer_counts))
    got = _STAGE_PASSES.get(key)
    if got is None:
        if len(_STAGE_PASSES) >= _STAGE_PASSES_MAX:
            _STAGE_PASSES.clear()
        # The split does not depend on the ideal aspects (IterationBuilder._split prices it on
        # the scenario's own network): ``b``'s is reused rather than searched again.
        ideal = iteration_builder(b.sc, Network(b.sc, free=True), IDEAL_ASPECTS, split=key[1])
        got = _STAGE_PASSES[key] = _passes(ideal)
    return got


def _passes(ideal: IterationBuilder) -> tuple[float, float, float]:
    """F, B, W of the first chunk of an ideal pipeline's builder."""
    ch = ideal.chunks[0]
    F = sum(x for _, x in ch.fwd_parts)
    W = sum(x for _, x in ch.split(ch.bwd_parts, True))
    B = sum(x for _, x in ch.split(ch.bwd_parts, False))
    return F, B, W


def bubble_formula(sc: Scenario, b: IterationBuilder, m: int | None = None) -> tuple[float, str]:
    """The schedule's own closed-form bubble fraction for this p, m, v (and F, B, W where the
    formula needs them), and the formula as text.  Under ``parallelism.ideal_pipeline`` the Bubble
    card equals it exactly (tests/test_bubble.py).  ``m``: the pipeline units, when ``b`` was built
    for another count (the fold's reduced runs; F, B and W do not depend on it)."""
    par = sc.parallelism
    p, v = b.p, b.v
    m = b.m if m is None else m
    k = par.token_slices
    unit = "micro-batches" if k == 1 else f"units (micro-batches x {k} token slices)"
    if p == 1:
        return 0.0, "no pipeline (pp = 1): no bubble"
    return b.schedule.bubble(BubbleInputs(p, v, m, unit, lambda: stage_passes(b), b.timing))


def bubble_summary(sc: Scenario, card: float, busiest: float, formula_text: str, p: int,
                   per_gpu: bool = False) -> str:
    """The Bubble card next to the schedule's formula, in one sentence (no extra simulation).
    ``per_gpu``: the stages hold different GPU counts (PipeDream's stage replicas), so the card
    averages over the GPUs, each stage weighted by its GPUs."""
    if p == 1:
        return ""
    over = f"the {sc.gpus} GPUs of the {p} stages" if per_gpu else f"the {p} stages"
    out = (f"Bubble card {card:.1%} (idle share averaged over {over}; busiest stage {busiest:.1%}); "
           f"the schedule's formula: {formula_text}.")
    if sc.parallelism.ideal_pipeline:
        out += " Ideal pipeline: equal stages, no embedding/logits, no optimizer, free communication."
    return out
