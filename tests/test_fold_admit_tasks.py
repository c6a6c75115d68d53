"""A scenario admitted at load for its task fold alone (its full simulation beyond the work
budget, no array route) has that fold proven at load (explorer/fold/admit.py), as the array fold
already was: fuzzing found pipedream-gnmt16 at 4,096 units reported "ok" by ``validate`` and refused
by ``run`` (no period within the 256 micro-batches the fold may simulate).  The proof is kept for
the simulation that follows; the design tools, which simulate or estimate every scenario they build,
do not prove at load."""
from __future__ import annotations

import pytest

from explorer.cli import main
from explorer.design import open_base
from explorer.fold import admit, steady
from explorer.scenario import load
from explorer.simulate import simulate

from conftest import ROOT

GNMT = ROOT / "scenarios" / "pipedream-gnmt16.yaml"
GPT3 = ROOT / "scenarios" / "megatron-gpt3-175b.yaml"
ASYNC_HUGE = {"parallelism.schedule": "pipedream-async", "training.global_batch": 196608}


@pytest.mark.slow
def test_validate_refuses_what_run_would_refuse(capsys):
    args = [str(GNMT), "--set", "training.global_batch=262144"]
    assert main(["validate", *args]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("error: training.global_batch:")
    assert "could not be folded" in err
    assert main(["run", *args]) == 2
    assert capsys.readouterr().err.strip() == err
    # Within the budget unfolded (1,024 units) it still runs.
    assert main(["validate", str(GNMT), "--set", "training.global_batch=65536"]) == 0


def test_the_fold_proven_at_load_is_the_simulations(monkeypatch):
    calls = []
    real = steady.attempt_folded

    def counting(sc, ideal=None):
        calls.append(sc.training.global_batch)
        return real(sc, ideal)

    monkeypatch.setattr(admit, "attempt_folded", counting)
    sc = load(GPT3, ASYNC_HUGE)                   # beyond the budget unfolded: proven here
    assert calls == [196608]
    r = simulate(sc)                              # takes the proof: no second attempt
    assert calls == [196608] and r.iteration_time_s > 0
    again = simulate(sc)                          # taken once: a second simulation attempts it again
    assert calls == [196608, 196608] and again.iteration_time_s == r.iteration_time_s


def test_the_design_tools_do_not_prove_at_load(monkeypatch):
    calls = []
    monkeypatch.setattr(admit, "attempt_folded", lambda sc, ideal=None: calls.append(1))
    open_base(str(GPT3)).scenario(ASYNC_HUGE)
    assert calls == []
