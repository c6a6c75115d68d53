"""How the Bubble card (the pipeline's mean idle share) relates to its schedule's closed form,
every difference quantified: the scenario re-simulated from the ideal pipeline back to itself, one
aspect at a time (three or four more simulations, so on demand: the CLI's summary, the app's explanation).
"""
from __future__ import annotations

from ..fold.run import run_iteration
from ..result.record import Result
from ..scenario import Scenario
from ..schedules.registry import get as get_schedule
from ..taskgraph.builder import IDEAL_ASPECTS
from ..taskgraph.layout import layout_for
from ..variants.registry import needs_simulation
from ..workloads.registry import nouns

# Beyond this many engine tasks the card-versus-formula decomposition (four more simulations of
# the same graph) is skipped and the sentence gives the ingredients without their shares.
WATERFALL_MAX_TASKS = 200_000


def _mean_bubble(sc: Scenario, ideal: frozenset[str]) -> float:
    """The Bubble card of ``sc`` simulated with the given ideal-pipeline aspects (its steady state
    folded where it folds: explorer/fold/run.py; the array fold only when the pricing covers it)."""
    ms = run_iteration(sc, ideal, arrays=not needs_simulation(sc), budget=False).measures
    return sum(b["bubble"] for b in ms.breakdowns) / len(ms.breakdowns) / ms.T


def explain_bubble(r: Result) -> str:
    """How the Bubble card (mean idle share over stages) relates to the schedule's formula, with
    every difference quantified.

    Starting from the ideal pipeline (whose card is the formula exactly, but for the round trips a
    formula across datacenters counts, which are said first) the real scenario is restored one
    aspect at a time — the layer split, the embedding/logits work, the optimizer step,
    communication — and each step's change of the card is quoted, so the differences add up exactly
    to card - formula.  This costs three more simulations of the same graph (four across
    datacenters), so it is computed on demand (the CLI's summary, the app's explanation), never
    inside :func:`simulate`."""
    sc = r.scenario
    p, v = sc.parallelism.pp, sc.parallelism.vpp
    out = r.bubble_explanation
    if p == 1 or sc.parallelism.ideal_pipeline:
        return out
    split = list(r.stage_layers)
    lay = layout_for(get_schedule(sc.parallelism.schedule), p, v)
    last = lay.length - 1                   # the last chunk, on the rank the layout puts it (a V: rank 0)
    said = nouns(sc.model)                  # what the workload's edges are (embedding and logits)
    where = (f"the {said.first_edge} on stage 0 and the {said.last_edge} on stage {lay.rank_of(last)}"
             if lay.length == p else
             f"the {said.first_edge} on stage 0 (chunk 0) and the {said.last_edge} on stage "
             f"{lay.rank_of(last)} (its last chunk)")
    labels = [f"the layer split {split}", where, "the optimizer step", "exposed communication"]
    if len(r.tasks) > WATERFALL_MAX_TASKS:
        return out + (" It differs through " + ", ".join(labels) + " (not decomposed: "
                      f"{len(r.tasks):,} tasks).")
    steps = [IDEAL_ASPECTS - {"balance"}, frozenset({"optimizer", "comm"}), frozenset({"comm"})]
    # Within one datacenter the ideal pipeline's card is the formula; across several a formula may
    # count WAN round trips (schedules/cross_dc.py), which the ideal card (one more run) lacks.
    ideal = _mean_bubble(sc, IDEAL_ASPECTS) if sc.cluster.datacenters > 1 else r.bubble_formula
    values = [ideal] + [_mean_bubble(sc, st) for st in steps] + [r.bubble_fraction]
    deltas = [values[i + 1] - values[i] for i in range(len(labels))]
    shown = [f"{lab} {d * 100:+.1f} points" for lab, d in zip(labels, deltas, strict=True)]
    # A formula with round trips across datacenters (schedules/cross_dc.py) counts a cost the ideal
    # pipeline, whose communication is free, does not have: its card is the plain formula's, and the
    # round trips return with exposed communication (a hunt found them charged to an even layer split).
    if abs(ideal - r.bubble_formula) > 5e-4:
        shown.insert(0, f"the round trips the formula counts, which the ideal pipeline (communication "
                        f"free) has not, {(ideal - r.bubble_formula) * 100:+.1f} points")
    return out + " From formula to card: " + ", ".join(shown) + "."
