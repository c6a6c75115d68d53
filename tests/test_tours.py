"""Guided tours (explorer/teaching/tours.py, scenarios/tours/): every step's link applies as written, a tour
link round-trips through the share link, and each narration's claims hold (one assertion per
claim, quoting it)."""
from __future__ import annotations

from urllib.parse import parse_qsl

import pytest

from explorer.scenario import apply_overrides, from_dict
from explorer.share import check_tour, parse_query, preset_raw, to_query
from explorer.simulate import simulate
from explorer.teaching.tours import expand_link, tours

REQUIRED = {"pipeline-bubbles", "zero-fsdp", "moe-node-limited", "two-datacenters"}


def test_the_four_tours_of_the_issue_ship():
    assert REQUIRED <= set(tours())
    assert {t.title for t in tours().values()} >= {
        "Pipeline bubbles from GPipe to DualPipe", "ZeRO and FSDP: memory against communication",
        "Why MoE needs node-limited routing", "Training across two datacenters"}


@pytest.mark.parametrize("name", sorted(tours()))
def test_every_step_link_applies_as_written(name):
    assert check_tour(tours()[name]) == []


def test_a_tour_link_opens_at_its_step_and_round_trips():
    view = parse_query({"scenario": "teaching-8gpu", "tour": "pipeline-bubbles", "step": "3"})
    assert view.tour == "pipeline-bubbles" and view.step == 3 and not view.warnings
    sc = from_dict(preset_raw("teaching-8gpu"))
    q = to_query(view, sc, sc)
    assert q["tour"] == "pipeline-bubbles" and q["step"] == "3"
    bad = parse_query({"tour": "nope", "step": "99"})
    assert bad.tour is None and any("tour" in w for w in bad.warnings)
    out = parse_query({"tour": "pipeline-bubbles", "step": "99"})
    assert out.step == 1 and any("steps 1 to" in w for w in out.warnings)


def _run(tour: str, step: int):
    v = parse_query(tours()[tour].steps[step - 1].params)
    return simulate(from_dict(apply_overrides(preset_raw(v.scenario), v.overrides)))


def test_pipeline_bubbles_claims():
    gpipe, one, inter, zb, dual = (_run("pipeline-bubbles", i) for i in (1, 3, 4, 5, 6))
    # "(p-1)/(m+p-1)": 3/11 with p = 4, m = 8; 1F1B "the same bubble"; interleaved "((p-1)/v)/(m+(p-1)/v)".
    assert gpipe.bubble_fraction == pytest.approx(3 / 11, rel=1e-6)
    assert one.bubble_fraction == pytest.approx(gpipe.bubble_fraction, rel=1e-9)
    assert inter.bubble_fraction == pytest.approx(1.5 / 9.5, rel=1e-6)
    # 1F1B holds fewer micro-batches than GPipe; ZB-H1 "about half its bubble (27% -> 12%)", as the
    # Bubble card rounds them.
    assert one.memory.activations < gpipe.memory.activations
    assert 0.4 < zb.bubble_fraction / one.bubble_fraction < 0.55
    assert (f"{one.bubble_fraction:.0%}", f"{zb.bubble_fraction:.0%}") == ("27%", "12%")
    # DualPipe "keeps two copies of the weights": every chunk on two ranks (its split, balancing rank
    # pairs, need not be 1F1B's, so the weights are compared over the whole pipeline).
    def held(r):
        return sum(m.params for m in r.memory_by_class)
    assert held(dual) == pytest.approx(2 * held(one), rel=0.01)


def test_zero_fsdp_claims():
    plain, z1, z2, z3, _, slow = (_run("zero-fsdp", i) for i in range(1, 7))
    assert plain.memory_over_capacity and f"{plain.memory.total / 1e9:.0f}" == "186"    # "about 186 GB"
    assert f"{plain.scenario.hardware.gpu.capacity_bytes / 1e9:.1f}" == "85.9"        # "(85.9 GB)"
    assert z1.memory.optimizer < plain.memory.optimizer / 30
    assert abs(z1.iteration_time_s / plain.iteration_time_s - 1) < 0.02          # "barely moves"
    assert z2.memory.grads < z1.memory.grads / 30
    assert z3.memory.params < z2.memory.params
    assert slow.breakdown_s["dp"] > 10 * z3.breakdown_s["dp"]                   # 25 Gb/s: exposed


