"""Memory over time (explorer/result/memory_timeline.py): the curve replays the simulated passes
with the memory report's rule, so its maximum (plus the recompute transient) is the report's
activation peak for every schedule; GPipe piles up all m micro-batches, 1F1B at most p; every
activation is freed by the end of a flushing iteration; the Memory view draws it."""
from __future__ import annotations

import pytest

from explorer.result.memory_timeline import memory_timeline
from explorer.scenario import load, load_raw
from explorer.simulate import simulate
from explorer.taskgraph.make import iteration_builder

from app_support import run_app
from conftest import ROOT

TEACH = ROOT / "scenarios" / "teaching-8gpu.yaml"
SCHEDULES = [({"parallelism.schedule": "1f1b"}, "1f1b"), ({"parallelism.schedule": "gpipe"}, "gpipe"),
             ({"parallelism.schedule": "interleaved", "parallelism.vpp": 2}, "interleaved"),
             ({"parallelism.schedule": "zb-h1"}, "zb-h1"), ({"parallelism.schedule": "zb-h2"}, "zb-h2"),
             ({"parallelism.schedule": "dualpipe"}, "dualpipe")]


@pytest.mark.parametrize("over", [s for s, _ in SCHEDULES], ids=[n for _, n in SCHEDULES])
def test_curve_peak_is_the_reports_activation_peak(over):
    res = simulate(load(TEACH, over))
    curves = memory_timeline(res)
    assert len(curves) == len(res.memory_by_class)
    for c, mem in zip(curves, res.memory_by_class, strict=True):
        assert c.peak_activations + c.transient == pytest.approx(mem.activations, rel=1e-9)
        assert c.static == pytest.approx(mem.params + mem.grads + mem.optimizer + mem.reserved, rel=1e-12)


@pytest.mark.parametrize("name", ["megatron-gpt3-175b", "deepseek-v3"])
def test_folded_and_recomputing_runs_keep_the_identity(name):
    """A folded steady state (megatron-gpt3-175b) and selective recompute (deepseek-v3)."""
    res = simulate(load(ROOT / "scenarios" / f"{name}.yaml"))
    for c, mem in zip(memory_timeline(res), res.memory_by_class, strict=True):
        assert c.peak_activations + c.transient == pytest.approx(mem.activations, rel=1e-9)


def test_gpipe_holds_every_micro_batch_and_1f1b_at_most_p():
    """Stage 0 of teaching-8gpu (p = 4): GPipe keeps all m of its micro-batches' activations at once
    (GPipe, Huang et al. 2019), 1F1B at most p (Narayanan et al. SC21, Sec. 2.2)."""
    sc = load(TEACH, {"parallelism.schedule": "gpipe"})
    act = iteration_builder(sc).chunk_of(0, 0).act_bytes
    m, p = sc.micro_batches, sc.parallelism.pp
    gpipe = memory_timeline(simulate(sc))[0]
    one = memory_timeline(simulate(load(TEACH)))[0]
    assert gpipe.peak_activations == pytest.approx(m * act, rel=1e-9)
    assert one.peak_activations == pytest.approx(min(p, m) * act, rel=1e-9)
    assert m > p


@pytest.mark.parametrize("over", [s for s, _ in SCHEDULES], ids=[n for _, n in SCHEDULES])
def test_everything_is_freed_by_the_end(over):
    for c in memory_timeline(simulate(load(TEACH, over))):
        assert c.points[0] == (0.0, 0.0)
        assert c.points[-1][1] == pytest.approx(0.0, abs=1e-6 * c.peak_activations)
        times = [t for t, _ in c.points]
        assert times == sorted(times)


def test_memory_view_draws_the_timeline():
    at = run_app(scenario="teaching-8gpu", view="memory", **{"parallelism.schedule": "gpipe"})
    assert not at.exception and not at.error
    assert any("Over the iteration" in m.value for m in at.markdown)
    assert any("activations at most in flight" in c.value for c in at.caption)


@pytest.mark.parametrize("ideal", [False, True], ids=["as-shipped", "ideal-pipeline"])
def test_every_shipped_scenario_has_a_curve_per_class(ideal):
    """The Memory view computes the curves for every page: no shipped scenario, with or without
    the ideal pipeline (whose network is free), may fail here; peaks match the report."""
    from conftest import SCENARIO_FILES
    for path in SCENARIO_FILES:
        if ideal and "inference" in load_raw(path):
            continue            # a training field a serving scenario refuses (config/inference.py)
        res = simulate(load(path, {"parallelism.ideal_pipeline": ideal}))
        curves = memory_timeline(res)
        assert curves, path.stem
        for c in curves:
            mem = res.memory_by_class[c.cls]
            assert c.peak_activations + c.transient == pytest.approx(mem.activations, rel=1e-9), path.stem


def test_a_folded_run_is_not_unfolded():
    """The curves follow a folded run's reduced run, as the Gantt does: computing them must not
    build the full task list or the program order of the whole batch (the app's sweep of
    cross-region-pp at global_batch 10^8 ran out of memory when it did)."""
    from explorer.fold.arrays.lazy import resolved
    from explorer.fold.tasks import FoldedTasks
    res = simulate(load(ROOT / "scenarios" / "megatron-gpt3-175b.yaml", {"training.global_batch": 1_536_000}))
    curves = memory_timeline(res)
    tasks = resolved(res.tasks)          # folded over arrays: the reduced run's list, made when read
    assert isinstance(tasks, FoldedTasks) and tasks._full is None
    for c, mem in zip(curves, res.memory_by_class, strict=True):
        assert c.peak_activations + c.transient == pytest.approx(mem.activations, rel=1e-9)


def test_activations_build_up_through_the_forward_and_drain_through_the_backward():
    """Layer by layer: halfway through stage 0's first forward half its chunk's activations exist,
    halfway through the backward that frees them half are gone (ResNet-50 in data parallel: one
    micro-batch, so the curve is one ramp up and one ramp down)."""
    res = simulate(load(TEACH))
    act = iteration_builder(load(TEACH)).chunk_of(0, 0).act_bytes
    curve = memory_timeline(res)[0]
    first = min((t for t in res.tasks if t.cls == 0 and t.kind == "forward"), key=lambda t: t.start)
    assert curve.at((first.start + first.end) / 2) == pytest.approx(act / 2, rel=1e-9)
    assert curve.at(first.end) == pytest.approx(act, rel=1e-9)
    cnn = load(ROOT / "scenarios" / "resnet50-cloud-dp.yaml")
    res = simulate(cnn)
    (curve,) = memory_timeline(res)
    fwd = next(t for t in res.tasks if t.kind == "forward")
    bwd = next(t for t in res.tasks if t.kind == "backward")
    peak = curve.peak_activations
    assert curve.at((fwd.start + fwd.end) / 2) == pytest.approx(peak / 2, rel=1e-9)
    assert curve.at((bwd.start + bwd.end) / 2) == pytest.approx(peak / 2, rel=1e-9)
    assert curve.at(bwd.end) == pytest.approx(0.0, abs=1e-6 * peak)
