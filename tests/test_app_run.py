"""The Run tab (issue 38): shown only for a scenario with a run plan, its cards are the run total's,
and share links carry the phases (they round-trip through the address bar)."""
from __future__ import annotations

from urllib.parse import urlencode

import pytest

from explorer.run.total import run_total
from explorer.scenario import apply_overrides, from_dict
from explorer.share import SharedView, changed_fields, parse_query, preset_raw, to_query
from explorer.share_limits import unlinked
from explorer.simulate import simulate

from app_support import run_app

PHASES = [{"name": "ramp", "tokens": 1e9, "overrides": {"training.global_batch": 32}},
          {"name": "main", "steps": 100}]


def _tabs(at) -> list[str]:
    return [t.label for t in at.tabs]


def test_run_tab_only_with_a_run_plan():
    assert "Run" not in _tabs(run_app(scenario="teaching-8gpu"))
    assert "Run" in _tabs(run_app(scenario="teaching-8gpu", **{"training.total_tokens": "1e9"}))


def test_run_tab_shows_the_run_total():
    """Llama 3 405B pre-training: the Days card is run_total's days, the table has its five phases."""
    at = run_app(scenario="llama3-405b-pretraining", view="run")
    assert not at.error, [e.value for e in at.error]
    total = run_total(from_dict(preset_raw("llama3-405b-pretraining")), simulate)
    days = next(m.value for m in at.metric if m.label == "Days")
    assert days == f"{total.days:,.1f}"
    assert len(at.dataframe[0].value) == 5


def test_share_links_carry_phases():
    """A scenario with phases -> link -> the same scenario (phases, reliability) and the Run view."""
    raw = preset_raw("teaching-8gpu")
    cur = from_dict(apply_overrides(raw, {"training.phases": PHASES, "reliability.mtbf_gpu_hours": 5000}))
    query = to_query(SharedView("teaching-8gpu", view="run"), from_dict(raw), cur)
    view = parse_query(query)
    assert view.warnings == [] and view.view == "run"
    again = from_dict(apply_overrides(raw, view.overrides))
    assert again.training.phases == cur.training.phases and again.reliability == cur.reliability
    assert changed_fields(cur, again) == {}


def test_a_link_with_phases_opens_the_run_tab():
    q = to_query(SharedView("teaching-8gpu", view="run"), from_dict(preset_raw("teaching-8gpu")),
                 from_dict(apply_overrides(preset_raw("teaching-8gpu"), {"training.phases": PHASES})))
    at = run_app(**q)
    assert not at.error, [e.value for e in at.error]
    assert "Run" in _tabs(at)
    assert {m.label for m in at.metric} >= {"Days", "GPU-hours", "Goodput", "Energy"}


def test_waterfall_sums_to_the_run_and_failures_are_marked_one_by_one():
    """The waterfall's steps add up to the run's days; a phase expecting fewer than MAX_MARKS
    failures has exactly floor(wall / job MTBF) failure marks, one with more gets a shaded band."""
    from explorer.figures.run import MAX_MARKS, run_timeline_figure, waterfall_steps
    sc = from_dict(apply_overrides(preset_raw("teaching-8gpu"), {
        "training.total_tokens": 1e10, "reliability.mtbf_gpu_hours": 50.0,
        "reliability.checkpoint_write_GBps": 1.0, "reliability.restart_s": 60}))
    total = run_total(sc, simulate)
    assert sum(d for _, d in waterfall_steps(total)) == pytest.approx(total.days, rel=1e-12)
    p = total.phases[0]
    expected = int(p.wall_s / p.goodput.job_mtbf_s)
    assert 0 < expected <= MAX_MARKS
    fig = run_timeline_figure(total)
    marks = [t for t in fig.data if t.name == "expected failure"]
    assert len(marks) == 1 and len(marks[0].x) == expected
    dense = run_timeline_figure(run_total(from_dict(apply_overrides(
        preset_raw("teaching-8gpu"), {"training.total_tokens": 1e12, "reliability.mtbf_gpu_hours": 5.0})),
        simulate))
    assert any(t.name == "failure (dense)" for t in dense.data)


def test_a_diloco_runs_loss_caption_cites_its_scaling_law():
    """diloco-cross-region with a run plan and a critical batch: the Run tab's loss caption cites
    McCandlish and, the run being DiLoCo, Charles et al.'s law its progress is divided by."""
    at = run_app(scenario="diloco-cross-region", view="run", **{"training.total_tokens": "1e11",
                                                                "training.critical_batch_tokens": "4e6"})
    assert not at.exception
    loss = [c.value for c in at.caption if c.value.startswith("Loss, an estimate from the literature")]
    assert len(loss) == 1 and "McCandlish" in loss[0] and "Charles et al. 2025" in loss[0]


def _ramp(n: int, name: str = "ramp step") -> list[dict]:
    return [{"name": f"{name} {i:03d}", "tokens": 1e9 * (i + 1),
             "overrides": {"training.global_batch": 256 + 64 * i, "model.seq_len": 2048}} for i in range(n)]


def test_a_256_phase_batch_ramp_travels_in_the_link():
    """A hunt found 36 phases (4,000 characters) dropped on reopening, while the link box said it
    reopens exactly this view: the schema's 256 phases of a batch ramp now travel (28,912 characters,
    41.8 KB percent-encoded, inside the app server's 64 KB request)."""
    raw = preset_raw("fsdp-llama3-8b")
    cur = from_dict(apply_overrides(raw, {"training.phases": _ramp(256)}))
    query = to_query(SharedView("fsdp-llama3-8b", view="run"), from_dict(raw), cur)
    assert len(query["training.phases"]) == 28_912 and len(urlencode(query)) < 48_000
    assert unlinked(query) == []
    view = parse_query(query)
    assert view.warnings == []
    assert from_dict(apply_overrides(raw, view.overrides)).training.phases == cur.training.phases


def test_a_plan_too_long_for_a_link_is_named_not_claimed_exact():
    """Long phase names push 256 phases past the link's 32,000 characters: unlinked() names the
    field and its length (the link box then warns instead of claiming an exact reopening), and a
    reopened link says what it ignored."""
    raw = preset_raw("fsdp-llama3-8b")
    cur = from_dict(apply_overrides(raw, {"training.phases": _ramp(256, "x" * 100)}))
    query = to_query(SharedView("fsdp-llama3-8b", view="run"), from_dict(raw), cur)
    n = len(query["training.phases"])
    assert n > 32_000
    assert unlinked(query) == [f"training.phases ({n:,} characters, limit 32,000)"]
    assert parse_query(query).warnings == [f"ignored training.phases: its value has {n:,} characters "
                                           "(limit 32000)"]


def test_the_link_box_warns_when_the_link_cannot_carry_a_value(monkeypatch):
    """The page asks share_limits.unlinked what its link cannot carry: with nothing, the caption
    says the link reopens exactly this view; with something, a warning names it and the file to
    share instead (and no caption claims an exact reopening)."""
    at = run_app(scenario="teaching-8gpu")
    assert any(c.value == "This link reopens exactly this view:" for c in at.caption)
    import explorer.ui.page as page
    monkeypatch.setattr(page, "unlinked", lambda query: ["training.phases (40,000 characters, limit 32,000)"])
    at = run_app(scenario="teaching-8gpu")
    said = [w.value for w in at.warning if w.value.startswith("This link does not carry")]
    assert said == ["This link does not carry training.phases (40,000 characters, limit 32,000): it reopens "
                    "this view without it. Share the scenario file instead (Scenario & files, Download "
                    "scenario (YAML))."]
    assert not any(c.value == "This link reopens exactly this view:" for c in at.caption)
