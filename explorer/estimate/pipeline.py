"""Pass durations of every row and the pipeline's timeline for a group of rows that share a shape.

A pass lasts what the builder's task for it lasts (IterationBuilder._pass_shape, _fused_task):
the sum of its chunk's parts, plus the SM contention of the communication hidden under it
(_sm_contention: comm_sms of the GPU's SMs serve communication meanwhile, DeepSeek-V3 report
Sec. 3.2.2), and for DualPipe's F&B the fused pair of chunks.fuse (the pair takes its compute
time, or its communication time when longer; DeepSeek-V3 report Fig. 4).  Rows of one group share
the schedule, p, v and the framework's kind of send; rows with fewer units than the group's
largest run the same program with phantom units (estimate/critical_path.py).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .chunk_basis import BWD, COMPUTE_PARTS, F_IDX, FWD, PARTS
from .critical_path import OpTimes, evaluate
from .profile import RowProfile
from .program import KINDS, Program, compile_program

_COMP = [i for i, k in enumerate(PARTS) if k in COMPUTE_PARTS]
_COMM = [i for i, k in enumerate(PARTS) if k not in COMPUTE_PARTS]
_WGRAD = PARTS.index("weight-grad")


def pass_table(feat: np.ndarray, holds: np.ndarray, sm: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(g, p, nch, KINDS) seconds of F, B (full), Bi, W of every (stage, local chunk), and
    (g, p, nch, nch) of the fused F&B of local chunks (lf, lb); ``feat`` (g, chunks, FEATURES),
    ``sm`` (g,) the SM-contention factor."""
    f = feat[:, holds]                                              # (g, p, nch, F)
    fwd, bwd = f[..., FWD], f[..., BWD]
    s = sm[:, None, None]
    slow_f = s * (f[..., F_IDX["hidden_f"]] + f[..., F_IDX["fsdp_hidden_f"]])
    slow_b = s * (f[..., F_IDX["hidden_b"]] + f[..., F_IDX["fsdp_hidden_b"]])
    F = fwd.sum(-1) + slow_f
    B = bwd.sum(-1) + slow_b
    W = bwd[..., _WGRAD]
    table = np.stack([F, B, B - W, W], axis=-1)
    # DualPipe's F&B of the forward of local chunk lf and the backward of lb (chunks.fuse).
    comp = fwd[..., _COMP].sum(-1)[:, :, :, None] + bwd[..., _COMP].sum(-1)[:, :, None, :]
    comm = fwd[..., _COMM].sum(-1)[:, :, :, None] + bwd[..., _COMM].sum(-1)[:, :, None, :]
    excess = np.maximum(0.0, comm - comp)
    hidden = (comm + f[..., F_IDX["hidden_f"]][:, :, :, None] + f[..., F_IDX["hidden_b"]][:, :, None, :]
              - excess)
    fsdp = f[..., F_IDX["fsdp_hidden_f"]][:, :, :, None] + f[..., F_IDX["fsdp_hidden_b"]][:, :, None, :]
    fused = comp + excess + s[..., None] * (hidden + fsdp)
    return table, fused


@dataclass(frozen=True)
class RealOps:
    """Per-row op indices a unit count picks out of a (possibly larger) program."""

    last: np.ndarray             # (p,) last op of each stage
    grads: np.ndarray            # (p, nch) op completing each chunk's gradients
    first: np.ndarray            # (p,) first op of each stage
    backward: dict[tuple[int, int], int]   # (stage, unit) -> its (full) backward op


_REAL: dict[tuple, RealOps] = {}


def real_ops(prog: Program, units: int) -> RealOps:
    """The ops of ``prog`` that belong to a row of ``units`` units (memoised)."""
    key = (prog.schedule, prog.p, prog.v, prog.units, units)
    got = _REAL.get(key)
    if got is None:
        if len(_REAL) > 4096:
            _REAL.clear()
        got = _REAL[key] = _real_ops(prog, units)
    return got


def _real_ops(prog: Program, units: int) -> RealOps:
    real = prog.mb < units
    idx = np.arange(prog.n)
    last = np.zeros(prog.p, np.int64)
    first = np.zeros(prog.p, np.int64)
    grads = np.zeros((prog.p, prog.nch), np.int64)
    completes = real & ((prog.kind == KINDS.index("B")) | (prog.kind == KINDS.index("W")) | (prog.kind == 4))
    for s in range(prog.p):
        mine = idx[(prog.stage == s) & real]
        first[s], last[s] = mine[0], mine[-1]
        for c in range(prog.nch):
            got = idx[completes & (prog.stage == s) & (prog.local_b == c)]
            grads[s, c] = got[-1] if len(got) else mine[-1]
    backward = {(int(prog.stage[i]), int(prog.mb[i])): int(i)
                for i in idx[real & (prog.kind == KINDS.index("B"))]}
    return RealOps(last, grads, first, backward)


@dataclass(frozen=True)
class GroupTimes:
    """The pipeline part of a group's rows (last axis: rows)."""

    prog: Program
    ops: OpTimes
    real: list[RealOps]
    table: np.ndarray            # (g, p, nch, KINDS) pass seconds
    fused: np.ndarray            # (g, p, nch, nch)

    def per_stage(self, which: str) -> np.ndarray:
        """(g, p) a time of each stage's ``first`` or ``last`` op: its start or end (the compute
        stream's free time after a last op's blocking sends)."""
        cols = np.arange(len(self.real))
        idx = np.array([getattr(r, which) for r in self.real])           # (g, p)
        arr = self.ops.start if which == "first" else self.ops.free
        return arr[idx, cols[:, None]]

    def grads(self) -> tuple[np.ndarray, np.ndarray]:
        """(g, p, nch) start and duration of the pass completing each chunk's gradients."""
        cols = np.arange(len(self.real))[:, None, None]
        idx = np.array([r.grads for r in self.real])
        start = self.ops.start[idx, cols]
        return start, self.ops.end[idx, cols] - start


def run_group(profs: list[RowProfile]) -> GroupTimes:
    """Evaluate the pipeline of rows sharing schedule, p, v and send kind."""
    pr0 = profs[0]
    units = max(r.units for r in profs)
    prog = compile_program(pr0.schedule.name, pr0.p, pr0.v, units)
    feat = np.stack([r.feat for r in profs])
    sm = np.array([r.sm_factor for r in profs])
    table, fused = pass_table(feat, pr0.holds, sm)
    g = len(profs)
    flat = np.concatenate([table.reshape(g, -1), fused.reshape(g, -1)], axis=1)   # Program's column order
    real = (prog.mb[:, None] < np.array([r.units for r in profs])[None, :]).astype(float)
    dur = flat[:, prog.dur].T * real
    transfer = np.stack([r.transfer for r in profs], axis=1)                      # (p, g)
    send_f = np.where(prog.send_f[:, None] >= 0, transfer[np.maximum(prog.send_f, 0)], 0.0) * real
    send_b = np.where(prog.send_b[:, None] >= 0, transfer[np.maximum(prog.send_b, 0)], 0.0) * real
    gates = np.stack([r.gates.reshape(-1) for r in profs], axis=1)
    ops = evaluate(prog, dur, send_f, send_b, real, gates, pr0.blocking)
    return GroupTimes(prog, ops, [real_ops(prog, r.units) for r in profs], table, fused)
