"""The schedule registry: every schedule is described once (explorer/schedules/registry.py) and
nothing outside explorer/schedules/ compares schedule names."""
from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from explorer.schedules import registry
from explorer.schedules.pipeline import peak_in_flight

ROOT = Path(__file__).resolve().parents[1]
EXPLORER = ROOT / "explorer"

# A schedule name as a string literal ("zb-h1", '1f1b', ...).
NAMES = "|".join(re.escape(n) for n in registry.names())
LITERAL = re.compile(rf"""["']({NAMES})["']""")

# Directories where names belong: the registry and its schedule modules, and shipped data.
ALLOWED_DIRS = ("schedules", "data")
# Not yet moved to the registry (issue 9, app part): the timeline view's caption, which can read
# registry.get(name).window (OVERLAP: one iteration alone, ASYNC: two back to back).  Remove then.
PENDING: tuple[str, ...] = ()


def test_no_schedule_name_literals_outside_the_registry():
    offenders = []
    for path in sorted(EXPLORER.rglob("*.py")):
        rel = path.relative_to(EXPLORER).as_posix()
        if rel.split("/")[0] in ALLOWED_DIRS or any(rel == p or rel.startswith(p + "/") for p in PENDING):
            continue
        for no, line in enumerate(path.read_text().splitlines(), 1):
            if LITERAL.search(line):
                offenders.append(f"{rel}:{no}: {line.strip()}")
    assert not offenders, "schedule names compared outside explorer/schedules/:\n" + "\n".join(offenders)


def test_every_schedule_is_a_complete_frozen_description():
    for name, s in registry.SCHEDULES.items():
        assert s.name == name and s.citation
        with pytest.raises(AttributeError):
            s.name = "x"                         # type: ignore[misc]
        assert s.iterations_simulated >= 1
        assert s.overlapping == (s.window is not registry.Window.FLUSH)
    with pytest.raises(ValueError, match="unknown schedule"):
        registry.get("zigzag")


@pytest.mark.parametrize("name", registry.names())
@pytest.mark.parametrize("p,m", [(2, 4), (4, 8), (4, 16), (8, 16), (8, 24)])
def test_in_flight_matches_the_replayed_order(name, p, m):
    """The closed-form in-flight count equals the peak of the order replayed with unit activations."""
    s = registry.get(name)
    v = 2 if s.virtual_stages else 1
    for stage in range(p):
        order = s.order(stage, p, m, v)
        replayed = s.peak_activations(order, [1.0] * s.chunks_per_rank(v))
        assert s.in_flight(stage, p, m, v) == round(replayed), (name, p, m, stage)
        if not s.split_backward and not s.two_directions:
            assert peak_in_flight(order) == round(replayed)


def _sc(schedule, pp=4, vpp=1, global_batch=64, micro_batch=1, dp=2, token_slices=1):
    par = SimpleNamespace(schedule=schedule, pp=pp, vpp=vpp, dp=dp, token_slices=token_slices)
    return SimpleNamespace(parallelism=par, training=SimpleNamespace(global_batch=global_batch,
                                                                     micro_batch=micro_batch))


def test_validation_rules_name_the_field():
    assert registry.validate(_sc("1f1b")) is None
    assert registry.validate(_sc("1f1b", vpp=2))[0] == "parallelism.vpp"
    assert registry.validate(_sc("interleaved", vpp=2)) is None
    assert registry.validate(_sc("interleaved", pp=1))[0] == "parallelism.schedule"
    assert registry.validate(_sc("interleaved", vpp=2, global_batch=20))[0] == "training.global_batch"
    assert registry.validate(_sc("dualpipe", pp=3))[0] == "parallelism.pp"
    assert registry.validate(_sc("dualpipe", pp=4, global_batch=12)) [0] == "training.global_batch"
    assert registry.validate(_sc("dualpipe", pp=4, global_batch=16)) is None
    # The V schedules flush along one lane (P3 allowed); DualPipeV's fused pairs, like DualPipe's, not.
    assert set(registry.priority_schedules()) == {"gpipe", "1f1b", "interleaved", "zb-h1", "1f1b-latency",
                                                 "crosspipe", "zb-v", "v-half", "v-min"}
