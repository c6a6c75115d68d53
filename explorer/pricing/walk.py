"""The busiest stage's idle time split as the simulation's walk splits it, for many rows at once.

analysis/breakdown.class_breakdown explains each idle interval of a class's compute stream — before
each of its compute tasks, and after its last one up to the window's end — by walking back the
chain of binding dependencies (the input each task waited for last): a pipeline transfer's span
from its ready time is pp, a gradient bucket's or a parameter gather's dp, another class's compute
the bubble; the walk stops at the class's own compute or when the interval is explained, and what
is left is bubble.  Here the same walk runs over the evaluated programs' time vectors:
:class:`Intervals` finds a group's intervals, :func:`walk` walks those of several groups at once,
one hop per numpy step, the walks that ended dropping out (a chain can cross every stage twice:
the hops, not the rows, cost; groups evaluated into one buffer share them, estimate/many.py).

The tasks a walk can meet, numbered per group (their time-vector slot minus ``end0`` for the
first three kinds): op ``i`` (a pass, ``[0, n)``); the forward and backward transfers op ``i``
sends (``n + i``, ``2n + i``); each chunk's last parameter gather at the start (ZeRO 1-2,
builder._gathers_at_start: ready at 0); then per stage its last gradient bucket, its optimizer step
and its last parameter gather after the step (IterationBuilder._iteration_end).  A pass waits for
the previous pass of its stage, the transfer (or, on a V's turn, the pass) bringing its input, its
own forward or backward (which ends with the previous pass at the latest) and its chunk's gather;
the one that binds is the engine's (engine/scheduler.run: the latest end, then the latest start,
then the stream visited last at one instant, as fold/arrays/rows.py's binding), found only for the
passes a walk meets.
"""
from __future__ import annotations

import numpy as np

from .critical_path import OpTimes
from .pipeline import StageTimes
from .profile import RowProfile
from .program import Program
from .sync import Ending

IDLE = ("bubble", "pp", "dp")      # the categories a walk charges, in this order
BUBBLE, PP, DP = 0, 1, 2
GAP_EPS = 1e-15                    # class_breakdown's: a shorter interval is explained (as bubble)
NONE = -1
STEP = 1                           # roles of the per-stage tasks after the passes: bucket, step, gather
# Columns of a walk's integer state: its task; where its row's times and starts begin in the
# shared buffers, and their stride; its program's n, end0, first op, tail's first task, p, nch and
# send kind; where its row's previous-op and tail tables begin; its stage; its interval.
D, TB, SB, G, N, E0, OB, T0, P, NCH, BLK, PB, RB, KK, GID = range(15)


