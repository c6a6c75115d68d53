"""The iteration split into the categories of Result.breakdown_s, for the busiest stage of each row.

As the simulation does (simulate.assemble), the breakdown is the one of the stage with the most
compute-stream work, over its window (analysis/breakdown.class_breakdown).  Its busy seconds are
every pass's parts (compute with weight gradients and SM contention, recompute, exposed tp/cp/ep
and ZeRO-3 dp), blocking sends (pp) and the optimizer step — in proportion to their time inside
the window where the window cuts them (PipeDream's period, P3's next iteration).  Its idle
seconds are split by the simulation's own walk along binding dependencies (pricing/walk.py):
transfers to pp, gradient buckets and parameter gathers to dp, other stages' compute to the
bubble.  The time a slower stream adds to PipeDream's period goes to that stream's category
(analysis/steady_state.PACE_CATEGORY).  The categories sum to the iteration time.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..analysis.busiest import busiest_stages
from ..vocabulary import CATEGORIES
from .chunk_basis import BWD, F_IDX, FWD, PARTS
from .pipeline import UNDER_DIMS, StageTimes, fused_extra
from .profile import RowProfile
from .program import KINDS
from .sync import Ending, Window_
from .walk import IDLE, Intervals, walk

_PASS_CATS = ("compute", "recompute", "tp", "cp", "ep", "dp")
_CAT_OF = {"compute": 0, "weight-grad": 0, "recompute": 1, "tp": 2, "cp": 3, "ep": 4, "dp": 5}
_FOLD = np.zeros((len(PARTS), len(_PASS_CATS)))
for _i, _k in enumerate(PARTS):
    _FOLD[_i, _CAT_OF[_k]] = 1.0
_COMM = [i for i, k in enumerate(PARTS) if k in ("tp", "cp", "ep", "dp")]
_COMPUTE = [i for i, k in enumerate(PARTS) if k not in ("tp", "cp", "ep", "dp")]
_WGRAD = PARTS.index("weight-grad")
_IDX = {c: i for i, c in enumerate(CATEGORIES)}


def _column_parts(profs: list[RowProfile], st: StageTimes) -> np.ndarray:
    """(g, p, J, categories) the parts of one op of each stage's own columns (RealOps.per_column)."""
    pr0 = profs[0]
    feat = np.stack([r.feat for r in profs])[:, pr0.holds]            # (g, p, nch, F)
    sm = np.array([r.sm_factor for r in profs])[:, None, None]
    fwd, bwd = feat[..., FWD], feat[..., BWD]
    slow_f = sm * (feat[..., F_IDX["hidden_f"]] + feat[..., F_IDX["fsdp_hidden_f"]])
    slow_b = sm * (feat[..., F_IDX["hidden_b"]] + feat[..., F_IDX["fsdp_hidden_b"]])
    F = fwd @ _FOLD
    F[..., 0] += slow_f
    B = bwd @ _FOLD
    B[..., 0] += slow_b
    W = np.zeros_like(B)
    W[..., 0] = bwd[..., _WGRAD]
    Bi = B - W
    g, p, nch = feat.shape[:3]
    table = np.stack([F, B, Bi, W], axis=3).reshape(g, p, nch * 4, len(_PASS_CATS))
    # Fused F&B (chunks.fuse): compute parts of both, communication beyond them split in proportion.
    pair = fwd[:, :, :, None, :] + bwd[:, :, None, :, :]             # (g, p, lf, lb, PARTS)
    comp = pair[..., _COMPUTE] @ _FOLD[_COMPUTE]
    comm_parts = pair[..., _COMM]
    t_comp = comp.sum(-1)
    t_comm = comm_parts.sum(-1)
    excess = np.maximum(0.0, t_comm - t_comp)
    scale = np.divide(excess, t_comm, out=np.zeros_like(excess), where=t_comm > 0)
    fused = comp + (comm_parts * scale[..., None]) @ _FOLD[_COMM]
    # A dimension's exposed and hidden communication together beyond both: charged to it.
    extra, which = fused_extra(feat, t_comp, t_comm)
    cats = np.array([_CAT_OF[d] for d in UNDER_DIMS])[which]
    fused += extra[..., None] * (np.arange(len(_PASS_CATS)) == cats[..., None])
    fused[..., 0] += st.fused - (t_comp + excess + extra)            # SM contention of the pair
    return np.concatenate([table, fused.reshape(g, p, nch * nch, len(_PASS_CATS))], axis=2)


@dataclass(frozen=True)
class Pending:
    """A breakdown before its walk: the busy seconds, and the idle intervals to walk per group of
    rows that share op times (``groups[j]`` the intervals of rows ``rows[j]``)."""

    out: np.ndarray                  # (g, CATEGORIES) busy seconds, then the pace
    T: np.ndarray                    # (g,) iteration time
    groups: list[Intervals]
    rows: list[np.ndarray]


def breakdowns(pending: list[Pending]) -> list[np.ndarray]:
    """Each pending breakdown (:func:`begin`) finished with its idle time, (rows, CATEGORIES)
    seconds summing to the iteration time: the intervals of all of them walked at once."""
    idle = walk([x for pend in pending for x in pend.groups])
    out = []
    for pend in pending:
        got, idle = idle[:len(pend.groups)], idle[len(pend.groups):]
        out.append(finish(pend, got))
    return out


