"""The pipeline bubble: the schedule's closed form (its registry entry) for this p, m, v and F, B,
W, the simulated Bubble card next to it, and — on demand — the difference decomposed aspect by
aspect of the ideal pipeline."""
from __future__ import annotations

from typing import TYPE_CHECKING

from ..network.groups import Network
from ..scenario import Scenario
from ..schedules.base import BubbleInputs
from ..taskgraph.builder import IDEAL_ASPECTS, IterationBuilder
from ..workloads.registry import nouns
from .steady_state import schedule_iteration

if TYPE_CHECKING:
    from ..simulate import Result


def stage_passes(b: IterationBuilder) -> tuple[float, float, float]:
    """F, B, W of one micro-batch on one stage of the ideal pipeline (the average chunk, no
    embedding/logits, no communication): forward, input-gradient backward (recompute included)
    and weight-gradient seconds."""
    ideal = IterationBuilder(b.sc, Network(b.sc, free=True), IDEAL_ASPECTS) if b.ideal != IDEAL_ASPECTS else b
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


# Beyond this many engine tasks the card-versus-formula decomposition (four more simulations of
# the same graph) is skipped and the sentence gives the ingredients without their shares.
WATERFALL_MAX_TASKS = 200_000


def _mean_bubble(sc: Scenario, ideal: frozenset[str]) -> float:
    """The Bubble card of ``sc`` simulated with the given ideal-pipeline aspects (its steady state
    folded where it folds: over arrays, explorer/fold/arrays, or over tasks, explorer/fold/steady.py)."""
    from ..fold.arrays.fold import simulate_arrays  # deferred: the folds build on the analysis modules
    from ..fold.steady import simulate_folded

    arrays = simulate_arrays(sc, ideal)
    if arrays is not None:
        ms = arrays.measures
        return sum(b["bubble"] for b in ms.breakdowns) / len(ms.breakdowns) / ms.T
    folded = simulate_folded(sc, ideal)
    if folded is not None:
        ms = folded.measures
        return sum(b["bubble"] for b in ms.breakdowns) / len(ms.breakdowns) / ms.T
    r = schedule_iteration(sc, ideal)
    return sum(r.breakdown(s)["bubble"] for s in range(r.builder.p)) / r.builder.p / r.T


def bubble_summary(sc: Scenario, card: float, busiest: float, formula_text: str, p: int) -> str:
    """The Bubble card next to the schedule's formula, in one sentence (no extra simulation)."""
    if p == 1:
        return ""
    out = (f"Bubble card {card:.1%} (idle share averaged over the {p} stages; busiest stage {busiest:.1%}); "
           f"the schedule's formula: {formula_text}.")
    if sc.parallelism.ideal_pipeline:
        out += " Ideal pipeline: equal stages, no embedding/logits, no optimizer, free communication."
    return out


def explain_bubble(r: Result) -> str:
    """How the Bubble card (mean idle share over stages) relates to the schedule's formula, with
    every difference quantified.

    Starting from the ideal pipeline (whose card is the formula exactly) the real scenario is
    restored one aspect at a time — the layer split, the embedding/logits work, the optimizer
    step, communication — and each step's change of the card is quoted, so the differences add
    up exactly to card - formula.  This costs three more simulations of the same graph, so it is
    computed on demand (the CLI's summary, the app's explanation), never inside :func:`simulate`."""
    sc = r.scenario
    p, v = sc.parallelism.pp, sc.parallelism.vpp
    out = r.bubble_explanation
    if p == 1 or sc.parallelism.ideal_pipeline:
        return out
    split = list(r.stage_layers)
    last = p * v - 1
    said = nouns(sc.model)                  # what the workload's edges are (embedding and logits)
    where = (f"the {said.first_edge} on stage 0 and the {said.last_edge} on stage {last % p}" if v == 1 else
             f"the {said.first_edge} on stage 0 (chunk 0) and the {said.last_edge} on stage {last % p} "
             "(its last chunk)")
    labels = [f"the layer split {split}", where, "the optimizer step", "exposed communication"]
    if len(r.tasks) > WATERFALL_MAX_TASKS:
        return out + (" It differs through " + ", ".join(labels) + " (not decomposed: "
                      f"{len(r.tasks):,} tasks).")
    steps = [IDEAL_ASPECTS - {"balance"}, frozenset({"optimizer", "comm"}), frozenset({"comm"})]
    values = [r.bubble_formula] + [_mean_bubble(sc, st) for st in steps] + [r.bubble_fraction]
    deltas = [values[i + 1] - values[i] for i in range(len(labels))]
    shown = [f"{lab} {d * 100:+.1f} points" for lab, d in zip(labels, deltas, strict=True)]
    return out + " From formula to card: " + ", ".join(shown) + "."