def test_moe_claims():
    base, plain, _, one_f, skew = (_run("moe-node-limited", i) for i in range(1, 6))
    assert plain.breakdown_s["ep"] > 3 * base.breakdown_s["ep"]                 # "several-fold"
    assert one_f.breakdown_s["ep"] > 3 * base.breakdown_s["ep"]
    assert skew.iteration_time_s > 1.1 * base.iteration_time_s
    # "that rank keeps 1.5x the routed tokens' activations ...: the layer split moves layers to fit"
    assert skew.stage_layers != base.stage_layers and not skew.memory_over_capacity


def test_two_datacenters_claims():
    dp, _, hier, pp, _, _, diloco = (_run("two-datacenters", i) for i in range(1, 8))
    bytes_of = [sum(w["bytes_per_iteration"] for w in r.wan_links) for r in (dp, hier)]
    assert bytes_of[1] == pytest.approx(bytes_of[0] / 2, rel=0.05)             # "halves"
    assert pp.comm_bytes_by_tier["dp"]["scale-across"] == 0                    # "DP stays inside"
    assert diloco.sync_window is not None and diloco.time_per_step_s < dp.iteration_time_s


def test_step_params_parse_like_the_address_bar():
    for t in tours().values():
        for s in t.steps:
            assert s.params == dict(parse_qsl(s.link))


STEPS = [(name, i) for name, t in sorted(tours().items()) for i in range(1, len(t.steps) + 1)]


@pytest.mark.parametrize(("name", "i"), STEPS)
def test_a_bare_tour_link_reads_as_its_steps_own_link(name, i):
    """``?tour=NAME&step=N`` alone (the README's form, steps counted from 1) is the step's link:
    the same scenario, fields and view, the tour and step kept."""
    step = tours()[name].steps[i - 1]
    opened = parse_query(expand_link({"tour": name, "step": str(i), "present": "1"}))
    own = parse_query(step.params)
    assert (opened.scenario, opened.overrides, opened.view) == (own.scenario, own.overrides, own.view)
    assert (opened.tour, opened.step, opened.present) == (name, i, True) and not opened.warnings


def test_a_tour_link_that_names_a_scenario_keeps_it():
    """The address bar during a tour names the scenario and what the user changed: it wins."""
    params = {"scenario": "teaching-8gpu", "parallelism.pp": "2", "tour": "pipeline-bubbles", "step": "1"}
    assert expand_link(params) == params
    # ... and what a bare link says besides the tour overrides the step's link.
    assert expand_link({"tour": "pipeline-bubbles", "step": "2", "view": "timeline"})["view"] == "timeline"


@pytest.mark.parametrize("step", ["99", "0", "abc", "", "1e3", "²", "①", "٣"])  # (digits int() refuses)
def test_a_bare_link_to_a_step_that_does_not_exist_opens_step_one_with_a_warning(step):
    view = parse_query(expand_link({"tour": "pipeline-bubbles", "step": step}))
    first = parse_query(tours()["pipeline-bubbles"].steps[0].params)
    assert (view.scenario, view.overrides, view.step) == (first.scenario, first.overrides, 1)
    assert view.warnings == ["ignored step: tour pipeline-bubbles has steps 1 to 7; showing step 1"]


def test_a_bare_link_to_an_unknown_tour_is_left_to_warn():
    assert expand_link({"tour": "../etc", "step": "1"}) == {"tour": "../etc", "step": "1"}
    view = parse_query({"tour": "../etc", "step": "1"})
    assert view.tour is None and view.scenario == "teaching-8gpu" and len(view.warnings) == 1
