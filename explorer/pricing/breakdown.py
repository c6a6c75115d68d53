"""The iteration split into the categories of Result.breakdown_s, for the busiest stage of each row.

As the simulation does (simulate.assemble), the breakdown is the one of the stage with the most
compute-stream work.  Its busy seconds are exact: every pass's parts (compute with weight
gradients and SM contention, recompute, exposed tp/cp/ep and ZeRO-3 dp), blocking sends (pp) and
the optimizer step, for every pass the stage runs.  Its idle seconds are split without the
engine's walk along binding dependencies, charged as that walk charges them where it can be
followed: the wait for its own gradient buckets after its last pass, a chunk's first forward held
by a parameter gather along that chunk's fill (its own or an earlier stage's: _fill_gates) and its
tail after its own step (_tail_dp: its trailing ZeRO gathers when it ends the iteration, else the
last stage's gathers and gradient buckets) to dp; the pipeline transfers on the way of the first
unit to the stage and of the last one back (one hop per stage pair it crosses) to pp; the time a
slower stream adds to PipeDream's period to that stream's category
(analysis/steady_state.PACE_CATEGORY); the rest to the bubble.  The categories sum to the
iteration time.
"""
from __future__ import annotations

import numpy as np

from ..analysis.busiest import busiest_stages
from ..schedules.registry import Window
from ..vocabulary import CATEGORIES
from .chunk_basis import BWD, F_IDX, FWD, PARTS
from .pipeline import UNDER_DIMS, StageTimes, fused_extra
from .profile import RowProfile
from .sync import Ending, Window_

_PASS_CATS = ("compute", "recompute", "tp", "cp", "ep", "dp")
_CAT_OF = {"compute": 0, "weight-grad": 0, "recompute": 1, "tp": 2, "cp": 3, "ep": 4, "dp": 5}
_FOLD = np.zeros((len(PARTS), len(_PASS_CATS)))
for _i, _k in enumerate(PARTS):
    _FOLD[_i, _CAT_OF[_k]] = 1.0
_COMM = [i for i, k in enumerate(PARTS) if k in ("tp", "cp", "ep", "dp")]
_COMPUTE = [i for i, k in enumerate(PARTS) if k not in ("tp", "cp", "ep", "dp")]
_WGRAD = PARTS.index("weight-grad")


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


def breakdowns(profs: list[RowProfile], st: StageTimes, en: Ending, win: Window_) -> np.ndarray:
    """(g, CATEGORIES) seconds of the busiest stage of each row, summing to the iteration time."""
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
    idx = {c: i for i, c in enumerate(CATEGORIES)}
    for j, c in enumerate(_PASS_CATS):
        out[:, idx[c]] = busy_parts[rows, k, j]
    out[:, idx["pp"]] = sends[rows, k]
    out[:, idx["optimizer"]] = opt[rows, k]
    T = win.T
    # A window shorter than the stage's work (P3's next iteration starts before this step ends,
    # PipeDream's window between backwards): the step, then compute, fall outside it.
    over = np.maximum(0.0, out.sum(1) - T)
    for col in ("optimizer", "compute"):
        take = np.minimum(over, out[:, idx[col]])
        out[:, idx[col]] -= take
        over = over - take
    idle = np.maximum(0.0, T - out.sum(1))
    gate_wait = _fill_gates(np.stack([r.gates for r in profs]), st, k, T)
    trailing = np.stack([r.trailing for r in profs])
    dp_wait = np.maximum(0.0, en.dp_end[rows, k] - en.free[rows, k]) + gate_wait
    hops = np.array([r.transfer[:max(r.p - 1, 0)].sum() for r in profs]) * (not profs[0].blocking)
    pp_wait = 2 * hops
    dp_wait = dp_wait + _tail_dp(en, trailing, k, T, profs[0].schedule.window is Window.FLUSH)
    for col, wait in (("dp", dp_wait), ("pp", pp_wait)):
        take = np.minimum(wait, idle)
        out[:, idx[col]] += take
        idle = idle - take
    for r, cat in enumerate(win.pace_category):
        if win.pace[r] > 0:
            take = min(win.pace[r], idle[r])
            out[r, idx[cat]] += take
            idle[r] -= take
    out[:, idx["bubble"]] += idle
    # Float rounding: make the categories sum to T exactly.
    out[:, idx["bubble"]] += T - out.sum(1)
    return out


