"""Pass durations of every row and the pipeline's timeline for a group of rows that share a shape.

A pass lasts what the builder's task for it lasts (IterationBuilder._pass_shape, _fused_task):
the sum of its chunk's parts, plus the SM contention of the communication hidden under it
(_sm_contention: comm_sms of the GPU's SMs serve communication meanwhile, DeepSeek-V3 report
Sec. 3.2.2), and for DualPipe's F&B the fused pair of chunks.fuse (the pair takes its compute
time, or its communication time when longer; DeepSeek-V3 report Fig. 4).  Rows of one group share
the schedule, p, v and the framework's kind of send; rows with fewer units than the group's
largest run the same program with phantom units (pricing/critical_path.py).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..taskgraph.techniques.dp_contention import hidden_many
from ..vocabulary import CATEGORIES
from .chunk_basis import BWD, COMPUTE_PARTS, F_IDX, FWD, PARTS
from .critical_path import OpTimes, evaluate
from .keys import memo_table
from .profile import RowProfile
from .program import KINDS, Program, compile_program, program_units

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
    extra, _ = fused_extra(f, comp, comm)
    fused = comp + excess + extra + s[..., None] * (hidden + fsdp - extra)
    return table, fused


# The dimensions whose communication also hides under a pass's own compute (chunks.fuse's
# ``under``), in the order fuse's max breaks ties (by name, the largest first), and per dimension
# the feature columns of that hidden time under the forward and the backward.
UNDER_DIMS = ("tp", "dp", "cp")


def fused_extra(f: np.ndarray, comp: np.ndarray, comm: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """chunks.fuse's bound of a DualPipe pair by each dimension's communication, exposed and hidden
    together: the seconds it adds beyond max(compute, exposed communication), (g, p, lf, lb), and
    the index in ``UNDER_DIMS`` of the dimension charged with them.  ``f``: (g, p, nch, FEATURES)."""
    def pair(col_f: str, col_b: str) -> np.ndarray:
        return f[..., F_IDX[col_f]][:, :, :, None] + f[..., F_IDX[col_b]][:, :, None, :]

    cp_hidden = pair("hidden_f.cp", "hidden_b.cp")
    hidden = {"tp": pair("hidden_f", "hidden_b") - cp_hidden, "cp": cp_hidden,
              "dp": pair("fsdp_hidden_f", "fsdp_hidden_b")}
    need = np.stack([pair(f"fwd.{d}", f"bwd.{d}") + hidden[d] for d in UNDER_DIMS])
    which = need.argmax(axis=0)
    extra = np.maximum(0.0, need.max(axis=0) - np.maximum(comp, comm))
    return extra, which


@dataclass(frozen=True)
class RealOps:
    """Per-row op indices a unit count picks out of a (possibly larger) program."""

    last: np.ndarray             # (p,) last op of each stage
    grads: np.ndarray            # (p, nch) op completing each chunk's gradients
    first: np.ndarray            # (p,) first op of each stage
    backward_ops: np.ndarray     # (p, units) each stage's (full) backward op of each unit (-1: none)
    per_column: np.ndarray       # (p, J) ops of each stage per column of its own: KINDS x chunk, then fused
    sends: np.ndarray            # (p, p) transfers each stage sends per stage pair


_REAL: dict[tuple, RealOps] = memo_table()


def own_columns(prog: Program, s: int) -> np.ndarray:
    """The duration-table columns of stage ``s``: its chunks' KINDS, then its fused pairs."""
    nk = prog.nch * len(KINDS)
    fused0 = prog.p * nk + s * prog.nch * prog.nch
    return np.concatenate((np.arange(s * nk, (s + 1) * nk), np.arange(fused0, fused0 + prog.nch * prog.nch)))


def real_ops(prog: Program, units: int) -> RealOps:
    """The ops of ``prog`` that belong to a row of ``units`` units (memoised)."""
    key = (prog.schedule, prog.p, prog.v, prog.units, units)
    got = _REAL.get(key)
    if got is None:
        got = _REAL[key] = _real_ops(prog, units)
    return got


def _real_ops(prog: Program, units: int) -> RealOps:
    real = prog.mb < units
    idx = np.arange(prog.n)
    last = np.full(prog.p, -1, np.int64)
    first = np.full(prog.p, prog.n, np.int64)
    np.maximum.at(last, prog.stage[real], idx[real])
    np.minimum.at(first, prog.stage[real], idx[real])
    # The pass completing each chunk's gradients: its last full backward or weight-gradient pass.
    completes = real & ((prog.kind == KINDS.index("B")) | (prog.kind == KINDS.index("W")) | (prog.kind == 4))
    grads = np.full((prog.p, prog.nch), -1, np.int64)
    np.maximum.at(grads, (prog.stage[completes], prog.local_b[completes]), idx[completes])
    grads = np.where(grads < 0, last[:, None], grads)
    backward = np.full((prog.p, units), -1, np.int64)
    full_b = real & (prog.kind == KINDS.index("B"))
    backward[prog.stage[full_b], prog.mb[full_b]] = idx[full_b]
    k = prog.fused_index(prog.p - 1, prog.nch - 1, prog.nch - 1) + 1
    every = np.bincount(prog.stage[real] * k + prog.dur[real], minlength=prog.p * k).reshape(prog.p, k)
    per_column = np.stack([every[s, own_columns(prog, s)] for s in range(prog.p)])
    sends = np.zeros((prog.p, prog.p))
    for pairs in (prog.send_f, prog.send_b):
        sel = real & (pairs >= 0)
        np.add.at(sends, (prog.stage[sel], pairs[sel]), 1.0)
    return RealOps(last, grads, first, backward, per_column, sends)


