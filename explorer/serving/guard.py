"""The design tools that rank training layouts with the estimator (search, sweep without --full),
study training replicas (consensus) or grow a training step's data-parallel replicas and global
batch (scaling) refuse a serving scenario in one line: the estimator prices a training step
(explorer/estimate) and scaling reads the training section, so their figures for a serving file
would be a training step's, not TTFT or TPOT."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..config import ScenarioError


def refuse_serving(raw: Mapping[str, Any], command: str, how: str = "the estimator, replicas") -> None:
    """Raise a one-line ScenarioError when ``raw`` (a scenario mapping) is a serving scenario;
    ``how`` says how ``command`` studies training steps."""
    if raw.get("inference") is not None:
        raise ScenarioError("inference", f"{command} studies training steps ({how}); a "
                            "serving scenario is compared with run --set (e.g. parallelism.tp=4, "
                            "inference.batch=64) or sweep --full")
