"""The app's result cache is bounded by bytes, not entries (issue 8.11)."""
from __future__ import annotations

from explorer.ui.cache import ByteBoundedLRU


def test_least_recently_used_entries_go_when_the_byte_budget_is_exceeded():
    cache = ByteBoundedLRU(max_bytes=100)
    for k in "abc":
        cache.get_or_compute(k, lambda k=k: k * 40, len)       # 40 bytes each
    assert len(cache) == 2 and cache.bytes == 80                # 'a' evicted at 120 > 100
    calls = []
    cache.get_or_compute("b", lambda: calls.append(1) or "x", len)
    assert calls == []                                          # hit: not recomputed
    cache.get_or_compute("d", lambda: "d" * 40, len)            # evicts 'c' (b was used last)
    assert cache.get_or_compute("b", lambda: "new", len) == "b" * 40
    assert cache.get_or_compute("c", lambda: "again", len) == "again"


def test_a_value_larger_than_the_budget_is_returned_but_not_kept():
    cache = ByteBoundedLRU(max_bytes=10)
    assert cache.get_or_compute("big", lambda: "x" * 50, len) == "x" * 50
    assert len(cache) == 0 and cache.bytes == 0
