"""Direction tests for training.sync: each field moves the amortised time per step the way the
window's physics says (explorer/lowcomm/window.py), on Llama 3 70B across two datacenters with a
slow WAN so the synchronisation matters.  tests/test_controls.py collects ``COVERED``; the closed
forms are in tests/test_lowcomm.py."""
from __future__ import annotations

from explorer.scenario import load
from explorer.simulate import simulate

from conftest import ROOT

TWO_DC = ROOT / "scenarios" / "two-datacenters.yaml"
SLOW_WAN = {"cluster.scale_across.bandwidth_Gbps": 10}


def _step(**sync) -> float:
    over = {**SLOW_WAN, **{f"training.sync.{k}": v for k, v in sync.items()}}
    return simulate(load(TWO_DC, over)).time_per_step_s


def test_synchronising_less_often_is_faster_over_a_slow_wan():
    """kind: every-step > local-sgd (H = 100) and diloco adds its outer update (more HBM work)."""
    every = _step()
    local = _step(kind="local-sgd")
    diloco = _step(kind="diloco")
    assert local < every and local < diloco < every
    assert _step(kind="independent") < local


def test_more_inner_steps_between_syncs_is_faster():
    """inner_steps: 10 > 100 > 1000 (the sync amortised over more steps)."""
    assert _step(kind="diloco", inner_steps=10) > _step(kind="diloco", inner_steps=100) \
        > _step(kind="diloco", inner_steps=1000)


def test_more_fragments_expose_less():
    """fragments (streaming, tau = 1, a fragment slower than a step): 1 > 4 > 16."""
    assert _step(kind="streaming-diloco", fragments=1) > _step(kind="streaming-diloco", fragments=4) \
        > _step(kind="streaming-diloco", fragments=16)


def test_more_overlap_exposes_less():
    """overlap_steps: 0 (blocking) > 1 > 4 with 4 fragments over a 10 Gb/s WAN."""
    assert _step(kind="streaming-diloco", fragments=4, overlap_steps=0) \
        > _step(kind="streaming-diloco", fragments=4, overlap_steps=1) \
        > _step(kind="streaming-diloco", fragments=4, overlap_steps=4)


def test_fewer_outer_bits_are_faster():
    """outer_dtype: fp32 > bf16 > fp8 > int4 (the WAN payload per parameter)."""
    times = [_step(kind="diloco", outer_dtype=d) for d in ("fp32", "bf16", "fp8", "int4")]
    assert times == sorted(times, reverse=True) and len(set(times)) == 4


COVERED = {
    "training.sync.kind": "test_synchronising_less_often_is_faster_over_a_slow_wan",
    "training.sync.inner_steps": "test_more_inner_steps_between_syncs_is_faster",
    "training.sync.fragments": "test_more_fragments_expose_less",
    "training.sync.overlap_steps": "test_more_overlap_exposes_less",
    "training.sync.outer_dtype": "test_fewer_outer_bits_are_faster",
}
