"""Memory headroom on clusters whose datacenters hold different GPUs (explorer/design/capacity.py):
the search's free memory is the tightest GPU's, not the busiest GPU's against ``hardware.gpu``."""
from __future__ import annotations

import pytest

from explorer.design.base import open_base
from explorer.design.capacity import least_capacity_GB, tightest_gpu
from explorer.scenario import load
from explorer.simulate import simulate

from conftest import ROOT

MIXED = ROOT / "scenarios" / "mixed-generations.yaml"
TIGHT = {"hardware.gpu": "b200", "parallelism.tp": 4, "parallelism.pp": 8, "parallelism.zero": 3,
         "training.micro_batch": 2, "parallelism.span": "dp", "training.recompute": "none"}


def test_a_layout_all_but_full_on_its_h100s_is_not_read_as_roomy_on_its_b200s():
    """mixed-generations (H100 and B200 datacenters) with hardware.gpu b200: the busiest GPU needs 85.9 GB
    of a B200's 193.3 (107 GB "free", found by a verdict hunt), while the H100 datacenter's GPUs have
    0.02 GB left.  The tightest GPU is the H100 one; the ranking's bound is the H100's capacity."""
    sc = load(MIXED, TIGHT)
    r = simulate(sc)
    assert not r.memory_over_capacity
    need, cap = tightest_gpu(sc)
    assert cap == pytest.approx(80 * 2**30 / 1e9) and 0 <= cap - need < 0.05
    assert least_capacity_GB(sc) == pytest.approx(80 * 2**30 / 1e9)
    assert sc.hardware.gpu.capacity_bytes / 1e9 - r.memory.total / 1e9 > 100      # the old reading


def test_a_priced_layout_reports_its_free_memory_on_its_tightest_gpu():
    """The search's exact pricing of a layout (search._simulate, here the scenario's own layout) on a
    mixed cluster: its verdict is its tightest GPU's, 0.02 GB free, where it used to read 107.4 GB."""
    from explorer.design.search import _FullJob, _simulate
    from explorer.design.space import Layout, LayoutBuilder, search_raw
    base = open_base("mixed-generations", TIGHT)
    raw = search_raw(base.raw)
    cand = _simulate(_FullJob(base, raw, Layout.of(LayoutBuilder(raw).parsed), None, baseline=True))
    assert cand is not None and cand.memory.fits
    need, cap = tightest_gpu(load(MIXED, TIGHT))
    assert (cand.memory.need_GB, cand.memory.capacity_GB) == (need, cap)
    assert 0 <= cand.memory.free_GB < 0.05 and not cand.memory.roomy()
