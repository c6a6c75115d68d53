"""``search --json``'s overrides reproduce each row with ``run --set`` on the scenario searched (a hunt
found pipedream-vgg16's rows at other times — the file's stage_layers stayed — and with --gpus the
nodes left out, so the cluster no longer fitted)."""
from __future__ import annotations

import pytest

from explorer.design import open_base, search
from explorer.scenario import load
from explorer.simulate import simulate

from conftest import ROOT


@pytest.mark.parametrize("name,gpus", [("pipedream-vgg16", None), ("dlrm-dcnv2", 16)])
def test_every_rows_overrides_rerun_its_figures(name, gpus):
    res = search(open_base(name), gpus=gpus, top=3)
    assert res.top
    for c in res.top:
        ov = c.to_json()["overrides"]
        r = simulate(load(ROOT / "scenarios" / f"{name}.yaml", ov))
        assert r.iteration_time_s == pytest.approx(c.iteration_time_s, rel=1e-9), ov
        if gpus:
            sc = load(ROOT / "scenarios" / f"{name}.yaml", ov)
            assert sc.cluster.gpus == gpus
