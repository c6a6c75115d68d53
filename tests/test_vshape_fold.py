"""The V schedules' bubble formula folds its critical path over micro-batches
(explorer/schedules/vshape.ideal_makespan): beyond the count from which one more micro-batch
inserts one steady period, the makespan at four counts proves one period's seconds and is
extrapolated.  V-Half's formula at a million micro-batches walked the whole order: 141 s, 10 GB."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from explorer.schedules import vshape


@settings(max_examples=40, deadline=None)
@given(schedule=st.sampled_from(["zb-v", "v-half", "v-min"]), p=st.integers(2, 9),
       extra=st.integers(0, 60), F=st.floats(0.2, 3.0), B=st.floats(0.2, 3.0), W=st.floats(0.0, 3.0))
def test_the_folded_makespan_is_the_walked_one(schedule, p, extra, F, B, W):
    m = vshape.SETTLED[schedule](p) + p + 4 + vshape.FOLD_MARGIN + extra
    folded = vshape.ideal_makespan(schedule, p, m, F, B, W)
    assert folded == pytest.approx(vshape._walked_makespan(schedule, p, m, F, B, W), rel=1e-9)


def test_a_million_micro_batches_walk_only_the_four_counts_that_prove_the_period(monkeypatch):
    walked = []
    real = vshape._walked_makespan

    def counting(schedule, p, m, F, B, W):
        walked.append(m)
        return real(schedule, p, m, F, B, W)

    monkeypatch.setattr(vshape, "_walked_makespan", counting)
    p = 4
    got = vshape.ideal_makespan("v-half", p, 1_000_000, 1.0, 1.0, 1.0)
    base = vshape.SETTLED["v-half"](p) + p
    assert walked == [base, base + 1, base + 2, base + 3]
    # At F = B = W = 1 a steady period adds one micro-batch's 2 x 3 units on every rank.
    assert got == pytest.approx(real("v-half", p, base, 1.0, 1.0, 1.0) + (1_000_000 - base) * 6.0, rel=1e-12)


def test_near_counts_are_walked_whole(monkeypatch):
    walked = []
    real = vshape._walked_makespan
    monkeypatch.setattr(vshape, "_walked_makespan",
                        lambda *a: walked.append(a[2]) or real(*a))
    m = vshape.SETTLED["v-min"](4) + 4 + 3
    vshape.ideal_makespan("v-min", 4, m, 1.0, 1.0, 1.0)
    assert walked == [m]


@pytest.mark.parametrize("schedule", ["zb-v", "v-half", "v-min", "dualpipe-v"])
def test_a_v_needs_a_pipeline(schedule, capsys):
    """At pp 1 a V's two chunks ran back to back on one GPU (1F1B's timeline, more activations held:
    DualPipeV 8.98 against 6.12 GB); refused as the interleaved schedule, DualPipe and Chimera are."""
    from explorer.cli import main

    from conftest import ROOT
    args = ["run", str(ROOT / "scenarios" / "zero-bubble-8gpu.yaml"),
            "--set", f"parallelism.schedule={schedule}",
            "--set", "parallelism.pp=1", "--set", "cluster.gpus_per_node=1"]
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("error: parallelism.schedule:") and "pp > 1" in err
    assert main(args[:-4] + ["--set", "parallelism.pp=2", "--set", "cluster.gpus_per_node=2"]) == 0
