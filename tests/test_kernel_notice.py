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


# --- heads wider than the fused kernels take -----------------------------------------------------
# teaching-8gpu is hidden 2,048: 4 heads are 512 wide, 8 heads 256.  FlashAttention-2 takes "all head
# dimensions up to 256" (Dao-AILab/flash-attention README), FlashAttention-3 and cuDNN's fused
# attention at most 256 too; a hunt found a 512-wide head priced as FlashAttention at its 256-wide rate.


def _run(*sets: str):
    return simulate(load_scenario("teaching-8gpu", list(sets)))


@pytest.mark.parametrize("kernel", ["auto", "flash3", "cudnn"])
def test_a_head_wider_than_256_runs_unfused_as_flash_attention_false(kernel):
    wide = _run("model.heads=4", f"training.attention_kernel={kernel}")
    unfused = _run("model.heads=4", "training.flash_attention=false")
    assert wide.iteration_time_s == unfused.iteration_time_s
    assert wide.memory.total == unfused.memory.total            # the s x s scores kept
    assert wide.memory.total > _run("model.heads=8").memory.total
    notes = dict(zip(wide.warning_kinds, wide.warnings, strict=True))
    assert "a head dimension of 512 is wider than the 256" in notes["kernel"]
    # 119.4 ms (14.0 GB) against the 106.4 ms (11.9 GB) it was priced at as FlashAttention
    assert wide.iteration_time_s == pytest.approx(0.1194, abs=5e-5)
    assert wide.memory.total / 1e9 == pytest.approx(14.0, abs=0.05)


def test_a_256_wide_head_keeps_the_fused_kernel_and_no_note():
    r = _run("model.heads=8")
    assert "kernel" not in r.warning_kinds
    assert r.iteration_time_s < _run("model.heads=8", "training.flash_attention=false").iteration_time_s
    assert r.iteration_time_s == pytest.approx(0.1064, abs=5e-5)


def test_the_estimator_prices_a_wide_head_as_the_simulation_does():
    from explorer.estimate import estimate_many
    sc = load_scenario("teaching-8gpu", ["model.heads=4"])
    est = estimate_many([sc])
    r = simulate(sc)
    assert est.iteration_time_s[0] == pytest.approx(r.iteration_time_s, rel=1e-9)
    assert est.memory_GB_total[0] == pytest.approx(r.memory.as_GB()["total"], rel=1e-9)


def test_the_app_says_a_wide_head_runs_unfused():
    from app_support import run_app
    at = run_app(scenario="teaching-8gpu", **{"model.heads": "4"})
    assert not at.exception
    assert [i for i in at.info if "a head dimension of 512 is wider than the 256" in i.value]
