"""estimate_many: validated scenarios in, one row of estimates each out.

Rows are priced one by one from memoised pieces (estimate/profile.py), then grouped by what their
pipeline program shares — the schedule, p, v and whether sends block (DualPipe also by its unit
count, its phases depending on it) — and every group is evaluated at once: the pipeline's critical
path (estimate/pipeline.py), the buckets, optimizer and iteration window (estimate/sync.py), the
breakdown and the memory.  Throughput and MFU follow simulate.assemble: tokens per iteration over
the iteration time; model FLOPs without recompute per GPU over time and the bf16 dense peak
(PaLM App. B), hardware FLOPs with recompute for TFLOP/s (Megatron-LM SC21 Eq. 3).
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..scenario import Scenario
from ..vocabulary import CATEGORIES
from .breakdown import breakdowns
from .chunk_basis import F_IDX
from .memory import stage_memory
from .pipeline import run_group
from .priority import p3_period
from .profile import RowProfile, row_profile
from .result import Estimates
from .sync import Window_, ending, window


def group_key(prof: RowProfile) -> tuple:
    """Rows with the same key run one compiled program (phantom units pad the shorter ones)."""
    sched = prof.schedule
    return (sched.name, prof.p, prof.v, prof.blocking, prof.units if sched.two_directions else 0)


def estimate_profiles(profs: Sequence[RowProfile]) -> Estimates:
    """Estimates of already-profiled rows (in their order)."""
    n = len(profs)
    groups: dict[tuple, list[int]] = {}
    for i, pr in enumerate(profs):
        groups.setdefault(group_key(pr), []).append(i)
    pieces = []
    for idx in groups.values():
        rows = [profs[i] for i in idx]
        pieces.append((np.array(idx), _estimate_group(rows)))
    return Estimates.scatter(n, pieces)


def estimate_many(scenarios: Sequence[Scenario]) -> Estimates:
    """Estimates of validated scenarios (explorer.scenario.from_dict), one row each, in order."""
    return estimate_profiles([row_profile(sc) for sc in scenarios])


def estimate(sc: Scenario) -> Estimates:
    """The estimate of one validated scenario (one row)."""
    return estimate_many([sc])


def _estimate_group(profs: list[RowProfile]) -> Estimates:
    gt = run_group(profs)
    en = ending(profs, gt)
    win = window(profs, gt, en)
    p3 = [r for r, pr in enumerate(profs) if pr.sc.communication.dp_priority]
    if p3:
        T, starts = win.T.copy(), win.window_start.copy()
        for r in p3:
            T[r], starts[r], _ = p3_period(profs[r], gt, r)
        win = Window_(T, starts, win.pace, win.pace_category)
    bd = breakdowns(profs, gt, en, win)
    T = win.T
    mem = np.array([stage_memory(pr).sum(axis=1).max() for pr in profs])
    cap = np.array([pr.sc.hardware.gpu.capacity_bytes for pr in profs])
    hw = np.array([pr.feat[:, F_IDX["hw_flops"]].sum() * pr.m / pr.p for pr in profs])
    model = np.array([pr.feat[:, F_IDX["model_flops"]].sum() * pr.m / pr.p for pr in profs])
    peak = np.array([pr.sc.hardware.gpu.peak_tflops * 1e12 for pr in profs])
    tokens = np.array([pr.sc.training.global_batch * pr.sc.model.seq_len for pr in profs], dtype=float)
    return Estimates(T, {k: bd[:, i] for i, k in enumerate(CATEGORIES)}, mem / 1e9, mem <= cap,
                     model / T / peak, tokens / T, hw / T / 1e12)
