"""A sweep over a scenario with a run plan (issue 38, "sweep the checkpoint interval or the batch
ramp"): each valid combination's whole run — days, GPU-hours, goodput, energy — beside its
iteration.

The run of a combination is its phases' iterations times their steps, with failures and
checkpoints (explorer/run).  Which iteration a phase runs does not depend on the reliability
section or on the run plan's lengths, so phases are simulated once per distinct iteration scenario
(the scenario without ``reliability``, ``training.phases`` and ``training.total_tokens``): a sweep
of the checkpoint interval, the MTBF or the restart time simulates each phase once in all.  The
full engine is used, as ``run`` does; beyond :data:`MAX_RUNS` valid combinations the whole-run
figures are left out (said in one line) rather than simulating thousands of runs.
"""
from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from ..config import ScenarioError, apply_overrides, from_dict
from ..config.loading import to_dict
from ..result.record import Result
from ..run.phases import has_run
from ..run.total import run_total
from .sweep import Point

MAX_RUNS = 2_000
RUN_FIGURES = ("days", "gpu_hours", "goodput", "energy_MWh")


def _iteration_key(sc: Any) -> str:
    """What decides a phase's iteration: the scenario less its reliability and run plan."""
    d = to_dict(sc)
    d.pop("reliability", None)
    if isinstance(d.get("training"), dict):
        d["training"] = {k: v for k, v in d["training"].items() if k not in ("phases", "total_tokens")}
    return json.dumps(d, sort_keys=True, default=str)


def with_runs(raw: Mapping[str, Any], points: Sequence[Point],
              simulate: Callable[[Any], Result]) -> tuple[tuple[Point, ...], str | None]:
    """``points`` with ``run_total`` ({days, gpu_hours, goodput, energy_MWh}) in each valid
    combination's figures, and a one-line note when that was not done (no run plan in the base,
    or too many combinations).  A combination whose run fails (failures outpacing progress) is
    made invalid with that reason."""
    try:
        planned = has_run(from_dict(dict(raw)))
    except ScenarioError:
        planned = False
    if not planned:
        return tuple(points), None
    valid = [p for p in points if p.valid]
    if len(valid) > MAX_RUNS:
        return tuple(points), (f"whole-run columns left out: {len(valid):,} valid combinations "
                               f"(at most {MAX_RUNS:,} are run)")
    memo: dict[str, Result] = {}

    def once(sc: Any) -> Result:
        key = _iteration_key(sc)
        if key not in memo:
            memo[key] = simulate(sc)
        return memo[key]

    out = []
    for p in points:
        if not p.valid:
            out.append(p)
            continue
        try:
            total = run_total(from_dict(apply_overrides(dict(raw), dict(p.overrides))), once)
        except ScenarioError as exc:
            out.append(replace(p, valid=False, reason=str(exc), reason_field=exc.field, figures={}))
            continue
        assert total is not None
        figures = total.to_json_dict()
        summary = {k: figures.get(k) for k in RUN_FIGURES}
        # A plan fits when every phase does: a phase that raises seq_len can outgrow the GPU while
        # the base layout fits (a hunt found "shortest run that fits" on a 227.8 GB phase).
        fits = bool(p.figures.get("fits", True)) and bool(figures["fits"])
        out.append(replace(p, figures={**p.figures, "fits": fits, "run_total": summary}))
    return tuple(out), None