class Intervals:
    """The idle intervals of stage ``k[r]`` of the rows ``rows`` of one evaluation (one program and
    time vector) in their windows ``[w0, w1]``, and what a walk reads of that evaluation."""

    def __init__(self, profs: list[RowProfile], st: StageTimes, en: Ending, rows: np.ndarray, k: np.ndarray,
                 w0: np.ndarray, w1: np.ndarray) -> None:
        kept = [st.ops[r] for r in rows]
        assert all(x is not None for x in kept)      # rows are timed while their op times are kept
        prog, opt = kept[0][0], kept[0][1]
        self.prog, self.rows = prog, rows
        self.col = np.array([x[2] for x in kept])
        self.G = opt.times.shape[1]
        self.times, self.start = opt.times.reshape(-1), opt.start.reshape(-1)
        self.blocking = profs[rows[0]].blocking
        self.tail0 = 3 * prog.n + prog.p * prog.nch
        reals = [x[3] for x in kept]
        # Each row's previous real op of every op, one table per unit count (rows of one count
        # share their RealOps), at self.pbase[row] in their concatenation.
        first: dict[int, int] = {}                                    # a column of each count
        for r, x in zip(reals, kept, strict=True):
            first.setdefault(id(r), x[2])
        at = {key: j * prog.n for j, key in enumerate(first)}
        self.prev = [_previous(prog, opt.real[:, col] > 0) for col in first.values()]
        self.pbase = np.array([at[id(r)] for r in reals])
        self._tail_tasks([profs[r] for r in rows], en, reals)
        self._intervals(opt, [profs[r] for r in rows], en, k, w0, w1)

    def _tail_tasks(self, profs: list[RowProfile], en: Ending, reals: list) -> None:
        """Per row (of the group) and stage: ready time and binding of its last bucket, its step and
        its last gather after the step (columns role x p)."""
        rows, p, G = self.rows, self.prog.p, self.G
        last = np.array([r.last for r in reals])                         # (gr, p)
        grads = np.array([r.grads for r in reals])                       # (gr, p, nch)
        overlap = np.array([pr.overlap_reduce for pr in profs])[:, None]
        chunk = en.dp_chunk[rows]
        bucket_op = np.where(overlap & (chunk >= 0),
                             np.take_along_axis(grads, np.maximum(chunk, 0)[..., None], -1)[..., 0], last)
        dp_end, col = en.dp_end[rows], self.col[:, None]
        last_end = self.times[(self.prog.end0 + last) * G + col]
        last_start = self.start[last * G + col]
        has = chunk >= 0
        # The step waits for the stage's last pass and its buckets: the later end binds (a tie: the
        # later start, then the dp stream, visited after compute at one instant).
        tie = (dp_end == last_end) & (dp_end - en.dp_dur[rows] >= last_start)
        by_bucket = has & ((dp_end > last_end) | tie)
        stages = np.arange(p)
        self.tail_ready = np.concatenate([en.dp_ready[rows], np.maximum(last_end, np.where(has, dp_end, 0.0)),
                                          en.step_end[rows]], axis=1)
        self.tail_next = np.concatenate([bucket_op, np.where(by_bucket, self.tail0 + stages, last),
                                         np.broadcast_to(self.tail0 + p + stages, last.shape)], axis=1)

    def _intervals(self, opt: OpTimes, profs: list[RowProfile], en: Ending, k: np.ndarray, w0: np.ndarray,
                   w1: np.ndarray) -> None:
        """The intervals [a, b] to walk, their rows (of the group) and first tasks ``d``; ``via``:
        ``d`` is the pass after the interval, whose binding the walk starts at."""
        gr, prog, G = len(self.rows), self.prog, self.G
        n, end0 = prog.n, prog.end0
        # Stage k's passes that take time, row after row in program order (ops are stage-major).
        stage_lo = np.r_[0, prog.last_op[:-1] + 1]
        lo, hi = stage_lo[k], prog.last_op[k] + 1
        counts = hi - lo
        ri = np.repeat(np.arange(gr), counts)
        i = lo[ri] + np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
        flat = i * G + self.col[ri]
        keep = (opt.dur.reshape(-1)[flat] > 0) & (opt.real.reshape(-1)[flat] > 0)
        i, ri, flat = i[keep], ri[keep], flat[keep]
        ts = self.start[flat]
        free = self.times[flat + end0 * G]
        if self.blocking:
            # A blocking sender's compute stream is free once its sends arrive (the backward's last).
            for c, pairs in ((1, prog.send_f), (2, prog.send_b)):
                free = np.where(pairs[i] >= 0, self.times[flat + (end0 + c * n) * G], free)
        # Where the stream is before each pass: its window's start, else the previous pass's end.
        prev = np.r_[-np.inf, free[:-1]]
        prev[np.r_[True, ri[1:] != ri[:-1]]] = -np.inf
        at = np.maximum(w0[ri], np.minimum(prev, w1[ri]))
        gap = np.flatnonzero((ts > at) & (at < w1[ri]))
        a, b, d, rows, via = [at[gap]], [np.minimum(ts[gap], w1[ri[gap]])], [i[gap]], [ri[gap]], [len(gap)]
        # The optimizer step (it may wait for the stage's buckets), then the tail up to the window's end.
        sel, own = self.rows, np.arange(gr)
        opt_s = np.array([pr.optimizer[kk] for pr, kk in zip(profs, k, strict=True)])
        step_start = np.maximum(en.free[sel, k], en.dp_end[sel, k])
        at = np.maximum(w0, np.minimum(en.free[sel, k], w1))
        wait = (opt_s > 0) & (step_start > at) & (at < w1)
        a.append(at[wait])
        b.append(np.minimum(step_start, w1)[wait])
        d.append(self.tail_next[own[wait], prog.p + k[wait]])        # the step's binding
        rows.append(own[wait])
        at = np.where(opt_s > 0, np.maximum(at, np.minimum(en.step_end[sel, k], w1)), at)
        tail = w1 > at
        a.append(at[tail])
        b.append(w1[tail])
        d.append(self._enders(profs, en, k)[tail])
        rows.append(own[tail])
        self.a, self.b, self.d, self.ri = (np.concatenate(x) for x in (a, b, d, rows))
        self.k = k
        self.via = np.arange(len(self.d)) < via[0]

    def _enders(self, profs: list[RowProfile], en: Ending, k: np.ndarray) -> np.ndarray:
        """Per row the task the tail's walk starts at: of the tasks that end last, stage k's own,
        else the first in task order (the lowest stage's: its step, or its gather after it)."""
        rows, p = self.rows, self.prog.p
        trailing = np.stack([pr.trailing for pr in profs])
        last = np.where(trailing > 0, en.step_end[rows] + trailing, en.step_end[rows])
        top = last.max(axis=1)
        own = np.arange(len(rows))
        s = np.where(last[own, k] == top, k, last.argmax(axis=1))
        return self.tail0 + np.where(trailing[own, s] > 0, 2 * p, p) + s


