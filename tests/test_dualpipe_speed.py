"""DualPipe's simulation at speed (issue 35: deepseek-v3 at most 50 ms in-process): the program
orders and their steps, DualPipe's pair split and the ideal pipeline's F, B, W are memoised on
what they read; every memo gives what the computation it replaces gives (==, not approx), and a
simulation with the memos cold equals one with them warm, to the last bit."""
from __future__ import annotations

from pathlib import Path

import pytest

from explorer.analysis import bubble
from explorer.scenario import load
from explorer.schedules.registry import get as get_schedule
from explorer.simulate import simulate
from explorer.taskgraph import order_memo, split
from explorer.taskgraph.dualpipe_split import pair_split
from explorer.taskgraph.layout import normalise
from explorer.taskgraph.make import iteration_builder
from explorer.taskgraph.split_cost import split_costs

ROOT = Path(__file__).resolve().parents[1]
# The iteration time of scenarios/deepseek-v3.yaml as tests/golden/deepseek-v3.json holds it (the
# unmemoised code gave the same before the two copies' gradient sync moved it from 15.824595134405882;
# 15.846440873259121 before the fp32 gradient buffer, bf16 Adam moments and the sustained clock).
DEEPSEEK_V3_T = 15.916060542122395


@pytest.mark.parametrize("name,p,units,v", [("dualpipe", 16, 120, 1), ("1f1b", 8, 32, 1),
                                             ("interleaved", 4, 16, 2), ("zb-h1", 4, 12, 1)])
def test_memoised_orders_and_steps_are_the_registry_s(name, p, units, v):
    sched = get_schedule(name)
    got = order_memo.program_orders(sched, p, units, v, lambda: None)
    want = sched.orders(p, units, v, lambda: None)
    assert [list(o) for o in got] == [list(o) for o in want]
    assert order_memo.program_orders(sched, p, units, v, lambda: None) is got      # shared
    for o in got:
        assert order_memo.steps(o, sched) == tuple(normalise(op, sched) for op in o)
        assert order_memo.steps(o, sched) is order_memo.steps(o, sched)


def test_the_pair_split_memo_gives_the_search_s_split():
    sc = load(ROOT / "scenarios" / "deepseek-v3.yaml")
    b = iteration_builder(sc)
    costs = split_costs(sc, b.net, b.cm, b.spec, b.tied)
    split._PAIR_SPLITS.clear()
    got = split.choose_split(None, costs, b.p, None, b.m)
    assert got == pair_split(costs, b.p, b.m) == tuple(b.layer_counts)
    assert split.choose_split(None, costs, b.p, None, b.m) is got
    assert len(split._PAIR_SPLITS) == 1


def test_deepseek_v3_equals_with_cold_and_warm_memos():
    sc = load(ROOT / "scenarios" / "deepseek-v3.yaml")
    for memo in (order_memo._ORDERS, order_memo._STEPS, split._PAIR_SPLITS, bubble._STAGE_PASSES):
        memo.clear()
    cold = simulate(sc)
    warm = simulate(sc)
    assert cold.iteration_time_s == warm.iteration_time_s == DEEPSEEK_V3_T
    assert cold.breakdown_s == warm.breakdown_s
    assert cold.bubble_formula == warm.bubble_formula
    assert cold.memory == warm.memory
