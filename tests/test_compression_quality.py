"""The convergence cost of gradient compression as its papers measured it
(explorer/network/compression_quality.py): every kind cited, parity where the paper measured it and
no figure outside the measured setting, carried by run --json, the CLI and the app."""
from __future__ import annotations

import json

import pytest

from explorer.cli import main
from explorer.config.compression import COMPRESSION_KINDS, Compression
from explorer.network.compression_quality import convergence_cost

from app_support import run_app


@pytest.mark.parametrize("kind", [k for k in COMPRESSION_KINDS if k != "none"])
def test_every_kind_cites_a_measurement(kind):
    cc = convergence_cost(Compression(kind=kind))
    assert cc is not None and cc.extra_steps == 0.0
    assert any(year in cc.source for year in ("2018", "2019", "2021", "2024"))
    assert "an estimate from" in cc.sentence() and "not simulated" in cc.sentence()


def test_no_compression_no_figure_and_topk_below_dgcs_share_has_none():
    assert convergence_cost(Compression()) is None
    assert convergence_cost(Compression(kind="topk", ratio=0.001)).extra_steps == 0.0
    below = convergence_cost(Compression(kind="topk", ratio=0.0001))
    assert below.extra_steps is None and "no published convergence figure" in below.sentence()


def test_run_json_and_cli_carry_it(capsys):
    args = ["run", "scenarios/cloud-25g-dp.yaml", "--set", "communication.compression.kind=1bit"]
    assert main([*args, "--json"]) == 0
    j = json.loads(capsys.readouterr().out)
    cc = j["compression_convergence"]
    assert cc["kind"] == "1bit" and "Tang et al." in cc["source"]
    assert main(args) == 0
    assert "  compression: 1bit: +0% steps" in capsys.readouterr().out
    assert main(["run", "scenarios/cloud-25g-dp.yaml", "--set", "communication.compression.kind=none",
                 "--json"]) == 0
    assert "compression_convergence" not in json.loads(capsys.readouterr().out)


def test_the_app_cites_it_beside_the_compare_link():
    at = run_app(scenario="cloud-25g-dp", **{"communication.compression.kind": "powersgd"})
    assert not at.exception
    assert any(c.value.startswith("Convergence (cited, not simulated): powersgd") for c in at.caption)
