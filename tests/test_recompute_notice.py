"""``training.recompute: none`` with recompute modules named other than the default recomputes them
(selective: config/recompute.py, as NeMo's recipes give the modules alone).  A hunt found
deepseek-v3 with recompute none giving exactly its selective figures, unsaid; the run now says so
in a ``recompute`` note, and only then."""
from __future__ import annotations

from streamlit.testing.v1 import AppTest

from explorer.scenario import load
from explorer.simulate import simulate

from conftest import ROOT

# recompute selective, modules [layernorm, mla_up_proj, moe_act]
DEEPSEEK = ROOT / "scenarios" / "deepseek-v3.yaml"


def test_named_modules_under_none_recompute_and_the_run_says_so():
    none = simulate(load(DEEPSEEK, {"training.recompute": "none"}))
    selective = simulate(load(DEEPSEEK))
    assert none.iteration_time_s == selective.iteration_time_s and none.breakdown_s["recompute"] > 0
    notes = [w for w, k in zip(none.warnings, none.warning_kinds, strict=True) if k == "recompute"]
    assert notes == ["recompute: training.recompute none with recompute_modules [layernorm, mla_up_proj, "
                     "moe_act] recomputes those modules (selective, as NeMo's recipes name them); "
                     "recompute_modules [core_attn] with none recomputes nothing"]
    assert "recompute" not in selective.warning_kinds


def test_none_with_the_default_modules_recomputes_nothing_and_says_nothing():
    r = simulate(load(DEEPSEEK, {"training.recompute": "none", "training.recompute_modules": ["core_attn"]}))
    assert r.breakdown_s["recompute"] == 0 and "recompute" not in r.warning_kinds


def test_the_app_shows_it_as_a_note():
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.query_params["scenario"] = "deepseek-v3"
    at.query_params["training.recompute"] = "none"
    at.run()
    assert not at.exception
    assert any("recomputes those modules" in str(i.value) for i in at.info)
    assert not any("recomputes those modules" in str(w.value) for w in at.warning)
