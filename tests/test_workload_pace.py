"""A workload's own communication stream can set the pace: with ``communication.dp_priority``
(P3's order) a DLRM's embedding exchange (``emb``) or a GNN's feature fetch (``gnn``) outlasts the
compute window, and its excess is charged to its own category (analysis/steady_state.pace_category;
both runs had failed with KeyError 'emb' / 'gnn')."""
from __future__ import annotations

import pytest

from explorer.scenario import load
from explorer.simulate import simulate

CASES = [("dlrm-dcnv2", {"cluster.nodes": 4, "parallelism.dp": 32, "communication.dp_priority": True,
                         "training.global_batch": 221184}, "emb"),
         ("gnn-sage-papers100m", {"communication.dp_priority": True, "model.gnn.local_share": 0,
                                  "model.gnn.overlap": True}, "gnn")]


@pytest.mark.parametrize(("name", "overrides", "dim"), CASES)
def test_a_family_stream_that_sets_the_pace_is_charged_to_its_dimension(name, overrides, dim):
    r = simulate(load(name, overrides))
    assert sum(r.breakdown_s.values()) == pytest.approx(r.iteration_time_s, rel=1e-9)
    # The family's exchange is the largest category and the bottleneck sentence names it.
    assert max(r.breakdown_s, key=r.breakdown_s.get) in (dim, "compute")
    assert r.breakdown_s[dim] > 0.4 * r.iteration_time_s
    assert r.bottleneck.startswith(dim.upper())
