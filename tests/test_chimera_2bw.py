"""Chimera (Li & Hoefler SC21) and PipeDream-2BW (Narayanan et al. ICML 2021): their orders drawn
at unit time against the papers' figures, their closed forms (bubble, weights, activations), their
rules, and their results in the engine: folded or not equal to the full simulation, the estimator
equal to the engine, the search exploring Chimera."""
from __future__ import annotations

from types import SimpleNamespace

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from test_fold import check_fold

from explorer.config import sections
from explorer.design.space import synchronous_schedules
from explorer.estimate import estimate_many
from explorer.scenario import ScenarioError, from_dict, load, shipped_scenarios
from explorer.schedules import chimera, pipedream_2bw, registry
from explorer.schedules.base import BubbleInputs
from explorer.simulate import simulate
from explorer.taskgraph.make import iteration_builder
from explorer.taskgraph.techniques.optimizer import PARAM_BYTES, grad_buffer_bytes
from explorer.teaching.schedule_story import narrate
from explorer.teaching.unit_time import as_rows, makespan, textbook_micro_batches, unit_grid

from app_support import run_app

SHIPPED = shipped_scenarios()


def _table_rows(p: int, m: int) -> list[str]:
    """Chimera's schedule table (one slot per pass, forward and backward alike) as the paper draws
    it: micro-batches 0..m-1, the first half down (direction 0), the second up; a digit for a
    forward, the letter of the same index (A = 0) for its backward, '.' idle."""
    table = chimera._table(p, m)
    rows = []
    for r in range(p):
        row = ""
        for slot in table:
            op = slot[r]
            if op is None:
                row += "."
                continue
            n = op.mb + op.direction * (m // 2)
            row += "0123456789"[n] if op.kind == "F" else "ABCDEFGHIJ"[n]
        rows.append(row)
    return rows


def test_chimera_basic_unit_is_the_papers_figure_3():
    """SC21 Fig. 3, top right ("equal workload between forward and backward passes"), D = N = 4,
    read off the figure cell by cell: micro-batches 0, 1 flow down (stage s on P_s), 2, 3 up (stage
    s on P_{3-s}); 2N + D - 2 = 10 slots, D - 2 = 2 of them idle on every worker (Table 2's
    (D-2)/(2N+D-2) = 20%).  The forward block's micro-batches enter two slots apart, so the two
    directions take slots of opposite parity on every worker (Sec. 3.1: no conflict for even D)."""
    assert _table_rows(4, 4) == [
        "0.12C3DA.B",
        ".0213CADB.",
        ".2031ACBD.",
        "2.30A1BC.D",
    ]


def _lanes(cells, p: int) -> list[str]:
    rows = [["."] * makespan(cells) for _ in range(p)]
    for c in cells:
        for t in range(c.start, c.start + c.units):
            rows[c.rank][t] = str(c.lane)
    return ["".join(r) for r in rows]


def test_chimera_with_a_backward_of_two_forwards_is_figure_3s_lower_schedule():
    """SC21 Fig. 3, bottom ("backward is 2x workload of forward"), in the textbook notation
    (micro-batches numbered 1, 2 within each direction, a backward two units; lane 0 down, 1 up).
    The middle workers P1, P2 are the figure cell by cell.  The edge workers run the figure's order
    and end at its 16 units, but as soon as their inputs allow: P0's second down forward needs no
    input and starts in unit 1 (the figure keeps the table's slot 2), and its up backward of
    micro-batch 2 follows that forward at once (unit 7, the figure's 8).  16 units, 4 idle on every
    worker: Sec. 2's (D-2)/(3N/2+D-2) = 25% for one basic unit."""
    figure = ["1.21112.2211..22", ".1122.11112222..", ".1122.11112222..", "1.21112.2211..22"]
    figure_lanes = ["0.01111.1100..00", ".0101.11001100..", ".1010.00110011..", "1.10000.0011..11"]
    cells = unit_grid("chimera", 4, 4)
    rows, lanes = as_rows(cells, 4), _lanes(cells, 4)
    assert rows[1:3] == figure[1:3] and lanes[1:3] == figure_lanes[1:3]
    for r in (0, 3):
        assert rows[r].replace(".", "") == figure[r].replace(".", "")
        assert lanes[r].replace(".", "") == figure_lanes[r].replace(".", "")
    assert rows[0] == "12.111222.11..22" and lanes[0] == "00.111111.00..00"
    assert makespan(cells) == len(figure[0]) == 16
    assert 1 - 4 * 3 / makespan(cells) == pytest.approx((4 - 2) / (3 * 4 / 2 + 4 - 2), rel=1e-12)


def test_chimera_direct_concatenation_fills_the_next_units_forwards_into_the_cool_down():
    """SC21 Sec. 3.5, direct concatenation of two basic units (D = 4, N = 8): "the bubbles at the
    end of the first basic unit can be occupied by the forward passes at the beginning of the
    second" — micro-batches 2, 3 down and 6, 7 up — and with equal forward and backward workloads
    the units join "seamlessly": 2N + D - 2 = 18 slots, still D - 2 idle per worker."""
    assert _table_rows(4, 8) == [
        "0.14E5FA2B36G7HC.D",
        ".0415EAFB2637GCHD.",
        ".4051AEBF6273CGDH.",
        "4.50A1BE6F72C3DG.H",
    ]


@pytest.mark.parametrize("p,m", [(2, 2), (2, 8), (4, 4), (4, 8), (4, 16), (6, 6), (6, 18), (8, 8), (8, 32)])
def test_chimera_bubble_is_table_2_at_equal_pass_costs(p, m):
    """SC21 Table 2: bubble ratio (D-2)/(2N+D-2), D-2 idle slots when a forward and a backward take
    equal time (Sec. 2) — the critical path of the order at F = B = 1 is 2N + D - 2 exactly; the
    registry's bubble (the order's exact idle share) gives the same at F = B."""
    T = chimera.ideal_makespan(p, m, 1.0, 1.0)
    assert T == 2 * m + p - 2
    if m == p:           # Sec. 2: one basic unit with a backward of two forwards, (D-2)/(3N/2+D-2)
        T2 = chimera.ideal_makespan(p, m, 1.0, 2.0)
        assert 1 - 3 * m / T2 == pytest.approx((p - 2) / (3 * m / 2 + p - 2), rel=1e-12, abs=1e-15)
    b = registry.SCHEDULES["chimera"].bubble
    val, text = b(BubbleInputs(p, 1, m, "micro-batches", lambda: (1.0, 0.6, 0.4)))
    assert val == pytest.approx((p - 2) / (2 * m + p - 2), rel=1e-12, abs=1e-15)
    assert "(D-2)/(2N+D-2)" in text


def test_chimera_step_through_names_both_directions():
    cells = unit_grid("chimera", 4, 4)
    assert narrate(cells, 4, 1, 2) == ("warm-up: forward 2 of 4 before its first backward — micro-batch 1 "
                                       "from rank 3")
    assert narrate(cells, 4, 1, 5) == ("idle (bubble): its backward of micro-batch 1 from rank 3 waits for "
                                       "rank 0's gradient of micro-batch 1 (there at unit 6)")
    assert narrate(cells, 4, 1, 14) == "done"
    # The textbook draws whole basic units: at most 12 micro-batches, at least 2p, a multiple of p.
    for p, m, drawn in [(4, 24, 12), (6, 18, 12), (8, 24, 16), (8, 8, 8), (2, 40, 12)]:
        assert textbook_micro_batches("chimera", p, m) == drawn
        assert makespan(unit_grid("chimera", p, drawn)) > 0


@pytest.mark.parametrize("p", [2, 4, 6, 8])
def test_chimera_activations_are_table_1s_range(p):
    """SC21 Table 2: activations between (D/2+1)·Ma and D·Ma — the edge workers hold D/2+1
    micro-batches at their peak, the middle ones D, for one basic unit and for several."""
    for m in (p, 4 * p):
        held = [registry.get("chimera").in_flight(r, p, m, 1) for r in range(p)]
        assert min(held) == held[0] == held[-1] == p // 2 + 1
        assert max(held) == held[p // 2] == p
        assert held == held[::-1]


def test_2bw_is_1f1b_without_flush_and_two_weight_versions():
    """PipeDream-2BW (ICML 2021 Fig. 2: 4 workers, "backward passes are assumed to take twice as
    long as forward passes") runs 1F1B across the iteration boundary — micro-batches 5-8 of the
    next iteration follow 1-4 without a flush — so two iterations of 4 are 1F1B's grid of 8; every
    stage keeps 2 weight versions (Sec. 3.1), where PipeDream keeps p - s."""
    s = registry.get("2bw")
    assert as_rows(unit_grid("2bw", 4, 8), 4) == as_rows(unit_grid("1f1b", 4, 8), 4)
    assert as_rows(unit_grid("2bw", 4, 8), 4)[0].startswith("1234......115226337448")
    assert s.window is registry.Window.ASYNC and s.iterations_simulated == 2
    assert [s.weight_versions(r, 8) for r in range(8)] == [2] * 8
    assert [registry.get("pipedream-async").weight_versions(r, 8) for r in range(8)] == list(range(8, 0, -1))
    assert [s.in_flight(r, 4, 8, 1) for r in range(4)] == [4, 3, 2, 1]          # 1F1B's p - s
    assert pipedream_2bw.bubble(None)[0] == 0.0                                   # type: ignore[arg-type]
    # Sec. 3.1's reading of Fig. 2 (m = d = 4): "input 7 on worker 3 at t = 21" (1-based units) —
    # a forward that started under the old weights; W^(4) (one batch applied) is first used by
    # input 9, and inputs 1-8 use version 0.
    cells = unit_grid("2bw", 4, 12)
    f7 = next(c for c in cells if c.rank == 2 and c.kind == "F" and c.mb == 6)
    assert f7.start + 1 == 21
    assert [pipedream_2bw.version_of(k, 4) for k in range(1, 13)] == [0] * 8 + [1] * 4


def _sc(schedule, pp=4, global_batch=64, micro_batch=1, dp=2):
    par = SimpleNamespace(schedule=schedule, pp=pp, vpp=1, dp=dp, token_slices=1)
    return SimpleNamespace(parallelism=par, training=SimpleNamespace(global_batch=global_batch,
                                                                     micro_batch=micro_batch))


def test_rules_name_the_field_and_what_would_be_valid():
    assert registry.validate(_sc("chimera")) is None                      # 32 micro-batches on 4 stages
    field, msg = registry.validate(_sc("chimera", pp=3))
    assert field == "parallelism.pp" and "even number of stages" in msg
    field, msg = registry.validate(_sc("chimera", pp=4, global_batch=12))  # 6 micro-batches: not 4k
    assert field == "training.global_batch" and "multiple of 8" in msg
    assert registry.validate(_sc("chimera", pp=4, global_batch=8)) is None
    assert registry.validate(_sc("2bw", pp=3, global_batch=6)) is None
    with pytest.raises(ValueError, match="whole basic units"):
        chimera.chimera_order(0, 4, 6)
    # The loader refuses it with the one-line message (CLI exit code 2, the app's message).
    raw = {"model": {"layers": 8, "hidden": 512, "heads": 8, "vocab": 1000, "seq_len": 256},
           "training": {"global_batch": 6, "micro_batch": 1}, "hardware": {"gpu": "h100-sxm"},
           "cluster": {"nodes": 1, "gpus_per_node": 4}, "parallelism": {"pp": 4, "schedule": "chimera"}}
    with pytest.raises(ScenarioError, match="training.global_batch"):
        from_dict(raw)


def _teaching(**ov):
    return simulate(load(SHIPPED["teaching-8gpu"], {k.replace("__", "."): v for k, v in ov.items()}))


def test_the_schedule_control_offers_both_and_they_move_the_result_as_the_papers_say():
    """The sidebar's selectbox lists the registry's schedules.  On teaching-8gpu (p = 4, m = 8):
    Chimera's two pipelines leave a smaller bubble than 1F1B's and a shorter iteration, at two
    weight replicas per GPU (parameters, gradients and optimizer state of two stages); PipeDream-2BW
    runs PipeDream's timeline exactly, with 2 weight versions instead of p - s, so less memory
    than PipeDream on stage 0 and more parameters than 1F1B."""
    choices = sections.Parallelism.__dataclass_fields__["schedule"].metadata["choices"]
    assert {"chimera", "2bw"} <= set(choices)
    base = _teaching(parallelism__schedule="1f1b")
    chi = _teaching(parallelism__schedule="chimera")
    assert chi.bubble_fraction < base.bubble_fraction and chi.iteration_time_s < base.iteration_time_s
    assert chi.memory.params > 1.5 * base.memory.params
    two, pd = _teaching(parallelism__schedule="2bw"), _teaching(parallelism__schedule="pipedream-async")
    assert two.iteration_time_s == pd.iteration_time_s
    assert two.memory.params == pytest.approx(2 * base.memory.params, rel=1e-12)
    assert two.memory.total < pd.memory.total
    assert two.memory.activations == pytest.approx(base.memory.activations, rel=1e-12)


def test_weights_chimera_holds_two_stages_and_2bw_two_versions_per_gpu():
    """Chimera (SC21 Table 2, 2·Mθ): rank r holds the parameters of stage r (down pipeline) and of
    stage p-1-r (up pipeline) — two replicas, with their gradients and optimizer state; 2BW (ICML
    2021 Sec. 3.1) keeps two versions of its one stage's weights (gradients and optimizer state
    once), PipeDream p - s versions."""
    sc = load(SHIPPED["teaching-8gpu"], {"parallelism.schedule": "chimera"})
    b = iteration_builder(sc)
    r = simulate(sc)
    p = sc.parallelism.pp
    for s in range(p):
        held = b.chunks[s].params + b.chunks[p - 1 - s].params
        assert r.memory_by_class[s].params == pytest.approx(PARAM_BYTES * held, rel=1e-12)
        # Megatron's bf16 gradients sit in its fp32 main_grad buffer: 4 bytes per parameter.
        assert grad_buffer_bytes(sc) == 4
        assert r.memory_by_class[s].grads == pytest.approx(4 * held, rel=1e-12)
    base, two, pd = (_teaching(parallelism__schedule=x) for x in ("1f1b", "2bw", "pipedream-async"))
    for s in range(p):
        one = base.memory_by_class[s]
        assert two.memory_by_class[s].params == pytest.approx(2 * one.params, rel=1e-12)
        assert two.memory_by_class[s].grads == pytest.approx(one.grads, rel=1e-12)
        assert two.memory_by_class[s].optimizer == pytest.approx(one.optimizer, rel=1e-12)
        assert pd.memory_by_class[s].params == pytest.approx((p - s) * one.params, rel=1e-12)


def test_chimera_ideal_pipeline_bubble_is_its_formula():
    """parallelism.ideal_pipeline (equal stages, free communication, no optimizer): the Bubble card
    equals the registry's bubble, the Chimera order's critical path at the real F and B."""
    r = _teaching(parallelism__schedule="chimera", parallelism__ideal_pipeline=True)
    k = {}
    for t in r.tasks:
        if t.cls == 0 and t.stream == "compute":
            k.setdefault(t.kind, t.duration)
    F, B = k["forward"], k["backward"]
    p, m = r.scenario.parallelism.pp, r.scenario.micro_batches
    expected = 1 - m * (F + B) / chimera.ideal_makespan(p, m, F, B)
    assert r.bubble_fraction == pytest.approx(expected, rel=1e-9)


def test_the_search_explores_chimera_and_the_estimator_equals_the_engine():
    """The design search's schedules are the registry's synchronous ones: Chimera competes,
    PipeDream-2BW (stale weights, like PipeDream) only when asked by name.  The estimator the
    search scores layouts with equals the simulation for both."""
    assert "chimera" in synchronous_schedules() and "2bw" not in synchronous_schedules()
    scs = [load(SHIPPED["teaching-8gpu"], {"parallelism.schedule": s, "training.global_batch": gb})
           for s in ("chimera", "2bw") for gb in (16, 64)]
    est = estimate_many(scs)
    for i, sc in enumerate(scs):
        r = simulate(sc)
        assert est.iteration_time_s[i] == pytest.approx(r.iteration_time_s, rel=1e-9)
        assert est.memory_GB_total[i] == pytest.approx(r.memory.as_GB()["total"], rel=1e-9)


def _raw(schedule: str, pp: int, units: int, zero: int, tp: int) -> dict:
    dp = 16 // (tp * pp)
    raw = {"model": {"layers": 8, "hidden": 1024, "heads": 16, "vocab": 1000, "seq_len": 512},
           # 2·units whole Chimera basic units of pp micro-batches per pipeline
           "training": {"global_batch": dp * pp * 2 * units, "micro_batch": 1},
           "hardware": {"gpu": "h100-sxm"}, "cluster": {"nodes": 2, "gpus_per_node": 8},
           "parallelism": {"tp": tp, "pp": pp, "zero": zero, "schedule": schedule}}
    return raw


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(schedule=st.sampled_from(["chimera", "2bw"]), pp=st.sampled_from([2, 4]),
       units=st.sampled_from([1, 3, 16, 64]), zero=st.integers(0, 3), tp=st.sampled_from([1, 2]))
@example("2bw", 2, 64, 3, 2)          # folds: 256 micro-batches, FSDP
@example("2bw", 4, 64, 0, 1)          # folds: 512 micro-batches
@example("chimera", 4, 64, 1, 2)      # two directions: never folded (fold/plan.py), run in full
def test_folded_or_not_the_result_is_the_full_simulation(schedule, pp, units, zero, tp):
    """Random small scenarios of both: simulate() (which folds 2BW's steady state when it can, and
    runs Chimera's two directions in full) equals simulate(fold=False) to 1e-9 in every figure, and
    the folded timeline is the full one task for task (tests/test_fold.check_fold)."""
    sc = from_dict(_raw(schedule, pp, units, zero, tp))
    folded = check_fold(sc)
    assert not (folded and schedule == "chimera")


def test_2bw_folds_its_steady_state_and_chimera_runs_in_full():
    assert check_fold(from_dict(_raw("2bw", 2, 64, 3, 2)))
    assert not check_fold(from_dict(_raw("chimera", 2, 64, 3, 2)))


def test_the_apps_textbook_step_through_draws_chimera():
    """The Timeline's step-through in textbook mode on zero-bubble-8gpu switched to Chimera (p = 8,
    m = 16: two basic units drawn): one sentence per rank naming the direction of each pass — at
    unit 4 the middle ranks run their second forward, down (from rank 0) and up (from rank 7) at
    once, while rank 0 waits for the up pipeline's first micro-batch; the caption cites the paper
    and says nothing of fused F&B cells, which Chimera has none of."""
    at = run_app(scenario="zero-bubble-8gpu", **{"parallelism.schedule": "chimera"})
    at.session_state["textbook"] = True
    at.run()
    at.radio(key="step_mode").set_value("textbook diagram (unit time)").run()
    at.slider(key="textbook_t").set_value(5).run()
    assert not at.exception
    story = next(m.value for m in at.markdown if m.value.startswith("In unit 4:"))
    assert story.count("- **rank") == 8
    assert ("- **rank 3** — warm-up: forward 2 of 8 before its first backward — micro-batch 1 from rank 7"
            in story)
    assert ("- **rank 4** — warm-up: forward 2 of 8 before its first backward — micro-batch 1 from rank 0"
            in story)
    assert ("- **rank 0** — idle (bubble): its forward of micro-batch 1 from rank 7 waits for rank 1's "
            "activations of micro-batch 1 (there at unit 7)") in story
    caption = next(c.value for c in at.caption if c.value.startswith("As the papers draw it"))
    assert "Li & Hoefler" in caption and "F&B" not in caption


def test_chimera_balances_its_chunks_as_one_direction_schedules_do():
    """Chimera's passes are not fused, so its layer split balances chunks one by one as 1F1B's does
    (registry ``pair_split`` is DualPipe's alone: that split times the DualPipe order, which needs
    at least 2p micro-batches and deadlocked on Chimera's one basic unit of p — a search of
    teaching-8gpu over chimera layouts raised "DualPipe order deadlocks")."""
    ov = {"training.global_batch": 8}                    # dp 2: m = 4 = p, one basic unit
    chi = simulate(load(SHIPPED["teaching-8gpu"], {**ov, "parallelism.schedule": "chimera"}))
    one = simulate(load(SHIPPED["teaching-8gpu"], {**ov, "parallelism.schedule": "1f1b"}))
    assert chi.stage_layers == one.stage_layers
    assert registry.get("dualpipe").pair_split and not registry.get("chimera").pair_split
    est = estimate_many([chi.scenario])
    assert est.iteration_time_s[0] == pytest.approx(chi.iteration_time_s, rel=1e-9)


def test_the_formula_says_when_directly_concatenated_units_idle_again():
    """Beyond one basic unit the card exceeds Table 2's few percent (24 % against 4.5 % at p 8,
    m 64): the text says why (forward doubling is not modelled); one unit needs no such remark."""
    from explorer.schedules.base import BubbleInputs
    from explorer.schedules.chimera import bubble
    many = bubble(BubbleInputs(8, 1, 64, "micro-batches", lambda: (1.0, 1.0, 1.0)))[1]
    one = bubble(BubbleInputs(8, 1, 8, "micro-batches", lambda: (1.0, 1.0, 1.0)))[1]
    assert "forward doubling" in many and "8 units concatenated directly" in many
    assert "forward doubling" not in one
