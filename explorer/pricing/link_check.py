"""Rows whose links might carry more than their iteration: left to the simulation.

The simulation raises an iteration to its busiest link's busy seconds when calls of several
dimensions overlap on one link (analysis/link_bound.py).  The estimator counts no bytes per link,
but it knows a bound: a call lasts at least its bytes over its share of every boundary it crosses
(collective_algorithms.base.crossing), and every group of its dimension sends at once, so one call
adds at most its own seconds to a link's busy time averaged over the link's domains, divided by the
stages (each holds 1/p of the GPUs).  A link is therefore busy at most the largest stage's communication
seconds per iteration — every call of its passes, hidden or exposed, its pipeline transfers and its
gradient buckets and gathers (:func:`comm_seconds`).  A row whose stages communicate no longer
than its iteration cannot be link-bound; the others (communication overlapping beyond the
iteration) come from the simulation, exact by construction.
"""
from __future__ import annotations

import numpy as np

from .chunk_basis import BWD, COMPUTE_PARTS, F_IDX, FWD, PARTS
from .keys import memo_table
from .pipeline import StageTimes
from .profile import Layout, RowProfile

_COMM = [i for i, k in enumerate(PARTS) if k not in COMPUTE_PARTS]
_HIDDEN_F = [F_IDX["hidden_f"], F_IDX["fsdp_hidden_f"]]
_HIDDEN_B = [F_IDX["hidden_b"], F_IDX["fsdp_hidden_b"]]
_PER_PASS = memo_table()


def _per_pass(layout: Layout, p: int) -> np.ndarray:
    """(p, J) each pass's communication seconds per column (RealOps order), memoised on the layout
    (its key holds the schedule, p and v): rows of one layout share it.  The entry keeps its layout
    and is used only for that very object, so a key interned again after keys.clear() (a long
    session, between two rows of one call) never returns another layout's seconds."""
    got = _PER_PASS.get(layout.key)
    if got is not None and got[0] is layout:
        return got[1]
    f = layout.feat[layout.holds]                                    # (p, nch, FEATURES)
    comm_f = f[..., FWD][..., _COMM].sum(-1) + f[..., _HIDDEN_F].sum(-1)
    comm_b = f[..., BWD][..., _COMM].sum(-1) + f[..., _HIDDEN_B].sum(-1)
    # Columns in RealOps order: per chunk F, B, Bi, W (the weight gradient sends nothing), then the
    # fused F&B of (forward chunk, backward chunk).
    kinds = np.stack([comm_f, comm_b, comm_b, np.zeros_like(comm_b)], axis=-1).reshape(p, -1)
    fused = (comm_f[:, :, None] + comm_b[:, None, :]).reshape(p, -1)
    per_pass = np.concatenate([kinds, fused], axis=1)
    _PER_PASS[layout.key] = (layout, per_pass)
    return per_pass


def comm_seconds(prof: RowProfile, st: StageTimes, r: int) -> float:
    """An upper bound of any link's busy seconds per iteration of ``prof`` (row ``r`` of ``st``):
    its largest stage's communication seconds — each pass's calls, hidden or exposed, times the
    passes of its kind the row runs (StageTimes.per_column), each transfer times the transfers it
    sends, its gradient buckets and gathers — per iteration (m of the units simulated)."""
    per_pass = _per_pass(prof.layout, prof.p)                        # (p, J)
    share = prof.m / prof.units
    passes = share * (st.per_column[r] * per_pass).sum(-1)
    sends = share * st.sends[r] @ prof.transfer
    dp = prof.job_dur.sum(-1) + prof.trailing + prof.gates.max(axis=-1, initial=0.0)
    return float((passes + sends + dp).max())


def maybe_link_bound(profs: list[RowProfile], st: StageTimes, T: np.ndarray) -> np.ndarray:
    """(rows,) whether a row's links might carry more than its iteration ``T``."""
    return np.array([comm_seconds(pr, st, r) > T[r] for r, pr in enumerate(profs)], dtype=bool)
