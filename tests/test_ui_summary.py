"""The UI's typed summary (explorer/ui/summary.py): the record the views read by attribute equals
the run's JSON summary it is built from, nested records included."""
from __future__ import annotations

import pytest

from explorer.scenario import load
from explorer.simulate import simulate
from explorer.ui.summary import LinkCall, Summary, WanLink
from explorer.variants.lowcomm import SyncWindow
from explorer.variants.lowcomm.decentral import Exchange

from conftest import ROOT


def _summary(name: str) -> tuple[dict, Summary]:
    j = simulate(load(ROOT / "scenarios" / f"{name}.yaml")).to_json_dict()
    return j, Summary.from_json(j)


def test_the_record_carries_the_json_figures():
    j, s = _summary("megatron-gpt3-175b")
    assert (s.iteration_time_s, s.mfu, s.tokens_per_s) == (j["iteration_time_s"], j["mfu"], j["tokens_per_s"])
    assert s.memory_GB == j["memory_GB"]["total"] and s.layout.pp == j["parallelism"]["pp"] == 8
    assert s.layout.schedule == j["parallelism"]["schedule"] and s.warnings == tuple(j["warnings"])
    tp = s.links["tp"]
    assert isinstance(tp, LinkCall) and (tp.op, tp.group, tp.bytes) == (
        j["links"]["tp"]["op"], j["links"]["tp"]["group"], j["links"]["tp"]["bytes"])
    assert s.sync is None and s.exchange is None and s.wan_links == ()


def test_windows_exchanges_and_wan_links_are_records():
    j, s = _summary("diloco-cross-region")
    assert isinstance(s.sync, SyncWindow) and s.sync.inner_steps == j["sync"]["inner_steps"]
    assert s.time_per_step_s == pytest.approx(s.sync.time_per_step_s)
    j, s = _summary("two-datacenters")
    assert s.wan_links and all(isinstance(w, WanLink) for w in s.wan_links)
    assert [w._asdict() for w in s.wan_links] == [{f: w[f] for f in WanLink._fields} for w in j["wan_links"]]
    j, s = _summary("gossip-exponential")
    assert isinstance(s.exchange, Exchange) and s.exchange.kind == j["dp_exchange"]["kind"]
    assert s.exchange.samples_per_s == j["dp_exchange"]["samples_per_s"]


def test_a_missing_field_fails_where_the_record_is_built():
    j, _ = _summary("teaching-8gpu")
    del j["bottleneck"]
    with pytest.raises(KeyError, match="bottleneck"):
        Summary.from_json(j)