@dataclass(frozen=True)
class StageTimes:
    """Per row (first axis) and stage: the pipeline facts the end of an iteration reads."""

    first: np.ndarray            # (g, p) start of each stage's first pass
    last_end: np.ndarray         # (g, p) end of its last pass
    free: np.ndarray             # (g, p) its compute stream free after it (blocking sends included)
    last_send: np.ndarray        # (g, p) its pp stream free after its last transfer (0 when blocking)
    grads_start: np.ndarray      # (g, p, nch) start of the pass completing each chunk's gradients
    grads_dur: np.ndarray        # (g, p, nch) its seconds
    per_column: np.ndarray       # (g, p, J) ops of each stage per column of its own (RealOps)
    sends: np.ndarray            # (g, p, p) transfers each stage sends per stage pair
    table: np.ndarray            # (g, p, nch, KINDS) pass seconds
    fused: np.ndarray            # (g, p, nch, nch) fused F&B seconds
    contention: np.ndarray       # (g, p) seconds gradient buckets' SM contention adds to the stage
    # The row's iteration time and breakdown (CATEGORIES), once timed (estimate/many.py; NaN before).
    iteration: np.ndarray        # (g,)
    breakdown: np.ndarray        # (g, CATEGORIES)
    # Per row the program, its op times (all rows of its group) with the row's column, and its ops,
    # while the row is timed (the window of PipeDream and P3, the breakdown's walk); then None.
    ops: tuple[tuple[Program, OpTimes, int, RealOps] | None, ...]

    def take(self, idx: np.ndarray | list[int]) -> StageTimes:
        """The rows ``idx``."""
        idx = np.asarray(idx)
        return StageTimes(**{f: getattr(self, f)[idx] for f in _ARRAYS}, ops=tuple(self.ops[i] for i in idx))

    @staticmethod
    def concat(parts: list[StageTimes]) -> StageTimes:
        return StageTimes(**{f: np.concatenate([getattr(p, f) for p in parts]) for f in _ARRAYS},
                          ops=tuple(o for p in parts for o in p.ops))


_ARRAYS = ("first", "last_end", "free", "last_send", "grads_start", "grads_dur", "per_column", "sends",
           "table", "fused", "contention", "iteration", "breakdown")


def _bucket_contention(profs: list[RowProfile], dur: np.ndarray, grads: np.ndarray) -> np.ndarray:
    """(g, p) seconds the gradient buckets' SM contention adds to each stage (techniques/
    dp_contention.py), added in place to ``dur`` (ops x rows) at the pass completing each chunk's
    gradients, as dp_buckets.dp_tasks lengthens that pass."""
    g, p, nch = grads.shape
    sm = np.array([r.sm_factor if r.overlap_reduce else 0.0 for r in profs])
    if not sm.any():
        return np.zeros((g, p))
    rows = np.broadcast_to(np.arange(g)[:, None, None], grads.shape)
    frac = np.stack([r.job_frac for r in profs]).reshape(g, p, nch, -1)
    jd = np.stack([r.job_dur for r in profs]).reshape(g, p, nch, -1)
    extra = sm[:, None, None] * hidden_many(dur[grads, rows], frac, jd)
    np.add.at(dur, (grads, rows), extra)
    return extra.sum(axis=-1)


def group_program(profs: list[RowProfile], units: list[int]) -> Program:
    """The compiled program rows sharing schedule, p and v run, row i with ``units[i]`` units."""
    pr0 = profs[0]
    return compile_program(pr0.schedule.name, pr0.p, pr0.v, program_units(pr0.schedule, max(units), pr0.p))


def run_group(profs: list[RowProfile], units: list[int], out: np.ndarray | None = None) -> StageTimes:
    """Evaluate the pipeline of rows sharing schedule, p, v and send kind, row i with ``units[i]``
    units (fewer than the program's: phantom units pad it, pricing/critical_path.py), the time vector
    in ``out`` when given (critical_path.evaluate).  The rows keep their op times (StageTimes.ops) and
    are not yet timed (``iteration``, ``breakdown``)."""
    pr0 = profs[0]
    prog = group_program(profs, units)
    feat = np.stack([r.feat for r in profs])
    sm = np.array([r.sm_factor for r in profs])
    table, fused = pass_table(feat, pr0.holds, sm)
    g = len(profs)
    flat = np.concatenate([table.reshape(g, -1), fused.reshape(g, -1)], axis=1)   # Program's column order
    real = (prog.mb[:, None] < np.array(units)[None, :]).astype(float)
    dur = flat[:, prog.dur].T * real
    transfer = np.stack([r.transfer for r in profs], axis=1)                      # (p, g)
    sends = np.stack([np.where(pairs[:, None] >= 0, transfer[np.maximum(pairs, 0)], 0.0) * real
                      for pairs in (prog.send_f, prog.send_b)])
    gates = np.stack([r.gates.reshape(-1) for r in profs], axis=1)
    reals = [real_ops(prog, u) for u in units]
    cols = np.arange(g)
    grads = np.array([r.grads for r in reals])
    contention = _bucket_contention(profs, dur, grads)
    ops = evaluate(prog, dur, sends, real, gates, pr0.blocking, out)
    first = ops.start[np.array([r.first for r in reals]), cols[:, None]]
    last = np.array([r.last for r in reals])
    g_start = ops.start[grads, cols[:, None, None]]
    untimed = np.full(g, np.nan), np.full((g, len(CATEGORIES)), np.nan)
    return StageTimes(first, ops.end[last, cols[:, None]], ops.clock.T, ops.pp_free.T, g_start,
                      ops.end[grads, cols[:, None, None]] - g_start, np.stack([r.per_column for r in reals]),
                      np.stack([r.sends for r in reals]), table, fused, contention, *untimed,
                      tuple((prog, ops, i, reals[i]) for i in range(g)))
