"""Per-class breakdowns of array runs (arrayfold/rows.py), as analysis/breakdown.class_breakdown
makes them from task objects, for every row and class at once.

Busy time is each compute task's parts.  Idle time before a compute task — and after the class's
last one, up to the iteration's end — is explained by walking back the chain of binding
dependencies: a transfer's span from its ready time is charged to pp, a gradient bucket's to dp,
another class's compute to the bubble, and the walk stops at the class's own compute or when the
gap is explained; what is left is bubble.  Here every gap of every row walks at once, one hop per
numpy step, the gaps whose walk ended dropping out.
"""
from __future__ import annotations

import numpy as np

from ...vocabulary import CATEGORIES
from .rows import Rows, stage_starts

BUBBLE = CATEGORIES.index("bubble")
PP = CATEGORIES.index("pp")
DP = CATEGORIES.index("dp")
CHARGED = np.array(sorted((BUBBLE, PP, DP)))   # the categories idle time is charged to
REST = int(np.searchsorted(CHARGED, BUBBLE))   # ... and where what a walk leaves goes (the bubble)
SLOT = np.zeros(len(CATEGORIES), np.int64)     # a category's place among CHARGED (a look-up table)
SLOT[CHARGED] = np.arange(len(CHARGED))
OPTIMIZER = CATEGORIES.index("optimizer")
GAP_EPS = 1e-15              # class_breakdown's: a gap this short is explained


