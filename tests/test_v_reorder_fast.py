"""The V-Shape reordering's fast paths (schedules/v_reorder.py) equal the step-by-step walks they
replace: the squeeze's integer sort and the explicit-W move's one search give the same slots and
the same memory state as the reference code below (the implementation before them), and the
orders of V-Half and V-Min are unchanged on shapes the search prices (p 32 and 64)."""
from __future__ import annotations

import hashlib
import random

import pytest

from explorer.schedules import v_reorder as vr
from explorer.schedules.vshape import building_block


def _squeeze_reference(ranks):
    p = len(ranks)
    passes = sorted((t, r, k, j) for r in range(p) for k, ts in enumerate(ranks[r]) for j, t in enumerate(ts))
    end = {}
    last = [0] * p
    for _, r, k, j in passes:
        t = last[r]
        if k in (vr.F0, vr.B1) and r > 0:
            t = max(t, end[r - 1, k, j])
        if k in (vr.F1, vr.B0) and r + 1 < p:
            t = max(t, end[r + 1, k, j])
        if k in (vr.F1, vr.B1, vr.B0):
            t = max(t, end[r, k - 1, j])
        if j > 0:
            t = max(t, end[r, k, j - 1])
        end[r, k, j] = last[r] = t + 1
    return [[[end[r, k, j] - 1 for j in range(len(ts))] for k, ts in enumerate(ranks[r])] for r in range(p)]


def _move_reference(mem, t, s, cap):
    k = mem.kind[t]
    live, pend = (mem.live[s - 1], mem.pend[s - 1]) if s else (0, 0)
    new = []
    for u in range(s, len(mem.kind)):
        live, pend = mem._step(k if u == s else -1 if u == t else mem.kind[u], live, pend)
        if live > cap:
            return False
        if u > t and live == mem.live[u] and pend == mem.pend[u]:
            break
        new.append((live, pend))
    mem.kind[s], mem.kind[t] = k, -1
    for u, (live, pend) in enumerate(new, start=s):
        mem.live[u], mem.pend[u] = live, pend
    return True


@pytest.mark.parametrize("p,m,k", [(4, 6, 1), (6, 9, 2), (8, 16, 2), (9, 12, 1)])
def test_squeeze_equals_the_tuple_sort(p, m, k):
    ranks = vr.repeat(building_block(p, k), m)
    ranks6 = [vr.place_w(r, split=False) for r in ranks]
    for rs in (ranks, ranks6):
        assert vr.squeeze([[list(ts) for ts in r] for r in rs]) == _squeeze_reference(rs)
    # After a reordering pass (moved passes, ties of start slots across ranks and kinds).
    moved = [vr.place_w(r[:4], split=False) for r in vr._reorder_pass(ranks, with_w=True)]
    assert vr.squeeze([[list(ts) for ts in r] for r in moved]) == _squeeze_reference(moved)


@pytest.mark.parametrize("seed", range(6))
def test_explicit_move_equals_the_walk(seed):
    rng = random.Random(seed)
    rank = vr.place_w(vr.repeat(building_block(6, 1 + seed % 2), 8)[seed % 6], split=False)
    fast, slow = vr._Memory(rank), vr._Memory(rank)
    assert not fast.implicit
    cap = max(fast.live)
    for _ in range(300):
        busy = [u for u, k in enumerate(fast.kind) if k >= 0]
        t = rng.choice(busy)
        idle = [u for u in range(t) if fast.kind[u] < 0]
        if not idle:
            continue
        s = rng.choice(idle)
        assert fast.move(t, s, cap) == _move_reference(slow, t, s, cap)
        assert (fast.kind, fast.live, fast.pend) == (slow.kind, slow.live, slow.pend)


def test_v_half_and_v_min_orders_unchanged_on_deep_pipelines():
    """sha256 of the orders before the fast paths (the reference implementation's output)."""
    digest = hashlib.sha256()
    for p, m, k in ((32, 64, 2), (32, 48, 1), (64, 32, 2)):
        digest.update(repr(vr.reorder(building_block(p, k), m)).encode())
    assert digest.hexdigest() == EXPECTED


EXPECTED = "face881adb32c86e59161ef84eb27f67a99eafe77d172c2469f31d2a6bbb2dbd"


def _heap_merge(ranks):
    import heapq
    heads = [(ts[0], r, k, 0) for r, rank in enumerate(ranks) for k, ts in enumerate(rank) if ts]
    heapq.heapify(heads)
    out = []
    while heads:
        t, r, k, j = heapq.heappop(heads)
        if j + 1 < len(ranks[r][k]):
            heapq.heappush(heads, (ranks[r][k][j + 1], r, k, j + 1))
        out.append((t, r, k, j))
    return out


def test_pass_order_is_the_heap_merge():
    ranks = [vr.place_w(r, split=False) for r in vr.repeat(building_block(8, 2), 12)]
    assert list(vr._in_order(ranks)) == _heap_merge(ranks)
    # A list out of order takes the merge itself (a pass read after its predecessor).
    ranks[3][1][4], ranks[3][1][5] = ranks[3][1][5], ranks[3][1][4]
    assert list(vr._in_order(ranks)) == _heap_merge(ranks)
