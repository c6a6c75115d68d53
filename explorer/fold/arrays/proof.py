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

from dataclasses import dataclass

import numpy as np

from .rows import NONE, Rows


@dataclass(frozen=True)
class Maps:
    """Static maps of a program's task space for a shift of ``shift`` units."""

    back: np.ndarray             # (N,) the same task ``shift`` units earlier (NONE: none)
    fwd: np.ndarray              # (N,) ... ``shift`` units later
    prev_same: np.ndarray        # (N,) the previous task of the same identity (unit - 1), NONE first
    next_same: np.ndarray        # (N,) the next one (unit + 1), NONE last
    per_unit: np.ndarray         # (N,) bool: the task belongs to a unit (not once per iteration)


def unit_maps(R: Rows, shift: int) -> Maps:
    """The :class:`Maps` of ``R``'s program: a pass's identity is its duration-table column
    (stage, local chunk, kind), a transfer's its sender's; the optimizer steps map to themselves."""
    prog = R.prog
    n, units = R.n, prog.units
    cols = int(prog.dur.max()) + 1
    table = np.full((cols, units + 2 * shift + 2), NONE, np.int64)
    table[prog.dur, prog.mb + shift + 1] = np.arange(n)
    steps = np.arange(2 * n, 2 * n + len(R.tail))          # per-iteration tasks: themselves
    fixed = np.full(len(R.tail), NONE, np.int64)

    def at(offset: int) -> np.ndarray:
        m = table[prog.dur, prog.mb + shift + 1 + offset]
        return np.concatenate([m, np.where(m >= 0, n + m, NONE)])
    return Maps(np.concatenate([at(-shift), steps]), np.concatenate([at(shift), steps]),
                np.concatenate([at(-1), fixed]), np.concatenate([at(1), fixed]),
                np.concatenate([np.ones(2 * n, bool), np.zeros(len(R.tail), bool)]))


def match(R: Rows, small: int, big: int, T: np.ndarray, tol: float,
          maps: Maps) -> tuple[float, np.ndarray] | None:
    """When row ``big`` is row ``small`` with one period of ``maps``'s shift inserted (times within
    ``tol``): the seconds one period adds and which tasks of ``big`` are late ((N,) bool); else
    None."""
    back, fwd = maps.back, maps.fwd
    here = R.exists[:, big]
    delta = float(T[big] - T[small])
    s, b = small, big
    rs, rb = (R.ready[:, s], R.start[:, s], R.end[:, s]), (R.ready[:, b], R.start[:, b], R.end[:, b])
    bind_s, bind_b = R.binding[:, s], R.binding[:, b]
    end_b = R.end[:, b]

    def tie(other: np.ndarray, bind: np.ndarray) -> np.ndarray:
        """Whether task ``other`` of the larger row ends when the binding ``bind`` does: two inputs
        released the task at once, and which one the engine named is a tie-break, not timing."""
        ok = (other >= 0) & (bind >= 0)
        o = np.maximum(other, 0)
        return ok & R.exists[o, b] & (np.abs(end_b[o] - end_b[np.maximum(bind, 0)]) <= tol)

    same = R.exists[:, s] & (R.dur[:, s] == R.dur[:, b])
    for xs, xb in zip(rs, rb, strict=True):
        same &= (xs == xb) | (np.abs(xb - xs) <= tol)
    odd = same & (bind_s != bind_b)
    if odd.any():
        same[odd] = tie(bind_s[odd], bind_b[odd])
    early = here & same
    # Late: the rest, each the task one period earlier, later by delta.
    c = np.flatnonzero(here & ~early)
    k = back[c]
    if (k < 0).any():
        return None
    ok = R.exists[k, s] & (R.dur[k, s] == R.dur[c, b])
    for xs, xb in zip(rs, rb, strict=True):
        ok &= np.abs(xb[c] - xs[k] - delta) <= tol
    bk = bind_s[k]
    shifted = np.where(bk >= 0, fwd[np.maximum(bk, 0)], NONE)
    odd = shifted != bind_b[c]
    if odd.any():
        ok[odd] &= tie(shifted[odd], bind_b[c][odd])
    if not ok.all():
        return None
    late = np.zeros(len(here), bool)
    late[c] = True
    # Per identity the late units form a suffix, and every identity grew: no early task follows a
    # late one of its identity, and the last of each identity in the larger row is late.
    prev = maps.prev_same
    has_prev = maps.per_unit & (prev >= 0)
    if (early & has_prev & late[np.maximum(prev, 0)]).any():
        return None
    nxt = maps.next_same
    last = here & maps.per_unit & ((nxt < 0) | ~here[np.maximum(nxt, 0)])
    if not late[last].all():
        return None
    return delta, late
