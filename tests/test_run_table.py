"""The run plan's table in run's summary speaks its workload's units and shows short steps (a hunt
found "images/s 124,460" above a table headed "tokens/s", and a 3.6 ms DLRM step as "0.00s")."""
from __future__ import annotations

import pytest

from explorer.run.report import run_lines
from explorer.scenario import load
from explorer.simulate import simulate

from conftest import ROOT


@pytest.mark.parametrize("name,unit,step", [("resnet50-cloud-dp", "images", "32.9ms"),
                                            ("dlrm-dcnv2", "samples", "3.6ms"),
                                            ("fsdp-llama3-8b", "tokens", None)])
def test_the_run_table_counts_the_workloads_units(name, unit, step):
    res = simulate(load(ROOT / "scenarios" / f"{name}.yaml", {"training.total_tokens": 1e9}))
    header, row = run_lines(res)[2:4]
    assert header.split()[2:6] == [unit, "steps", "step", f"{unit}/s"]
    if step is not None:
        assert row.split()[4] == step
        assert f"{res.iteration_time_s * 1e3:.1f}ms" == step
    else:
        assert row.split()[4] == f"{res.iteration_time_s:.2f}s"
