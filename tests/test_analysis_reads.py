"""Analysis reads what the task graph priced; it never asks the network again (issue 9)."""
from __future__ import annotations

import pytest

from explorer.analysis.report import link_summary
from explorer.analysis.steady_state import schedule_iteration
from explorer.scenario import load
from explorer.simulate import simulate

from conftest import ROOT

CASES = [("fsdp-llama3-8b", {}), ("teaching-8gpu", {"parallelism.zero": 3}), ("deepseek-v3", {}),
         ("long-context-cp", {}), ("two-datacenters", {})]


@pytest.mark.parametrize("name,overrides", CASES)
def test_link_summary_prices_nothing(name, overrides):
    """With the network's pricing disabled after the graph is built, the link summary is the
    same: every call it reports (TP/CP/EP per layer, ZeRO-3's layer gather, pp transfers, dp
    buckets) comes from the builder's priced records."""
    res = simulate(load(ROOT / "scenarios" / f"{name}.yaml", overrides))
    run = schedule_iteration(res.scenario)

    def refuse(*_args, **_kwargs):
        raise AssertionError("the analysis priced a call again")
    run.net.cost = refuse
    assert link_summary(run.builder, run.tasks) == res.links


def test_zero3_link_is_the_gather_of_the_largest_layer():
    run = schedule_iteration(load(ROOT / "scenarios" / "fsdp-llama3-8b.yaml"))
    links = link_summary(run.builder, run.tasks)
    assert links["dp"]["op"] == "all-gather"
    assert links["dp"]["bytes"] == max(c.fsdp_layer_bytes for c in run.builder.chunks)
