"""SMs the gradient buckets take from the backward they overlap.

NCCL runs a collective as kernels on the GPU's SMs (one channel per SM), so while gradient buckets
are reduced under the backward (PyTorch DDP, Li et al. VLDB 2020 Sec. 3.2.3) the backward's kernels
share the GPU with them: with ``communication.comm_sms`` of the GPU's SMs serving communication,
compute progresses at (1 - comm_sms/sms) of its speed meanwhile (DeepSeek-V3 report Sec. 3.2.2: 20
of the H800's 132 SMs serve communication).  The same rule slows the passes under which pipeline,
tensor, expert and FSDP communication hides (IterationBuilder._sm_contention).

Which part of the buckets runs under the pass is decided when the graph is built, from the pass
alone: bucket jobs (ready fraction of the pass, seconds) are served one at a time in order of
readiness on a stream free at the pass's start, and the seconds they run before the pass ends are
hidden.  The pass then takes ``hidden x comm_sms / sms`` longer.  What runs after the pass (under a
later chunk's backward in interleaved schedules, or exposed before the step) is not charged: a
lower bound on the contention, exact for one chunk per stage.  The estimator evaluates the same
arithmetic over arrays (:func:`hidden_many`) so both models stay equal to float rounding.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ...config import Scenario
from ...physics.kernels import DEFAULT_SMS


def sm_factor(sc: Scenario, ideal: bool = False) -> float:
    """Share of a pass's speed lost per second of communication under it: comm_sms of the GPU's
    SMs (at most all of them: communication kernels wanting more SMs than the GPU has take every
    SM while they run, and the pass waits them out), 0 in the ideal pipeline.  The share was capped
    at all but one SM, which made a 1-SM GPU lose nothing and a 2-SM GPU half (a hunt: deepseek-v3
    15.46 s at 1 SM, 18.15 s at 2)."""
    if ideal:
        return 0.0
    sms = sc.hardware.gpu.sms or DEFAULT_SMS
    return min(sc.communication.comm_sms or 0, sms) / sms


def hidden_seconds(duration: float, jobs: Sequence[tuple[float, float]]) -> float:
    """Seconds of ``jobs`` ((ready fraction of the pass, seconds) each) that run before a pass of
    ``duration`` seconds ends, served first come first served (ties in the given order).

    >>> hidden_seconds(10.0, [(0.5, 2.0), (1.0, 3.0)])    # 5 -> 7 under the pass, 10 -> 13 after
    2.0
    >>> hidden_seconds(10.0, [(0.2, 3.0), (0.3, 3.0)])    # 2 -> 5, then 5 -> 8
    6.0
    """
    free = hidden = 0.0
    for f, d in sorted(jobs, key=lambda j: j[0]):
        start = max(f * duration, free)
        end = start + d
        hidden += max(0.0, min(end, duration) - start)
        free = end
    return hidden


def hidden_many(duration: np.ndarray, frac: np.ndarray, dur: np.ndarray) -> np.ndarray:
    """:func:`hidden_seconds` over arrays: ``duration`` (...,) and jobs ``frac``/``dur`` (..., J);
    jobs of zero seconds (padding) change nothing.  The same operations in the same order."""
    order = np.argsort(frac, axis=-1, kind="stable")
    f = np.take_along_axis(frac, order, -1)
    d = np.take_along_axis(dur, order, -1)
    free = np.zeros(duration.shape)
    hidden = np.zeros(duration.shape)
    for j in range(f.shape[-1]):
        start = np.maximum(f[..., j] * duration, free)
        end = start + d[..., j]
        hidden = hidden + np.maximum(0.0, np.minimum(end, duration) - start)
        free = np.where(d[..., j] > 0, end, free)
    return hidden