def walk(groups: list[Intervals]) -> list[np.ndarray]:
    """Per group its (rows, IDLE) seconds: every interval of every group walked at once."""
    return _Batch(groups).run()


class _Batch:
    """Several groups' tasks, addressed through flat arrays: their times and starts (one shared
    buffer when the groups were evaluated into one, else copies), their programs' op tables, their
    rows' previous-op and tail tables."""

    def __init__(self, groups: list[Intervals]) -> None:
        self.groups = groups
        self.TIMES, tb = _shared([x.times for x in groups])
        self.START, sb = _shared([x.start for x in groups])
        progs = [x.prog for x in groups]
        ob = np.cumsum([0] + [pr.n for pr in progs])[:-1]
        self.STAGE = np.concatenate([pr.stage for pr in progs])
        self.SRC = np.concatenate([pr.src for pr in progs])
        # Per pass the slots of its input from the neighbouring position and of its chunk's gather;
        # and whether it has two arrivals (DualPipe's F&B: :meth:`_bind_all`).
        self.INPUTS = np.concatenate([np.stack([np.maximum(pr.src[:, 0], pr.src[:, 1]), pr.src[:, 3]], axis=1)
                                      for pr in progs])
        more = np.concatenate([(pr.src[:, 0] > 0) & (pr.src[:, 1] > 0) for pr in progs])
        self.MORE = more if more.any() else None
        self.blocking = any(x.blocking for x in groups)
        self.PSEND = np.concatenate([_prev_sends(pr) for pr in progs])
        prevs = [p for x in groups for p in x.prev]
        pb = np.cumsum([0] + [len(p) for p in prevs])[:-1]
        self.PREV = np.concatenate(prevs)
        self.TREADY = np.concatenate([x.tail_ready.reshape(-1) for x in groups])
        self.TNEXT = np.concatenate([x.tail_next.reshape(-1) for x in groups])
        S, F, via, rows = [], [], [], []
        prev_at, tail_at, row_at = 0, 0, 0
        for j, x in enumerate(groups):
            m, pr = len(x.d), x.prog
            s = np.empty((m, 15), np.int64)
            s[:, D], s[:, G], s[:, N], s[:, E0], s[:, OB] = x.d, x.G, pr.n, pr.end0, ob[j]
            s[:, TB], s[:, SB] = tb[j] + x.col[x.ri], sb[j] + x.col[x.ri]
            s[:, T0], s[:, P], s[:, NCH], s[:, BLK] = x.tail0, pr.p, pr.nch, x.blocking
            s[:, PB] = pb[prev_at] + x.pbase[x.ri]
            s[:, RB] = tail_at + x.ri * 3 * pr.p
            s[:, KK] = x.k[x.ri]
            S.append(s)
            F.append(np.stack([x.a, x.b], axis=1))
            via.append(x.via)
            rows.append(row_at + x.ri)
            prev_at += len(x.prev)
            tail_at += x.tail_ready.size
            row_at += len(x.rows)
        self.S, self.F = np.concatenate(S), np.concatenate(F)
        self.S[:, GID] = len(IDLE) * np.arange(len(self.S))
        self.via, self.row, self.nrows = np.concatenate(via), np.concatenate(rows), row_at

    def run(self) -> list[np.ndarray]:
        """Walk every interval; per group its (rows, IDLE) seconds."""
        S, F = self.S, self.F
        acc = np.zeros(len(IDLE) * len(S))
        v = np.flatnonzero(self.via)
        if len(v):
            S[v, D] = self._bind(S[v], S[v, D])[1]                   # the walk starts at the binding
        while len(S):
            d, n = S[:, D], S[:, N]
            # A transfer off the compute stream (pp from its ready time, the end of the pass that
            # sent it) is crossed in the step that reached it: a chain alternates the two.
            sel = (d >= n) & (d < 3 * n) & (F[:, 1] - F[:, 0] > GAP_EPS)
            sel = np.flatnonzero(sel & (S[:, BLK] == 0) if self.blocking else sel)
            if len(sel):
                s = S[sel]
                prod = s[:, D] % s[:, N]
                lo = np.maximum(self.TIMES[s[:, TB] + (s[:, E0] + prod) * s[:, G]], F[sel, 0])
                acc[s[:, GID] + PP] += np.maximum(F[sel, 1] - lo, 0.0)
                F[sel, 1] = np.minimum(F[sel, 1], lo)
                S[sel, D] = prod
            idx = np.flatnonzero((F[:, 1] - F[:, 0] > GAP_EPS) & (S[:, D] >= 0))
            s = S[idx]
            dd = s[:, D]
            cat: np.ndarray | int = BUBBLE
            if (dd < s[:, N]).all():                                # passes: their stage's compute
                go = self.STAGE[s[:, OB] + dd] != s[:, KK]          # the class's own compute ends a walk
                idx, s = idx[go], s[go]
                ready, nxt = self._bind(s, s[:, D])
            else:
                cls, comp, cats, ready, nxt = self._resolve(s)
                go = ~(comp & (cls == s[:, KK]))
                idx, s, cat, ready, nxt = idx[go], s[go], cats[go], ready[go], nxt[go]
            if len(idx) < len(S):
                dead = np.ones(len(S), bool)
                dead[idx] = False
                acc[S[dead, GID] + BUBBLE] += np.maximum(F[dead, 1] - F[dead, 0], 0.0)
                S, F = s, F[idx]
            lo = np.maximum(ready, F[:, 0])
            acc[S[:, GID] + cat] += np.maximum(F[:, 1] - lo, 0.0)
            F[:, 1] = np.minimum(F[:, 1], lo)
            S[:, D] = nxt
        out = np.stack([np.bincount(self.row, acc[c::len(IDLE)], self.nrows) for c in range(len(IDLE))],
                       axis=1)
        cuts = np.cumsum([len(x.rows) for x in self.groups])[:-1]
        return np.split(out, cuts)

    def _bind(self, s: np.ndarray, i: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Ready time and binding task of passes ``i`` of the walks ``s`` (state rows): the latest of
        the previous pass of the stage, the input from the neighbouring position and the chunk's
        gather (a pass with two inputs, or a tie with the gather: :meth:`_bind_all`)."""
        e0, op, m = s[:, E0], s[:, OB] + i, len(i)
        prev = self.PREV[s[:, PB] + i]
        slot = np.empty((m, 3), np.int64)                           # time-vector slots, 0: none
        slot[:, 0] = np.where(prev >= 0, e0 + prev, 0)
        slot[:, 1:] = self.INPUTS[op]
        ends = self.TIMES[s[:, TB, None] + slot * s[:, G, None]]
        ends[slot == 0] = -np.inf
        top = ends.max(axis=1)
        pick = ends.argmax(axis=1)
        tied = ((ends == top[:, None]).sum(axis=1) > 1) & (top > -np.inf)
        if tied.any():
            # The previous pass and the input end together (the usual tie): the later one recorded.
            two = np.flatnonzero(tied & (ends[:, 2] < top))
            pick[two] = self._later_input(s[two], prev[two], slot[two, 1])
        chosen = slot[np.arange(m), pick]
        nxt = np.where(chosen >= e0, chosen - e0, np.where(chosen > 0, 3 * s[:, N] + chosen - 1, NONE))
        ready = np.where(chosen > 0, top, 0.0)                       # no input: ready at 0
        odd = tied & (ends[:, 2] == top)
        odd = np.flatnonzero(odd if self.MORE is None else odd | self.MORE[op])
        if len(odd):
            ready[odd], nxt[odd] = self._bind_all(s[odd], i[odd], prev[odd])
        return ready, nxt

    def _later_input(self, s: np.ndarray, prev: np.ndarray, inp: np.ndarray) -> np.ndarray:
        """1 where a pass's input (slot ``inp``) binds it rather than its previous pass ``prev``,
        both ending together: the engine records the later start, then the stream it visits later
        (:meth:`_latest`); else 0."""
        T = self.TIMES
        g, tb, sb, e0, n, ob = (s[:, c] for c in (G, TB, SB, E0, N, OB))
        at = inp - e0
        is_tr = at >= n
        prod = np.where(is_tr, at % n, at)
        sent = T[tb + self.PSEND[2 * ob + np.clip(at - n, 0, 2 * n - 1)] * g]
        start_in = np.where(is_tr, np.maximum(sent, T[tb + (e0 + prod) * g]), self.START[sb + prod * g])
        start_prev = self.START[sb + prev * g]
        key_in = 3 * self.STAGE[ob + prod] + np.where(is_tr, 2 * (1 - s[:, BLK]), 0)
        key_prev = 3 * self.STAGE[ob + prev]
        return ((start_in > start_prev) | ((start_in == start_prev) & (key_in >= key_prev))).astype(np.int64)

    def _bind_all(self, s: np.ndarray, i: np.ndarray, prev: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`_bind` over every input: the previous pass and the program's four sources."""
        e0, n = s[:, E0], s[:, N]
        slots = np.empty((len(i), 5), np.int64)
        slots[:, 0] = np.where(prev >= 0, e0 + prev, 0)
        slots[:, 1:] = self.SRC[s[:, OB] + i]
        ends = self.TIMES[s[:, TB, None] + slots * s[:, G, None]]
        ends[slots == 0] = -np.inf                                  # slot 0: no such input
        top = ends.max(axis=1)
        pick = ends.argmax(axis=1)
        tied = np.flatnonzero((ends == top[:, None]).sum(axis=1) > 1)
        if len(tied):
            pick[tied] = self._latest(s[tied], slots[tied], ends[tied] == top[tied, None])
        slot = slots[np.arange(len(i)), pick]
        nxt = np.where(slot >= e0, slot - e0, np.where(slot > 0, 3 * n + slot - 1, NONE))
        return np.where(slot > 0, top, 0.0), nxt

    def _latest(self, s: np.ndarray, slots: np.ndarray, tied: np.ndarray) -> np.ndarray:
        """Among inputs ending together (``tied``), the one the engine records last: the later
        start, then the stream visited later (class, then compute < dp < pp)."""
        T, g, tb = self.TIMES, s[:, G, None], s[:, TB, None]
        e0, n, ob = s[:, E0, None], s[:, N, None], s[:, OB, None]
        op = slots - e0
        is_op = (op >= 0) & (op < n)
        is_tr = op >= n
        prod = np.where(is_tr, op % n, np.maximum(op, 0))
        prev_send = self.PSEND[2 * ob + np.clip(op - n, 0, 2 * n - 1)]
        tr_start = np.maximum(T[tb + prev_send * g], T[tb + (e0 + prod) * g])
        # (A gather's start is not kept: taken as 0, the gathers at the start running from there.)
        start = np.where(is_op, self.START[s[:, SB, None] + prod * g], np.where(is_tr, tr_start, 0.0))
        stage = self.STAGE[ob + prod]
        key = np.where(is_op, 3 * stage, np.where(is_tr, 3 * stage + 2 * (1 - s[:, BLK, None]),
                                                  3 * (np.maximum(slots - 1, 0) // s[:, NCH, None]) + 1))
        start = np.where(tied, start, -np.inf)
        return np.where(start == start.max(axis=1, keepdims=True), key, -1).argmax(axis=1)

    def _resolve(self, s: np.ndarray) -> tuple[np.ndarray, ...]:
        """Per walk of ``s`` at any task: its task's class, whether it runs on the compute stream,
        the category its idle span is charged to, its ready time and its binding task."""
        d, n, t0, p = s[:, D], s[:, N], s[:, T0], s[:, P]
        cls, comp, cat = np.empty(len(d), np.int64), np.ones(len(d), bool), np.full(len(d), BUBBLE)
        ready, nxt = np.empty(len(d)), np.empty(len(d), np.int64)
        sel = np.flatnonzero(d < n)
        cls[sel] = self.STAGE[s[sel, OB] + d[sel]]
        ready[sel], nxt[sel] = self._bind(s[sel], d[sel])
        sel = np.flatnonzero((d >= n) & (d < 3 * n))                # transfers: ready when sent
        prod = d[sel] % n[sel]
        cls[sel] = self.STAGE[s[sel, OB] + prod]
        comp[sel] = s[sel, BLK] > 0                                 # a blocking send runs on compute
        cat[sel] = np.where(comp[sel], BUBBLE, PP)
        ready[sel] = self.TIMES[s[sel, TB] + (s[sel, E0] + prod) * s[sel, G]]
        nxt[sel] = prod
        sel = np.flatnonzero((d >= 3 * n) & (d < t0))               # start gathers: ready at once
        cls[sel] = (d[sel] - 3 * n[sel]) // s[sel, NCH]
        comp[sel], cat[sel], ready[sel], nxt[sel] = False, DP, 0.0, NONE
        sel = np.flatnonzero(d >= t0)                               # bucket, step, gather of a stage
        j = d[sel] - t0[sel]
        cls[sel] = j % p[sel]
        comp[sel] = j // p[sel] == STEP
        cat[sel] = np.where(comp[sel], BUBBLE, DP)
        ready[sel] = self.TREADY[s[sel, RB] + j]
        nxt[sel] = self.TNEXT[s[sel, RB] + j]
        return cls, comp, cat, ready, nxt


def _previous(prog: Program, real: np.ndarray) -> np.ndarray:
    """(n,) per op the previous op of its stage with ``real`` set (-1: none): op indices rise
    within a stage, so the running maximum of the real ones before an op is it, unless it lies on
    an earlier stage."""
    seen = np.maximum.accumulate(np.r_[-1, np.where(real, np.arange(prog.n), -1)[:-1]])
    return np.where(seen >= np.r_[0, prog.last_op[:-1] + 1][prog.stage], seen, -1)


def _shared(parts: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """One flat array holding every part and where each begins in it: the buffer they are views of
    when they share one (groups evaluated into one arena), else their concatenation."""
    if len(parts) == 1:
        return parts[0], np.zeros(1, np.int64)
    owner = parts[0].base if parts[0].base is not None else parts[0]
    addr = owner.__array_interface__["data"][0]
    size = owner.itemsize
    if owner.ndim == 1 and owner.flags.c_contiguous and all(
            (x.base is owner or x is owner) and x.flags.c_contiguous for x in parts):
        return owner, np.array([(x.__array_interface__["data"][0] - addr) // size for x in parts])
    return np.concatenate(parts), np.cumsum([0] + [len(x) for x in parts])[:-1]


def _prev_sends(prog: Program) -> np.ndarray:
    """(2n,) per transfer task (``n + i`` forward, ``2n + i`` backward, less n) the time-vector slot
    of the previous transfer on its sender's stream (0 for its first): the stream is first in, first
    out in the order the program sends (memoised on the program)."""
    got = prog.__dict__.get("_walk_prev_sends")
    if got is None:
        n, stage = prog.n, prog.stage[prog.send_ops]
        order = np.argsort(stage, kind="stable")
        ordered = (n * prog.send_cols + prog.send_ops)[order]            # less n: 0..2n-1
        follows = np.r_[False, stage[order][1:] == stage[order][:-1]] if len(order) else np.zeros(0, bool)
        got = prog.__dict__["_walk_prev_sends"] = np.zeros(2 * n, np.int64)
        got[ordered[follows]] = prog.end0 + n + ordered[np.flatnonzero(follows) - 1]
    return got
