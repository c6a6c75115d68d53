"""FlashAttention-3 asked for where it does not run (analysis/report.kernel_notice): FA3 is Hopper's
wgmma/TMA kernel (Shah et al., arXiv 2407.08608), so on an A100 or a B200 flash-attn runs
FlashAttention-2 and the run is priced so (physics/attention.resolve_kernel).  A re-check found it
silent: on B200 FA2 prices attention at about 425 TF/s at 16K where cuDNN, the default, reaches
1,475 (physics/attention_blackwell.py).  The run now says so, as a note."""
from __future__ import annotations

import pytest

from explorer.cli import load_scenario
from explorer.simulate import simulate


def _kinds(*sets: str) -> dict[str, str]:
    r = simulate(load_scenario("teaching-8gpu", list(sets)))
    return dict(zip(r.warning_kinds, r.warnings, strict=True))


@pytest.mark.parametrize("gpu", ["b200", "a100-80gb"])
def test_flash3_off_hopper_is_said_and_priced_as_flash2(gpu):
    got = _kinds(f"hardware.gpu={gpu}", "training.attention_kernel=flash3")
    assert "kernel" in got and "flash3 runs on Hopper only" in got["kernel"]
    assert "FlashAttention-2" in got["kernel"]
    # ... and it is priced as flash2: the same iteration to the bit.
    t3 = simulate(load_scenario("teaching-8gpu", [f"hardware.gpu={gpu}",
                                                  "training.attention_kernel=flash3"])).iteration_time_s
    t2 = simulate(load_scenario("teaching-8gpu", [f"hardware.gpu={gpu}",
                                                  "training.attention_kernel=flash2"])).iteration_time_s
    assert t3 == t2


@pytest.mark.parametrize("sets", [["training.attention_kernel=flash3"],                     # H100: it runs
                                  ["hardware.gpu=b200", "training.attention_kernel=cudnn"],
                                  ["hardware.gpu=b200"]])
def test_no_note_where_the_kernel_runs(sets):
    assert "kernel" not in _kinds(*sets)


def test_the_app_shows_it_as_a_note_not_a_fault():
    from app_support import run_app
    at = run_app(scenario="teaching-8gpu", **{"hardware.gpu": "b200", "training.attention_kernel": "flash3"})
    assert not at.exception
    assert [i for i in at.info if "flash3 runs on Hopper only" in i.value]
    assert not [w for w in at.warning if "flash3" in w.value]