def _fill_gates(gates: np.ndarray, st: StageTimes, k: np.ndarray, T: np.ndarray) -> np.ndarray:
    """(g,) seconds of the busiest stage's waits for its chunks' first forwards that the
    simulation's walk charges to dp.  Along a chunk's fill (each stage's first forward of that
    chunk bound by its input from the stage before, or by its own parameter gather, ZeRO 1-2),
    the walk back from stage k's first forward of chunk c crosses the stages until one whose
    first forward of chunk c waited for its gather; that gather is dp from the gap's start on
    stage k (the previous op's end, 0 for the first) — the sends between are pp, the forwards
    bubble.  ``gates``: (g, p, nch) the chunks' gather ends."""
    g, p, nch = gates.shape
    rows = np.arange(g)
    start = st.chunk_start                                                # (g, p, nch)
    bound = (gates > 0) & (np.abs(start - gates) <= 1e-12 * np.maximum(T, 1e-30)[:, None, None])
    upto = (np.arange(p)[None, :] <= k[:, None])[:, :, None]              # stages 0..k
    j = np.where(bound & upto, np.arange(p)[None, :, None], -1).max(axis=1)   # (g, nch)
    gate = np.take_along_axis(gates, np.maximum(j, 0)[:, None, :], axis=1)[:, 0, :]
    after = st.chunk_after[rows, k]                                       # (g, nch)
    return np.where(j >= 0, np.maximum(gate - after, 0.0), 0.0).sum(axis=1)


def _tail_dp(en: Ending, trailing: np.ndarray, k: np.ndarray, T: np.ndarray, flush: bool) -> np.ndarray:
    """(g,) seconds of the busiest stage's tail — after its own compute ends (its optimizer step),
    until the iteration ends — that the simulation's walk charges to dp
    (analysis/breakdown.class_breakdown), following the last task back:
    - the stage ends the iteration itself: its trailing ZeRO gathers (``trailing``, (g, p));
    - another stage does (flushing schedules whose last stage ends with its step or its gathers):
      its trailing gathers from its step's end, then its step (bubble: another class's compute),
      bound by its last gradient bucket when the buckets end after its passes, charged from the
      bucket's readiness (its wait for the FIFO dp stream included), each from the tail's start at
      the earliest; before that the backward that produced it (bubble).  Other endings keep the
      tail as bubble."""
    g = k.shape[0]
    rows = np.arange(g)
    own = trailing[rows, k]
    if g == 0:
        return own
    a = en.step_end[rows, k]
    mine = en.end[rows, k] >= T * (1 - 1e-12)             # the busiest stage ends the iteration itself
    if not flush:
        return own
    last = np.argmax(en.end, axis=1)                      # first in task order among equals
    ends_last = np.isclose(en.end[rows, last], T, rtol=1e-12, atol=0.0)
    step, tr = en.step_end[rows, last], trailing[rows, last]
    end = en.end[rows, last]
    by_step = (end == step) | ((tr > 0) & np.isclose(end, step + tr, rtol=1e-12))
    gathers = np.where(tr > 0, np.maximum(T - np.maximum(a, step), 0.0), 0.0)
    bound = (en.dp_end[rows, last] >= en.free[rows, last]) & (en.dp_end[rows, last] > 0)
    buckets = np.where(bound, np.maximum(np.minimum(en.dp_end[rows, last], T)
                                         - np.maximum(a, en.dp_ready[rows, last]), 0.0), 0.0)
    other = ends_last & by_step & (last != k)
    return np.where(mine | (last == k), own, np.where(other, gathers + buckets, 0.0))
