"""The Bubble card with PipeDream's stage replicas averages the idle share over the GPUs, each
stage weighted by the GPUs it holds (explorer/simulate.assemble): PipeDream's 15-1 VGG-16 keeps
15 of its 16 GPUs busy, so the card is at most the one FC GPU's share, 1/16 — the mean over the
two stages (36 %) said the pipeline idled a third of the time."""
from __future__ import annotations

import pytest

from explorer.scenario import load
from explorer.simulate import simulate

from conftest import SCENARIO_FILES

PIPEDREAM = next(f for f in SCENARIO_FILES if f.stem == "pipedream-vgg16")


@pytest.fixture(scope="module")
def run():
    return simulate(load(PIPEDREAM))


def test_card_is_weighted_by_the_gpus_of_each_stage(run):
    gpus = [c.gpus for c in run.classes]
    assert gpus == [15, 1]
    # The 15 convolution replicas are the busiest stage and never idle (asynchronous 1F1B-RR).
    assert run.bubble_fraction_busiest == pytest.approx(0.0, abs=1e-9)
    # So 16 x card = 15 x 0 + 1 x (the FC GPU's idle share), which is at most 1.
    fc_idle = 16 * run.bubble_fraction
    assert 0.0 < fc_idle <= 1.0
    assert run.bubble_fraction <= 1 / 16
    assert "16 GPUs of the 2 stages" in run.bubble_explanation
