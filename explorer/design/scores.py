"""Scoring many scenarios at once: the fast estimator by default, the full engine on request.

This is the one place the design-space tools (sweep, search, sensitivity, scaling) turn scenarios
into figures, so switching the estimator in or out is one line (:func:`_estimator`).  Both engines
give the same :class:`Scores`: one NumPy array per figure, aligned with the scenarios, plus the
breakdown by category.  The full engine is :func:`explorer.simulate.simulate`, scenario by
scenario; a scenario it refuses (the unfolded work budget) comes back as a reason instead of a
score.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..estimate.prime import prime_networks  # a network sweep's calls priced together
from ..scenario import Scenario, ScenarioError
from ..variants.registry import needs_simulation
from ..vocabulary import CATEGORIES

ENGINES = ("estimate", "full")
# What a sweep row of a serving scenario keeps of run --json's ``inference`` (issue 37's contract
# keys, the decode step, and the requests/s within a latency target when one is set).
SERVING_FIGURES = ("ttft_s", "tpot_s", "output_tokens_per_s_per_gpu", "requests_per_s", "kv_cache_GB",
                   "max_batch", "batch", "decode_step_s", "requests_per_s_at_target", "target_batch")


@dataclass(frozen=True)
class Scores:
    """Figures of ``n`` scored scenarios, index-aligned (the fields of the estimator's Estimates).

    ``memory_GB_total`` is the busiest GPU's memory; ``fits`` whether every GPU's memory is within
    its capacity; ``breakdown_s`` maps each breakdown category (explorer/vocabulary.py) to seconds.
    """

    iteration_time_s: np.ndarray
    memory_GB_total: np.ndarray
    fits: np.ndarray
    mfu: np.ndarray
    tokens_per_s: np.ndarray
    breakdown_s: dict[str, np.ndarray] = field(default_factory=dict)
    # Serving scenarios (full engine): each row's run --json ``inference`` figures (SERVING_FIGURES).
    serving: tuple[dict[str, Any] | None, ...] = ()
    # Result.time_per_step_s (the iteration, or the amortised step of replicas that synchronise every
    # few steps): what rankings compare; None = the iteration.
    time_per_step_s: np.ndarray | None = None

    def step_s(self) -> np.ndarray:
        """Each row's time per step (what a ranking compares: module docstring of estimate/result.py)."""
        return self.iteration_time_s if self.time_per_step_s is None else self.time_per_step_s

    def __len__(self) -> int:
        return len(self.iteration_time_s)

    def row(self, i: int) -> dict[str, Any]:
        """Scenario ``i``'s figures as plain Python numbers (JSON-ready)."""
        return {"iteration_time_s": float(self.iteration_time_s[i]), "mfu": float(self.mfu[i]),
                "tokens_per_s": float(self.tokens_per_s[i]),
                "memory_GB_total": float(self.memory_GB_total[i]), "fits": bool(self.fits[i]),
                "breakdown_s": {k: float(v[i]) for k, v in self.breakdown_s.items()},
                "time_per_step_s": float(self.step_s()[i]),
                **({"inference": self.serving[i]} if self.serving and self.serving[i] is not None else {})}


def empty_scores() -> Scores:
    """Scores of no scenario (what an all-invalid chunk scores)."""
    z = np.zeros(0)
    return Scores(z, z, np.zeros(0, dtype=bool), z, z, {k: z for k in CATEGORIES})


def _estimator() -> Callable[..., Any] | None:
    """The vectorised estimator (explorer/estimate), or None while it is not installed."""
    try:
        from ..estimate import estimate_many
    except ImportError:
        return None
    return estimate_many


def engine_cost(sc: Scenario) -> str:
    """Which engine's cost (chunks.SECONDS_PER_CONFIG) the estimator's rows like ``sc`` take: the
    full engine's for the rows it leaves to the simulation (replicas that differ, faults, ...:
    variants/registry.needs_simulation)."""
    return "full" if needs_simulation(sc) else "estimate"


def score_overrides(raw: Mapping[str, Any], overrides: Sequence[Mapping[str, Any]]
                    ) -> tuple[Scores, list[str | None]] | None:
    """The estimator's own faster path for many dotted-key variants of one raw base, when it has
    one (``explorer.estimate.estimate_overrides``): (scores, per variant None or the one-line reason
    it is invalid).  None when the estimator offers no such path."""
    try:
        from ..estimate import estimate_overrides
    except ImportError:
        return None
    e, reasons = estimate_overrides(raw, list(overrides))
    return _from_estimates(e), [None if r is None else str(r) for r in reasons]


def estimator_available() -> bool:
    """Whether ``engine="estimate"`` uses the vectorised estimator (else it falls back to the
    full engine, the same figures more slowly)."""
    return _estimator() is not None


def score(scenarios: Sequence[Scenario], engine: str = "estimate", exact: bool = True,
          progress: Callable[[int, int], None] | None = None,
          overrides: Sequence[Mapping[str, Any]] | None = None) -> tuple[Scores, list[str | None]]:
    """Score ``scenarios`` with ``engine`` ("estimate" or "full"); ``exact=False`` lets the
    estimator extrapolate long pipelines (its fast mode, explorer/estimate/fast.py: for ranking);
    ``progress(done, total)`` is told after each simulation (after the one batch, for the estimator).
    ``overrides``: the dotted-key overrides each scenario was made from, when it was (a sweep's rows):
    the estimator then prices the calls of rows that differ only in network fields together
    (explorer/estimate/prime.py), with the same results.

    Returns the scores and, per scenario, None or the one-line reason the engine refused it (the
    refused rows hold NaN and ``fits`` False).  Deterministic: the same scenarios in the same
    order give the same numbers, whichever process runs this.
    """
    if engine not in ENGINES:
        raise ScenarioError("--engine", f"{engine!r} is not one of {', '.join(ENGINES)}")
    est = _estimator() if engine == "estimate" else None
    if est is None:
        return _score_full(scenarios, progress)
    if not scenarios:
        return empty_scores(), []
    reasons: list[str | None] = [None] * len(scenarios)
    if overrides is not None:
        prime_networks(scenarios, overrides)
    out = _from_estimates(est(list(scenarios), exact))
    if progress:
        progress(len(scenarios), len(scenarios))
    return out, reasons


def score_exact(scenarios: Sequence[Scenario], progress: Callable[[int, int], None] | None = None
                ) -> tuple[Scores, list[str | None]]:
    """The full engine's figures for ``scenarios`` (:func:`score` with ``engine="full"``), from the
    estimator wherever it prices a row: in its exact mode it equals the simulation to 1e-9 (tests:
    test_network_sweep.py over random networks, bench/estimator.py over random scenarios), and it hands
    the rows it does not price (a variant that wraps the iteration, contention between dimensions, a
    row too long for it) to the simulation itself, keeping the simulation's reason for a refusal.
    Scenarios of which any serves requests are all simulated (their ``inference`` figures come from
    the simulation; a tool's variants of one base are all serving or all training).  The sensitivity
    tornado and the scaling curves score this way: a variant costs a sweep row, not a simulation.  One
    difference from the full path: an offload stall stays in ``compute`` (the estimator has no
    ``offload`` category), so a row's breakdown sums to its iteration time."""
    est = _estimator()
    if est is None or any(sc.inference is not None for sc in scenarios):
        return _score_full(scenarios, progress)
    from ..estimate.many import estimate_profiles, profile  # deferred, as _estimator's import
    e, reasons = estimate_profiles([profile(sc) for sc in scenarios])
    if progress:
        progress(len(scenarios), len(scenarios))
    return _from_estimates(e), list(reasons)


def _from_estimates(e: Any) -> Scores:
    """The estimator's Estimates as Scores (the same fields, as arrays of fixed dtype)."""
    return Scores(np.asarray(e.iteration_time_s, dtype=float), np.asarray(e.memory_GB_total, dtype=float),
                  np.asarray(e.fits, dtype=bool), np.asarray(e.mfu, dtype=float),
                  np.asarray(e.tokens_per_s, dtype=float),
                  {k: np.asarray(v, dtype=float) for k, v in e.breakdown_s.items()},
                  time_per_step_s=np.asarray(e.time_per_step_s, dtype=float))


def reason_field(reason: str) -> str:
    """The field a one-line ScenarioError message names (its text before the first ": ")."""
    return reason.split(": ", 1)[0]


def _score_full(scenarios: Sequence[Scenario], progress: Callable[[int, int], None] | None = None
                ) -> tuple[Scores, list[str | None]]:
    """The full engine, one simulation per scenario (``progress`` told after each)."""
    from ..simulate import simulate  # deferred: the engine is only needed here

    n = len(scenarios)
    cols = {k: np.full(n, np.nan) for k in ("t", "mem", "mfu", "tps", "step")}
    fits = np.zeros(n, dtype=bool)
    parts = {k: np.full(n, np.nan) for k in CATEGORIES}
    reasons: list[str | None] = [None] * n
    serving: list[dict[str, Any] | None] = [None] * n
    for i, sc in enumerate(scenarios):
        if progress and i:
            progress(i, n)
        try:
            r = simulate(sc)
        except ScenarioError as exc:        # beyond the budget once unfolded: a reason, not a crash
            reasons[i] = str(exc)
            continue
        cols["t"][i], cols["mfu"][i], cols["tps"][i] = r.iteration_time_s, r.mfu, r.tokens_per_s
        cols["mem"][i] = r.memory.total / 1e9
        cols["step"][i] = r.time_per_step_s
        fits[i] = not r.memory_over_capacity
        for k in CATEGORIES:
            parts[k][i] = r.breakdown_s.get(k, 0.0)
        if r.inference is not None:
            serving[i] = {k: r.inference[k] for k in SERVING_FIGURES if k in r.inference}
    if progress:
        progress(n, n)
    return Scores(cols["t"], cols["mem"], fits, cols["mfu"], cols["tps"], parts,
                  tuple(serving) if any(v is not None for v in serving) else (), cols["step"]), reasons
