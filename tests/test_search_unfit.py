"""A search's ranking does not time the layouts over the GPU's memory (estimate/fast.py
``unfit_times``, design/ranking.py): the layouts that fit keep their figures to the bit, the others
their memory and ``fits`` False, and the search finds the same layouts with the same numbers."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

import explorer.design.ranking as ranking
from explorer.design import open_base, search
from explorer.design.space import Space
from explorer.estimate.fast import estimate_many
from explorer.scenario import ScenarioError, apply_overrides, from_dict, load_raw, shipped_scenarios

# llama3-405b-16k over degrees and recompute: tp 1-2 or pp 1-2 cannot hold 405B on 80 GB, tp 8 x
# pp 16 with ZeRO 1 can (the shipped layout), so both kinds of row are here.
_GRID = {"parallelism.tp": [1, 8], "parallelism.pp": [1, 16], "parallelism.vpp": [1, 2],
         "training.recompute": ["none", "full"], "parallelism.zero": [1]}


def _rows() -> list:
    raw = load_raw(shipped_scenarios()["llama3-405b-16k"])
    out = []
    for combo in itertools.product(*_GRID.values()):
        ov = {**dict(zip(_GRID, combo, strict=True)), "parallelism.dp": None,
              "parallelism.stage_layers": None}
        ov["parallelism.schedule"] = "interleaved" if ov["parallelism.vpp"] > 1 else "1f1b"
        try:
            out.append(from_dict(apply_overrides(raw, ov)))
        except ScenarioError:
            pass
    return out


def test_fast_mode_without_unfit_times_keeps_every_fitting_row_to_the_bit():
    rows = _rows()
    full = estimate_many(rows, exact=False)
    lean = estimate_many(rows, exact=False, unfit_times=False)
    fit = np.asarray(full.fits, dtype=bool)
    assert 0 < fit.sum() < len(rows)                      # both kinds of row
    assert np.array_equal(np.asarray(lean.fits, dtype=bool), fit)
    assert np.array_equal(lean.memory_GB_total, full.memory_GB_total)
    assert np.array_equal(lean.iteration_time_s[fit], full.iteration_time_s[fit])
    for k, col in full.breakdown_s.items():
        assert np.array_equal(lean.breakdown_s[k][fit], col[fit])
    assert np.array_equal(lean.mfu[fit], full.mfu[fit])
    assert np.isnan(lean.iteration_time_s[~fit]).all() and np.isnan(lean.mfu[~fit]).all()


@pytest.mark.slow
def test_search_ranks_the_same_layouts_with_the_same_numbers(monkeypatch):
    space = Space(schedules=("1f1b", "zb-h1", "interleaved"), zero=(0, 1), recompute=("none", "full"))
    base = open_base("long-context-cp")          # 64 H100, 128K tokens: some layouts do not fit
    lean = search(base, top=5, space=space)
    real = ranking._ranking_scores
    # Every layout timed, as before: the ranking ignores the flag.
    monkeypatch.setattr(ranking, "_ranking_scores", lambda scs, _unfit: real(scs, True))
    timed = search(base, top=5, space=space)
    assert (lean.enumerated, lean.valid, lean.fit, lean.roomy, lean.reasons) == \
        (timed.enumerated, timed.valid, timed.fit, timed.roomy, timed.reasons)
    assert lean.fit < lean.valid                          # some layouts did not fit (not timed)
    assert [(c.layout, c.iteration_time_s, c.estimate_s) for c in lean.top] == \
        [(c.layout, c.iteration_time_s, c.estimate_s) for c in timed.top]
