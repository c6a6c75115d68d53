"""PipeDream's asynchronous 1F1B (Narayanan et al., "PipeDream: Generalized Pipeline Parallelism
for DNN Training", SOSP 2019, Sec. 3.2-3.3): the 1F1B order of every stage, but the pipeline never
flushes — the next iteration's forwards follow this one's without waiting for the optimizer.  Weight
stashing keeps one weight version per micro-batch in flight (p - s on stage s).

The simulator runs two iterations back to back (2m units of the 1F1B order) and measures one
steady-state period of m backwards in the second (analysis of the steady-state window).
"""
from __future__ import annotations

from .base import BubbleInputs, Problem, ScenarioLike, micro_batch_units
from .pipeline import Op, one_f_one_b

ITERATIONS_SIMULATED = 2     # the second iteration's warm-up is the first one's tail


def order(stage: int, p: int, m: int, v: int = 1) -> list[Op]:
    """The 1F1B order of ``stage`` over ``m`` units (the caller passes both iterations' units)."""
    return one_f_one_b(stage, p, m)


def weight_versions(stage: int, p: int) -> int:
    """Weight stashing (SOSP 2019 Sec. 3.3): one version per micro-batch in flight, p - stage."""
    return p - stage


def bubble(b: BubbleInputs) -> tuple[float, str]:
    """PipeDream (Narayanan et al. SOSP 2019): 1F1B without flushes has no bubble in steady state."""
    return 0.0, "0 in steady state: asynchronous 1F1B never flushes (PipeDream, SOSP 2019)"


def rule(sc: ScenarioLike) -> Problem | None:
    """An iteration of at least pp micro-batches: the steady state the iteration is measured in
    (analysis/steady_state.py) spans m backwards after stage 0's warm-up of pp, and with fewer the
    run is all warm-up and drain (a hunt found 2bw at m 7 on 8 stages reading half its compute)."""
    p, t = sc.parallelism, sc.training
    dp, _, units = micro_batch_units(sc)
    if p.pp > 1 and units < p.pp:
        step = t.micro_batch * dp
        return "training.global_batch", (f"{t.global_batch} gives {units} micro-batches per pipeline; "
                                         f"{p.schedule} runs pp = {p.pp} in flight on its first stage "
                                         f"and needs at least that many per iteration: at least "
                                         f"{p.pp * step}")
    return None
