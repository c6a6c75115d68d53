"""The proof that one array run is the one before with one period inserted (fold_tasks.match_shift
over arrays).

Two rows of one program that differ by ``shift`` units relate by one inserted period when every
task of the larger row is *early* — in the smaller row too, with the same times and the same
binding dependency — or *late* — the task ``shift`` units earlier in the smaller row, ``delta``
seconds later, its binding dependency shifted alike (or, at a tie, another input ending at the
same instant, as fold_tasks.match_shift accepts); per identity (pass column, or transfer
direction and column) the late units must form a suffix, and every identity must have grown.
The optimizer steps, once per iteration, are early or late as a whole.
"""
from __future__ import annotations

import numpy as np

from .rows import NONE, Rows


def unit_maps(R: Rows, shift: int) -> tuple[np.ndarray, np.ndarray]:
    """(N,) each task's counterpart ``shift`` units earlier and later (NONE when there is none);
    the optimizer steps map to themselves."""
    prog = R.prog
    n, units = R.n, prog.units
    cols = int(prog.dur.max()) + 1
    table = np.full((cols, units), NONE, np.int64)
    table[prog.dur, prog.mb] = np.arange(n)
    back = np.full(n, NONE, np.int64)
    fwd = np.full(n, NONE, np.int64)
    ok = prog.mb >= shift
    back[ok] = table[prog.dur[ok], prog.mb[ok] - shift]
    ok = prog.mb + shift < units
    fwd[ok] = table[prog.dur[ok], prog.mb[ok] + shift]
    steps = np.arange(2 * n, 2 * n + R.p)

    def tasks(m: np.ndarray) -> np.ndarray:
        return np.concatenate([m, np.where(m >= 0, n + m, NONE), steps])
    return tasks(back), tasks(fwd)


def identities(R: Rows) -> tuple[np.ndarray, np.ndarray]:
    """(N,) identity of every task (its unit aside: a transfer's is its sender's pass column) and its
    unit (-1: once per iteration)."""
    prog = R.prog
    cols = int(prog.dur.max()) + 1
    ident = np.concatenate([prog.dur, cols + prog.dur, 2 * cols + np.arange(R.p)])
    unit = np.concatenate([prog.mb, prog.mb, np.full(R.p, -1)])
    return ident, unit


def match(R: Rows, small: int, big: int, shift: int, T: np.ndarray, tol: float,
          maps: tuple[np.ndarray, np.ndarray]) -> float | None:
    """Seconds one period adds when row ``big`` is row ``small`` with one period of ``shift``
    units inserted (times within ``tol``), else None.  ``maps``: :func:`unit_maps` for ``shift``."""
    back, fwd = maps
    here = R.exists[:, big]
    delta = float(T[big] - T[small])
    s, b = small, big
    rs, rb = (R.ready[:, s], R.start[:, s], R.end[:, s]), (R.ready[:, b], R.start[:, b], R.end[:, b])
    bind_s, bind_b = R.binding[:, s], R.binding[:, b]
    end_b = R.end[:, b]

    def tie(other: np.ndarray) -> np.ndarray:
        """Whether task ``other`` of the larger row ends when each task's binding does: two inputs
        released it at once, and which one the engine named is a tie-break, not timing."""
        ok = (other >= 0) & (bind_b >= 0)
        o = np.maximum(other, 0)
        return ok & R.exists[o, b] & (np.abs(end_b[o] - end_b[np.maximum(bind_b, 0)]) <= tol)

    same = R.exists[:, s] & (R.dur[:, s] == R.dur[:, b]) & ((bind_s == bind_b) | tie(bind_s))
    for xs, xb in zip(rs, rb, strict=True):
        same &= (xs == xb) | (np.abs(xb - xs) <= tol)
    early = here & same
    k = np.where(back >= 0, back, 0)
    shifted = np.where(bind_s[k] >= 0, fwd[np.maximum(bind_s[k], 0)], NONE)
    late = (here & ~early & (back >= 0) & R.exists[k, s] & (R.dur[k, s] == R.dur[:, b])
            & ((shifted == bind_b) | tie(shifted)))
    for xs, xb in zip(rs, rb, strict=True):
        late &= np.abs(xb - xs[k] - delta) <= tol
    if (here & ~early & ~late).any():
        return None
    ident, unit = identities(R)
    per = unit >= 0
    size = int(ident.max()) + 1
    last_early = np.full(size, -1, np.int64)
    first_late = np.full(size, np.iinfo(np.int64).max, np.int64)
    e, lt = early & per, late & per
    np.maximum.at(last_early, ident[e], unit[e])
    np.minimum.at(first_late, ident[lt], unit[lt])
    present = np.zeros(size, bool)
    present[ident[here & per]] = True
    grew = first_late < np.iinfo(np.int64).max
    if (present & ~grew).any() or (last_early[grew] >= first_late[grew]).any():
        return None
    return delta
