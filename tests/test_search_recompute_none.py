"""A searched layout labelled ``recompute none`` recomputes nothing.  A file that names recompute
modules (deepseek-v3: layernorm, mla_up_proj, moe_act) makes ``recompute: none`` selective
(config/recompute.py, as NeMo's recipes read the modules); a hunt found search's "recompute none"
rows priced as selective (370 ms of recompute) and identical to the selective ones.  A layout's
none now resets the modules (design/space.Layout.overrides, LayoutBuilder), and the scenario's own
layout reads as the policy in force."""
from __future__ import annotations

import pytest

from explorer.design import Space, open_base, search
from explorer.design.space import Layout
from explorer.scenario import apply_overrides, from_dict, load
from explorer.share import preset_raw
from explorer.simulate import simulate

from conftest import ROOT

SPACE = Space(schedules=("dualpipe",), zero=(1,), recompute=("none", "selective"), sequence_parallel=(False,),
              vpp=(1,), max_micro_batch=1)


@pytest.mark.slow
def test_none_rows_recompute_nothing_and_differ_from_selective():
    res = search(open_base("deepseek-v3"), top=40, space=SPACE, include_baseline=False)
    none = [c for c in res.top if c.layout.recompute == "none"]
    sel = {c.layout.overrides()["parallelism.tp"]: c for c in res.top if c.layout.recompute == "selective"}
    assert none and sel
    for c in none[:2]:
        r = simulate(from_dict(apply_overrides(preset_raw("deepseek-v3"), c.layout.overrides())))
        assert r.breakdown_s["recompute"] == 0.0
        assert r.iteration_time_s == pytest.approx(c.iteration_time_s, rel=1e-9)
        assert "recompute_modules" in c.link


def test_the_own_layout_of_a_file_naming_modules_under_none_is_selective():
    sc = load(ROOT / "scenarios" / "deepseek-v3.yaml", {"training.recompute": "none"})
    assert Layout.of(sc).recompute == "selective"
    assert "training.recompute_modules" not in Layout.of(sc).overrides()
    assert Layout.of(load(ROOT / "scenarios" / "teaching-8gpu.yaml")).overrides()[
        "training.recompute_modules"] == ["core_attn"]