def begin(profs: list[RowProfile], st: StageTimes, en: Ending, win: Window_) -> Pending:
    """The breakdown of each row (with its op times, StageTimes.ops) but its idle time, and the
    intervals that idle time is (walked later, several evaluations' at once: :func:`breakdowns`)."""
    g, p = en.end.shape
    parts = _column_parts(profs, st)                                  # (g, p, J, 6)
    share = np.array([r.m / r.units for r in profs])                  # one iteration of those simulated
    # Per stage: its ops' parts (how many ops of each column it runs, times the column's parts).
    busy_parts = np.einsum("gpj,gpjc->gpc", st.per_column, parts) * share[:, None, None]
    busy_parts[..., 0] += st.contention * share[:, None]      # the passes the gradient buckets slowed
    sends = np.zeros((g, p))
    if profs[0].blocking:
        tr = np.stack([r.transfer for r in profs])                    # (g, pairs)
        sends = np.einsum("gsq,gq->gs", st.sends, tr) * share[:, None]
    opt = np.stack([r.optimizer for r in profs])
    busy = busy_parts.sum(-1) + sends + opt
    # simulate.assemble: most compute-stream work, then the later end, then the lower stage.
    k = busiest_stages(busy, en.end)
    rows = np.arange(g)
    out = np.zeros((g, len(CATEGORIES)))
    for j, c in enumerate(_PASS_CATS):
        out[:, _IDX[c]] = busy_parts[rows, k, j]
    out[:, _IDX["pp"]] = sends[rows, k]
    out[:, _IDX["optimizer"]] = opt[rows, k]
    # The window the stage's compute stream is broken down over; a slower stream's time beyond it
    # (PipeDream's pace) is charged to that stream.
    w0 = win.window_start[rows, k]
    w1 = w0 + (win.T - win.pace)
    # A window that cuts the stage's tasks (PipeDream's period between backwards, P3's next
    # iteration starting before this step ends) counts only their parts inside it, in proportion.
    done = np.where(opt[rows, k] > 0, en.step_end[rows, k], en.free[rows, k])
    for row in np.flatnonzero((w0 > en.first[rows, k]) | (w1 < done)).tolist():
        kk = int(k[row])
        step = (max(en.free[row, kk], en.dp_end[row, kk]), en.step_end[row, kk])
        out[row] = _clipped(profs[row], st, row, parts[row, kk], kk, w0[row], w1[row], step)
    for r, cat in enumerate(win.pace_category):
        out[r, _IDX[cat]] += win.pace[r]
    by_times: dict[int, list[int]] = {}
    for r, kept in enumerate(st.ops):
        assert kept is not None                 # rows are timed while their op times are kept
        by_times.setdefault(id(kept[1]), []).append(r)
    sets = [np.array(x) for x in by_times.values()]
    return Pending(out, win.T, [Intervals(profs, st, en, x, k[x], w0[x], w1[x]) for x in sets], sets)


def finish(pend: Pending, idle: list[np.ndarray]) -> np.ndarray:
    """The breakdown of :func:`begin` with its idle seconds (per group of rows, (rows, IDLE))."""
    out = pend.out.copy()
    for rows, got in zip(pend.rows, idle, strict=True):
        for j, c in enumerate(IDLE):
            out[rows, _IDX[c]] += got[:, j]
    # Float rounding: make the categories sum to T exactly.
    out[:, _IDX["bubble"]] += pend.T - out.sum(1)
    return out


def _clipped(prof: RowProfile, st: StageTimes, r: int, parts: np.ndarray, k: int, w0: float, w1: float,
             step: tuple[float, float]) -> np.ndarray:
    """(CATEGORIES,) the busy seconds of stage ``k``'s compute tasks inside [w0, w1] for row ``r``:
    each pass's parts (``parts``: (J, 6) per own column), blocking send and optimizer step (``step``:
    its start and end) in proportion to its time inside the window, as class_breakdown counts them."""
    kept = st.ops[r]
    assert kept is not None
    prog, times, col, _ = kept
    n, nch, end0 = prog.n, prog.nch, prog.end0
    lo, hi = (0 if k == 0 else prog.last_op[k - 1] + 1), prog.last_op[k] + 1
    i = np.arange(lo, hi)
    i = i[(times.real[i, col] > 0) & (times.dur[i, col] > 0)]
    ts, te, d = times.start[i, col], times.end[i, col], times.dur[i, col]
    inside = np.maximum(np.minimum(te, w1) - np.maximum(ts, w0), 0.0)
    c = prog.dur[i]
    nk = nch * len(KINDS)
    own = np.where(c < prog.p * nk, c - k * nk, nk + c - prog.p * nk - k * nch * nch)
    flat = np.concatenate([st.table[r].ravel(), st.fused[r].ravel()])
    out = np.zeros(len(CATEGORIES))
    got = (inside / d) @ parts[own]
    for j, cat in enumerate(_PASS_CATS):
        out[_IDX[cat]] = got[j]
    out[_IDX["compute"]] += (inside / d) @ (d - flat[c])     # SM contention of the gradient buckets
    if prof.blocking:
        # Each send runs on the compute stream after its pass (the backward's after the forward's).
        begin = te
        for pairs, slot in ((prog.send_f, end0 + n), (prog.send_b, end0 + 2 * n)):
            sent = pairs[i] >= 0
            arrive = np.where(sent, times.times[slot + i, col], begin)
            out[_IDX["pp"]] += np.maximum(np.minimum(arrive, w1) - np.maximum(begin, w0), 0.0).sum()
            begin = arrive
    out[_IDX["optimizer"]] = max(min(step[1], w1) - max(step[0], w0), 0.0) if prof.optimizer[k] > 0 else 0.0
    return out
