"""Gantt bars aggregated the way pixels would draw them (figures/gantt.py, beyond MAX_BARS bars).

The iteration is split into ``bins`` columns; in each row and column the kind that occupies it
most is kept, and runs of equal columns are fused.  A compute row's column is kept if at least a
third of it is busy, a communication row's if any of it is (a sparse all-reduce still shows).

Tens of thousands of bars (DeepSeek-V3's folded timeline) are expanded into their (bar, column)
pieces with NumPy; only the drawn cells are walked in Python, to fuse runs.  Each cell's per-kind
time is summed in the order of the bars, and a cell's busy share over its kinds in the order they
first appear in it, exactly as a plain loop would (tests/test_gantt_figure.py keeps that loop as
the reference), so the same bars always give the same floats.
"""
from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np

Row = tuple[Hashable, str, float, float, bool]     # (row key, kind, start s, end s, communication row)


def rasterize(rows: Sequence[Row], iteration_s: float, bins: int) -> list[tuple]:
    """``rows`` aggregated into ``bins`` columns (module docstring).  Returns (row_key, kind,
    start_s, end_s, operations, fill): ``operations`` = bars that started in the run, ``fill`` = its
    busy share, sorted by (str(row_key), start)."""
    if not rows:
        return []
    width = iteration_s / bins
    keys = list(dict.fromkeys(r[0] for r in rows))
    key_at = {k: i for i, k in enumerate(keys)}
    kinds = list(dict.fromkeys(r[1] for r in rows))
    kind_at = {k: i for i, k in enumerate(kinds)}
    n = len(rows)
    ki = np.fromiter((key_at[r[0]] for r in rows), dtype=np.int64, count=n)
    kd = np.fromiter((kind_at[r[1]] for r in rows), dtype=np.int64, count=n)
    s = np.fromiter((r[2] for r in rows), dtype=np.float64, count=n)
    e = np.fromiter((r[3] for r in rows), dtype=np.float64, count=n)
    comm_key = np.zeros(len(keys), dtype=bool)
    comm_key[ki[np.fromiter((bool(r[4]) for r in rows), dtype=bool, count=n)]] = True
    b0 = (s / width).astype(np.int64)                 # int() of a non-negative float: its floor
    b1 = np.minimum((e / width).astype(np.int64), bins - 1)
    # Bars that start in each (row, column): counted even where nothing of them is drawn.
    start_id, start_n = np.unique(ki * (bins + 1) + b0, return_counts=True)
    starts = dict(zip(start_id.tolist(), start_n.tolist(), strict=True))
    # Every (bar, column) piece, bar by bar and column by column (the loop's order).
    count = np.maximum(b1 - b0 + 1, 0)
    bar = np.repeat(np.arange(n), count)
    first = np.cumsum(count) - count
    col = b0[bar] + (np.arange(len(bar)) - first[bar])
    overlap = np.minimum(e[bar], (col + 1) * width) - np.maximum(s[bar], col * width)
    keep = overlap > 0
    bar, col, overlap = bar[keep], col[keep], overlap[keep]
    cell = ki[bar] * bins + col
    piece = cell * len(kinds) + kd[bar]
    ids, first_at, inverse = np.unique(piece, return_index=True, return_inverse=True)
    time = np.bincount(inverse, weights=overlap)      # per (cell, kind), summed in bar order
    p_cell, p_kind = ids // len(kinds), ids % len(kinds)
    cells, where = np.unique(p_cell, return_inverse=True)
    # A cell's busy time: its kinds added in the order they first appear there, one rank at a
    # time (0 + t0 + t1 + ..., as Python's sum over the loop's dict).
    by_first = np.lexsort((first_at, p_cell))
    rank = np.empty(len(ids), dtype=np.int64)
    group_start = np.searchsorted(p_cell[by_first], p_cell[by_first], side="left")
    rank[by_first] = np.arange(len(ids)) - group_start
    busy_s = np.zeros(len(cells))
    for r in range(int(rank.max()) + 1 if len(ids) else 0):
        at = rank == r
        busy_s[where[at]] += time[at]
    busy = np.minimum(busy_s / width, 1.0)
    # The kind that occupies a cell most (ties: the later name, as max((t, kind)) picks).
    name_rank = np.argsort(np.argsort(np.array(kinds, dtype=object)))
    top = np.lexsort((name_rank[p_kind], time, p_cell))
    last_of_cell = np.r_[p_cell[top][1:] != p_cell[top][:-1], True]
    winner = np.empty(len(cells), dtype=np.int64)
    winner[where[top[last_of_cell]]] = p_kind[top[last_of_cell]]
    c_key, c_bin = cells // bins, cells % bins
    shown = busy >= np.where(comm_key[c_key], 1e-6, 1 / 3)
    key_rank = np.argsort(np.argsort(np.array([str(k) for k in keys], dtype=object)))
    order = np.lexsort((c_bin, key_rank[c_key]))
    order = order[shown[order]]
    out: list[list] = []
    for k, b, kind_i, fill in zip(c_key[order].tolist(), c_bin[order].tolist(), winner[order].tolist(),
                                  busy[order].tolist(), strict=True):
        kind = kinds[kind_i]
        ops = starts.get(k * (bins + 1) + b, 0)
        last = out[-1] if out else None
        if last and last[0] == keys[k] and last[1] == kind and abs(last[3] - b * width) < width * 1e-6:
            runs = (last[3] - last[2]) / width
            last[5] = (last[5] * runs + fill) / (runs + 1)
            last[3] = (b + 1) * width
            last[4] += ops
        else:
            out.append([keys[k], kind, b * width, (b + 1) * width, ops, fill])
    return [tuple(x) for x in out]
