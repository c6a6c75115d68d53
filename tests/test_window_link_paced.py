"""A synchronisation window's steps are no shorter than their busiest link needs (lowcomm/window.py
link_paced).  Found by an invariant hunt: Streaming DiLoCo on a 0.01 GB/s scale-up, whose inner
step already fills that link, counted the fragment syncs' scale-up traffic as hidden and read the
link 100.65 % busy."""
from __future__ import annotations

import json

import pytest

from explorer.cli import main

SLOW_LINK = ["cluster.scale_up.bandwidth_GBps=0.01", "training.sync.outer_dtype=fp32"]


def _run(capsys, name: str, *sets: str) -> dict:
    args = ["run", name, "--json"]
    for s in sets:
        args += ["--set", s]
    assert main(args) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("name", ["streaming-diloco-1gbps", "diloco-cross-region"])
def test_no_link_is_more_than_fully_busy(capsys, name):
    j = _run(capsys, name, *SLOW_LINK)
    assert max(j["utilisation"].values()) <= 1 + 1e-12


def test_a_filled_link_exposes_what_cannot_hide(capsys):
    shipped = _run(capsys, "streaming-diloco-1gbps")
    slow = _run(capsys, "streaming-diloco-1gbps", *SLOW_LINK)
    assert max(shipped["utilisation"].values()) < 1                    # the shipped run is not link-paced
    assert slow["utilisation"]["scale-up"] == pytest.approx(1.0, rel=1e-12)
    # The busy link sets the step: the step is its busy seconds (utilisation x step = step).
    assert slow["time_per_step_s"] > slow["sync"]["inner_step_s"]
    window = slow["sync"]
    assert window["window_s"] == pytest.approx(window["inner_steps"] * slow["time_per_step_s"], rel=1e-12)