def breakdowns(R: Rows, parts: np.ndarray, T: np.ndarray, starts: np.ndarray | None = None) -> np.ndarray:
    """(g, p, CATEGORIES) seconds of each row's iteration ``T[r]`` per category on every class.

    ``parts``: (columns, CATEGORIES) the parts of one pass of each duration-table column
    (Program.dur), as the builder's task carries them.  ``starts``: (g, p) where each class's
    window begins (class_breakdown's ``start_s``: its first compute under a schedule whose
    iterations overlap, :func:`window`); 0 when None (a flushing schedule)."""
    g, p, n = R.g, R.p, R.n
    prog = R.prog
    out = np.zeros((g, p, len(CATEGORIES)))
    cls, comp = R.cls(), R.compute()
    cat = np.array([BUBBLE, PP, DP])[R.kind()]
    steps = R.steps
    # Duration-table columns are stage-major blocks of nch x KINDS: one block of parts per stage.
    width = -(-len(parts) // p)
    flat = np.zeros((p * width, len(CATEGORIES)))
    flat[:len(parts)] = parts
    table = flat.reshape(p, width, -1)
    gaps: list[tuple[np.ndarray, ...]] = []
    if starts is None:
        starts = np.zeros((g, p))
    for r in range(g):
        busy, sel, parts_sum, st, first = _busy(R, r, table, parts)
        out[r] = parts_sum
        opt = R.dur[steps, r]
        out[r, :, OPTIMIZER] += opt
        at = starts[r][st]                      # a class's first compute: from its window's start
        at[1:] = np.where(first[1:], at[1:], R.end[sel[:-1], r])
        begin = R.start[sel, r]
        gap = begin > at
        gaps.append((at[gap], begin[gap], R.binding[sel[gap], r], st[gap], np.full(gap.sum(), r)))
        last_end = np.maximum.reduceat(np.where(busy, R.end[:n, r], 0.0),
                                       stage_starts(prog))
        # The step may wait for the stage's gradient buckets after its last pass.
        has_opt = opt > 0
        step_start = R.start[steps, r]
        wait = np.flatnonzero(has_opt & (step_start > last_end))
        if len(wait):
            gaps.append((last_end[wait], step_start[wait], R.binding[steps[wait], r], wait,
                         np.full(len(wait), r)))
        # After the class's last compute task: what the iteration still waits for.
        last_end = np.where(has_opt, R.end[steps, r], last_end)
        ends = starts[r] + T[r]                 # each class's window's end
        tail = np.flatnonzero(ends > last_end)
        if len(tail):
            # The walk starts at the tasks that end the run (its makespan, which an overlapping
            # window's end need not be).
            live = R.end[:, r][R.exists[:, r]]
            enders = np.flatnonzero(R.exists[:, r] & (R.end[:, r] == live.max()))
            own = {int(cls[k]): int(k) for k in enders[::-1]}        # the first of each class
            d = np.array([own.get(int(s), int(enders[0])) for s in tail])
            gaps.append((last_end[tail], ends[tail], d, tail, np.full(len(tail), r)))
    a, b, d, s, rows = (np.concatenate(x) for x in zip(*gaps, strict=True))
    _walk(R, cls, comp, cat, a, b, d, s, rows, out)
    return out


def _busy(R: Rows, r: int, table: np.ndarray, parts: np.ndarray) -> tuple[np.ndarray, ...]:
    """Row ``r``'s passes that take time (mask and indices), the seconds of their parts per class
    and category ((p, CATEGORIES)), and the compute tasks of each class in start order: its real
    passes (their stages, and where each class's first is).  A row of every unit depends on the
    program and the builder's durations and parts only (``parts``: fold._parts, kept on the
    builder, as the tail is): kept on the tail for the program and ``parts``, read-only."""
    prog, n, p = R.prog, R.n, R.p
    every = R.g == 1 and R.units[0] == prog.units
    memo = R.tail.__dict__.get("_walk_busy")
    if every and memo is not None and memo[0] is prog and memo[1] is parts:
        return memo[2]
    busy = R.real[:, r] & (R.dur[:n, r] > 0)
    sel = np.flatnonzero(busy)
    width = table.shape[1]
    counts = np.bincount(prog.dur[sel], minlength=p * width).astype(float).reshape(p, width, 1)
    parts_sum = (counts * table).sum(axis=1)
    st = prog.stage[sel]
    first = np.r_[True, st[1:] != st[:-1]]
    got = (busy, sel, parts_sum, st, first)
    if every:
        for a in got:
            a.flags.writeable = False
        R.tail.__dict__["_walk_busy"] = (prog, parts, got)
    return got


def _walk(R: Rows, cls: np.ndarray, comp: np.ndarray, cat: np.ndarray, a: np.ndarray, b: np.ndarray,
          d: np.ndarray, s: np.ndarray, rows: np.ndarray, out: np.ndarray) -> None:
    """Charge every gap [a, b] of class ``s`` in row ``rows`` by walking its binding chain from
    task ``d`` (class_breakdown's ``explain``), adding into ``out``.

    A hop charges pp (a transfer), dp (a gradient bucket) or the bubble (another class's compute),
    so each gap keeps three sums, added into ``out`` at the end; gaps whose walk ended drop out as
    they end."""
    g = R.g
    ready = R.ready.ravel()                     # task-major: task t of row r at t * g + r
    binding = R.binding.ravel()
    owner = np.where(comp, cls, -1)             # reaching its own class's compute ends a walk
    slot = SLOT[cat]                            # a hop's category among CHARGED
    G = len(d)
    acc = np.zeros(len(CHARGED) * G)            # per gap: seconds of each CHARGED category
    gid = len(CHARGED) * np.arange(G)
    s_all, rows_all = s, rows
    one = g == 1                                # one row: task t at t, no row to carry along
    while len(d):
        live = b - a > GAP_EPS
        live &= d >= 0
        live &= owner[d] != s                   # (d = -1 reads the last task: dead already)
        if not live.all():
            dead = ~live
            acc[gid[dead] + REST] += np.maximum(b[dead] - a[dead], 0.0)
            a, b, d, s, gid = a[live], b[live], d[live], s[live], gid[live]
            if not len(d):
                break
            if not one:
                rows = rows[live]
        if one:
            flat = d
        else:
            flat = d * g
            flat += rows
        lo = ready[flat]
        np.maximum(lo, a, out=lo)
        amt = b - lo
        np.maximum(amt, 0.0, out=amt)
        acc[gid + slot[d]] += amt
        np.minimum(b, lo, out=b)
        d = binding[flat]
    g, p = out.shape[:2]
    where = rows_all * p + s_all
    for k, c in enumerate(CHARGED):
        out[:, :, c] += np.bincount(where, acc[k::len(CHARGED)], g * p).reshape(g, p)


def window(R: Rows, end: np.ndarray, overlap: bool) -> tuple[np.ndarray, np.ndarray]:
    """(T (g,), starts (g, p)): each row's iteration time and where each class's window begins,
    given ``end`` (g, p), when each class's last task ends.  A flushing schedule's iteration is
    the makespan from 0; one whose consecutive iterations overlap (ZB-H2, Window.OVERLAP) repeats
    every largest span from a class's first compute to its last task
    (analysis/steady_state.schedule_iteration)."""
    g, p = R.g, R.p
    if not overlap:
        return end.max(axis=1), np.zeros((g, p))
    n = R.n
    cls = R.cls()[:n]
    starts = np.zeros((g, p))
    for r in range(g):
        here = R.exists[:n, r]
        first = np.full(p, np.inf)
        np.minimum.at(first, cls[here], R.start[:n, r][here])
        starts[r] = first
    return (end - starts).max(axis=1), starts
